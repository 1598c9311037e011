"""The ``observability`` block read and judged: a value with a problem goes to the reader (naming the key, the value
and the fix), and what a setting leaves to the site becomes a warning or a plan note.

config/observability.py declares the keys and the plain data this returns.
"""

from __future__ import annotations

import re
from typing import Optional

from config.key_types import HTTP_URL_PATTERN, quantity_value
from config.observability import (
    DCGM_FIELDS_BEYOND_DEFAULTS, INSTALL_RELEASE, KSM_FLAGS, MINIMUM_VOLUME, AlertThresholds, Observability,
    TimeAwareFairness, duration_seconds,
)
from config.observability_alerting import read_alerting
from config.observability_login import read_grafana_login
from config.reader import Reader, Section
from config.secrets import Secrets


def read_observability(section: Section, secrets: Secrets) -> Observability:
    """Read the ``observability`` block; every problem goes to the section's reader, and a secret it needs to
    ``secrets``."""
    mode = section.read("prometheus")
    external = section.child("external")
    release_label = external.read("releaseLabel")
    url = external.read("url")
    namespace = section.read("namespace")
    version = section.read("chartVersion")
    retention = section.read("retention")
    storage = _volume(section, "storage")
    grafana = section.read("grafana")
    grafana_storage = _volume(section, "grafanaStorage")
    grafana_url = section.read("grafanaUrl")
    if grafana_url is not None and not (mode == "install" and grafana is not False):
        section.fail("grafanaUrl", grafana_url, "team organizations are made in the Grafana this program installs",
                     "remove observability.grafanaUrl, or set prometheus: install with grafana: true")
        grafana_url = None
    elif grafana_url is not None and not re.fullmatch(HTTP_URL_PATTERN, grafana_url):
        section.fail("grafanaUrl", grafana_url, "is not an http(s) URL",
                     "set it to where pulumi up reaches Grafana, e.g. https://grafana.gpu.example.com")
        grafana_url = None
    fairness = _fairness(section.child("timeAwareFairness"), mode, url)
    if retention is not None and duration_seconds(retention) == 0:
        section.fail("retention", retention, "keeps no history at all", "set a positive duration, e.g. 90d")
    elif (mode == "install" and fairness.enabled and retention is not None and fairness.window_size is not None
            and duration_seconds(fairness.window_size) > duration_seconds(retention)):
        section.fail("retention", retention, f"is shorter than the usage window KAI reads "
                     f"(timeAwareFairness.windowSize: {fairness.window_size}), so part of that window is never there",
                     f"set observability.retention to at least {fairness.window_size}, or shorten the window")
    return Observability(
        prometheus=mode or "off",
        namespace=namespace,
        chart_version=version,
        retention=retention,
        storage=storage,
        grafana=grafana,
        grafana_storage=grafana_storage,
        protect=section.read("protect"),
        grafana_url=grafana_url,
        grafana_login=read_grafana_login(section.child("grafanaLogin"), grafana_url,
                                         mode == "install" and grafana is not False),
        release_label=INSTALL_RELEASE if mode == "install" else release_label,
        url=url,
        alerts=_alerts(section.child("alerts")),
        alerting=read_alerting(section.child("alerting"), mode == "install", secrets),
        control_plane_metrics=bool(section.read("controlPlaneMetrics")),
        fairness=fairness,
    )


def _volume(section: Section, key: str) -> Optional[str]:
    size = section.read(key)
    if size is not None and quantity_value(size) < quantity_value(MINIMUM_VOLUME):
        section.fail(key, size, f"is smaller than {MINIMUM_VOLUME}, too small for a database that keeps history",
                     f"set it to {MINIMUM_VOLUME} or more, e.g. {section.block[key].default}")
        return None
    return size


def _alerts(section: Section) -> AlertThresholds:
    return AlertThresholds(
        pending_minutes=section.read("pendingMinutes"),
        idle_utilisation_percent=section.read("idleUtilisationPercent"),
        idle_minutes=section.read("idleMinutes"),
        admission_rejections=section.read("admissionRejections"),
    )


def _fairness(section: Section, mode: Optional[str], url: Optional[str]) -> TimeAwareFairness:
    enabled = section.read("enabled")
    if enabled and mode == "off":
        section.fail("enabled", True, "time-aware fairness reads each queue's usage history from Prometheus, and "
                     "observability.prometheus is off", "set observability.prometheus to install or external")
    if enabled and mode == "external" and url is None:
        section.fail("enabled", True, "KAI's scheduler needs the URL of the external Prometheus to read usage history",
                     "set observability.external.url, e.g. http://prometheus-operated.monitoring:9090")
    k_value = section.read("kValue")
    return TimeAwareFairness(
        enabled=bool(enabled),
        window_size=section.read("windowSize"),
        window_type=section.read("windowType"),
        half_life_period=section.read("halfLifePeriod"),
        k_value=k_value,
    )


