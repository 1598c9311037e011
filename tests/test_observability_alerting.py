"""Spec of where the installed Alertmanager sends alerts (``observability.alerting``) and what it keeps.

Checked on the config, on the program's resources, on the real kube-prometheus-stack chart rendered with the
program's values (skipping without the chart cache), and with Debian's ``amtool``; a real Alertmanager delivering
to local Slack and PagerDuty stand-ins is tests/test_observability_alert_delivery.py. Which alert goes where (the
pager, the tenants' own) is tests/test_observability_alert_routes.py; the heartbeat,
tests/test_observability_heartbeat.py. The upstream sources at the tags the pinned charts run are read by
tests/test_observability_alerting_contract.py."""

from __future__ import annotations

import base64
import copy
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from components import observability_alerting as alerting
from components import observability_rules as rules
from config import load_platform, versions
from config.source import OFFLINE_PLACEHOLDER
from tests.conftest import real_charts_or_skip, run
from tests.isolation_spec import prefixed
from tests.local_alertmanager import AMTOOL, needs_amtool
from tests.mirror_charts import chart_values
from tests.test_observability_config import issues
from tests.test_observability_rules import site_config
from tools.charts.cache import chart_cache_dir, find_cached
from tools.charts.render import release_chart_key, render_release
from tools.deployability import operator_mounts
from tools.deployability.inputs import K8sObject, program_objects
from tools.offline.mockrun import SECRET_PLACEHOLDER
from tools.plan.document import build_plan
from tools.plan.lookup import PlanIndex
from tools.plan.summary_site import observability_section

RECEIVERS = ("slack", "webhook", "pagerduty")


def chart_inhibit_rules(version: str) -> list[dict]:
    return chart_values(versions.KUBE_PROMETHEUS_STACK_CHART, version)["alertmanager"]["config"]["inhibit_rules"]


def alerting_site(**settings) -> dict:
    return site_config(alerting=settings)


def with_receiver_secret(config: dict) -> dict:
    """The site as its stack file holds it once the receiver's secret is set (encrypted), and the heartbeat's
    when it is on."""
    heartbeat = ((config.get("observability") or {}).get("alerting") or {}).get("heartbeat")
    return {**prefixed(config), "gpu-tenancy:alertReceiver": {"secure": "v1:AAAA"},
            **({"gpu-tenancy:alertHeartbeat": {"secure": "v1:BBBB"}} if heartbeat else {})}


# --- config -------------------------------------------------------------------------------------


def test_by_default_alerts_stay_in_alertmanager_and_no_secret_is_needed():
    settings = load_platform(site_config()).observability.alerting
    assert settings.receiver == "none" and not settings.delivers


@pytest.mark.parametrize("receiver", RECEIVERS)
def test_a_receiver_needs_its_secret_and_the_error_says_how_to_set_it(receiver):
    message = issues(alerting_site(receiver=receiver))["alertReceiver"]
    assert f"receiver is {receiver}" in message and "pulumi config set --secret gpu-tenancy:alertReceiver" in message
    # An offline plan of a new site stands in for it, and says so.
    warnings = load_platform(alerting_site(receiver=receiver), placeholders=["alertReceiver"]).warnings
    assert any(warning.startswith("gpu-tenancy:alertReceiver is not set") for warning in warnings)


def test_keys_that_only_shape_a_receiver_are_refused_without_one():
    found = issues(alerting_site(alerts="all"))
    assert "receiver is none" in found["observability.alerting.alerts"]
    message = issues(alerting_site(receiver="webhook", slackChannel="#gpu"))["observability.alerting.slackChannel"]
    assert "webhook" in message and "remove observability.alerting.slackChannel" in message


@pytest.mark.parametrize("channel", ["GPU Platform", "#", "gpu/platform"])
def test_a_channel_slack_cannot_name_is_refused(channel):
    message = issues(alerting_site(receiver="slack", slackChannel=channel))["observability.alerting.slackChannel"]
    assert repr(channel) in message and "#gpu-platform" in message


@pytest.mark.parametrize("mode", ["external", "off"])
def test_alerting_is_for_the_alertmanager_the_program_installs(mode):
    extra = {"external": {"releaseLabel": "prometheus"}} if mode == "external" else {}
    message = issues(site_config(prometheus=mode, **extra, alerting={"receiver": "slack"}))["observability.alerting"]
    assert mode in message and "remove observability.alerting" in message


