"""Who may connect to the unauthenticated parts of an installed monitoring stack: NetworkPolicies (ingress) in
``observability.namespace``, so a tenant's pod cannot query Prometheus around its team's proxy, silence
alerts in Alertmanager, or read every namespace's pod labels from kube-state-metrics.

kube-prometheus-stack 88.5.3 creates no NetworkPolicy by default (``prometheus.networkPolicy.enabled``,
``alertmanager.networkPolicy.enabled`` and the kube-state-metrics chart's are false), so these are the only
ones. Each peer is a pod selector without a namespace selector (pods of the monitoring namespace only, where
tenants create nothing: vCluster puts their pods in their own host namespace, whatever labels they wear) or,
for KAI's usage reader, the KAI namespace by its ``kubernetes.io/metadata.name`` label, which the API server
sets. Traffic from a pod's own node (``kubectl port-forward``, kubelet probes) is always allowed.

Grafana is not closed this way: it authenticates every request (generated admin password, per-team
organizations), and a site reaches it through a load balancer or ingress whose client addresses a policy
cannot tell from tenants' pod addresses.
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.observability_views import GRAFANA_POD_LABELS, PROXY_POD_LABELS
from components.kubernetes_resources import NETWORK_POLICY, KubernetesObject
from config.model import Platform
from config.observability import INSTALL_RELEASE
from config.vocabulary import MANAGED_BY, NAMESPACE_NAME_LABEL

PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
# Pod labels at kube-prometheus-stack 88.5.3 (the chart's own NetworkPolicy templates select these; the
# operator sets them on the pods it creates), and the kube-state-metrics 8.4.0 subchart's selector labels.
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus",
                         "operator.prometheus.io/name": f"{INSTALL_RELEASE}-prometheus"}
ALERTMANAGER_POD_LABELS = {"app.kubernetes.io/name": "alertmanager"}
KUBE_STATE_METRICS_POD_LABELS = {"app.kubernetes.io/name": "kube-state-metrics",
                                 "app.kubernetes.io/instance": INSTALL_RELEASE}


def _pods(labels: dict) -> dict:
    return {"podSelector": {"matchLabels": dict(labels)}}


def _tcp(port: int) -> list[dict]:
    return [{"port": port, "protocol": "TCP"}]


def monitoring_policies(platform: Platform) -> dict[str, dict]:
    """NetworkPolicy name -> spec, for the installed stack's Prometheus, Alertmanager and kube-state-metrics."""
    queriers = [_pods(PROXY_POD_LABELS), _pods(GRAFANA_POD_LABELS)]
    if platform.observability.fairness.enabled:
        # KAI's scheduler reads each queue's usage history (usageDBConfig).
        queriers.append({"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: platform.kai_scheduler.namespace}}})
    return {
        "gpu-tenancy-prometheus": {
            "podSelector": {"matchLabels": PROMETHEUS_POD_LABELS}, "policyTypes": ["Ingress"],
            "ingress": [{"from": queriers, "ports": _tcp(PROMETHEUS_PORT)},
                        # Prometheus scrapes itself and its config reloader.
                        {"from": [_pods(PROMETHEUS_POD_LABELS)]}]},
        "gpu-tenancy-alertmanager": {
            "podSelector": {"matchLabels": ALERTMANAGER_POD_LABELS}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [_pods(GRAFANA_POD_LABELS)], "ports": _tcp(ALERTMANAGER_PORT)},
                        # Prometheus sends alerts and scrapes; replicas gossip with each other.
                        {"from": [_pods(PROMETHEUS_POD_LABELS), _pods(ALERTMANAGER_POD_LABELS)]}]},
        "gpu-tenancy-kube-state-metrics": {
            "podSelector": {"matchLabels": KUBE_STATE_METRICS_POD_LABELS}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [_pods(PROMETHEUS_POD_LABELS)]}]},
    }


class MonitoringIngress(pulumi.ComponentResource):
    """The NetworkPolicies of ``monitoring_policies`` in the monitoring namespace."""

    def __init__(self, name: str, platform: Platform, provider: k8s.Provider, after: list[pulumi.Resource],
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gpu-tenancy:platform:MonitoringIngress", name, None, opts)
        namespace = platform.observability.namespace
        policies = monitoring_policies(platform)
        for policy, spec in policies.items():
            KubernetesObject(
                f"{name}-{policy.removeprefix('gpu-tenancy-')}", NETWORK_POLICY,
                metadata={"name": policy, "namespace": namespace, "labels": MANAGED_BY}, spec=spec,
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=after))
        self.register_outputs({"policies": sorted(policies)})
