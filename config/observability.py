"""The ``observability`` stack key: where metrics go, alert thresholds and KAI's time-aware fairness.

Plain data and its key definitions; config/load_observability.py reads and judges a stack's block, and
components/observability.py turns it into resources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from config import versions
from config.key_types import HTTP_URL_PATTERN, Boolean, Check, Integer, Number, Quantity, Text, quantity_value
from config.keys import Block, Condition, Key
from config.observability_alerting import ALERTING, Alerting
from config.observability_login import GRAFANA_LOGIN, GrafanaLogin
from config.version_types import Version

MODES = ("install", "external", "off")
WINDOW_TYPES = ("sliding", "tumbling")
# The pattern KAI's SchedulingShard CRD puts on usageParams.windowSize (v0.16.4 and v0.17.0).
KAI_DURATION = Check(r"0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?",
                     "is not a duration KAI accepts", "use units y, w, d, h, m, s, ms without spaces, e.g. 1w or 12h")
# The pattern the Prometheus CRD puts on spec.retention (kube-prometheus-stack 88.x): KAI's, without "0".
PROMETHEUS_DURATION = Check(
    r"(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?",
    "is not a Prometheus duration", "use units y, w, d, h, m, s, ms without spaces, e.g. 90d or 26w")
_DURATION_UNITS = (("y", 365 * 86400), ("w", 7 * 86400), ("d", 86400), ("h", 3600), ("ms", 0.001), ("m", 60),
                   ("s", 1))
# A Kubernetes label value: at most 63 characters of [A-Za-z0-9_.-], starting and ending alphanumeric.
LABEL_VALUE = Check(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", "is not a Kubernetes label value",
                    "use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
# The Helm release name of an installed kube-prometheus-stack: its Prometheus selects monitors and rules by
# the label release=<this name>.
INSTALL_RELEASE = "kube-prometheus-stack"
# What charging a shared GPU to the pods sharing it reads (components/observability_shares.py): KAI's GPU group
# label and fraction annotations on pods, exported by kube-state-metrics only for allowlisted keys.
KAI_GPU_GROUP_LABEL = "runai-gpu-group"
KAI_FRACTION_ANNOTATION = "gpu-fraction"
KAI_MEMORY_ANNOTATION = "gpu-memory"
# The container KAI gives a pod's share to; it may be an init container, which runs while the pod is Pending.
KAI_FRACTION_CONTAINER_ANNOTATION = "gpu-fraction-container-name"
# How many GPUs a fractional pod takes its fraction of; from 2 on KAI names the pod's GPU groups in label keys
# only, so its shares are read from the pod's annotations (components/observability_multi_fractions.py).
KAI_NUM_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
KSM_LABELS_ALLOWLIST = f"pods=[{KAI_GPU_GROUP_LABEL}]"
KSM_ANNOTATIONS_ALLOWLIST = (f"pods=[{KAI_FRACTION_ANNOTATION},{KAI_MEMORY_ANNOTATION},"
                             f"{KAI_FRACTION_CONTAINER_ANNOTATION},{KAI_NUM_DEVICES_ANNOTATION}]")
# How often the platform's monitors scrape KAI and the DCGM exporter, and the Prometheus operator's default
# (v0.93, the Prometheus resource's scrapeInterval), which kube-prometheus-stack leaves for kube-state-metrics. A
# report sampling more sparsely skips scrapes: a pod present at every other one would be charged nothing
# (ops/usage.py).
SCRAPE_INTERVAL_SECONDS = 30
# kube-prometheus-stack's values that scrape control-plane components (found by their pods in kube-system) and
# alert when they are down: on only with observability.controlPlaneMetrics.
CONTROL_PLANE_SCRAPES = ("kubeScheduler", "kubeControllerManager", "kubeEtcd", "kubeProxy")
KSM_FLAGS = (f"--metric-labels-allowlist={KSM_LABELS_ALLOWLIST}",
             f"--metric-annotations-allowlist={KSM_ANNOTATIONS_ALLOWLIST}")
# What the alerts read from the DCGM exporter beyond the GPU Operator's default collector list (the platform's
# list adds them, components/observability_dcgm.py): double-bit ECC errors, and every XID code in the
# exporter's window.
DCGM_ECC_DBE_FIELD = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
DCGM_XID_COUNT_FIELD = "DCGM_EXP_XID_ERRORS_COUNT"
DCGM_FIELDS_BEYOND_DEFAULTS = (DCGM_ECC_DBE_FIELD, DCGM_XID_COUNT_FIELD)


@dataclass(frozen=True)
class AlertThresholds:
    pending_minutes: int = 15
    idle_utilisation_percent: float = 10
    idle_minutes: int = 60
    admission_rejections: int = 1


@dataclass(frozen=True)
class TimeAwareFairness:
    enabled: bool = False
    window_size: str = "1w"
    window_type: str = "sliding"
    half_life_period: Optional[str] = None
    k_value: float = 1.0


def duration_seconds(duration: str) -> float:
    """A validated KAI or Prometheus duration (``1w``, ``90d``, ``1d12h``) in seconds."""
    return sum(int(number) * dict(_DURATION_UNITS)[unit]
               for number, unit in re.findall(r"([0-9]+)(ms|y|w|d|h|m|s)", duration))


# Prometheus counts its write-ahead log and head chunks in the size limit but deletes only whole blocks
# to honour it, and the log peaks between compactions: the rest of the volume is room for that peak.
RETENTION_SIZE_SHARE = 0.8
MINIMUM_VOLUME = "1Gi"


@dataclass(frozen=True)
class Observability:
    prometheus: str = "off"
    namespace: str = "monitoring"
    chart_version: str = versions.KUBE_PROMETHEUS_STACK_VERSION
    retention: str = "90d"
    storage: str = "50Gi"
    grafana: bool = True
    grafana_storage: str = "10Gi"
    protect: bool = True
    grafana_url: Optional[str] = None
    grafana_login: Optional[GrafanaLogin] = None
    release_label: Optional[str] = None
    url: Optional[str] = None
    alerts: AlertThresholds = field(default_factory=AlertThresholds)
    alerting: Alerting = field(default_factory=Alerting)
    control_plane_metrics: bool = False
    fairness: TimeAwareFairness = field(default_factory=TimeAwareFairness)

    @property
    def enabled(self) -> bool:
        return self.prometheus != "off"

    @property
    def retention_size(self) -> str:
        """The size limit on Prometheus' data (``retentionSize``), in whole MiB: a share of its volume, so a site
        whose history outgrows the volume drops its oldest blocks instead of stopping on a full disk."""
        return f"{int(quantity_value(self.storage) * RETENTION_SIZE_SHARE) // 2 ** 20}MiB"

    @property
    def prometheus_url(self) -> Optional[str]:
        """Where KAI's scheduler reads usage history from, inside the cluster."""
        if self.prometheus == "install":
            return f"http://{INSTALL_RELEASE}-prometheus.{self.namespace}.svc.cluster.local:9090"
        return self.url


