"""The ``observability`` stack key: where metrics go, alert thresholds and KAI's time-aware fairness.

Plain data and validation only; components/observability.py turns it into resources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from config import versions
from config.reader import Reader, Section

FIELDS = ("prometheus", "namespace", "chartVersion", "grafana", "external", "alerts", "timeAwareFairness")
EXTERNAL_FIELDS = ("releaseLabel", "url")
ALERT_FIELDS = ("pendingMinutes", "idleUtilisationPercent", "idleMinutes", "admissionRejections")
FAIRNESS_FIELDS = ("enabled", "windowSize", "windowType", "halfLifePeriod", "kValue")
MODES = ("install", "external", "off")
WINDOW_TYPES = ("sliding", "tumbling")
# The pattern KAI's SchedulingShard CRD puts on usageParams.windowSize (v0.16.4 and v0.17.0).
KAI_DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")
# A Kubernetes label value: at most 63 characters of [A-Za-z0-9_.-], starting and ending alphanumeric.
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
# The Helm release name of an installed kube-prometheus-stack: its Prometheus selects monitors and rules by
# the label release=<this name>.
INSTALL_RELEASE = "kube-prometheus-stack"


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


@dataclass(frozen=True)
class Observability:
    prometheus: str = "off"
    namespace: str = "monitoring"
    chart_version: str = versions.KUBE_PROMETHEUS_STACK_VERSION
    grafana: bool = True
    release_label: Optional[str] = None
    url: Optional[str] = None
    alerts: AlertThresholds = field(default_factory=AlertThresholds)
    fairness: TimeAwareFairness = field(default_factory=TimeAwareFairness)

    @property
    def enabled(self) -> bool:
        return self.prometheus != "off"

    @property
    def prometheus_url(self) -> Optional[str]:
        """Where KAI's scheduler reads usage history from, inside the cluster."""
        if self.prometheus == "install":
            return f"http://{INSTALL_RELEASE}-prometheus.{self.namespace}.svc.cluster.local:9090"
        return self.url


def read_observability(section: Section) -> Observability:
    """Read the ``observability`` block; every problem goes to the section's reader."""
    mode = section.string("prometheus", "off", choices=MODES)
    external = section.child("external", EXTERNAL_FIELDS)
    release_label = external.string("releaseLabel", None)
    url = external.string("url", None)
    if mode in ("install", "off") and external.present:
        section._fail("external", section.raw("external"), f"is for prometheus: external, but prometheus is {mode}",
                      "remove observability.external or set observability.prometheus to external")
    if mode == "external" and not external.has("releaseLabel"):
        external._fail("releaseLabel", external.raw("releaseLabel"),
                       "the site's Prometheus picks ServiceMonitors and rules by a release label",
                       "set it to the value of the `release` label your Prometheus selects, e.g. kube-prometheus-stack")
    if release_label is not None and not LABEL_VALUE.fullmatch(release_label):
        external._fail("releaseLabel", release_label, "is not a Kubernetes label value",
                       "use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
        release_label = None
    if url is not None and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        external._fail("url", url, "is not an http(s) URL",
                       "set it to the in-cluster URL of your Prometheus, e.g. http://prometheus.monitoring:9090")
        url = None
    namespace = section.string("namespace", "monitoring", dns_label=True)
    version = section.string("chartVersion", versions.KUBE_PROMETHEUS_STACK_VERSION)
    if version is not None and not re.fullmatch(r"\d+\.\d+\.\d+", version):
        section._fail("chartVersion", version, "is not an exact kube-prometheus-stack chart version",
                      f"set an exact version without a leading 'v', e.g. {versions.KUBE_PROMETHEUS_STACK_VERSION}")
    grafana = section.boolean("grafana", True)
    if mode != "install" and section.has("grafana"):
        section._fail("grafana", section.raw("grafana"), f"only applies to prometheus: install (it is {mode})",
                      "remove observability.grafana; with an external Prometheus, dashboards are ConfigMaps for "
                      "your own Grafana's sidecar")
    return Observability(
        prometheus=mode or "off",
        namespace=namespace,
        chart_version=version,
        grafana=grafana,
        release_label=INSTALL_RELEASE if mode == "install" else release_label,
        url=url,
        alerts=_alerts(section.child("alerts", ALERT_FIELDS)),
        fairness=_fairness(section.child("timeAwareFairness", FAIRNESS_FIELDS), mode, url),
    )


def _alerts(section: Section) -> AlertThresholds:
    defaults = AlertThresholds()
    idle = section.number("idleUtilisationPercent", defaults.idle_utilisation_percent, minimum=0)
    if idle is not None and idle > 100:
        section._fail("idleUtilisationPercent", idle, "is a percentage of one GPU's busy time",
                      "set it between 0 and 100, e.g. 10")
        idle = None
    return AlertThresholds(
        pending_minutes=section.integer("pendingMinutes", defaults.pending_minutes, minimum=1, maximum=1440),
        idle_utilisation_percent=idle,
        idle_minutes=section.integer("idleMinutes", defaults.idle_minutes, minimum=5, maximum=10080),
        admission_rejections=section.integer("admissionRejections", defaults.admission_rejections, minimum=1),
    )


def _duration(section: Section, name: str, default: Optional[str]) -> Optional[str]:
    value = section.string(name, default)
    if value is not None and not KAI_DURATION.fullmatch(value):
        section._fail(name, value, "is not a duration KAI accepts",
                      "use units y, w, d, h, m, s, ms without spaces, e.g. 1w or 12h")
        return None
    return value


def _fairness(section: Section, mode: Optional[str], url: Optional[str]) -> TimeAwareFairness:
    defaults = TimeAwareFairness()
    enabled = section.boolean("enabled", defaults.enabled)
    if enabled and mode == "off":
        section._fail("enabled", True, "time-aware fairness reads each queue's usage history from Prometheus, and "
                      "observability.prometheus is off", "set observability.prometheus to install or external")
    if enabled and mode == "external" and url is None:
        section.reader.fail(section.key("enabled"), True,
                            "KAI's scheduler needs the URL of the external Prometheus to read usage history",
                            "set observability.external.url, e.g. http://prometheus-operated.monitoring:9090")
    k_value = section.number("kValue", defaults.k_value, minimum=0)
    return TimeAwareFairness(
        enabled=bool(enabled),
        window_size=_duration(section, "windowSize", defaults.window_size),
        window_type=section.string("windowType", defaults.window_type, choices=WINDOW_TYPES),
        half_life_period=_duration(section, "halfLifePeriod", None),
        k_value=k_value,
    )


def check_namespace(reader: Reader, settings: Observability, taken: dict[str, str]) -> None:
    """An installed stack gets a namespace of its own; external objects may share one, not a tenant's."""
    owner = taken.get(settings.namespace)
    if not settings.enabled or owner is None:
        return
    if settings.prometheus == "install" or owner.startswith("team "):
        reader.fail("observability.namespace", settings.namespace, f"is the namespace of {owner}",
                    "give the monitoring stack a namespace of its own, e.g. monitoring")
