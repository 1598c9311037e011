"""Team members sign in to Grafana through the teams' OIDC issuer, into their own team's organization only.

Grafana's decision is reproduced from its source (grafana/grafana pkg/login/social/connectors:
org_role_mapper.go, generic_oauth.go, social_base.go, at the 13.x line the grafana chart 12.11.1 pins):
``org_mapping`` entries ``group:org:role`` split on unescaped ``:``; the groups claim read by
``org_attribute_path`` picks entries; with ``role_attribute_strict`` and no role from ``role_attribute_path``,
no mapped group means no role anywhere and the login is refused. ``grafana_roles`` below does exactly that,
and people a hostile or careless IdP admin could produce are run through it with the settings the program
registers.
"""

from __future__ import annotations

import json
import re

import pytest

from components.observability_sign_in import MAIN_ORGANIZATION_ID, org_mapping
from config import ConfigError, load_platform
from config.vocabulary import project_config
from tests.conftest import run
from tests.test_grafana_admin import STACK, grafana_cache, stack_release  # noqa: F401 (fixture)
from tests.test_tenant_access import ISSUER, oidc_dev_config
from tools.charts.render import RELEASE_TYPE, render_plan_releases
from tools.deployability.inputs import rendered_objects
from tools.offline.recording import REDACTED
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

SSO = "grafana:oss/ssoSettings:SsoSettings"
LOGIN = {"clientId": "grafana", "authUrl": f"{ISSUER}/auth", "tokenUrl": f"{ISSUER}/token",
         "adminGroups": ["platform-admins"]}
CLIENT_SECRET = "v1:encrypted-client-secret"


def login_config(**login) -> dict:
    config = oidc_dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install", "grafanaUrl": "https://grafana.example.com",
                                           "grafanaLogin": {**LOGIN, **login}}
    return config


@pytest.fixture(scope="module")
def signed_in():
    config = login_config()
    config["gpu-tenancy:grafanaClientSecret"] = {"secure": CLIENT_SECRET}
    return run(config, stack="lab-oidc")


def settings_of(program) -> dict:
    """The registered oauth2Settings, with the snake_case names Grafana's settings carry."""
    [sso] = program.of_type(SSO)
    return {re.sub(r"[A-Z]", lambda upper: "_" + upper.group().lower(), key): value
            for key, value in sso.raw_inputs["oauth2Settings"].items()}


def _split(entry: str) -> list[str]:
    parts, current, escaped = [], "", False
    for char in entry:
        if char == ":" and not escaped:
            parts.append(current)
            current = ""
        elif char == "\\" and not escaped:
            escaped = True
            continue
        else:
            current += char
        escaped = False
    return parts + [current]


def grafana_roles(settings: dict, claims: dict, org_ids: dict[str, int]) -> dict[int, str] | None:
    """Organization id -> role Grafana gives a person with these ID-token claims; None: the login is refused."""
    assert settings["role_attribute_strict"] and "role_attribute_path" not in settings
    groups = claims.get(json.loads(settings["org_attribute_path"])) or []
    if set(json.loads(settings["allowed_groups"])).isdisjoint(groups):
        return None  # "user not a member of one of the required groups"
    roles: dict[int, str] = {}
    rank = {"Viewer": 1, "Editor": 2, "Admin": 3}
    for entry in json.loads(settings["org_mapping"]):
        group, organization, role = _split(entry)
        org_id = int(organization) if organization.isdigit() else org_ids[organization]
        if group in groups and rank[role] > rank.get(roles.get(org_id, ""), 0):
            roles[org_id] = role
    return roles or None  # strict: no mapped organization is a refused login, never the main one


ORG_IDS = {"team-nlp": 2, "team-vision": 3, "team-recommender": 4}  # for settings written by hand below


def org_ids(program) -> dict[str, int]:
    """Team -> the id Grafana gave its organization (the mock numbers them), read from the team's data source."""
    return {r.inputs["name"].removeprefix("Prometheus (").removesuffix(")"): int(r.inputs["orgId"])
            for r in program.of_type("grafana:oss/dataSource:DataSource")}


