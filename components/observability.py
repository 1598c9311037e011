"""Per-team GPU metrics: scraping, recording rules, alerts and dashboards (``observability`` stack key).

- ``install``: a pinned kube-prometheus-stack release (Prometheus operator, Prometheus, kube-state-metrics,
  Grafana) in ``observability.namespace``;
- ``external``: the site's own Prometheus operator picks up what is created here by the label
  ``release: <observability.external.releaseLabel>``;
- ``off``: nothing (the component is not constructed).

Either way the component creates ServiceMonitors for KAI's queue controller and scheduler and for the GPU
Operator's DCGM exporter, one PrometheusRule (components/observability_rules.py) and one dashboard ConfigMap
per board (components/observability_dashboards.py). With ``timeAwareFairness.enabled`` it also points KAI's
default SchedulingShard at that Prometheus, so the scheduler weighs each queue's recent usage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components import observability_dashboards, observability_ksm, observability_team_series
from components.observability_crds import crd_upgrade_values
from components.observability_discovery import discovery_values
from components.observability_access import GrafanaAdmin, admin_values, grafana_ini
from components.observability_alerting import (alerting_secret, alertmanager_config, alertmanager_values, config_secret,
                                               configured)
from components.observability_network import MonitoringIngress
from components.observability_views import TeamViews
from components.kubernetes_resources import CONFIG_MAP, NAMESPACE, HelmRelease, Kind, KubernetesObject
from config import versions
from config.merge import deep_merge
from config.mirrors import mirrored_values
from config.model import Platform
from config.observability import CONTROL_PLANE_SCRAPES, INSTALL_RELEASE, SCRAPE_INTERVAL_SECONDS
from config.vocabulary import DASHBOARD_LABEL, HELM_MAX_HISTORY, MANAGED_BY, OBSERVABILITY_COMPONENT

RELEASE_TIMEOUT_SECONDS = 900
# Grafana's dashboard sidecar loads a ConfigMap labelled DASHBOARD_LABEL into the folder this annotation names.
FOLDER_ANNOTATION = "grafana_folder"
# Where KAI v0.16.4-v0.17.0's operator exposes metrics: Services labelled app=<name> in KAI's namespace.
KAI_QUEUE_CONTROLLER = ("queue-controller", "metrics")
KAI_SCHEDULER = ("kai-scheduler-default", "http-metrics")  # <global.schedulerName>-<shard>, shard "default"
# The GPU Operator's exporter Service (assets/state-dcgm-exporter), v26.3.x and v26.7.0.
DCGM_EXPORTER = ("nvidia-dcgm-exporter", "gpu-metrics")
DEFAULT_SHARD = "default"
# The prometheus-operator kinds the monitoring stack installs, whose objects tell its Prometheus what to scrape and
# which rules to run.
SERVICE_MONITOR = Kind("monitoring.coreos.com/v1", "ServiceMonitor")
PROMETHEUS_RULE = Kind("monitoring.coreos.com/v1", "PrometheusRule")


@dataclass
class ObservabilityArgs:
    platform: Platform
    provider: k8s.Provider
    # KAI's release: its Services and the SchedulingShard patched for time-aware fairness exist after it.
    kai_release: pulumi.Resource
    gpu_operator: Sequence[pulumi.Resource] = ()
    # The secret of Grafana's OAuth client (observability.grafanaLogin), when the site set one.
    grafana_client_secret: Optional[pulumi.Output[str]] = None
    # The URL or key of the alert receiver (observability.alerting.receiver), when the site set one.
    alert_receiver: Optional[pulumi.Output[str]] = None
    # The URL of the dead man's switch (observability.alerting.heartbeat), when the site turned it on.
    alert_heartbeat: Optional[pulumi.Output[str]] = None
    # Each team receiver's URL or key (teams[].alerting.receiver), by team name.
    team_alert_addresses: Mapping[str, pulumi.Output[str]] = field(default_factory=dict)


def stack_values(platform: Platform) -> dict:
    """Helm values of the kube-prometheus-stack release."""
    settings = platform.observability
    storage_class = platform.host.storage_class if platform.host is not None else None
    on_site_class = {"storageClassName": storage_class} if storage_class else {}
    storage = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": settings.storage}},
               **on_site_class}
    registries = mirrored_values(versions.KUBE_PROMETHEUS_STACK_IMAGE_REGISTRIES, "registry", platform.mirrors)
    values = deep_merge(registries, {
        # The Prometheus operator's CRDs are upgraded with the chart, before its new operator starts.
        "crds": crd_upgrade_values(platform.kubectl_image, platform.mirrors),
        "prometheus": {"prometheusSpec": {
            # The usage report and KAI's usage window read history: keep it past a restart and a month.
            "retention": settings.retention,
            "retentionSize": settings.retention_size,
            "storageSpec": {"volumeClaimTemplate": {"spec": storage}},
        }},
        "alertmanager": alertmanager_values(settings, storage_class, platform.teams),
        **{component: {"enabled": settings.control_plane_metrics} for component in CONTROL_PLANE_SCRAPES},
        # kube_pod_labels / kube_pod_annotations with KAI's GPU group and the fraction annotations (how the rules
        # charge a shared GPU to the pods sharing it), without what lets one team fill Prometheus for all.
        "kube-state-metrics": observability_ksm.KSM_VALUES,
        "grafana": {
            "enabled": settings.grafana,
            # The stack's generated login (components/observability_access.py), never the chart's own.
            "admin": admin_values(),
            "grafana.ini": grafana_ini(settings),
            # The teams' organizations and sign-in settings that pulumi up creates through Grafana's API live in
            # its database: the chart keeps that in an emptyDir unless persistence is on. A StatefulSet, so an
            # upgrade stops the old pod before the new one opens the database and mounts the volume.
            "persistence": {"enabled": True, "type": "statefulset", "size": settings.grafana_storage,
                            **on_site_class},
            "sidecar": {"dashboards": {
                "enabled": True, "label": DASHBOARD_LABEL[0], "labelValue": DASHBOARD_LABEL[1],
                "folderAnnotation": FOLDER_ANNOTATION,
                "provider": {"foldersFromFilesStructure": True},
            }},
        },
    })
    return deep_merge(values, discovery_values(settings.namespace))


def service_monitor_spec(namespace: str, service: tuple[str, str], *, honor_labels: bool = False) -> dict:
    name, port = service
    return {
        "jobLabel": "app",
        "namespaceSelector": {"matchNames": [namespace]},
        "selector": {"matchLabels": {"app": name}},
        "endpoints": [{"port": port, "interval": f"{SCRAPE_INTERVAL_SECONDS}s", "honorLabels": honor_labels}],
    }


def shard_fairness_spec(platform: Platform) -> dict:
    """The SchedulingShard fields of KAI's usage-based fair share (usageDBConfig, kValue)."""
    fairness = platform.observability.fairness
    params = {"windowSize": fairness.window_size, "windowType": fairness.window_type}
    if fairness.half_life_period:
        params["halfLifePeriod"] = fairness.half_life_period
    return {"kValue": fairness.k_value, "usageDBConfig": {
        "clientType": "prometheus", "connectionString": platform.observability.prometheus_url,
        "usageParams": params}}


