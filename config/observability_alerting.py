"""Stack config: ``observability.alerting``, where the installed Alertmanager sends the platform's alerts.

Without it the alerts the program defines (components/observability_rules.py) are only seen by someone looking
at Alertmanager or Grafana: kube-prometheus-stack routes every alert to a receiver that does nothing. The
receiver's address or key is a secret (``alertReceiver``), and so is the heartbeat's URL (``alertHeartbeat``): the
loader learns only whether they are set.
components/observability_alerting.py turns it into Alertmanager's configuration. No Pulumi here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from config.key_types import Boolean, Check, Text
from config.keys import Block, Condition, Derived, Key
from config.reader import Section
from config.secrets import Secrets

KEY = "observability.alerting"
# The secret key (config/secrets.py) holding the receiver's address: its URL or routing key.
ADDRESS_SECRET = "alertReceiver"
# The secret key holding the URL of the dead man's switch that expects the heartbeat.
HEARTBEAT_SECRET = "alertHeartbeat"
# How often the heartbeat is posted: the dead man's switch's period (its grace period on top).
HEARTBEAT_INTERVAL = "5m"
RECEIVERS = ("none", "slack", "webhook", "pagerduty")
# What each receiver reads from the secret, for messages and docs.
SECRET_MEANING = {"slack": "the Slack incoming-webhook URL", "webhook": "the webhook's URL",
                  "pagerduty": "the PagerDuty Events API v2 routing (integration) key"}
SCOPES = ("platform", "all")
# The alerts' severity label, least severe first (the program's alerts and kube-prometheus-stack's use these).
SEVERITIES = ("info", "warning", "critical")
# How a receiver key's docs say where its address comes from (the site's and each team's).
ADDRESS_KINDS = "; ".join(f"`{name}`: {meaning}" for name, meaning in SECRET_MEANING.items())
MOUNTED = "Alertmanager reads it from a Secret mounted into its pod, never from the chart's values."
SLACK_CHANNEL = Check(r"[#@]?[a-z0-9][a-z0-9._-]{0,79}", "is not a Slack channel name",
                      "use the channel's name in lower case, e.g. #gpu-platform")


@dataclass(frozen=True)
class Alerting:
    receiver: str = "none"
    scope: str = "platform"
    slack_channel: Optional[str] = None
    severity: str = "info"
    heartbeat: bool = False

    @property
    def delivers(self) -> bool:
        return self.receiver != "none"

    @property
    def configured(self) -> bool:
        """Whether the program sets Alertmanager's configuration (a receiver, a heartbeat or both)."""
        return self.delivers or self.heartbeat


def slack_only(fix: str) -> Condition:
    """slackChannel is refused unless the receiver is Slack."""
    return Condition("receiver", ("webhook", "pagerduty"), "only applies to receiver: slack (it is {value})", fix,
                     forbidden=("slackChannel",))


_ALERTING = Alerting()
ALERTING = Block(conditions=(
    Condition("receiver", ("none",), "chooses what goes to a receiver, and receiver is none",
              "set observability.alerting.receiver, or remove observability.alerting.{name}",
              forbidden=("alerts", "slackChannel", "severity")),
    slack_only("remove observability.alerting.slackChannel"),
), keys=(
    Key("receiver", Text(choices=RECEIVERS), _ALERTING.receiver,
        "Where the installed Alertmanager sends alerts (`install` only).", example="slack",
        default_note="`none`: alerts show in Alertmanager and Grafana only",
        details=f"The address or key is the secret key `{ADDRESS_SECRET}`: {ADDRESS_KINDS}. {MOUNTED} Resolved "
                "alerts are sent too."),
    Key("alerts", Text(choices=SCOPES), _ALERTING.scope, "Which alerts go to the receiver.", example="all",
        details="`platform`: the program's own alerts (`GpuTenancy*`: starved teams, idle GPUs, admission "
                "refusals, history trimmed, ...) and kube-prometheus-stack's that say they cannot fire (rules "
                "failing, a PrometheusRule rejected, a configuration not loaded). `all`: also "
                "kube-prometheus-stack's cluster alerts, except `Watchdog` and `InfoInhibitor`, which exist to fire "
                "all the time, and those about what a tenant runs in its host namespace (its pods and volumes: the "
                "team's own, which a tenant drives at will; its virtual cluster's control plane there is the "
                "platform's, and its alerts go)."),
    Key("severity", Text(choices=SEVERITIES), Derived("`critical` for `pagerduty`, `info` otherwise"),
        "The least severe alert that goes to the receiver (the alerts' `severity` label).", example="warning",
        details="A PagerDuty receiver pages someone: by default only critical alerts (a fatal XID or an ECC "
                "error, a queue KAI dropped) go there, not a team's idle GPUs or its own application's faults."),
    Key("slackChannel", Text(form="Slack channel", checks=(SLACK_CHANNEL,)), _ALERTING.slack_channel,
        "Channel to post to (`receiver: slack`).", example="#gpu-platform",
        default_note="the incoming webhook's own channel"),
    Key("heartbeat", Boolean(), _ALERTING.heartbeat,
        f"Post kube-prometheus-stack's always-firing `Watchdog` alert every {HEARTBEAT_INTERVAL} to a dead man's "
        f"switch (`install` only), whose URL is the secret key `{HEARTBEAT_SECRET}`.", example="true",
        details="Without it nobody is told when alerting itself stops (Prometheus or Alertmanager down, their node "
                "gone, rules failing): no alert is also what a healthy site sends. The URL is a service that "
                "alerts when the posts stop (healthchecks.io, Dead Man's Snitch: any URL that takes a POST with no "
                f"credentials): set its period to {HEARTBEAT_INTERVAL} with a few minutes' grace. Independent of "
                "`receiver`."),
))


def read_alerting(section: Section, installed: bool, secrets: Secrets) -> Alerting:
    """The block; every problem goes to the section's reader. The receiver needs its secret."""
    receiver = section.read("receiver") or _ALERTING.receiver
    alerting = Alerting(receiver=receiver, scope=section.read("alerts") or _ALERTING.scope,
                        slack_channel=section.read("slackChannel"),
                        severity=section.read("severity", "critical" if receiver == "pagerduty" else "info")
                        or _ALERTING.severity,
                        heartbeat=bool(section.read("heartbeat")))
    if installed and alerting.delivers:
        secrets.require(ADDRESS_SECRET, f"{KEY}.receiver is {receiver}, and Alertmanager needs "
                                         f"{SECRET_MEANING[receiver]}")
    if installed and alerting.heartbeat:
        secrets.require(HEARTBEAT_SECRET, f"{KEY}.heartbeat is true, and Alertmanager needs the URL of the dead "
                                           "man's switch to post to")
    return alerting


def alerting_warnings(alerting: Alerting, installed: bool, secrets_set: set[str]) -> list[str]:
    """Receiver or heartbeat secrets nothing reads."""
    unread = [(ADDRESS_SECRET, "receiver is not set", "Set a receiver"),
              (HEARTBEAT_SECRET, "heartbeat is not true", "Turn the heartbeat on")]
    used = {ADDRESS_SECRET: installed and alerting.delivers, HEARTBEAT_SECRET: installed and alerting.heartbeat}
    return [f"{name} is set but nothing reads it: {KEY}.{why} (or prometheus is not install). {fix}, or remove "
            "the secret." for name, why, fix in unread if name in secrets_set and not used[name]]
