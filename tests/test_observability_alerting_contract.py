"""Spec of the Alertmanager configuration the program writes, against the upstream sources at the tags the
kube-prometheus-stack charts the config accepts (every release from the floor to the default) run: Alertmanager
reads every key, the Prometheus operator parses them strictly and drops none, mounts the receiver's Secret where
the configuration reads it, and the chart's inhibit rules are the program's but for its one exemption, and the
chart defines, on by default, each of its alerts the program sends with its own. Each part skips without the
mirrors, naming them."""

from __future__ import annotations

import re

import pytest
import yaml

from components import observability_alerting as alerting
from components.observability_team_alerting import team_address_file, team_secret_key
from config import load_platform, versions
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.mirror_charts import chart_file, chart_values
from tests.test_observability_alerting import RECEIVERS, alerting_site, chart_inhibit_rules
from tests.test_observability_team_alerting import team_site

OPERATOR = "prometheus-operator/prometheus-operator"
ALERTMANAGER_REPO = "prometheus/alertmanager"
CHART_VERSIONS = versions.KUBE_PROMETHEUS_STACK_RELEASES


def program_keys(config: dict) -> set[str]:
    """Every key of the program's Alertmanager configuration, at any depth."""
    keys: set[str] = set()
    stack = [config]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            keys |= set(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return keys


def every_program_key() -> set[str]:
    keys: set[str] = set()
    for receiver in RECEIVERS:
        for scope, heartbeat in (("platform", False), ("all", True)):
            settings = load_platform(alerting_site(receiver=receiver, alerts=scope, heartbeat=heartbeat, **(
                {"slackChannel": "#gpu"} if receiver == "slack" else {})),
                placeholders=["alertReceiver", "alertHeartbeat"])
            keys |= program_keys(alerting.alertmanager_config(settings.observability.alerting, settings.teams))
    # Each kind of team receiver (teams[].alerting), with its route's continue.
    settings = load_platform(team_site(), secrets_set=["alertReceiver", "teamAlertReceivers"])
    return keys | program_keys(alerting.alertmanager_config(settings.observability.alerting, settings.teams))


def yaml_fields(repository: str, tag: str, *paths: str) -> set[str]:
    text = git(repository, "grep", "-h", "-o", r'yaml:"[a-z_]*', tag, "--", *paths)
    return {line.split('"')[1] for line in text.splitlines()}


@pytest.mark.parametrize("version", CHART_VERSIONS)
def test_the_inhibit_rules_are_the_charts_but_for_the_programs_exemption(version):
    """Helm replaces the chart's list with the program's: a chart that changes its rules turns this red. The
    program's differ in the exemption and in comparing the claim too, in the two rules by severity."""
    ours = alerting.inhibit_rules()
    exemption = f'alertname !~ "{alerting.PLATFORM_ALERT_NAMES}"'
    [exempted] = [index for index, rule in enumerate(ours) if exemption in rule.get("target_matchers", [])]
    assert ours[exempted]["source_matchers"] == [f"alertname = {alerting.INFO_INHIBITOR}"]
    by_claim = [index for index, rule in enumerate(ours) if alerting.INHIBIT_SAME_CLAIM in rule.get("equal", [])]
    assert [ours[index]["source_matchers"] for index in by_claim] == [["severity = critical"], ["severity = warning"]]
    as_in_chart = [{**rule, "target_matchers": [m for m in rule["target_matchers"] if m != exemption],
                    **({"equal": [label for label in rule["equal"] if label != alerting.INHIBIT_SAME_CLAIM]}
                       if "equal" in rule else {})}
                   for rule in ours]
    assert as_in_chart == chart_inhibit_rules(version)


@pytest.mark.parametrize("version", CHART_VERSIONS)
def test_the_configuration_keeps_the_charts_own_settings(version):
    """The program writes Alertmanager's whole configuration (a Secret of its own, the chart's left unrendered): the
    chart's global settings, top route and templates are restated, and the chart has no template files, which its
    own Secret would have carried."""
    chart = chart_values(versions.KUBE_PROMETHEUS_STACK_CHART, version)["alertmanager"]
    assert chart["config"]["global"] == alerting.CHART_GLOBAL
    assert {key: value for key, value in chart["config"]["route"].items() if key != "routes"} == alerting.CHART_ROUTE
    assert chart["config"]["templates"] == alerting.CHART_TEMPLATES
    assert set(chart["config"]) == {"global", "inhibit_rules", "route", "receivers", "templates"}
    assert chart["templateFiles"] == {} and chart["tplConfig"] is False
    assert chart["alertmanagerSpec"]["useExistingSecret"] is False


def test_the_mirrored_sources_are_the_ones_the_accepted_charts_run():
    """Each accepted chart's Alertmanager and Prometheus operator are mirrored, and nothing else is."""
    chart = versions.KUBE_PROMETHEUS_STACK_CHART
    assert {chart_values(chart, version)["alertmanager"]["alertmanagerSpec"]["image"]["tag"]
            for version in CHART_VERSIONS} == set(MIRRORED_TAGS[ALERTMANAGER_REPO])
    assert {yaml.safe_load(chart_file(chart, version, "Chart.yaml"))["appVersion"]
            for version in CHART_VERSIONS} == set(MIRRORED_TAGS[OPERATOR])


@pytest.mark.parametrize("tag", MIRRORED_TAGS[ALERTMANAGER_REPO])
def test_the_alertmanager_the_charts_run_reads_every_key_the_program_writes(tag):
    written, known = every_program_key(), yaml_fields(ALERTMANAGER_REPO, tag, "config", "notify", "pkg/labels")
    assert written <= known, written - known


@pytest.mark.parametrize("tag", MIRRORED_TAGS[OPERATOR])
def test_the_operator_mounts_each_named_secret_where_the_configuration_reads_it(tag):
    tag = mirrored_tag(OPERATOR, tag)
    source = git(OPERATOR, "show", f"{tag}:pkg/alertmanager/statefulset.go")
    assert re.search(r'secretsDir\s*=\s*"' + re.escape(alerting.SECRETS_DIR) + '"', source)
    assert "path.Join(secretsDir, s)" in source and "SecretName: s," in source
    for path, key in ((alerting.RECEIVER_FILE, alerting.RECEIVER_SECRET_KEY),
                      (alerting.HEARTBEAT_FILE, alerting.HEARTBEAT_SECRET_KEY),
                      (team_address_file("alpha"), team_secret_key("alpha"))):
        assert path == f"{alerting.SECRETS_DIR}/{alerting.RECEIVER_SECRET}/{key}"


@pytest.mark.parametrize("tag", MIRRORED_TAGS[OPERATOR])
def test_the_operator_parses_every_key_strictly_and_drops_none_for_the_charts_alertmanager(tag):
    """The operator reads the configuration into its own structs (unknown keys refuse it) and silently drops a
    ``*_file`` key the Alertmanager it runs is too old for."""
    tag = mirrored_tag(OPERATOR, tag)
    written = every_program_key()
    known = yaml_fields(OPERATOR, tag, "pkg/alertmanager/types.go")
    assert written <= known, written - known
    gates = re.findall(r"'([a-z_]+)' supported in Alertmanager >= ([0-9.]+) only",
                       git(OPERATOR, "show", f"{tag}:pkg/alertmanager/amcfg.go"))
    used = {key: tuple(map(int, version.split("."))) for key, version in gates if key in written}
    assert {"url_file", "routing_key_file", "api_url_file"} <= set(used)
    oldest = min(tuple(map(int, tag.lstrip("v").split("."))) for tag in MIRRORED_TAGS[ALERTMANAGER_REPO])
    assert all(oldest >= needed for needed in used.values()), used


@pytest.mark.parametrize("version", CHART_VERSIONS)
def test_the_charts_alerts_that_go_with_the_programs_exist_and_are_on(version):
    """A name the chart no longer defines would match nothing, and the platform would stop hearing that its
    alerts cannot fire, with nothing failing."""
    rules = "".join(chart_file(versions.KUBE_PROMETHEUS_STACK_CHART, version, f"templates/prometheus/rules-1.14/{name}")
                    for name in ("prometheus.yaml", "prometheus-operator.yaml", "alertmanager.rules.yaml",
                                 "config-reloaders.yaml"))
    defined = set(re.findall(r"^\s*- alert: (\w+)$", rules, re.MULTILINE))
    assert set(alerting.MONITORING_BLIND) <= defined, set(alerting.MONITORING_BLIND) - defined
    defaults = chart_values(versions.KUBE_PROMETHEUS_STACK_CHART, version)["defaultRules"]
    assert defaults["create"] and all(defaults["rules"][group] for group in (
        "prometheus", "prometheusOperator", "alertmanager", "configReloaders"))
    assert not set(alerting.MONITORING_BLIND) & set(defaults.get("disabled") or {})