@pytest.mark.parametrize("receiver, least", [("slack", "info"), ("webhook", "info"), ("pagerduty", "critical")])
def test_a_pager_gets_only_critical_alerts_unless_the_site_says_otherwise(receiver, least):
    def severity(**settings) -> str:
        return load_platform(alerting_site(receiver=receiver, **settings),
                             placeholders=["alertReceiver"]).observability.alerting.severity
    assert severity() == least and severity(severity="warning") == "warning"
    assert "receiver is none" in issues(alerting_site(severity="warning"))["observability.alerting.severity"]


def test_the_severity_matcher_keeps_the_least_severe_named_and_above():
    assert alerting.severity_matcher("info") == []
    assert alerting.severity_matcher("warning") == ['severity =~ "warning|critical"']
    assert alerting.severity_matcher("critical") == ['severity =~ "critical"']


def test_a_receiver_secret_nothing_reads_draws_a_warning():
    warnings = load_platform(site_config(), secrets_set=["alertReceiver"]).warnings
    assert any("alertReceiver is set but nothing reads it" in warning for warning in warnings)
    assert not any("alertReceiver" in warning for warning in load_platform(
        alerting_site(receiver="slack"), secrets_set=["alertReceiver"]).warnings)


# --- the program ------------------------------------------------------------------------------------


def stack_release(program):
    [release] = [resource for resource in program.of_type("kubernetes:helm.sh/v3:Release")
                 if resource.inputs["name"] == "kube-prometheus-stack"]
    return release


def receiver_secrets(program) -> list:
    return [resource for resource in program.of_type("kubernetes:core/v1:Secret")
            if resource.inputs.get("metadata", {}).get("name") == alerting.RECEIVER_SECRET]


@pytest.mark.parametrize("receiver", RECEIVERS)
def test_the_receiver_address_is_a_secret_of_its_own_that_exists_before_the_release(receiver):
    program = run(with_receiver_secret(alerting_site(receiver=receiver)), stack="dev")
    [secret] = receiver_secrets(program)
    assert secret.inputs["metadata"]["namespace"] == "monitoring" and secret.inputs["stringData"] == "[secret]"
    release = stack_release(program)
    assert secret.urn in release.dependencies
    values = release.inputs["values"]["alertmanager"]
    # Helm keeps a release's values readable (helm get values): the address is only a path there.
    assert not {SECRET_PLACEHOLDER, OFFLINE_PLACEHOLDER} & set(re.findall(r"[\w-]+", json.dumps(release.inputs)))
    assert values["alertmanagerSpec"]["secrets"] == [alerting.RECEIVER_SECRET]
    [delivering] = [entry for entry in alertmanager_configuration(program)["receivers"]
                    if entry["name"] == alerting.RECEIVER]
    [(kind, [settings])] = [(key, value) for key, value in delivering.items() if key != "name"]
    assert kind == f"{receiver}_configs" and settings["send_resolved"] is True
    [path] = [value for key, value in settings.items() if key.endswith("_file")]
    assert path == f"{alerting.SECRETS_DIR}/{alerting.RECEIVER_SECRET}/{alerting.RECEIVER_SECRET_KEY}"


def test_without_a_receiver_the_chart_keeps_its_routes_and_no_secret_is_made():
    program = run(prefixed(site_config()), stack="dev")
    values = stack_release(program).inputs["values"]["alertmanager"]
    assert "config" not in values and "secrets" not in values["alertmanagerSpec"]
    assert "configSecret" not in values["alertmanagerSpec"]
    assert not receiver_secrets(program) and not config_secrets(program)


def test_the_platform_route_matches_every_alert_the_program_defines_and_nothing_else():
    pattern = re.fullmatch(r'alertname =~ "(.+)"', alerting.PLATFORM_ALERTS).group(1)
    names = [rule["alert"] for rule in rules.alert_rules(load_platform(site_config()))]
    assert names and all(re.fullmatch(pattern, name) for name in names)
    assert not any(re.fullmatch(pattern, name) for name in ("KubePodCrashLooping", "Watchdog", "TargetDown"))


