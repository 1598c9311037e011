"""The installed Alertmanager: where it sends alerts (``observability.alerting``) and where it keeps its state.

kube-prometheus-stack's default configuration sends every alert to a receiver named ``null`` that does
nothing. With a receiver set, the program's alerts (or all of them) go to Slack, a webhook or PagerDuty.
With the heartbeat on, the chart's always-firing ``Watchdog`` is posted to a dead man's switch, which alerts
when the posts stop: the one way to learn that alerting itself is down.
The URLs and the routing key never enter the chart's values (Helm keeps those in its release Secrets, readable
with ``helm get values``): they are a Secret of their own, which the Prometheus operator mounts into
Alertmanager's pod (``alertmanagerSpec.secrets``) and the configuration names by path (``*_file``).

The configuration itself is a Secret of the program's too (``alertmanagerSpec.configSecret``), not the chart's
``alertmanager.config``: it holds a route and a receiver per team with a receiver, and Helm keeps its values and
the Secret it renders from them in the release's record, a Secret the API server refuses past 1 MiB
(tools/charts/release_record.py). Outside the release, the record no longer grows with the teams.

Silences and the notification log live in Alertmanager's data directory: on a volume, a silence set during
an incident and the record of what was already sent outlive a restart of its pod.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import pulumi

from components.observability_receivers import RECEIVER_SECRET, SECRETS_DIR, receiver_config, severity_matcher
from components.observability_team_alerting import (PLATFORM_ALERT_NAMES, team_receivers, team_routes, team_secret_key,
                                                     tenants_own_alerts)
from components.yaml_text import yaml_documents
from components.kubernetes_resources import SECRET, KubernetesObject
from config.model import Team
from config.observability import MINIMUM_VOLUME, Observability
from config.observability_alerting import HEARTBEAT_INTERVAL, Alerting
from config.vocabulary import MANAGED_BY

RECEIVER = "gpu-tenancy"
# The Secret holding Alertmanager's configuration (the operator reads this key), in the monitoring namespace.
CONFIG_SECRET = "gpu-tenancy-alertmanager-config"
CONFIG_KEY = "alertmanager.yaml"
HEARTBEAT_RECEIVER = "gpu-tenancy-heartbeat"
NULL_RECEIVER = "null"  # the chart's own do-nothing receiver
RECEIVER_SECRET_KEY = "receiver"
HEARTBEAT_SECRET_KEY = "heartbeat"
RECEIVER_FILE = f"{SECRETS_DIR}/{RECEIVER_SECRET}/{RECEIVER_SECRET_KEY}"
HEARTBEAT_FILE = f"{SECRETS_DIR}/{RECEIVER_SECRET}/{HEARTBEAT_SECRET_KEY}"
WATCHDOG = "Watchdog"
# kube-prometheus-stack's alerts saying the program's alerts cannot fire or change: rules failing or skipped, a
# PrometheusRule the operator rejected, a configuration Prometheus or Alertmanager refused to load (they keep
# the old one), no samples stored. They go with the program's own (``alerts: platform``); a test finds each in
# the chart's rules at the floor and default versions.
MONITORING_BLIND = ("PrometheusRuleFailures", "PrometheusMissingRuleEvaluations", "PrometheusBadConfig",
                    "PrometheusNotIngestingSamples", "PrometheusTSDBReloadsFailing",
                    "PrometheusOperatorRejectedResources", "AlertmanagerFailedReload", "ConfigReloaderSidecarErrors")
PLATFORM_ALERTS = f'alertname =~ "{"|".join((PLATFORM_ALERT_NAMES, *MONITORING_BLIND))}"'
INFO_INHIBITOR = "InfoInhibitor"
# kube-prometheus-stack alerts that fire all the time on purpose: a dead man's switch and the inhibitor of
# info alerts.
ALWAYS_FIRING = (WATCHDOG, INFO_INHIBITOR)
# Silences and the notification log are kilobytes.
STATE_VOLUME = MINIMUM_VOLUME
# kube-prometheus-stack 88's own ``alertmanager.config`` settings the program keeps (a test holds them to the chart's
# values.yaml at every accepted release): the grouping and timers of the top route, which goes to ``null``, and where
# notification templates are read.
CHART_GLOBAL = {"resolve_timeout": "5m"}
CHART_ROUTE = {"group_by": ["namespace"], "group_wait": "30s", "group_interval": "5m", "repeat_interval": "12h",
               "receiver": NULL_RECEIVER}
CHART_TEMPLATES = ["/etc/alertmanager/config/*.tmpl"]

# Compared too by the chart's first two inhibit rules: a team namespace holds the tenant's claims and its control
# plane's, so the tenant's own claim filling up (critical, which it drives at will) would otherwise silence the
# platform's forecast (warning) for the control plane's. Alerts without the label compare as before.
INHIBIT_SAME_CLAIM = "persistentvolumeclaim"


def inhibit_rules() -> list[dict]:
    """kube-prometheus-stack 88's inhibit rules (restated: Helm replaces a list the values set), the program's
    alerts exempt from the InfoInhibitor one, and a severity's alert inhibiting a lower one of the same claim only
    (INHIBIT_SAME_CLAIM). The InfoInhibitor rule silences every info alert of a namespace in which nothing
    warning or critical fires; the program's alerts carry no namespace, so its info alerts (idle GPUs, admission
    refusals) would never reach a receiver."""
    return [
        {"source_matchers": ["severity = critical"], "target_matchers": ["severity =~ warning|info"],
         "equal": ["namespace", "alertname", INHIBIT_SAME_CLAIM]},
        {"source_matchers": ["severity = warning"], "target_matchers": ["severity = info"],
         "equal": ["namespace", "alertname", INHIBIT_SAME_CLAIM]},
        {"source_matchers": [f"alertname = {INFO_INHIBITOR}"],
         "target_matchers": ["severity = info", f'alertname !~ "{PLATFORM_ALERT_NAMES}"'], "equal": ["namespace"]},
        {"target_matchers": [f"alertname = {INFO_INHIBITOR}"]},
    ]


def alertmanager_config(alerting: Alerting, teams: Sequence[Team]) -> dict:
    """Alertmanager's configuration: the chart's global settings, templates and top route to ``null``, with the
    program's routes under it, its receivers and inhibit rules (what Helm made of the chart's ``alertmanager.config``
    with the program's parts set in the values)."""
    routes = [heartbeat_route() if name == WATCHDOG and alerting.heartbeat else
              {"receiver": NULL_RECEIVER, "matchers": [f'alertname = "{name}"']} for name in ALWAYS_FIRING]
    # Each team's own alerts to its receiver, then on (continue) to the site receiver's route.
    routes += team_routes(teams)
    receivers = [{"name": NULL_RECEIVER}, *team_receivers(teams)]
    if alerting.heartbeat:
        receivers.append({"name": HEARTBEAT_RECEIVER,
                          "webhook_configs": [{"url_file": HEARTBEAT_FILE, "send_resolved": False}]})
    if alerting.delivers:
        if alerting.scope == "all" and teams:
            routes.append({"receiver": NULL_RECEIVER, "matchers": tenants_own_alerts(teams)})
        which = ([PLATFORM_ALERTS] if alerting.scope == "platform" else []) + severity_matcher(alerting.severity)
        # One message per alert and team, so a team's alert does not hide in another's.
        routes.append({"receiver": RECEIVER, "group_by": ["alertname", "team"],
                       **({"matchers": which} if which else {})})
        receivers.append(receiver_config(RECEIVER, alerting.receiver, RECEIVER_FILE, alerting.slack_channel))
    return {"global": dict(CHART_GLOBAL), "route": {**CHART_ROUTE, "routes": routes}, "inhibit_rules": inhibit_rules(),
            "receivers": receivers, "templates": list(CHART_TEMPLATES)}