EXTERNAL = Block(keys=(
    Key("releaseLabel", Text(form="label value", checks=(LABEL_VALUE,)), None,
        "Value of the `release` label put on every ServiceMonitor and PrometheusRule.", example="kube-prometheus-stack",
        default_note="required with `external`",
        details="It is how kube-prometheus-stack-style Prometheus instances select them. Refused unless "
                "`prometheus` is `external`."),
    Key("url", Text(form="http(s) URL", checks=(Check(
            HTTP_URL_PATTERN, "is not an http(s) URL",
            "set it to the in-cluster URL of your Prometheus, e.g. http://prometheus.monitoring:9090"),)), None,
        "In-cluster URL of the site's Prometheus.",
        example="http://prometheus-operated.monitoring:9090",
        details="Required for `timeAwareFairness` with `external`, and only read by it: set while time-aware "
                "fairness is off, it draws a warning (and the review summary shows it)."),
))

_ALERTS = AlertThresholds()
ALERTS = Block(keys=(
    Key("pendingMinutes", Integer(1, 1440), _ALERTS.pending_minutes,
        "`GpuTenancyTeamStarved` fires after a team under its GPU quota has had pending pods this long while another "
        "team is over its quota.", example="30"),
    Key("idleUtilisationPercent", Number(minimum=0, maximum=100), _ALERTS.idle_utilisation_percent,
        "`GpuTenancyAllocatedGpuIdle`: a team whose held GPUs are busier than this (0–100) is not idle.",
        example="5", fix="set it between 0 and 100 (a percentage of one GPU's busy time), e.g. 10"),
    Key("idleMinutes", Integer(5, 10080), _ALERTS.idle_minutes,
        "`GpuTenancyAllocatedGpuIdle` fires after this long below the threshold.", example="120"),
    Key("admissionRejections", Integer(minimum=1), _ALERTS.admission_rejections,
        "`GpuTenancyAdmissionRejections` fires when one of the host's admission policies judging a team refused at "
        "least this many of its vCluster's requests (pods, Services, claims, deletions...) in 10 minutes.",
        example="5"),
))

