"""Stack config: ``observability.grafanaLogin``, team members signing in to Grafana through the OIDC issuer the
teams' vClusters trust (``vcluster.access.oidc``), declared, read and checked against the teams. No Pulumi here.

Grafana's generic OAuth does not read the issuer's discovery document, so the authorization and token
endpoints are keys of their own; the issuer, the groups claim and the groups each team is bound to come
from the teams' access settings, so a person's Grafana organization follows the same groups as their
vCluster. components/observability_sign_in.py turns it into Grafana's SSO settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlparse

from config.errors import MISSING
from config.key_collections import StringList
from config.key_types import HTTP_URL_PATTERN, Boolean, Check, Text
from config.keys import Block, Key
from config.reader import Reader, Section

HTTPS_URL = Check(r"https://[^\s/?#]+(/[^\s?#]*)?", "is not an https URL without query or fragment",
                  "copy it from the issuer's discovery document (<issuerUrl>/.well-known/openid-configuration)")
HTTP_URL = Check(HTTP_URL_PATTERN, "is not an http(s) URL",
                 "set it to the address team members open Grafana at, e.g. https://grafana.gpu.example.com")
KEY = "observability.grafanaLogin"
# The secret key (config/secrets.py) holding the OAuth client's secret, if the client has one.
CLIENT_SECRET = "grafanaClientSecret"


@dataclass(frozen=True)
class GrafanaLogin:
    client_id: str
    auth_url: str
    token_url: str
    root_url: str
    api_url: Optional[str] = None
    admin_groups: tuple[str, ...] = ()
    auto_login: bool = False


GRAFANA_LOGIN = Block(keys=(
    Key("clientId", Text(), None, "Grafana's OAuth client at the teams' OIDC issuer; set: team members sign in "
        "with their own identity.", example="grafana", default_note="no single sign-on (admin-created users)",
        details="A client of its own (not the Kubernetes one): its redirect URI is `<rootUrl>/login/generic_oauth`. "
                "Its secret, if the client has one, is the secret key `grafanaClientSecret`; without it Grafana "
                "signs in with PKCE only. Needs `grafanaUrl` and at least one team with "
                "`vcluster.access.oidc.issuerUrl`; every team with OIDC must use the same issuer."),
    Key("authUrl", Text(form="`https://` URL", checks=(HTTPS_URL,)), None,
        "The issuer's authorization endpoint (`authorization_endpoint` of its discovery document).",
        example="https://login.example.com/realms/ml/protocol/openid-connect/auth", default_note="required with clientId"),
    Key("tokenUrl", Text(form="`https://` URL", checks=(HTTPS_URL,)), None,
        "The issuer's token endpoint (`token_endpoint`).",
        example="https://login.example.com/realms/ml/protocol/openid-connect/token", default_note="required with clientId"),
    Key("apiUrl", Text(form="`https://` URL", checks=(HTTPS_URL,)), None,
        "The issuer's userinfo endpoint, if the ID token lacks the groups claim.",
        example="https://login.example.com/realms/ml/protocol/openid-connect/userinfo"),
    Key("rootUrl", Text(form="http(s) URL", checks=(HTTP_URL,)), None,
        "The address people open Grafana at (`[server] root_url`, the base of the redirect URI).",
        example="https://grafana.gpu.example.com", default_note="`grafanaUrl`"),
    Key("adminGroups", StringList(), (), "IdP groups whose members are Admins of Grafana's main organization (the "
        "platform board, unfiltered Prometheus).", example="[platform-admins]",
        details="Team members are Viewers of their team's organization only: the groups of "
                "`teams[].vcluster.access.oidc.adminGroups` and `viewGroups`."),
    Key("autoLogin", Boolean(), False, "Send people straight to the issuer instead of Grafana's login form.",
        example="true", details="The generated admin login then stays reachable at `/login?disableAutoLogin`."),
))


def read_grafana_login(section: Section, grafana_url: Optional[str], grafana_installed: bool) -> Optional[GrafanaLogin]:
    """The block, or None when it is left out; every problem goes to the section's reader."""
    client_id = section.read("clientId")
    if client_id is None and section.has("clientId"):
        return None  # its own problem is reported
    set_keys = [name for name in GRAFANA_LOGIN.names if section.has(name)]
    if client_id is None:
        for name in set_keys:
            section.fail(name, section.raw(name), "only applies with single sign-on",
                         f"set {KEY}.clientId (Grafana's OAuth client at the issuer) or remove {KEY}.{name}")
        return None
    if not grafana_installed or grafana_url is None:
        section.fail("clientId", client_id, "team organizations and sign-in settings are made through the Grafana API",
                     "set observability.grafanaUrl (prometheus: install with grafana: true), or remove "
                     f"{KEY}")
        return None
    auth_url, token_url = section.read("authUrl"), section.read("tokenUrl")
    for name, value in (("authUrl", auth_url), ("tokenUrl", token_url)):
        if value is None and not section.has(name):
            section.fail(name, MISSING, "Grafana's generic OAuth needs the issuer's endpoints (it does not read the "
                         "discovery document)", f"set {KEY}.{name} from <issuerUrl>/.well-known/openid-configuration")
    if auth_url is None or token_url is None:
        return None
    return GrafanaLogin(client_id=client_id, auth_url=auth_url, token_url=token_url,
                        root_url=section.read("rootUrl") or grafana_url, api_url=section.read("apiUrl"),
                        admin_groups=tuple(section.read("adminGroups") or ()),
                        auto_login=bool(section.read("autoLogin")))


