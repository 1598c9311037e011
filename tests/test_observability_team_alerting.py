"""Spec of each team's own alert receiver (``teams[].alerting``, the secret ``teamAlertReceivers``).

Checked on the config (the secret's content judged by team, never shown), on the program's resources (the addresses
only in the mounted Secret) and on the plan's summary. Where the alerts go (promtool, amtool and a real
Alertmanager): tests/test_observability_team_routing.py.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from components import observability_alerting as alerting
from components import observability_team_alerting as team_alerting
from config import ConfigError, load_platform
from config.team_alerting import SECRET, team_addresses
from tests.isolation_spec import prefixed
from tests.test_new_site import new, project  # noqa: F401 (the fixture)
from tests.test_observability_alerting import alertmanager_configuration, stack_release
from tests.test_observability_config import issues
from tests.test_observability_rules import site_config
from tools.offline.mockrun import SECRET_PLACEHOLDER, run_program
from tools.offline.recording import ProgramRun
from tools.plan.document import build_plan, render_plan_json
from tools.plan.lookup import PlanIndex
from tools.plan.summary import render_summary
from tools.plan.summary_site import observability_section

ALPHA_URL = "https://hooks.slack.com/services/T000/B000/alpha-token-71c3e9"
BETA_URL = "https://hooks.example.com/beta-token-2d8f41"
GAMMA_KEY = "G4MMAR0UT1NGKEY0123456789ABCDEFG"
ADDRESSES = {"alpha": ALPHA_URL, "beta": BETA_URL, "gamma": GAMMA_KEY}
RECOGNISABLE = ("alpha-token-71c3e9", "beta-token-2d8f41", GAMMA_KEY)
TEAM_RECEIVERS = {"alpha": {"receiver": "slack", "slackChannel": "#alpha-alerts"},
                  "beta": {"receiver": "webhook", "severity": "warning"},
                  "gamma": {"receiver": "pagerduty"}}

# For Debian's amtool and Alertmanager (0.25), which predate the webhook's url_file (0.26; the contract tests check
# it against the Alertmanager the accepted charts run): beta on Slack too.
RENDERED_RECEIVERS = {**TEAM_RECEIVERS, "beta": {"receiver": "slack", "severity": "warning"}}
# Alpha also hears the chart's alerts about its own host namespace.
WITH_NAMESPACE_ALERTS = {**RENDERED_RECEIVERS, "alpha": {**TEAM_RECEIVERS["alpha"], "alerts": "all"}}


def team_site(site_receiver: str = "slack", receivers: dict = TEAM_RECEIVERS, **observability) -> dict:
    """The three-team site of the rules' tests, each team with its receiver, the site with ``site_receiver``."""
    config = site_config(alerting={"receiver": site_receiver} if site_receiver != "none" else {}, **observability)
    for team in config["teams"]:
        if team["name"] in receivers:
            team["alerting"] = copy.deepcopy(receivers[team["name"]])
    return config


def secret_text(addresses: dict) -> str:
    return yaml.safe_dump(addresses)


def encrypted(config: dict) -> dict:
    """The site's stack file once its secrets are set."""
    site = ((config.get("observability") or {}).get("alerting") or {}).get("receiver")
    return {**prefixed(config), f"gpu-tenancy:{SECRET}": {"secure": "v1:TEAMS"},
            **({"gpu-tenancy:alertReceiver": {"secure": "v1:SITE"}} if site else {})}


def run_decrypted(config: dict, addresses: dict = ADDRESSES, record=None) -> ProgramRun:
    """The program as `pulumi up` runs it, the team receivers' secret decrypted to ``addresses``."""
    return run_program(encrypted(config), stack="dev", secret_placeholders=False, record=record, decrypted={
        f"gpu-tenancy:{SECRET}": secret_text({team: address for team, address in addresses.items()}),
        "gpu-tenancy:alertReceiver": "https://hooks.slack.com/services/T000/B000/site-token"})


def platform(config: dict):
    return load_platform(config, secrets_set=["alertReceiver", SECRET])


# --- config -------------------------------------------------------------------------------------


def test_a_team_receiver_is_read_with_the_site_receivers_defaults():
    teams = {team.name: team.alerting for team in platform(team_site()).teams}
    assert (teams["alpha"].receiver, teams["alpha"].severity, teams["alpha"].slack_channel) == \
        ("slack", "info", "#alpha-alerts")
    assert (teams["beta"].receiver, teams["beta"].severity) == ("webhook", "warning")
    # A pager pages someone: critical only, unless the team says otherwise.
    assert (teams["gamma"].receiver, teams["gamma"].severity) == ("pagerduty", "critical")
    assert not load_platform(site_config()).teams[0].alerting.delivers
    assert {alerting.scope for alerting in teams.values()} == {"platform"}
    assert {team.name: team.alerting.scope for team in platform(team_site(receivers=WITH_NAMESPACE_ALERTS)).teams}[
        "alpha"] == "all"