def test_alertmanager_keeps_silences_on_a_volume_of_the_site_storage_class():
    values = stack_release(run(prefixed(site_config()), stack="dev")).inputs["values"]["alertmanager"]
    claim = values["alertmanagerSpec"]["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["resources"]["requests"]["storage"] == "1Gi" and claim["storageClassName"] == "microk8s-hostpath"


def test_the_summary_says_where_alerts_go_from_the_release_values():
    def alert_lines(config: dict) -> list[str]:
        plan = build_plan(run(with_receiver_secret(config), stack="dev"), "dev")
        return [line for line in observability_section(PlanIndex(plan)) if "lert" in line]

    silent = alert_lines(site_config())
    assert "- Alerts are sent **nowhere** (the chart's `null` receiver): see observability.alerting" in silent
    assert any("silences" in line and "`1Gi` volume" in line for line in silent)
    [slack] = [line for line in alert_lines(alerting_site(receiver="slack", slackChannel="#gpu")) if "go to" in line]
    assert slack.startswith("- Alerts go to slack (`#gpu`): alerts matching `alertname =~")
    assert alerting.RECEIVER_FILE in slack
    [pager] = [line for line in alert_lines(alerting_site(receiver="pagerduty", alerts="all")) if "go to" in line]
    assert 'pagerduty: alerts matching `severity =~ "critical"`;' in pager
    [hook] = [line for line in alert_lines(alerting_site(receiver="webhook", alerts="all")) if "go to" in line]
    assert "webhook: every alert but those routed to `null`" in hook
    [kept] = [line for line in alert_lines(alerting_site(receiver="webhook", alerts="all")) if "sent nowhere" in line]
    assert '`alertname = "Watchdog"`' in kept and '`namespace =~ "vcluster-alpha|' in kept, kept


# --- the real chart ---------------------------------------------------------------------------------


def config_secrets(program) -> list:
    return [resource for resource in program.of_type("kubernetes:core/v1:Secret")
            if resource.inputs.get("metadata", {}).get("name") == alerting.CONFIG_SECRET]


def alertmanager_configuration(program) -> dict:
    """The configuration the release's Alertmanager reads: the program's Secret, created before the release."""
    [secret] = config_secrets(program)
    release = stack_release(program)
    assert secret.urn in release.dependencies
    assert release.inputs["values"]["alertmanager"]["alertmanagerSpec"]["configSecret"] == alerting.CONFIG_SECRET
    return yaml.safe_load(secret.raw_inputs["stringData"][alerting.CONFIG_KEY])


def rendered_stack(config: dict) -> list[dict]:
    """The kube-prometheus-stack objects Helm renders from the pinned chart with the program's values, and the
    program's Secret of Alertmanager's configuration as the API server stores it."""
    program = run(with_receiver_secret(config), stack="dev")
    plan = build_plan(program, "dev")
    real_charts_or_skip(plan)
    inputs = stack_release(program).inputs
    chart, _ = find_cached(release_chart_key(inputs), chart_cache_dir())
    manifests = render_release(chart, inputs["name"], inputs["namespace"], inputs["values"], include_crds=False)
    stored = [{"apiVersion": "v1", "kind": "Secret", "metadata": secret.inputs["metadata"],
               "data": {key: base64.b64encode(text.encode()).decode()
                        for key, text in secret.raw_inputs["stringData"].items()}}
              for secret in config_secrets(program)]
    return [document for text in manifests.values() for document in yaml.safe_load_all(text) if document] + stored


def alertmanager_file(objects: list[dict], tmp_path: Path) -> Path:
    """The configuration the Prometheus operator hands Alertmanager, as a file: that of the Secret the Alertmanager
    names (``spec.configSecret``, else the chart's ``alertmanager-<name>``)."""
    [manager] = [obj for obj in objects if obj["kind"] == "Alertmanager"]
    name = manager["spec"].get("configSecret") or f"alertmanager-{manager['metadata']['name']}"
    [secret] = [obj for obj in objects if obj["kind"] == "Secret" and obj["metadata"]["name"] == name]
    path = tmp_path / "alertmanager.yaml"
    path.write_bytes(base64.b64decode(secret["data"]["alertmanager.yaml"]))
    return path


@pytest.fixture(scope="module")
def slack_render(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slack")
    objects = rendered_stack(alerting_site(receiver="slack", slackChannel="#gpu-platform"))
    return objects, alertmanager_file(objects, tmp)


CHART_CONFIG_SECRET = "alertmanager-kube-prometheus-stack-alertmanager"


def test_the_chart_mounts_the_receiver_secret_and_keeps_its_own_settings(slack_render):
    objects, path = slack_render
    [manager] = [obj for obj in objects if obj["kind"] == "Alertmanager"]
    # The operator reads the program's Secret; the chart renders no configuration of its own.
    assert manager["spec"]["configSecret"] == alerting.CONFIG_SECRET
    assert not [obj for obj in objects if obj["kind"] == "Secret" and obj["metadata"]["name"] == CHART_CONFIG_SECRET]
    assert manager["spec"]["secrets"] == [alerting.RECEIVER_SECRET]
    claim = manager["spec"]["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "microk8s-hostpath"
    config = yaml.safe_load(path.read_text())
    # Helm merged the program's route into the chart's: its grouping, timers and templates stay.
    assert config["global"]["resolve_timeout"] and config["templates"]
    assert config["inhibit_rules"] == alerting.inhibit_rules()
    assert config["route"]["receiver"] == "null" and config["route"]["group_wait"]
    assert {receiver["name"] for receiver in config["receivers"]} == {"null", alerting.RECEIVER}


def test_the_configuration_is_what_helm_made_of_the_programs_parts_in_the_charts_values():
    """Before it was a Secret of the program's, the program set its routes, receivers and inhibit rules in the chart's
    ``alertmanager.config`` and Helm merged them into the chart's own: the program's Secret holds that same
    configuration, so Alertmanager runs as it did."""
    config = copy.deepcopy(alerting_site(receiver="slack", alerts="all", heartbeat=True, slackChannel="#gpu"))
    config["teams"][0]["alerting"] = {"receiver": "webhook", "alerts": "all"}
    site = {**with_receiver_secret(config), "gpu-tenancy:teamAlertReceivers": {"secure": "v1:CCCC"}}
    program = run(site, stack="dev")
    real_charts_or_skip(build_plan(program, "dev"))
    ours = alertmanager_configuration(program)
    inputs = stack_release(program).inputs
    values = copy.deepcopy(inputs["values"])
    for key in ("useExistingSecret", "configSecret"):
        values["alertmanager"]["alertmanagerSpec"].pop(key)
    values["alertmanager"]["config"] = {"route": {"routes": ours["route"]["routes"]},
                                        "inhibit_rules": ours["inhibit_rules"], "receivers": ours["receivers"]}
    chart, _ = find_cached(release_chart_key(inputs), chart_cache_dir())
    manifests = render_release(chart, inputs["name"], inputs["namespace"], values, include_crds=False)
    [secret] = [document for text in manifests.values() for document in yaml.safe_load_all(text)
                if document and document["kind"] == "Secret" and document["metadata"]["name"] == CHART_CONFIG_SECRET]
    assert yaml.safe_load(base64.b64decode(secret["data"]["alertmanager.yaml"])) == ours
    assert len(ours["route"]["routes"]) > 4 and "gpu-tenancy-team-alpha" in {r["name"] for r in ours["receivers"]}


def test_the_secret_alertmanager_mounts_is_one_the_program_creates():
    """As the deployability check reads the site: without the program's Secret, Alertmanager's pod would not start."""
    config = alerting_site(receiver="webhook")
    program = run(with_receiver_secret(config), stack="dev")
    chart_objects = [K8sObject(manifest, "chart kube-prometheus-stack") for manifest in rendered_stack(config)]
    program_side = program_objects(build_plan(program, "dev")["resources"])
    assert any(obj.kind == "Secret" and obj.name == alerting.RECEIVER_SECRET for obj in program_side)
    assert not operator_mounts.missing_mounts(program_side + chart_objects)
    without = [obj for obj in program_side if obj.name != alerting.RECEIVER_SECRET]
    [(what, problem, _)] = operator_mounts.missing_mounts(without + chart_objects)
    assert what.startswith("Alertmanager monitoring/") and f"Secret monitoring/{alerting.RECEIVER_SECRET}" in problem


def amtool(*args: str) -> str:
    done = subprocess.run([AMTOOL, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@needs_amtool
def test_alertmanager_accepts_the_rendered_configuration(slack_render, tmp_path):
    _, path = slack_render
    assert "SUCCESS" in amtool("check-config", str(path))
    # PagerDuty's routing_key_file is as old as Debian's amtool; the webhook's url_file (Alertmanager 0.26) is
    # newer, and checked against the pinned Alertmanager's source below.
    objects = rendered_stack(alerting_site(receiver="pagerduty", alerts="all"))
    assert "SUCCESS" in amtool("check-config", str(alertmanager_file(objects, tmp_path)))


def route_of(path: Path, *labels: str) -> str:
    return amtool("config", "routes", "test", f"--config.file={path}", *labels).strip()
