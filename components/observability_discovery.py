"""Where the installed Prometheus, Alertmanager and Grafana look for what configures them: the monitoring namespace
(``observability.namespace``) only (kube-prometheus-stack values, plain data).

kube-prometheus-stack's defaults have each of them search the whole cluster, tenant namespaces included:

- Prometheus selects monitors, probes, scrape configs and rules labelled with its release in every namespace (each
  ``*NamespaceSelector`` of the Prometheus resource is ``{}``, which matches all). A PrometheusRule in a tenant's
  namespace could record the charging series under another team's name; a monitor could scrape any address.
- Alertmanager merges every AlertmanagerConfig of every namespace into its configuration, whose receivers then send
  from the monitoring namespace to any URL.
- Grafana's dashboard sidecar lists labelled ConfigMaps and Secrets in every namespace, so the chart gives Grafana's
  service account a ClusterRole that reads every Secret of the cluster: every team's vCluster credentials, one path
  traversal in the Grafana the teams sign in to away.

Tenants cannot write those kinds on the host (their syncer's RBAC, the ``[dashboard-label]`` rule), so this is the
second wall. Every object the program creates for them is in the monitoring namespace
(tests/test_observability_discovery.py checks the plan and the charts' renders), and the namespace's name label is
the API server's own, which no tenant sets.
"""

from __future__ import annotations

from config.vocabulary import NAMESPACE_NAME_LABEL

# The namespace selectors of the Prometheus operator's Prometheus and Alertmanager resources: every field of either
# that picks where objects are discovered (tests/test_observability_discovery_contract.py reads them from the
# operator's source at each tag the accepted charts run).
PROMETHEUS_DISCOVERY = ("serviceMonitorNamespaceSelector", "podMonitorNamespaceSelector", "probeNamespaceSelector",
                        "scrapeConfigNamespaceSelector", "ruleNamespaceSelector")
ALERTMANAGER_DISCOVERY = ("alertmanagerConfigNamespaceSelector",)
# The Grafana chart's sidecars that list labelled ConfigMaps and Secrets (``sidecar.<name>.searchNamespace``), on or
# off: one the chart turns on later searches the monitoring namespace too.
GRAFANA_SIDECARS = ("alerts", "dashboards", "datasources", "notifiers", "plugins")


def only(namespace: str) -> dict:
    """A label selector matching the namespace ``namespace`` and no other."""
    return {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}


def discovery_values(namespace: str) -> dict:
    """The kube-prometheus-stack values that keep discovery, and Grafana's service account, in ``namespace``."""
    return {
        "prometheus": {"prometheusSpec": {field: only(namespace) for field in PROMETHEUS_DISCOVERY}},
        "alertmanager": {"alertmanagerSpec": {field: only(namespace) for field in ALERTMANAGER_DISCOVERY}},
        "grafana": {
            # A Role in the monitoring namespace instead of a ClusterRole reading every ConfigMap and Secret.
            "rbac": {"namespaced": True},
            "sidecar": {sidecar: {"searchNamespace": namespace} for sidecar in GRAFANA_SIDECARS},
        },
    }
