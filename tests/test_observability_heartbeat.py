"""The heartbeat (``observability.alerting.heartbeat``): who tells anyone when alerting itself is down.

A site whose Prometheus, Alertmanager or their node has stopped sends no alert, exactly as a healthy site
does. kube-prometheus-stack's ``Watchdog`` alert fires all the time on purpose; with the heartbeat on, the
installed Alertmanager posts it to a dead man's switch every interval, and that service alerts when the
posts stop. Config, the program's objects, amtool on the rendered configuration, and a real Alertmanager.
"""

from __future__ import annotations

import copy
import time

import pytest
import yaml

from components import observability_alerting as alerting
from config import load_platform
from config.observability_alerting import HEARTBEAT_INTERVAL, HEARTBEAT_SECRET
from tests.conftest import run
from tests.local_alertmanager import needs_alertmanager, needs_amtool, post_alerts, receiving_end, running_alertmanager
from tests.test_observability_alert_delivery import XID
from tests.test_observability_alerting import (alerting_site, alertmanager_configuration, alertmanager_file,
                                               receiver_secrets, rendered_stack, route_of, stack_release,
                                               with_receiver_secret)
from tests.test_observability_config import issues
from tests.test_observability_rules import site_config
from tools.plan.document import build_plan
from tools.plan.lookup import PlanIndex
from tools.plan.summary_site import observability_section


def heartbeat_site(**settings) -> dict:
    return alerting_site(heartbeat=True, **settings)


# --- config -------------------------------------------------------------------------------------


def test_the_heartbeat_is_off_by_default_and_needs_no_secret():
    settings = load_platform(site_config()).observability.alerting
    assert not settings.heartbeat and not settings.configured


def test_the_heartbeat_needs_its_secret_and_the_error_says_how_to_set_it():
    message = issues(heartbeat_site())[HEARTBEAT_SECRET]
    assert "heartbeat is true" in message and f"pulumi config set --secret gpu-tenancy:{HEARTBEAT_SECRET}" in message
    # Independent of the receiver: a site may watch its alerting before it routes any alert anywhere.
    settings = load_platform(heartbeat_site(), placeholders=[HEARTBEAT_SECRET]).observability.alerting
    assert settings.heartbeat and not settings.delivers and settings.configured


def test_a_heartbeat_secret_nothing_reads_draws_a_warning():
    warnings = load_platform(site_config(), secrets_set=[HEARTBEAT_SECRET]).warnings
    assert any(f"{HEARTBEAT_SECRET} is set but nothing reads it" in warning for warning in warnings)
    assert not any(HEARTBEAT_SECRET in warning for warning in load_platform(
        heartbeat_site(), secrets_set=[HEARTBEAT_SECRET]).warnings)


def test_the_heartbeat_is_for_the_alertmanager_the_program_installs():
    message = issues(site_config(prometheus="external", releaseLabel="prometheus",
                                 alerting={"heartbeat": True}))["observability.alerting"]
    assert "external" in message


# --- the program ------------------------------------------------------------------------------------


@pytest.mark.parametrize("receiver", ["none", "pagerduty"])
def test_the_heartbeat_url_is_in_the_secret_and_only_its_path_in_the_values(receiver):
    site = heartbeat_site(**({"receiver": receiver} if receiver != "none" else {}))
    program = run(with_receiver_secret(site), stack="dev")
    [secret] = receiver_secrets(program)
    release = stack_release(program)
    assert secret.urn in release.dependencies and secret.inputs["stringData"] == "[secret]"
    values = release.inputs["values"]["alertmanager"]
    assert values["alertmanagerSpec"]["secrets"] == [alerting.RECEIVER_SECRET]
    configuration = alertmanager_configuration(program)
    receivers = {entry["name"]: entry for entry in configuration["receivers"]}
    assert receivers[alerting.HEARTBEAT_RECEIVER]["webhook_configs"] == [
        {"url_file": f"{alerting.SECRETS_DIR}/{alerting.RECEIVER_SECRET}/{alerting.HEARTBEAT_SECRET_KEY}",
         "send_resolved": False}]
    assert (alerting.RECEIVER in receivers) == (receiver != "none")
    [watchdog] = [route for route in configuration["route"]["routes"]
                  if route["matchers"] == ['alertname = "Watchdog"']]
    assert watchdog["receiver"] == alerting.HEARTBEAT_RECEIVER and watchdog["repeat_interval"] == HEARTBEAT_INTERVAL


