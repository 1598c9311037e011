"""summary.md's "Who sees what": each team's query proxy, Grafana organization and data source, and the
platform's own view, read from the TeamViews component and the resources under it."""

from __future__ import annotations

from typing import Any

from config.vocabulary import NETWORK_POLICY
from tools.plan.lookup import PlanIndex, dig
from tools.plan.markdown import code, table

TEAM_VIEWS = "gpu-tenancy:platform:TeamViews"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
ORGANIZATION = "grafana:oss/organization:Organization"
DATA_SOURCE = "grafana:oss/dataSource:DataSource"
DASHBOARD = "grafana:oss/dashboard:Dashboard"
SIGN_IN = "gpu-tenancy:platform:GrafanaSignIn"
MONITORING_INGRESS = "gpu-tenancy:platform:MonitoringIngress"
MAIN_ORGANIZATION = "1"


def _arg(args: list[Any], flag: str) -> str:
    return next((str(arg).split("=", 1)[1] for arg in args if str(arg).startswith(f"{flag}=")), "—")


def views_section(index: PlanIndex) -> list[str]:
    components = index.of_type(TEAM_VIEWS)
    if not components:
        return []
    under = index.descendants(components[0])
    organizations = {r["urn"]: r["inputs"].get("name") for r in under if r["type"] == ORGANIZATION}
    sources = [r for r in under if r["type"] == DATA_SOURCE]
    rows = []
    for proxy in sorted((r for r in under if r["type"] == DEPLOYMENT), key=lambda r: r["name"]):
        [container] = proxy["inputs"]["spec"]["template"]["spec"]["containers"]
        args = container.get("args") or []
        team = _arg(args, "-label-value")
        service = proxy["inputs"]["metadata"]["name"]
        source = next((s for s in sources if f"//{service}." in str(s["inputs"].get("url"))), None)
        organization = next((organizations[dep] for dep in (source or {}).get("dependencies", [])
                             if dep in organizations), None)
        rows.append([code(team), code(f"{_arg(args, '-label')}=\"{team}\""), code(service),
                     code(organization) if organization else "none (no `observability.grafanaUrl`)",
                     code(source["inputs"]["name"]) if source else "—"])
    lines = ["## Who sees what", "",
             "Each team queries Prometheus only through its own proxy, which adds the team's label to every "
             "selector and refuses a query naming another team. In Grafana each team has an organization of its "
             "own whose only data source is that proxy; its members are Viewers.", ""]
    lines += table(["Team", "Enforced matcher", "Query proxy", "Grafana organization", "Data source"], rows)
    lines += ["", "- Platform admins: Grafana's main organization (platform board, unfiltered Prometheus), signed in "
                  "with the generated admin login (Secret `gpu-tenancy-grafana-admin`, a stack secret)."]
    return lines + sign_in_lines(index) + ingress_lines(index)


def _peer(peer: dict) -> str:
    pods = ", ".join(f"{key}={value}" for key, value in sorted(dig(peer, "podSelector", "matchLabels",
                                                                     default={}).items()))
    namespaces = dig(peer, "namespaceSelector", "matchLabels", default=None)
    if namespaces is not None:
        return "namespace " + code(", ".join(str(value) for value in namespaces.values())) + \
            (f" pods {code(pods)}" if pods else "")
    return code(pods)


def ingress_lines(index: PlanIndex) -> list[str]:
    """Which pods may connect to the monitoring stack's unauthenticated services."""
    components = index.of_type(MONITORING_INGRESS)
    if not components:
        return []
    rows = []
    for policy in sorted((r for r in index.descendants(components[0]) if r["type"] == NETWORK_POLICY),
                         key=lambda r: r["name"]):
        spec = policy["inputs"]["spec"]
        for rule in spec.get("ingress") or []:
            ports = ", ".join(str(entry["port"]) for entry in rule.get("ports") or []) or "any"
            rows.append([code(policy["inputs"]["metadata"]["name"]),
                         code(", ".join(f"{k}={v}" for k, v in sorted(spec["podSelector"]["matchLabels"].items()))),
                         "; ".join(_peer(peer) for peer in rule.get("from") or []), ports])
    return ["", "Nothing else in the cluster (no tenant pod, whatever its labels) reaches Prometheus, Alertmanager or "
                "kube-state-metrics (NetworkPolicies in the monitoring namespace):", ""] + \
        table(["Policy", "Protects pods", "Admits pods", "Ports"], rows)


def _mapping_entry(entry: str) -> list[str]:
    """``group:organization:role`` split as Grafana does (``\\:`` is a colon inside the group name)."""
    group, organization, role = entry.replace("\\:", "\0").split(":")
    return [group.replace("\0", ":"), organization, role]


def sign_in_lines(index: PlanIndex) -> list[str]:
    """How team members sign in to Grafana, and which OIDC group gets which role where."""
    mapping = index.registered(SIGN_IN, "orgMapping")
    if mapping is None:
        return ["- Team members: no single sign-on (`observability.grafanaLogin`). A platform admin creates each "
                "member's user and adds it to the team's organization as Viewer; a new user has no role in the main "
                "organization."]
    issuer, client = index.registered(SIGN_IN, "issuer"), index.registered(SIGN_IN, "clientId")
    secret = "a stack secret" if index.registered(SIGN_IN, "clientSecret") else "none (PKCE)"
    rows = []
    for entry in mapping:
        group, organization, role = _mapping_entry(entry)
        where = f"main (id {organization})" if organization == MAIN_ORGANIZATION else code(organization)
        rows.append([code(group), where, role])
    lines = [f"- Team members: single sign-on at {index.registered(SIGN_IN, 'rootUrl')} through the teams' issuer "
             f"{code(issuer)} (client {code(client)}, client secret: {secret}). Each OIDC group gets exactly this; "
             "anyone whose groups are not listed is refused:", ""]
    return lines + table(["OIDC group", "Grafana organization", "Role"], rows)