@pytest.mark.parametrize("mode", ["external", "off"])
def test_a_team_receiver_needs_the_alertmanager_the_program_installs(mode):
    config = team_site("none", {"alpha": {"receiver": "slack"}})
    config["observability"]["prometheus"] = mode
    if mode == "external":
        config["observability"]["external"] = {"releaseLabel": "prometheus"}
    message = issues(config)["teams[0].alerting.receiver"]
    assert "'slack'" in message and f"observability.prometheus is {mode}" in message
    assert "set observability.prometheus: install" in message


def test_team_receiver_keys_are_judged_like_the_site_receivers():
    found = issues(team_site("none", {"alpha": {"receiver": "webhook", "slackChannel": "#a", "alerts": "some"},
                                      "beta": {"severity": "warning", "alerts": "all"},
                                      "gamma": {"receiver": "email"}}))
    assert "'some'" in found["teams[0].alerting.alerts"]
    assert "receiver is none" in found["teams[1].alerting.alerts"]
    assert "remove the team's alerting.slackChannel" in found["teams[0].alerting.slackChannel"]
    assert "receiver is none" in found["teams[1].alerting.severity"]
    assert "'email'" in found["teams[2].alerting.receiver"]
    assert "'GPU Team'" in issues(team_site("none", {"alpha": {"receiver": "slack", "slackChannel": "GPU Team"}}))[
        "teams[0].alerting.slackChannel"]


def test_a_team_receiver_needs_the_secret_and_the_error_says_how_to_set_it():
    message = issues(team_site("none"))[SECRET]
    assert "teams alpha, beta, gamma have an alerting.receiver" in message
    assert f"pulumi config set --secret gpu-tenancy:{SECRET} < team-alert-receivers.yaml" in message
    warnings = load_platform(team_site("none"), placeholders=[SECRET]).warnings
    assert any(warning.startswith(f"gpu-tenancy:{SECRET} is not set") for warning in warnings)


def test_the_secret_without_a_team_receiver_draws_a_warning():
    assert any(f"{SECRET} is set but nothing reads it" in warning
               for warning in load_platform(site_config(), secrets_set=[SECRET]).warnings)
    assert not any(SECRET in warning for warning in platform(team_site()).warnings)


def test_the_secrets_content_gives_each_team_its_address():
    teams = platform(team_site()).teams
    # The trailing newline `pulumi config set --secret ... < file` keeps, and JSON, are read too.
    assert team_addresses(secret_text(ADDRESSES) + "\n", teams) == ADDRESSES
    assert team_addresses(json.dumps(ADDRESSES), teams) == ADDRESSES


def secret_issues(addresses, receivers: dict = TEAM_RECEIVERS) -> dict[str, str]:
    text = addresses if isinstance(addresses, str) else secret_text(addresses)
    with pytest.raises(ConfigError) as raised:
        team_addresses(text, platform(team_site(receivers=receivers)).teams)
    message = str(raised.value)
    assert not [hidden for hidden in (*RECOGNISABLE, "not-a-url-5e1f") if hidden in message], message
    return {issue.key: str(issue) for issue in raised.value.issues}


@pytest.mark.parametrize("text", [ALPHA_URL, "[alpha, beta]", "alpha: [unclosed", ""])
def test_a_secret_that_is_not_a_map_of_team_to_address_is_refused_unseen(text):
    message = secret_issues(text)[SECRET]
    assert "is not a YAML map of team name to address" in message and "<encrypted>" in message
    assert f"pulumi config set --secret gpu-tenancy:{SECRET}" in message


def test_each_problem_of_the_secret_names_the_team_and_never_the_value():
    found = secret_issues({"alpha": "not-a-url-5e1f", "beta": BETA_URL, "gamma": "https://events.pagerduty.com/x",
                           "delta": ALPHA_URL}, TEAM_RECEIVERS)
    assert set(found) == {f"{SECRET}.alpha", f"{SECRET}.gamma", f"{SECRET}.delta"}
    assert "is not an http(s) URL (team alpha's receiver is slack)" in found[f"{SECRET}.alpha"]
    assert "not a PagerDuty routing key" in found[f"{SECRET}.gamma"]
    assert "is not a team of this stack" in found[f"{SECRET}.delta"]
    # A team with no receiver of its own, and a team with one but no address.
    found = secret_issues({"alpha": ALPHA_URL, "gamma": GAMMA_KEY}, {"alpha": {"receiver": "slack"},
                                                                     "beta": {"receiver": "webhook"}})
    assert "names a team that has no alerting.receiver" in found[f"{SECRET}.gamma"]
    assert "is missing: team beta's alerting.receiver is webhook" in found[f"{SECRET}.beta"]
    assert "add a line 'beta: <address>'" in found[f"{SECRET}.beta"]