_FAIRNESS = TimeAwareFairness()
FAIRNESS = Block(keys=(
    Key("enabled", Boolean(), _FAIRNESS.enabled,
        "Let KAI's scheduler read each queue's recent GPU usage from Prometheus, so a team that used little lately "
        "gets surplus first.", example="true",
        details="Needs `prometheus: install`, or `external` with `external.url`. Patches KAI's `default` "
                "SchedulingShard (`usageDBConfig`, `kValue`). KAI then queries `kai_queue_allocated_gpus` and "
                "kube-state-metrics' `kube_node_status_capacity`: an external Prometheus must have both."),
    Key("windowSize", Text(form="KAI duration", checks=(KAI_DURATION,)), _FAIRNESS.window_size,
        "How much history counts (`usageParams.windowSize`; units y w d h m s ms).", example="3d"),
    Key("windowType", Text(choices=WINDOW_TYPES), _FAIRNESS.window_type, "`usageParams.windowType`.",
        example="tumbling"),
    Key("halfLifePeriod", Text(form="KAI duration", checks=(KAI_DURATION,)), _FAIRNESS.half_life_period,
        "Older usage counts half as much after each period.", example="12h", default_note="no decay"),
    Key("kValue", Number(minimum=0), _FAIRNESS.k_value,
        "Weight of past usage in the fair share (the proportion plugin's `kValue`).", example="2"),
))

