"""What kube-state-metrics exports of the teams' pods, and what Prometheus keeps of it (kube-prometheus-stack values,
plain data).

Each team is its own vCluster's cluster-admin, and vCluster copies a pod's spec to the host as written, so strings
and lists a team chooses become kube-state-metrics label values (kube-state-metrics v2.19.1 and v2.20.0,
``internal/store/pod.go``). Two of them are bounded by nothing that would keep one team from filling the shared
Prometheus (its memory, its head block, the usage report that reads it) for every team:

- ``kube_pod_tolerations`` writes one series per distinct toleration of a pod, with its key and value as labels. The
  API server bounds each toleration, not their number (``pod-size`` counts no toleration either), so one pod of
  the request's size carries tens of thousands of them, and each becomes a series. Nothing the platform or
  kube-prometheus-stack's rules and dashboards read uses it: kube-state-metrics' own ``--metric-denylist`` drops
  it before it is written.
- ``kube_pod_container_info`` and ``kube_pod_init_container_info`` carry a container's image twice (``image_spec``
  from the spec, ``image`` from the status, which is the spec's until the pull succeeds) and ``image_id``. The API
  server checks an image only for surrounding spaces: a team's images may fill its ``syncedPodTextBytes`` (256 KiB
  by default), some 2,000 times the labels of an ordinary series, and each pod created anew is a new series. The
  usage report reads ``kube_pod_init_container_info`` (``restart_policy``), not its images, so the three labels are
  cut, as Prometheus stores them, to their first ``IMAGE_LABEL_CHARACTERS``: every reference a container runtime
  can pull is far shorter (github.com/distribution/reference: a name of at most 255 characters, a tag of 128, a
  SHA-512 digest), so an honest image is kept whole.

Prometheus' own limits (``sample_limit``, ``label_limit``, ``label_value_length_limit``) are not used: past one,
Prometheus drops the whole scrape of kube-state-metrics, every team's series with it, which a team could then cause
at will.
"""

from __future__ import annotations

from components.observability_shares import KSM_VALUES as SHARE_VALUES

DENIED_METRICS = ("kube_pod_tolerations",)
IMAGE_LABELS = ("image_spec", "image", "image_id")
# RE2's largest repetition count ({0,1000}). (?s): the API server lets an image hold a line break, which '.' does not
# match otherwise, and the regex would then leave the label whole.
IMAGE_LABEL_CHARACTERS = 1000


def image_truncations() -> list[dict]:
    """The ServiceMonitor relabellings (Prometheus operator field names) that cut each image label, applied to every
    sample of the scrape; a label that is absent stays absent."""
    return [{"sourceLabels": [label], "targetLabel": label, "regex": f"(?s)(.{{0,{IMAGE_LABEL_CHARACTERS}}}).*",
             "replacement": "$1", "action": "replace"} for label in IMAGE_LABELS]


# The chart's collectors (its ``collectors`` default, the same in every accepted release) but ``secrets``: no rule or
# dashboard of the platform's or the chart's reads ``kube_secret_*``, and with the collector on, the chart gives
# kube-state-metrics' service account list and watch of every Secret of the cluster, every team's vCluster
# credentials among them.
CHART_COLLECTORS = (
    "certificatesigningrequests", "configmaps", "cronjobs", "daemonsets", "deployments", "endpointslices",
    "horizontalpodautoscalers", "ingresses", "jobs", "leases", "limitranges", "mutatingwebhookconfigurations",
    "namespaces", "networkpolicies", "nodes", "persistentvolumeclaims", "persistentvolumes", "poddisruptionbudgets",
    "pods", "replicasets", "replicationcontrollers", "resourcequotas", "secrets", "services", "statefulsets",
    "storageclasses", "validatingwebhookconfigurations", "volumeattachments")
UNREAD_COLLECTORS = ("secrets",)
COLLECTORS = tuple(name for name in CHART_COLLECTORS if name not in UNREAD_COLLECTORS)

KSM_VALUES = {
    **SHARE_VALUES,
    "collectors": list(COLLECTORS),
    "metricDenylist": list(DENIED_METRICS),
    "prometheus": {"monitor": {"http": {"metricRelabelings": image_truncations()}}},
}