def test_an_address_written_where_the_team_name_goes_is_not_shown():
    found = secret_issues({ALPHA_URL: "alpha", "beta": BETA_URL, "gamma": GAMMA_KEY})
    assert "whose name is not a team name" in found[SECRET] and "is missing" in found[f"{SECRET}.alpha"]


def test_pulumi_up_stops_on_a_bad_secret_before_registering_anything():
    record = ProgramRun()
    with pytest.raises(ConfigError) as raised:
        run_decrypted(team_site(), {**ADDRESSES, "beta": "hooks.example.com/beta-token-2d8f41"}, record=record)
    assert raised.value.keys == [f"{SECRET}.beta"]
    assert "beta-token-2d8f41" not in str(raised.value) and record.resources == []


# --- the program ------------------------------------------------------------------------------------


def test_each_address_is_a_secret_file_of_the_mounted_secret_and_nowhere_else():
    program = run_decrypted(team_site())
    [secret] = [resource for resource in program.of_type("kubernetes:core/v1:Secret")
                if resource.inputs.get("metadata", {}).get("name") == alerting.RECEIVER_SECRET]
    assert secret.inputs["stringData"] == "[secret]"
    assert {key: value for key, value in secret.raw_inputs["stringData"].items() if key.startswith("team-")} == \
        {team_alerting.team_secret_key(team): address for team, address in ADDRESSES.items()}
    release = stack_release(program)
    assert secret.urn in release.dependencies
    plan = build_plan(program, "dev")
    seen = render_plan_json(plan) + render_summary(plan) + "\n".join(program.warnings + program.notes)
    assert [hidden for hidden in RECOGNISABLE if hidden in seen] == []
    receivers = {receiver["name"]: receiver for receiver in alertmanager_configuration(program)["receivers"]}
    [(kind, [settings])] = [(key, value) for key, value in receivers["gpu-tenancy-team-alpha"].items() if key != "name"]
    assert kind == "slack_configs" and settings["channel"] == "#alpha-alerts"
    assert settings["api_url_file"] == f"{alerting.SECRETS_DIR}/{alerting.RECEIVER_SECRET}/team-alpha"
    assert receivers["gpu-tenancy-team-beta"]["webhook_configs"][0]["url_file"].endswith("/team-beta")
    assert receivers["gpu-tenancy-team-gamma"]["pagerduty_configs"][0]["routing_key_file"].endswith("/team-gamma")


def test_an_offline_plan_that_cannot_decrypt_the_secret_plans_with_a_placeholder():
    program = run_program(encrypted(team_site()), stack="dev")
    [secret] = [resource for resource in program.of_type("kubernetes:core/v1:Secret")
                if resource.inputs.get("metadata", {}).get("name") == alerting.RECEIVER_SECRET]
    assert secret.raw_inputs["stringData"]["team-alpha"] == SECRET_PLACEHOLDER


def test_team_receivers_alone_set_alertmanagers_configuration():
    program = run_decrypted(team_site("none"))
    values = stack_release(program).inputs["values"]["alertmanager"]
    assert values["alertmanagerSpec"]["secrets"] == [alerting.RECEIVER_SECRET]
    names = [route["receiver"] for route in alertmanager_configuration(program)["route"]["routes"]]
    assert names == ["null", "null", "gpu-tenancy-team-alpha", "gpu-tenancy-team-beta", "gpu-tenancy-team-gamma"]


def test_the_summary_says_where_each_teams_alerts_go_without_the_address():
    lines = observability_section(PlanIndex(build_plan(run_decrypted(team_site()), "dev")))
    [alpha] = [line for line in lines if "Team `alpha`" in line]
    assert "slack (`#alpha-alerts`)" in alpha and "info and up" in alpha
    [beta] = [line for line in lines if "Team `beta`" in line]
    assert "webhook" in beta and "warning and up" in beta
    assert "also to the site receiver" in alpha
    assert not [hidden for hidden in RECOGNISABLE if hidden in "\n".join(lines)]


def test_the_summary_says_which_teams_also_hear_of_their_namespace():
    lines = observability_section(PlanIndex(build_plan(run_decrypted(team_site(receivers=WITH_NAMESPACE_ALERTS)),
                                                       "dev")))
    [alpha] = [line for line in lines if "Team `alpha`'s receiver also gets" in line]
    assert "`vcluster-alpha`" in alpha and "not its control plane" in alpha
    assert not [line for line in lines if "Team `beta`'s receiver also gets" in line]


def test_a_new_site_with_a_team_receiver_is_told_to_set_the_secret(project, capsys):  # noqa: F811
    assert new(project, "lab-teams", "dev", "observability.prometheus=install",
               "teams[0].alerting.receiver=slack") == 0
    out = capsys.readouterr().out
    assert f"pulumi config set --secret gpu-tenancy:{SECRET} --stack lab-teams < team-alert-receivers.yaml" in out
