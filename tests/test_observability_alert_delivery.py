"""Spec of a real Alertmanager delivering what the installed one is configured with (``observability.alerting``):
the configuration the real kube-prometheus-stack chart renders from the program's values, run by Debian's
Alertmanager against local Slack and PagerDuty stand-ins (tests/local_alertmanager.py), the receiver's address
read from the file the mounted Secret gives. The config, resources and rendering: tests/test_observability_alerting.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from components import observability_alerting as alerting
from components import observability_rules as rules
from config import load_platform, versions
from tests.local_alertmanager import needs_alertmanager, post_alerts, receiving_end, running_alertmanager
from tests.test_observability_alerting import (  # noqa: F401 (slack_render: the fixture)
    alerting_site, alertmanager_file, chart_inhibit_rules, rendered_stack, slack_render,
)
from tests.test_observability_rules import site_config


# Where a test's Alertmanager reads the receiver's address from (the mounted Secret's file in the cluster).
ADDRESS_FILE = "receiver-address"
STARVED = {"labels": {"alertname": "GpuTenancyTeamStarved", "team": "alpha", "severity": "warning"},
           "annotations": {"summary": "Team alpha has pending pods below its GPU guarantee",
                           "description": "alpha has 2 pending pod(s)", "runbook": "Check the queue"}}


XID = {"labels": {"alertname": "GpuTenancyGpuXidError", "gpu": "0", "severity": "critical"},
       "annotations": {"summary": "GPU 0 reported an XID error", "description": "XID 79", "runbook": "Drain"}}


def delivered(config: dict, root: Path, secret: str, endpoint_received: list[dict]) -> list[dict]:
    """What the receiving end got after two platform alerts (a warning and a critical one) and the Watchdog reach
    a real Alertmanager running
    ``config``, its receiver's secret file holding ``secret`` with the trailing newline `pulumi config set
    --secret ... < file` keeps."""
    defined = {rule["alert"]: rule["labels"]["severity"] for rule in rules.alert_rules(load_platform(site_config()))}
    assert all(defined[alert["labels"]["alertname"]] == alert["labels"]["severity"] for alert in (STARVED, XID))
    (root / ADDRESS_FILE).write_text(secret + "\n")
    config["route"]["group_wait"] = "1s"
    with running_alertmanager(config, root) as url:
        post_alerts(url, [{"labels": {"alertname": "Watchdog", "severity": "none"}}, STARVED, XID])
        deadline = time.monotonic() + 30
        while not endpoint_received and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)  # what else comes, comes within the group wait
    return endpoint_received


def delivering_receiver(path: Path, kind: str) -> tuple[dict, dict]:
    """The rendered configuration and its one ``kind`` config, whose secret file must be the mounted Secret's."""
    config = yaml.safe_load(path.read_text())
    [settings] = next(receiver for receiver in config["receivers"] if receiver["name"] == alerting.RECEIVER)[kind]
    [file_key] = [key for key in settings if key.endswith("_file")]
    assert settings[file_key] == alerting.RECEIVER_FILE
    return config, settings


@needs_alertmanager
def test_the_charts_info_inhibitor_quiets_the_charts_info_alerts_but_not_the_programs(slack_render, tmp_path):
    """kube-prometheus-stack's InfoInhibitor fires wherever an info alert fires alone, the program's too (they
    carry no namespace): with the chart's rules as they are, an idle-GPU alert would never be sent."""
    config, slack = delivering_receiver(slack_render[1], "slack_configs")
    slack["api_url_file"] = str(tmp_path / ADDRESS_FILE)
    idle = {"labels": {"alertname": "GpuTenancyAllocatedGpuIdle", "team": "alpha", "severity": "info"},
            "annotations": {"summary": "Team alpha holds GPUs it barely uses"}}
    throttled = {"labels": {"alertname": "CPUThrottlingHigh", "namespace": "vcluster-alpha", "severity": "info"}}
    inhibitors = [{"labels": {"alertname": alerting.INFO_INHIBITOR, "severity": "none", **namespace}}
                  for namespace in ({}, {"namespace": "vcluster-alpha"})]
    for rules_in_force, expected in ((alerting.inhibit_rules(), ["[FIRING:1] GpuTenancyAllocatedGpuIdle (alpha)"]),
                                     (chart_inhibit_rules(versions.KUBE_PROMETHEUS_STACK_VERSION), [])):
        root = tmp_path / str(len(expected))
        root.mkdir()
        config["inhibit_rules"] = rules_in_force
        config["route"]["group_wait"] = "1s"
        with receiving_end() as (hook, received):
            (tmp_path / ADDRESS_FILE).write_text(hook)
            with running_alertmanager(config, root) as url:
                post_alerts(url, [*inhibitors, idle, throttled])
                time.sleep(5)
        assert [message["attachments"][0]["title"] for message in received] == expected


@needs_alertmanager
def test_a_real_alertmanager_posts_the_platform_alert_to_slack_and_not_the_watchdog(slack_render, tmp_path):
    """The rendered configuration as the operator mounts it: only the Secret's path is this machine's, and the
    grouping wait is shortened so the test does not sit through the chart's 30 seconds."""
    config, slack = delivering_receiver(slack_render[1], "slack_configs")
    slack["api_url_file"] = str(tmp_path / ADDRESS_FILE)
    with receiving_end() as (hook, received):
        messages = delivered(config, tmp_path, hook, received)
    # One message per alert (and team); the Watchdog's goes nowhere.
    assert sorted(message["attachments"][0]["title"] for message in messages) == [
        "[FIRING:1] GpuTenancyGpuXidError", "[FIRING:1] GpuTenancyTeamStarved (alpha)"]
    [message] = [message for message in messages if "TeamStarved" in message["attachments"][0]["title"]]
    assert message["channel"] == "#gpu-platform"
    [attachment] = message["attachments"]
    assert attachment["title"] == "[FIRING:1] GpuTenancyTeamStarved (alpha)"
    assert "*Team alpha has pending pods below its GPU guarantee*" in attachment["text"]
    assert "alpha has 2 pending pod(s)" in attachment["text"] and "Runbook: Check the queue" in attachment["text"]


@needs_alertmanager
def test_a_real_alertmanager_pages_pagerduty_for_the_critical_alert_with_the_routing_key_from_the_secret(tmp_path):
    """As above, with PagerDuty's endpoint (Alertmanager's default) replaced by the stand-in: the warning does not
    page."""
    path = alertmanager_file(rendered_stack(alerting_site(receiver="pagerduty")), tmp_path)
    config, pagerduty = delivering_receiver(path, "pagerduty_configs")
    pagerduty["routing_key_file"] = str(tmp_path / ADDRESS_FILE)
    with receiving_end() as (endpoint, received):
        pagerduty["url"] = endpoint
        [event] = delivered(config, tmp_path, "R0UT1NGKEY0123456789ABCDEFGHIJKL", received)
    assert event["routing_key"] == "R0UT1NGKEY0123456789ABCDEFGHIJKL" and event["event_action"] == "trigger"
    assert "GpuTenancyGpuXidError" in event["payload"]["summary"]