@pytest.mark.parametrize("settings, keys", [
    ({"heartbeat": True}, {alerting.HEARTBEAT_SECRET_KEY}),
    ({"heartbeat": True, "receiver": "slack"}, {alerting.HEARTBEAT_SECRET_KEY, alerting.RECEIVER_SECRET_KEY}),
    ({"receiver": "slack"}, {alerting.RECEIVER_SECRET_KEY}),
])
def test_the_secret_holds_each_file_the_configuration_names_and_nothing_else(settings, keys):
    """Alertmanager reads the file at each notification: a key the Secret lacks fails every delivery."""
    program = run(with_receiver_secret(alerting_site(**settings)), stack="dev")
    [secret] = receiver_secrets(program)
    assert set(secret.raw_inputs["stringData"]) == keys
    named = {config[key] for receiver in alertmanager_configuration(program)["receivers"]
             for field, configs in receiver.items() if field.endswith("_configs") for config in configs
             for key in config if key.endswith("_file")}
    assert named == {f"{alerting.SECRETS_DIR}/{alerting.RECEIVER_SECRET}/{key}" for key in keys}


def test_the_summary_says_whether_anyone_hears_when_alerting_stops():
    def alert_lines(config: dict) -> list[str]:
        plan = build_plan(run(with_receiver_secret(config), stack="dev"), "dev")
        return observability_section(PlanIndex(plan))

    [line] = [line for line in alert_lines(heartbeat_site()) if line.startswith("- Heartbeat")]
    assert f"every `{HEARTBEAT_INTERVAL}`" in line and alerting.HEARTBEAT_FILE in line
    assert "- Alerts are sent **nowhere** (the chart's `null` receiver): see observability.alerting" in \
        alert_lines(heartbeat_site())
    assert any(line.startswith("- No heartbeat") for line in alert_lines(alerting_site(receiver="slack")))


# --- the real chart and Alertmanager ------------------------------------------------------------------


# Debian's Alertmanager and amtool (0.25) predate the webhook's ``url_file`` (0.26; the floor chart's 0.33 reads
# it, tests/test_observability_alerting_contract.py): the copy they read has the stand-in's URL in its place.
STAND_IN = "http://127.0.0.1:9/heartbeat"


def readable_by_debian(config: dict, url: str) -> dict:
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            assert webhook.pop("url_file") == alerting.HEARTBEAT_FILE
            webhook["url"] = url
    return config


@pytest.fixture(scope="module")
def heartbeat_render(tmp_path_factory):
    """The configuration the chart renders for a PagerDuty site with the heartbeat, and a copy amtool reads."""
    path = alertmanager_file(rendered_stack(heartbeat_site(receiver="pagerduty")),
                             tmp_path_factory.mktemp("heartbeat"))
    config = yaml.safe_load(path.read_text())
    copy = path.with_name("debian.yaml")
    copy.write_text(yaml.safe_dump(readable_by_debian(yaml.safe_load(path.read_text()), STAND_IN)))
    return config, copy


@needs_amtool
def test_the_watchdog_goes_to_the_heartbeat_and_nothing_else_does(heartbeat_render):
    _, path = heartbeat_render
    assert route_of(path, "alertname=Watchdog", "severity=none") == alerting.HEARTBEAT_RECEIVER
    assert route_of(path, "alertname=GpuTenancyGpuXidError", "severity=critical") == alerting.RECEIVER
    assert route_of(path, f"alertname={alerting.INFO_INHIBITOR}") == "null"


@needs_alertmanager
def test_a_real_alertmanager_posts_the_watchdog_to_the_dead_mans_switch_again_and_again(heartbeat_render, tmp_path):
    """The rendered configuration, with the grouping and repeat intervals shortened to seconds so the test does
    not sit through minutes."""
    config = copy.deepcopy(heartbeat_render[0])
    [route] = [route for route in config["route"]["routes"] if route["receiver"] == alerting.HEARTBEAT_RECEIVER]
    route.update(group_wait="0s", group_interval="1s", repeat_interval="2s")
    with receiving_end() as (endpoint, received):
        with running_alertmanager(readable_by_debian(config, endpoint), tmp_path) as url:
            post_alerts(url, [{"labels": {"alertname": "Watchdog", "severity": "none"}}, XID])
            deadline = time.monotonic() + 30
            while len(received) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
    assert len(received) >= 2, "the heartbeat must repeat while the Watchdog fires"
    for post in received:
        assert post["receiver"] == alerting.HEARTBEAT_RECEIVER and post["status"] == "firing"
        assert [alert["labels"]["alertname"] for alert in post["alerts"]] == ["Watchdog"]