@pytest.mark.parametrize("groups, expected", [
    (["team-nlp-readers"], {"team-nlp": "Viewer"}),
    (["team-nlp-admins"], {"team-nlp": "Viewer"}),  # cluster-admin in the vCluster, still a Viewer of metrics
    (["team-nlp-readers", "team-vision-admins"], {"team-nlp": "Viewer", "team-vision": "Viewer"}),
    (["platform-admins"], {MAIN_ORGANIZATION_ID: "Admin"}),
    ([], None),
    (["everyone", "team-nlp"], None),  # a group named like the team, not bound to it
    (["oidc:team-nlp-readers"], None),  # the Kubernetes-side prefixed name is not the IdP's group
])
def test_each_person_lands_only_in_the_organizations_their_groups_give(signed_in, groups, expected):
    ids = org_ids(signed_in)
    assert len(set(ids.values()) | {MAIN_ORGANIZATION_ID}) == 4
    wanted = None if expected is None else {ids.get(org, org): role for org, role in expected.items()}
    assert grafana_roles(settings_of(signed_in), {"groups": groups, "email": "x@example.com"}, {}) == wanted


def test_nobody_reaches_the_main_organization_by_default(signed_in):
    settings = settings_of(signed_in)
    for team, org_id in org_ids(signed_in).items():
        roles = grafana_roles(settings, {"groups": [f"{team}-admins", f"{team}-readers"]}, {})
        assert roles == {org_id: "Viewer"} and MAIN_ORGANIZATION_ID not in roles
    values = stack_release(signed_in).inputs["values"]["grafana"]["grafana.ini"]
    # A user created outside the mapping (the admin's fallback) gets no role in the main organization either.
    assert values["users"]["auto_assign_org_role"] == "None"


def test_the_settings_follow_the_teams_issuer_and_claims(signed_in):
    settings = settings_of(signed_in)
    assert settings["client_id"] == "grafana" and settings["auth_url"].startswith(ISSUER)
    assert settings["org_attribute_path"] == settings["groups_attribute_path"] == '"groups"'
    assert settings["login_attribute_path"] == '"email"' and settings["use_pkce"] and settings["allow_sign_up"]
    assert not settings["skip_org_role_sync"] and not settings["allow_assign_grafana_admin"]
    assert set(settings["scopes"].split()) >= {"openid", "email"}
    root = stack_release(signed_in).inputs["values"]["grafana"]["grafana.ini"]["server"]["root_url"]
    assert root == "https://grafana.example.com"


def test_sign_in_settings_are_saved_after_every_team_organization_and_name_them_by_id(signed_in):
    [sso] = signed_in.of_type(SSO)
    organizations = {r.urn for r in signed_in.of_type("grafana:oss/organization:Organization")}
    assert len(organizations) == 3 and organizations <= set(sso.dependencies)
    # An organization re-created under the same name gets a new id, so the settings change and Grafana reloads.
    organizations_named = {entry.split(":")[1] for entry in json.loads(settings_of(signed_in)["org_mapping"])}
    assert organizations_named == {str(org_id) for org_id in org_ids(signed_in).values()} | {str(MAIN_ORGANIZATION_ID)}


def test_the_client_secret_is_secret_in_the_plan_and_never_in_chart_values(signed_in):
    [sso] = signed_in.of_type(SSO)
    assert sso.inputs["oauth2Settings"] == REDACTED
    secret = settings_of(signed_in)["client_secret"]
    plan = build_plan(signed_in, "lab-oidc")
    text, summary = json.dumps(plan), render_summary(plan)
    assert secret not in text and secret not in summary
    assert "client_secret" not in json.dumps(stack_release(signed_in).inputs["values"])


def test_without_a_client_secret_the_settings_are_plain_and_use_pkce():
    program = run(login_config(), stack="lab-oidc")
    [sso] = program.of_type(SSO)
    assert "clientSecret" not in sso.inputs["oauth2Settings"] and sso.inputs["oauth2Settings"]["usePkce"]


def test_group_names_with_colons_are_escaped_for_grafana():
    config = login_config(adminGroups=["cn=ops:platform"])
    config["gpu-tenancy:teams"][0]["vcluster"]["access"]["oidc"]["viewGroups"] = ["ml:nlp readers"]
    platform = load_platform(project_config(config))
    mapping = org_mapping(platform, {team.name: team.name for team in platform.teams})
    assert "ml\\:nlp readers:team-nlp:Viewer" in mapping and f"cn=ops\\:platform:{MAIN_ORGANIZATION_ID}:Admin" in mapping
    settings = {"role_attribute_strict": True, "org_attribute_path": '"groups"',
                "org_mapping": json.dumps(mapping), "allowed_groups": json.dumps(["ml:nlp readers"])}
    assert grafana_roles(settings, {"groups": ["ml:nlp readers"]}, ORG_IDS) == {2: "Viewer"}