def check_grafana_login(reader: Reader, login: Optional[GrafanaLogin], teams) -> None:
    """The teams that sign in to Grafana share one issuer and one groups claim, the one Grafana's client lives at."""
    if login is None:
        return
    with_oidc = [(index, team.vcluster.access.oidc) for index, team in enumerate(teams)
                 if team.vcluster is not None and team.vcluster.access.oidc.enabled]
    if not with_oidc:
        reader.fail(f"{KEY}.clientId", login.client_id, "no team trusts an OIDC issuer, so no group maps to a team",
                    "set vcluster.access.oidc.issuerUrl (and each team's adminGroups or viewGroups), or remove "
                    f"{KEY}")
        return
    first_index, first = with_oidc[0]
    for index, oidc in with_oidc[1:]:
        for field, name in (("issuer_url", "issuerUrl"), ("groups_claim", "groupsClaim")):
            if getattr(oidc, field) != getattr(first, field):
                reader.fail(f"teams[{index}].vcluster.access.oidc.{name}", getattr(oidc, field),
                            f"differs from teams[{first_index}]'s ({getattr(first, field)}); Grafana signs in "
                            "through one issuer", f"use one issuer for every team, or remove {KEY}")


def grafana_login_warnings(login: Optional[GrafanaLogin], teams, secrets_set: set[str]) -> list[str]:
    """Combinations that sign in but not as meant, and a client secret nothing reads."""
    if login is None:
        return [f"{CLIENT_SECRET} is set but nothing reads it: {KEY}.clientId is not set. Set up single sign-on, "
                "or remove the secret."] if CLIENT_SECRET in secrets_set else []
    warnings = []
    issuer_hosts = {urlparse(team.vcluster.access.oidc.issuer_url).hostname for team in teams
                    if team.vcluster.access.oidc.enabled}
    for name, url in (("authUrl", login.auth_url), ("tokenUrl", login.token_url)):
        if urlparse(url).hostname not in issuer_hosts:
            warnings.append(f"{KEY}.{name} ({url}) is not on the issuer's host ({', '.join(sorted(issuer_hosts))}): "
                            "check it is the same issuer the teams' vClusters trust.")
    for index, team in enumerate(teams):
        oidc = team.vcluster.access.oidc
        if not oidc.enabled:
            # (A team with OIDC but no group is already warned about by config/access_rules.py.)
            warnings.append(f"teams[{index}] ({team.name}) has no OIDC issuer: its members cannot sign in to its "
                            "Grafana organization (a platform admin adds them by hand).")
        elif oidc.certificate_authority:
            warnings.append(f"teams[{index}] ({team.name}) trusts its issuer through vcluster.access.oidc."
                            "certificateAuthority; Grafana must trust that CA too (its pod's system trust store).")
    return warnings
