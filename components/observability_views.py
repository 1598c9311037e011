"""Each team's own view of the metrics: a query proxy that admits only the team's series, and (with
``observability.grafanaUrl``) a Grafana organization holding the team's board and one data source, that proxy.

The proxy is prom-label-proxy (prometheus-community), one Deployment and Service per team, started with
``-label team -label-value <team> -error-on-replace``: every selector of every query gets ``team="<team>"``,
and a query that names another team is refused (HTTP 400). Only Grafana's pods may reach it (NetworkPolicy).

Why an organization per team, not a folder per team in one organization: Grafana OSS has no data source
permissions (an Enterprise feature), so any member of an organization can query every data source in it,
by hand, through the API. A team's organization holds exactly one data source, its proxy, and its board;
its members are Viewers (org_mapping from the OIDC groups claim, see docs/observability-dashboards.md), so Explore and
data source settings are closed to them too. The platform board and the unfiltered Prometheus data source
stay in the main organization, for platform admins.
"""

from __future__ import annotations

import json
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumiverse_grafana as grafana

from components.observability_access import ADMIN_USER
from components.observability_sign_in import GrafanaSignIn
from components.observability_dashboards import team_dashboard
from components.observability_team_series import TEAM_LABEL
from components.kubernetes_resources import DEPLOYMENT, NETWORK_POLICY, SERVICE, KubernetesObject
from config import versions
from config.mirrors import Mirrors
from config.model import Platform, Team
from config.vocabulary import MANAGED_BY

PROXY_PORT = 8080
# The grafana chart's pod labels (release kube-prometheus-stack): only these pods may query a proxy.
GRAFANA_POD_LABELS = {"app.kubernetes.io/name": "grafana", "app.kubernetes.io/instance": "kube-prometheus-stack"}
# Every team's proxy pod wears these (plus its team): what the monitoring namespace's policies let reach Prometheus.
PROXY_POD_LABELS = {"app.kubernetes.io/name": "prom-label-proxy"}


def proxy_name(team: Team) -> str:
    return f"gpu-tenancy-query-{team.name}"[:63].rstrip("-")


def proxy_url(team: Team, namespace: str) -> str:
    return f"http://{proxy_name(team)}.{namespace}.svc.cluster.local:{PROXY_PORT}"


def proxy_args(team: Team, upstream: str) -> list[str]:
    return [f"-insecure-listen-address=0.0.0.0:{PROXY_PORT}", f"-upstream={upstream}",
            f"-label={TEAM_LABEL}", f"-label-value={team.name}",
            # A query naming another team is an error, not silently the team's own data.
            "-error-on-replace",
            # Grafana's query editor lists label names and values; the proxy filters those too.
            "-enable-label-apis"]


def proxy_deployment_spec(team: Team, upstream: str, mirrors: Mirrors) -> dict:
    labels = {**PROXY_POD_LABELS, "gpu-tenancy/team": team.name}
    return {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": {**labels, **MANAGED_BY}}, "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "prom-label-proxy",
                "image": mirrors.image(versions.PROM_LABEL_PROXY_IMAGE),
                "args": proxy_args(team, upstream),
                "ports": [{"name": "http", "containerPort": PROXY_PORT}],
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
            }],
        }},
    }


# ``jsonData`` of a team's data source: the proxy serves POST queries; samples come every 30 s (the monitors).
DATA_SOURCE_JSON = {"httpMethod": "POST", "timeInterval": "30s"}


class TeamViews(pulumi.ComponentResource):
    proxies: dict[str, str]
    organizations: dict[str, pulumi.Output]

    def __init__(self, name: str, platform: Platform, provider: k8s.Provider, upstream: str,
                 admin_password: Optional[pulumi.Output[str]], after: list[pulumi.Resource],
                 opts: Optional[pulumi.ResourceOptions] = None,
                 client_secret: Optional[pulumi.Output[str]] = None):
        super().__init__("gpu-tenancy:platform:TeamViews", name, None, opts)
        namespace = platform.observability.namespace
        child = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=after)
        self.proxies = {}
        for team in platform.teams:
            proxy = proxy_name(team)
            spec = proxy_deployment_spec(team, upstream, platform.mirrors)
            metadata = {"name": proxy, "namespace": namespace, "labels": MANAGED_BY}
            KubernetesObject(f"{name}-{team.name}-proxy", DEPLOYMENT, metadata=metadata, spec=spec, opts=child)
            KubernetesObject(f"{name}-{team.name}-proxy", SERVICE, metadata=metadata, spec={
                "selector": spec["selector"]["matchLabels"],
                "ports": [{"name": "http", "port": PROXY_PORT, "targetPort": "http"}]}, opts=child)
            KubernetesObject(f"{name}-{team.name}-proxy", NETWORK_POLICY, metadata=metadata, spec={
                "podSelector": {"matchLabels": spec["selector"]["matchLabels"]},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {"matchLabels": GRAFANA_POD_LABELS}}],
                             "ports": [{"port": PROXY_PORT, "protocol": "TCP"}]}]}, opts=child)
            self.proxies[team.name] = proxy_url(team, namespace)

        self.organizations = {}
        grafana_url = platform.observability.grafana_url
        if grafana_url and admin_password is not None:
            self._organizations(name, platform, grafana_url, admin_password, after, client_secret)
        self.register_outputs({"proxies": self.proxies, "organizations": self.organizations})

    def _organizations(self, name: str, platform: Platform, url: str, admin_password: pulumi.Output[str],
                       after: list[pulumi.Resource], client_secret: Optional[pulumi.Output[str]]) -> None:
        api = grafana.Provider(f"{name}-grafana", url=url,
                               auth=pulumi.Output.concat(ADMIN_USER, ":", admin_password),
                               opts=pulumi.ResourceOptions(parent=self))
        created: dict[str, grafana.oss.Organization] = {}
        for team in platform.teams:
            in_grafana = pulumi.ResourceOptions(parent=self, provider=api, depends_on=after)
            organization = grafana.oss.Organization(
                f"{name}-{team.name}-org", name=organization_name(team), admin_user=ADMIN_USER,
                # Members come from the OIDC groups claim (org_mapping), never from a list kept here.
                create_users=False, opts=in_grafana)
            created[team.name] = organization
            in_org = pulumi.ResourceOptions.merge(in_grafana, pulumi.ResourceOptions(depends_on=[organization]))
            grafana.oss.DataSource(
                f"{name}-{team.name}-datasource", org_id=organization.org_id, name=f"Prometheus ({team.name})",
                type="prometheus", url=self.proxies[team.name], is_default=True, access_mode="proxy",
                uid=f"gpu-tenancy-{team.name}"[:40], json_data_encoded=json.dumps(DATA_SOURCE_JSON),
                opts=in_org)
            folder = grafana.oss.Folder(f"{name}-{team.name}-folder", org_id=organization.org_id,
                                        title=f"GPU tenancy - {team.name}",
                                        uid=f"gpu-tenancy-{team.name}"[:40], opts=in_org)
            grafana.oss.Dashboard(f"{name}-{team.name}-dashboard", org_id=organization.org_id, folder=folder.uid,
                                  config_json=json.dumps(team_dashboard(team), sort_keys=True), overwrite=True,
                                  opts=in_org)
            self.organizations[team.name] = organization.org_id
        if platform.observability.grafana_login is not None:
            GrafanaSignIn(f"{name}-sign-in", platform, api, created, client_secret,
                          opts=pulumi.ResourceOptions(parent=self))


def organization_name(team: Team) -> str:
    """The team's Grafana organization: the team's name, the value ``org_mapping`` maps its group to."""
    return team.name