def test_the_summary_lists_which_groups_see_which_organization(signed_in):
    summary = render_summary(build_plan(signed_in, "lab-oidc"))
    assert ISSUER in summary
    assert "| `team-vision-readers` | `team-vision` | Viewer |" in summary
    assert f"| `platform-admins` | main (id {MAIN_ORGANIZATION_ID}) | Admin |" in summary


def _refusal(config: dict) -> str:
    with pytest.raises(ConfigError) as refused:
        load_platform({name: value for name, value in project_config(config).items() if name != "grafanaClientSecret"})
    return str(refused.value)


def test_login_without_grafana_url_or_endpoints_is_refused_naming_the_key():
    config = login_config()
    del config["gpu-tenancy:observability"]["grafanaUrl"]
    message = _refusal(config)
    assert "observability.grafanaLogin.clientId" in message and "observability.grafanaUrl" in message
    config = login_config()
    del config["gpu-tenancy:observability"]["grafanaLogin"]["tokenUrl"]
    assert "observability.grafanaLogin.tokenUrl" in _refusal(config)
    assert "is not an https URL" in _refusal(login_config(authUrl="http://login.example.com/auth"))


def test_login_needs_one_issuer_shared_by_the_teams():
    config = login_config()
    config["gpu-tenancy:teams"][1]["vcluster"]["access"]["oidc"]["issuerUrl"] = "https://other.example.com"
    message = _refusal(config)
    assert "teams[1].vcluster.access.oidc.issuerUrl" in message and "one issuer" in message
    config = login_config()
    del config["gpu-tenancy:vcluster"]["access"]["oidc"]
    for team in config["gpu-tenancy:teams"]:
        del team["vcluster"]["access"]["oidc"]
    assert "no team trusts an OIDC issuer" in _refusal(config)


def test_login_keys_without_a_client_are_refused():
    config = login_config()
    del config["gpu-tenancy:observability"]["grafanaLogin"]["clientId"]
    assert "observability.grafanaLogin.authUrl" in _refusal(config)


def test_the_real_grafana_chart_renders_the_programs_ini_without_secrets(signed_in, grafana_cache, tmp_path):  # noqa: F811
    values = stack_release(signed_in).inputs["values"]["grafana"]
    resources = [{"type": RELEASE_TYPE, "name": "grafana-release",
                  "inputs": {"name": STACK, "chart": "grafana", "version": "12.11.1", "namespace": "monitoring",
                             "repositoryOpts": {"repo": "https://grafana-community.github.io/helm-charts"},
                             "values": values}}]
    objects = rendered_objects(render_plan_releases(resources, grafana_cache, tmp_path), tmp_path, resources)
    [ini] = [obj.manifest["data"]["grafana.ini"] for obj in objects
             if obj.manifest["kind"] == "ConfigMap" and "grafana.ini" in (obj.manifest.get("data") or {})]
    assert "root_url = https://grafana.example.com" in ini and "auto_assign_org_role = None" in ini
    assert "client_secret" not in ini and "generic_oauth" not in ini


def test_a_team_without_oidc_or_endpoints_elsewhere_draw_warnings():
    config = login_config(tokenUrl="https://tokens.example.net/token")
    del config["gpu-tenancy:vcluster"]["access"]["oidc"]
    teams = config["gpu-tenancy:teams"]
    for team in teams[:2]:
        team["vcluster"]["access"]["oidc"].update(issuerUrl=ISSUER, clientId="kubernetes")
    del teams[2]["vcluster"]["access"]["oidc"]
    platform = load_platform(project_config(config))
    warnings = "\n".join(platform.warnings)
    assert f"teams[2] ({teams[2]['name']}) has no OIDC issuer" in warnings
    assert "observability.grafanaLogin.tokenUrl (https://tokens.example.net/token) is not on the issuer's host" \
        in warnings and "grafanaLogin.authUrl" not in warnings
    mapping = org_mapping(platform, {team.name: team.name for team in platform.teams})
    assert not any(teams[2]["name"] in entry for entry in mapping)


def test_a_client_secret_without_single_sign_on_draws_a_warning():
    config = login_config()
    del config["gpu-tenancy:observability"]["grafanaLogin"]
    raw = project_config(config)
    warned = load_platform(raw, secrets_set={"grafanaClientSecret"}).warnings
    assert any("grafanaClientSecret is set but nothing reads it" in warning for warning in warned)
    assert not any("grafanaClientSecret" in warning for warning in load_platform(raw).warnings)