def heartbeat_route() -> dict:
    """Watchdog, posted at once and again every interval for as long as it fires (that is, always)."""
    return {"receiver": HEARTBEAT_RECEIVER, "matchers": [f'alertname = "{WATCHDOG}"'], "group_wait": "0s",
            "group_interval": "1m", "repeat_interval": HEARTBEAT_INTERVAL}


def alertmanager_values(settings: Observability, storage_class: Optional[str], teams: Sequence[Team]) -> dict:
    """The chart's ``alertmanager`` values."""
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": STATE_VOLUME}},
             **({"storageClassName": storage_class} if storage_class else {})}
    spec: dict = {"storage": {"volumeClaimTemplate": {"spec": claim}}}
    if not configured(settings.alerting, teams):
        return {"alertmanagerSpec": spec}
    # The chart renders no configuration of its own: the operator reads the program's Secret.
    return {"alertmanagerSpec": {**spec, "secrets": [RECEIVER_SECRET], "useExistingSecret": True,
                                 "configSecret": CONFIG_SECRET}}


def configured(alerting: Alerting, teams: Sequence[Team]) -> bool:
    """Whether the program sets Alertmanager's configuration: a site receiver, a heartbeat or a team receiver."""
    return alerting.configured or any(team.alerting.delivers for team in teams)


def alerting_secret(name: str, namespace: str, receiver: Optional[pulumi.Input[str]],
                    heartbeat: Optional[pulumi.Input[str]], teams: Mapping[str, pulumi.Input[str]],
                    opts: pulumi.ResourceOptions) -> KubernetesObject:
    """The Secret Alertmanager reads the receivers' URLs or keys (the site's and each team's) and the heartbeat's
    URL from. It must exist before the release: the operator mounts it into Alertmanager's pod, which does not
    start without it."""
    values = {RECEIVER_SECRET_KEY: receiver, HEARTBEAT_SECRET_KEY: heartbeat,
              **{team_secret_key(team): address for team, address in teams.items()}}
    return KubernetesObject(
        name, SECRET, metadata={"name": RECEIVER_SECRET, "namespace": namespace, "labels": dict(MANAGED_BY)},
        string_data={key: pulumi.Output.secret(value) for key, value in values.items() if value is not None},
        opts=opts)


def config_secret(name: str, namespace: str, alerting: Alerting, teams: Sequence[Team],
                  opts: pulumi.ResourceOptions) -> KubernetesObject:
    """The Secret Alertmanager's configuration is read from. It names the receivers' addresses by file only. It must
    exist before the release: without it the operator runs Alertmanager with a configuration that sends nothing."""
    return KubernetesObject(
        name, SECRET, metadata={"name": CONFIG_SECRET, "namespace": namespace, "labels": dict(MANAGED_BY)},
        string_data={CONFIG_KEY: yaml_documents([alertmanager_config(alerting, teams)])},
        opts=opts)