_OBSERVABILITY = Observability()
OBSERVABILITY = Block(title="GPU usage metrics, alerts and dashboards", conditions=(
    Condition("prometheus", ("install", "off"), "is for prometheus: external, but prometheus is {value}",
              "remove observability.external or set observability.prometheus to external", forbidden=("external",)),
    Condition("prometheus", ("external",), "the site's Prometheus picks ServiceMonitors and rules by a release label",
              "set it to the value of the `release` label your Prometheus selects, e.g. kube-prometheus-stack",
              required=("external.releaseLabel",)),
    Condition("prometheus", ("external", "off"), "only applies to prometheus: install (it is {value})",
              "remove observability.grafana; with an external Prometheus, dashboards are ConfigMaps for your own "
              "Grafana's sidecar", forbidden=("grafana",)),
    Condition("prometheus", ("external", "off"), "sizes the Prometheus and Grafana this program installs, and "
              "prometheus is {value}", "remove observability.{name}; a site's own Prometheus keeps its own settings",
              forbidden=("retention", "storage", "grafanaStorage", "protect")),
    Condition("prometheus", ("external", "off"), "routes the alerts of the Alertmanager this program installs, and "
              "prometheus is {value}", "remove observability.alerting; a site's own Alertmanager routes its alerts",
              forbidden=("alerting",)),
    Condition("prometheus", ("external", "off"), "sets what the Prometheus this program installs scrapes, and "
              "prometheus is {value}", "remove observability.controlPlaneMetrics; a site's own Prometheus scrapes "
              "what it is set to", forbidden=("controlPlaneMetrics",)),
    Condition("grafana", (False,), "is the volume of the installed Grafana's database, and grafana is false",
              "remove observability.grafanaStorage, or set grafana: true", forbidden=("grafanaStorage",)),
), intro="""\
Stacks without this key behave as before (`prometheus: off`: nothing is created). See [Per-team GPU
usage](observability.md) for what it
builds.""", keys=(
    Key("prometheus", Text(choices=MODES), _OBSERVABILITY.prometheus, "Where metrics go.", example="install",
        details="`install`: the program installs a pinned kube-prometheus-stack (Prometheus operator, Prometheus, "
                "kube-state-metrics, Grafana) as Helm release `kube-prometheus-stack`. `external`: the site's own "
                "Prometheus operator; the program creates only ServiceMonitors, a PrometheusRule and dashboard "
                "ConfigMaps. `off`: none of it."),
    Key("namespace", Text(dns_label=True), _OBSERVABILITY.namespace,
        "Where the release (`install`), the monitors, the rule and the dashboard ConfigMaps live.",
        example="observability",
        details="With `external`, use the namespace your Grafana's dashboard sidecar watches. Never a team's "
                "namespace; with `install`, not KAI's or the GPU Operator's either. Creation-only once installed: "
                "the monitoring namespace is protected, so a new one stops `pulumi up`."),
    Key("chartVersion", Version("", versions.KUBE_PROMETHEUS_STACK_RELEASES,
                                "the program's values are written for major release 88, and the chart "
                                "makes breaking changes only in major releases"),
        _OBSERVABILITY.chart_version,
        "kube-prometheus-stack chart version (`install`).", example="88.5.3"),
    Key("retention", Text(form="Prometheus duration", checks=(PROMETHEUS_DURATION,)), _OBSERVABILITY.retention,
        "How long the installed Prometheus keeps history (`install`; units y w d h m s ms).", example="26w",
        details="The usage report and time-aware fairness can look back this far; at least "
                "`timeAwareFairness.windowSize`. History is also capped at "
                f"{RETENTION_SIZE_SHARE:.0%} of `storage` (`retentionSize`; the rest is room for the write-ahead "
                "log): a site that outgrows its volume loses its oldest history first, and Prometheus keeps "
                "running."),
    Key("storage", Quantity(), _OBSERVABILITY.storage,
        f"Size of the installed Prometheus' volume (`install`; at least {MINIMUM_VOLUME}), on the host's storage "
        "class.", example="200Gi",
        details="A claim of a StatefulSet: growing it later needs a storage class that allows volume expansion "
                "and a resize of the existing claim before `pulumi up`, as the retention size grows with this key at "
                "once and would otherwise fill the old volume (docs/operations-data.md)."),
    Key("grafana", Boolean(), _OBSERVABILITY.grafana,
        "Install Grafana with the stack (`install` only; any other mode refuses the key).", example="false"),
    Key("grafanaStorage", Quantity(), _OBSERVABILITY.grafana_storage,
        f"Size of the volume holding the installed Grafana's database (`install` with `grafana: true`; at least "
        f"{MINIMUM_VOLUME}), on the host's storage class.", example="20Gi",
        details="The teams' organizations, data sources, boards and sign-in settings that `pulumi up` creates "
                "through Grafana's API live in that database: on a volume they outlive a restart of Grafana's pod. "
                "Creation-only as far as Helm goes: the chart runs Grafana as a StatefulSet, whose claim template "
                "the API server keeps, so a new size on a running site makes the release upgrade fail (the plan "
                "diff with `--render-charts` reports it; docs/operations-data.md says how to grow the volume)."),
    Key("protect", Boolean(), _OBSERVABILITY.protect,
        "Pulumi `protect` on the monitoring namespace (`install`), which holds Prometheus' history and Grafana's "
        "database, and on Grafana's generated admin password, which that database keeps.", example="false",
        details="Setting `prometheus` to `external` or `off`, renaming `namespace`, or `pulumi destroy` then stops "
                "with Pulumi's protected-resource error instead of deleting them: set it to `false` and run "
                "`pulumi up` first (docs/operations-data.md)."),
    Key("grafanaUrl", Text(form="http(s) URL"), _OBSERVABILITY.grafana_url,
        "Where `pulumi up` reaches the installed Grafana's HTTP API (its Ingress, LoadBalancer or a port-forward).",
        example="https://grafana.gpu.example.com", default_note="no team organizations",
        details="With it, each team gets a Grafana organization named after the team, holding its board and one data "
                "source, the team's query proxy (pulumiverse-grafana, signed in with the generated admin password). "
                "`install` with `grafana: true` only."),
    Key("grafanaLogin", GRAFANA_LOGIN, {}, "Team members sign in to Grafana through the teams' OIDC issuer, each "
        "into their team's organization (docs/observability-dashboards.md)."),
    Key("external", EXTERNAL, {}, "The site's own Prometheus, with `prometheus: external`."),
    Key("alerts", ALERTS, {}, "Thresholds of the platform's alert rules."),
    Key("alerting", ALERTING, {}, "Where the installed Alertmanager sends the alerts (`install`)."),
    Key("controlPlaneMetrics", Boolean(), _OBSERVABILITY.control_plane_metrics,
        "Let the installed Prometheus scrape kube-scheduler, kube-controller-manager, etcd and kube-proxy, and alert "
        "when they are down (`install`; `kubeconfig` hosts only).", example="true",
        details="kube-prometheus-stack finds them by their pods' labels in `kube-system`, on their metrics ports. "
                "MicroK8s runs them inside one process (and dqlite, not etcd), EKS outside the cluster (its "
                "kube-proxy binds metrics to 127.0.0.1): there they cannot be reached, and the chart's "
                "`KubeSchedulerDown`, `KubeControllerManagerDown` and `KubeProxyDown` would fire for ever, so the "
                "key is refused. On an existing cluster, set it once those components serve metrics beyond "
                "localhost (kubeadm binds them to 127.0.0.1 unless told otherwise)."),
    Key("timeAwareFairness", FAIRNESS, {}, "KAI's time-aware fair sharing, fed by the usage history in Prometheus."),
))