def observability_warnings(settings: Observability) -> list[str]:
    """Settings that are accepted but change nothing."""
    if settings.prometheus == "external" and settings.url is not None and not settings.fairness.enabled:
        return [f"observability.external.url is set ({settings.url}) but nothing reads it: only KAI's time-aware "
                "fairness queries the site's Prometheus, and observability.timeAwareFairness.enabled is false. "
                "Enable time-aware fairness, or remove the url."]
    return []


def check_observability_namespace(reader: Reader, settings: Observability, taken: dict[str, str]) -> None:
    """An installed stack gets a namespace of its own; external objects may share one, not a tenant's."""
    owner = taken.get(settings.namespace)
    if not settings.enabled or owner is None:
        return
    if settings.prometheus == "install" or owner.startswith("team "):
        reader.fail("observability.namespace", settings.namespace, f"is the namespace of {owner}",
                    "give the monitoring stack a namespace of its own, e.g. monitoring")


def external_notes(settings: Observability, gpu_sharing: bool, gpu_operator_mode: str) -> list[str]:
    """What a site's own Prometheus must collect for the program's rules to charge shared GPUs, and what a
    site's own GPU Operator must export for its alerts."""
    return _external_operator_notes(settings, gpu_operator_mode) + _external_prometheus_notes(settings, gpu_sharing)


def _external_operator_notes(settings: Observability, gpu_operator_mode: str) -> list[str]:
    if settings.prometheus == "off" or gpu_operator_mode != "external":
        return []
    return ["gpuOperator.mode is external: the site's own GPU Operator must run the DCGM exporter with "
            f"{' and '.join(DCGM_FIELDS_BEYOND_DEFAULTS)} added to its collector list (its dcgmExporter.config "
            "ConfigMap; keep the default fields). Without the first GpuTenancyGpuEccErrors never fires; without the "
            "second a fatal XID followed at once by another code does not page (docs/observability-metrics-alerts.md). Keep the "
            "exporter's pod-label export off (dcgmExporter.enablePodLabels, GPU Operator v26.3.3 and later): the "
            "program scrapes it with honorLabels, so a tenant's pod label named UUID or GPU_I_ID would break or "
            "redirect the GPU's series."]


def _external_prometheus_notes(settings: Observability, gpu_sharing: bool) -> list[str]:
    if settings.prometheus != "external":
        return []
    # The installed stack scrapes no tenant namespace (tests/test_observability_scrapes.py); a site's may.
    notes = ["observability.prometheus is external: the site's Prometheus must not scrape the teams' host "
             "namespaces (annotation-based pod scraping, PodMonitors or ServiceMonitors reaching them). A tenant "
             "controls what its pods expose: series named like those the rules read (kai_queue_*, DCGM_*, kube_pod_*, "
             "gpu_tenancy_team_info) would change other teams' GPU-hours, break the per-team "
             "rules for every team, or page the on-call (docs/observability-charging.md).",
             "observability.prometheus is external: for the GPUs a team's ordinary init containers hold to be "
             "charged, the site's kube-state-metrics must be v2.11.0 or later and export kube_pod_init_container_info, "
             "kube_pod_init_container_resource_requests, kube_pod_init_container_status_running and "
             "kube_pod_container_resource_requests (on by default; keep them out of any denylist).",
             "observability.prometheus is external: a team writes its pods' tolerations (any number) and images (up "
             "to its syncedPodTextBytes) into the site's kube-state-metrics series; for no team to fill that "
             "Prometheus for the others, deny kube_pod_tolerations (--metric-denylist) and cut the image labels of "
             "kube_pod_container_info and kube_pod_init_container_info in the scrape's metricRelabelings, as the "
             "installed stack does; not with sampleLimit or labelValueLengthLimit, which drop the whole scrape "
             "(docs/observability-charging.md)."]
    if not gpu_sharing:
        return notes
    return notes + [
        f"observability.prometheus is external: for the used GPU-hours of teams on KAI fractions, the site's "
        f"kube-state-metrics must run with {' '.join(KSM_FLAGS)} (merge with any allowlist it has; kube-state-"
        "metrics chart values metricLabelsAllowlist / metricAnnotationsAllowList) and be scraped with "
        "honorLabels: true. Without them shared GPUs are charged to no team (docs/observability-charging.md)."]
