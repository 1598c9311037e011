"""Team members sign in to Grafana through the teams' OIDC issuer (``observability.grafanaLogin``), each
landing as Viewer in their own team's organization only; platform admins' groups as Admin of the main one.

Written as Grafana's SSO settings (pulumiverse-grafana ``SsoSettings``, provider ``generic_oauth``), not as
``grafana.ini``: Grafana resolves the organization names of ``org_mapping`` when it loads the settings, and
with ``role_attribute_strict`` a name it cannot resolve empties the whole mapping (Grafana's
pkg/login/social/connectors/org_role_mapper.go). The team organizations are made through the API after
Grafana starts, so a mapping in ``grafana.ini`` would refuse everyone until Grafana restarted; SSO settings
saved after the organizations are reloaded at once. The mapping names organizations by the ids Grafana gave
them, so a re-created organization changes the settings, and Grafana reloads them, too.

How Grafana decides (same file, generic_oauth.go): the groups claim (``org_attribute_path``) picks the
organizations and roles from ``org_mapping``; with ``role_attribute_strict`` and no ``role_attribute_path``, a
person none of whose groups is mapped gets no role anywhere and is refused, instead of landing in the main
organization with ``auto_assign_org_role``. Org sync removes memberships the mapping no longer gives.
The client secret, if any, is a Pulumi secret passed to the API: never in chart values or a ConfigMap.
"""

from __future__ import annotations

import json
from typing import Optional

import pulumi
import pulumiverse_grafana as grafana

from config.model import Platform

MAIN_ORGANIZATION_ID = 1  # Grafana's first organization ("Main Org."), where the platform board lives
VIEWER, ADMIN = "Viewer", "Admin"
BASE_SCOPES = ("openid", "profile", "email")


def _escaped(group: str) -> str:
    """A group name as org_mapping reads it: ``:`` separates group, organization and role unless escaped."""
    return group.replace(":", "\\:")


def _claim_path(claim: str) -> str:
    """A JMESPath naming one top-level claim, quoted so claims like ``cognito:groups`` or URLs read as one name."""
    return json.dumps(claim)


def team_groups(platform: Platform) -> dict[str, tuple[str, ...]]:
    """Each team's IdP groups (those bound in its vCluster), the people who see its organization."""
    groups = {}
    for team in platform.teams:
        oidc = team.vcluster.access.oidc
        if oidc.enabled:
            groups[team.name] = tuple(dict.fromkeys(oidc.admin_groups + oidc.view_groups))
    return groups


def org_mapping(platform: Platform, organizations: dict[str, object]) -> list[str]:
    """``group:organization:role`` entries: team groups to Viewer of their team's organization, admin groups to
    Admin of the main organization. ``organizations`` maps team names to their Grafana organization ids (or
    names, for the review summary)."""
    login = platform.observability.grafana_login
    entries = [f"{_escaped(group)}:{organizations[team]}:{VIEWER}"
               for team, groups in team_groups(platform).items() for group in groups]
    entries += [f"{_escaped(group)}:{MAIN_ORGANIZATION_ID}:{ADMIN}" for group in login.admin_groups]
    return entries


def oauth_settings(platform: Platform) -> dict:
    """Grafana's generic OAuth settings (SsoSettings ``oauth2Settings``, snake_case), but for the client secret
    and ``org_mapping``, which need the organizations' ids."""
    login = platform.observability.grafana_login
    oidc = next(team.vcluster.access.oidc for team in platform.teams if team.vcluster.access.oidc.enabled)
    scopes = dict.fromkeys(BASE_SCOPES + tuple(scope for team in platform.teams if team.vcluster.access.oidc.enabled
                                               for scope in team.vcluster.access.oidc.extra_scopes))
    groups = [group for team_list in team_groups(platform).values() for group in team_list] + list(login.admin_groups)
    settings = {
        "name": "Single sign-on", "enabled": True, "client_id": login.client_id,
        "auth_url": login.auth_url, "token_url": login.token_url, "scopes": " ".join(scopes),
        "use_pkce": True, "allow_sign_up": True, "auto_login": login.auto_login,
        "login_attribute_path": _claim_path(oidc.username_claim),
        "groups_attribute_path": _claim_path(oidc.groups_claim),
        "org_attribute_path": _claim_path(oidc.groups_claim),
        "allowed_groups": json.dumps(list(dict.fromkeys(groups))),
        "role_attribute_strict": True, "skip_org_role_sync": False, "allow_assign_grafana_admin": False,
    }
    if login.api_url:
        settings["api_url"] = login.api_url
    return settings


class GrafanaSignIn(pulumi.ComponentResource):
    """The SSO settings of Grafana's generic OAuth, saved once the team organizations exist."""

    def __init__(self, name: str, platform: Platform, api: grafana.Provider,
                 organizations: dict[str, grafana.oss.Organization], client_secret: Optional[pulumi.Output[str]],
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gpu-tenancy:platform:GrafanaSignIn", name, None, opts)
        settings = oauth_settings(platform)
        # JSON list form: group names may hold spaces or commas.
        settings["org_mapping"] = pulumi.Output.all(**{team: org.org_id for team, org in organizations.items()}).apply(
            # Ids cross the engine as JSON numbers: written as whole numbers, the form Grafana parses.
            lambda ids: json.dumps(org_mapping(platform, {team: int(org_id) for team, org_id in ids.items()})))
        if client_secret is not None:
            settings["client_secret"] = pulumi.Output.secret(client_secret)
        grafana.oss.SsoSettings(
            f"{name}-generic-oauth", provider_name="generic_oauth",
            oauth2_settings=grafana.oss.SsoSettingsOauth2SettingsArgs(**settings),
            opts=pulumi.ResourceOptions(parent=self, provider=api, depends_on=list(organizations.values())))
        login = platform.observability.grafana_login
        self.register_outputs({
            "issuer": next(team.vcluster.access.oidc.issuer_url for team in platform.teams
                           if team.vcluster.access.oidc.enabled),
            "clientId": login.client_id, "clientSecret": client_secret is not None,
            # By name, for the review summary.
            "orgMapping": pulumi.Output.all(**{team: org.name for team, org in organizations.items()}).apply(
                lambda names: org_mapping(platform, names)),
            "rootUrl": login.root_url,
        })