class Observability(pulumi.ComponentResource):
    release: Optional[HelmRelease]
    namespace: str
    dashboards: list[str]

    def __init__(self, name: str, args: ObservabilityArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(OBSERVABILITY_COMPONENT, name, None, opts)
        platform = args.platform
        settings = platform.observability
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.namespace = settings.namespace
        self.release = None
        self.grafana_admin: Optional[GrafanaAdmin] = None
        labels = {**MANAGED_BY, "release": settings.release_label}

        # Monitors and rules need the Prometheus operator's CRDs: the release brings them, or the site has them.
        crds: list[pulumi.Resource] = []
        if settings.prometheus == "install":
            # Deleting the namespace deletes the claims of Prometheus' history and Grafana's database.
            namespace = KubernetesObject(
                f"{name}-namespace", NAMESPACE, metadata={"name": settings.namespace},
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=settings.protect)))
            before_release: list[pulumi.Resource] = [namespace]
            # Closed before anything listens: only the proxies, Grafana and the platform reach Prometheus.
            before_release.append(MonitoringIngress(f"{name}-ingress", platform, args.provider, [namespace],
                                                    opts=pulumi.ResourceOptions(parent=self)))
            if settings.grafana:
                self.grafana_admin = GrafanaAdmin(f"{name}-grafana-admin", settings.namespace, args.provider,
                                                  settings.protect,
                                                  opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]))
                before_release.append(self.grafana_admin.secret)
            if settings.alerting.delivers and args.alert_receiver is None:
                raise ValueError("observability.alerting.receiver is set: pass the alertReceiver secret")
            if settings.alerting.heartbeat and args.alert_heartbeat is None:
                raise ValueError("observability.alerting.heartbeat is true: pass the alertHeartbeat secret")
            unaddressed = [team.name for team in platform.teams
                           if team.alerting.delivers and team.name not in args.team_alert_addresses]
            if unaddressed:
                raise ValueError(f"teams {', '.join(unaddressed)} have a receiver: pass their teamAlertReceivers "
                                 "addresses")
            if configured(settings.alerting, platform.teams):
                in_namespace = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[namespace]))
                before_release.append(alerting_secret(
                    f"{name}-alert-receiver", settings.namespace, args.alert_receiver, args.alert_heartbeat,
                    args.team_alert_addresses, in_namespace))
                before_release.append(config_secret(f"{name}-alertmanager-config", settings.namespace,
                                                    settings.alerting, platform.teams, in_namespace))
            chart, repo = platform.mirrors.chart(versions.KUBE_PROMETHEUS_STACK_CHART, versions.KUBE_PROMETHEUS_STACK_CHART,
                                                 versions.KUBE_PROMETHEUS_STACK_REPO)
            self.release = HelmRelease(
                f"{name}-release",
                name=INSTALL_RELEASE,
                chart=chart,
                version=settings.chart_version,
                repository_opts={"repo": repo} if repo else None,
                namespace=settings.namespace,
                values=stack_values(platform),
                atomic=True,
                max_history=HELM_MAX_HISTORY,
                cleanup_on_fail=True,
                timeout=RELEASE_TIMEOUT_SECONDS,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=before_release)),
            )
            crds.append(self.release)
        after_crds = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=crds))

        monitors = {
            "kai-queue-controller": (platform.kai_scheduler.namespace, KAI_QUEUE_CONTROLLER, False,
                                     [args.kai_release]),
            "kai-scheduler": (platform.kai_scheduler.namespace, KAI_SCHEDULER, False, [args.kai_release]),
            # honorLabels: the exporter's own namespace/pod labels name the pod holding the GPU; without it,
            # Prometheus renames them exported_namespace/exported_pod and the team join finds nothing.
            "dcgm-exporter": (platform.gpu_operator.namespace, DCGM_EXPORTER, True, list(args.gpu_operator)),
        }
        for monitor, (namespace, service, honor, after) in monitors.items():
            KubernetesObject(
                f"{name}-{monitor}", SERVICE_MONITOR,
                metadata={"name": f"gpu-tenancy-{monitor}", "namespace": settings.namespace, "labels": labels},
                spec=service_monitor_spec(namespace, service, honor_labels=honor),
                opts=pulumi.ResourceOptions.merge(after_crds, pulumi.ResourceOptions(depends_on=after)),
            )
        KubernetesObject(
            f"{name}-rules", PROMETHEUS_RULE,
            metadata={"name": "gpu-tenancy", "namespace": settings.namespace, "labels": labels},
            spec={"groups": observability_team_series.all_rule_groups(platform)},
            opts=after_crds,
        )

        self.dashboards = []
        for key, (folder, board) in observability_dashboards.dashboards(platform).items():
            config_map_name = f"gpu-tenancy-dashboard-{key}"[:63].rstrip("-")
            KubernetesObject(
                f"{name}-dashboard-{key}", CONFIG_MAP,
                metadata={"name": config_map_name, "namespace": settings.namespace,
                          "labels": {**labels, DASHBOARD_LABEL[0]: DASHBOARD_LABEL[1]},
                          "annotations": {FOLDER_ANNOTATION: folder}},
                data={f"{key}.json": json.dumps(board, sort_keys=True)},
                opts=after_crds,
            )
            self.dashboards.append(config_map_name)

        self.team_views: Optional[TeamViews] = None
        if self.release is not None and self.grafana_admin is not None:
            # Teams see Prometheus only through their own proxy (and, with grafanaUrl, their own organization).
            self.team_views = TeamViews(f"{name}-team-views", platform, args.provider, settings.prometheus_url,
                                        self.grafana_admin.password, [self.release],
                                        opts=pulumi.ResourceOptions(parent=self),
                                        client_secret=args.grafana_client_secret)

        if settings.fairness.enabled:
            # The chart creates the default shard with helm.sh/resource-policy keep and no usage settings:
            # take over only these fields.
            k8s.apiextensions.CustomResourcePatch(
                f"{name}-kai-usage-fairness",
                api_version="kai.scheduler/v1",
                kind="SchedulingShard",
                metadata={"name": DEFAULT_SHARD, "annotations": {"pulumi.com/patchForce": "true"}},
                spec=shard_fairness_spec(platform),
                opts=pulumi.ResourceOptions.merge(after_crds, pulumi.ResourceOptions(depends_on=[args.kai_release])),
            )

        self.register_outputs({"mode": settings.prometheus, "namespace": self.namespace,
                               "releaseLabel": settings.release_label, "dashboards": self.dashboards,
                               "prometheusUrl": settings.prometheus_url,
                               "timeAwareFairness": settings.fairness.enabled,
                               "alertReceiver": settings.alerting.receiver,
                               # What the configuration Secret holds, which the plan shows as [secret]: no address.
                               "alertmanagerConfiguration": alertmanager_config(settings.alerting, platform.teams)
                               if self.release is not None and configured(settings.alerting, platform.teams) else None,
                               "alertHeartbeat": settings.alerting.heartbeat})
