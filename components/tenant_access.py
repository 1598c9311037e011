"""How a team reaches its vCluster and who it is there (config/access.py).

- Endpoint: the control plane's Service becomes a LoadBalancer or a NodePort, or the chart's TLSRoute
  attaches it to the host's Gateway (TLS passthrough: the vCluster's own certificate reaches the
  client). The endpoint name goes into the serving certificate (``controlPlane.proxy.extraSANs``) and
  into every kubeconfig the program exports. The control plane's NetworkPolicy (vCluster's rule, rendered by
  components/tenant_network.py) already admits TCP 8443 from anywhere, the port a NodePort, load balancer or gateway reaches after the
  Service is translated; nothing is added for ingress.
- Identity: vCluster's proxy checks bearer tokens with a TokenReview against the virtual API server,
  so OIDC is configured there: an AuthenticationConfiguration (``apiserver.config.k8s.io/v1``, GA in
  Kubernetes 1.34; the pinned chart runs 1.36) in a host ConfigMap, mounted into the control-plane
  container that runs the API server, named by ``--authentication-config``. The team's IdP groups
  are bound inside the vCluster (``cluster-admin`` / ``view``) by manifests vCluster applies there.
- Kubeconfigs: per team, one without any secret (the vCluster's CA, the endpoint and a
  ``kubectl oidc-login get-token`` exec block); the admin certificate one stays a stack secret.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.vcluster_manifests import with_vcluster_manifests
from components.kubernetes_resources import CONFIG_MAP, KubernetesObject
from config.access import RESERVED_NAME_PREFIX, Access
from config.merge import deep_merge
from config.model import Team
from config.vocabulary import ACCESS_COMPONENT, MANAGED_BY, TEAM_LABEL

AUTHENTICATION_CONFIG_MAP = "gpu-tenancy-authentication"
AUTHENTICATION_VOLUME = "gpu-tenancy-authentication"
AUTHENTICATION_DIR = "/etc/gpu-tenancy/authentication"
AUTHENTICATION_FILE = "config.yaml"
AUTHENTICATION_API = "apiserver.config.k8s.io/v1"
EXEC_API = "client.authentication.k8s.io/v1"
ROLE_FOR_GROUPS = {"admin_groups": "cluster-admin", "view_groups": "view"}
# external-dns reads its instructions (hostname, target, ttl, ...) from annotations under this prefix.
EXTERNAL_DNS_PREFIX = "external-dns.alpha.kubernetes.io/"
EXTERNAL_DNS_HOSTNAME = f"{EXTERNAL_DNS_PREFIX}hostname"


def identity_mode(access: Access) -> str:
    return "oidc" if access.oidc.enabled else "admin-certificate"


# --- Helm values ----------------------------------------------------------------------------


def exposure_values(access: Access) -> dict:
    """The chart values that publish the control plane at ``access.host``."""
    if not access.exposed:
        return {}
    control_plane: dict = {"proxy": {"extraSANs": [access.host]}}
    if access.exposure == "loadBalancer":
        spec: dict = {"type": "LoadBalancer"}
        if access.load_balancer_source_ranges:
            spec["loadBalancerSourceRanges"] = list(access.load_balancer_source_ranges)
        # Sites running external-dns get the record created; elsewhere the annotation does nothing.
        annotations = {EXTERNAL_DNS_HOSTNAME: access.host, **access.service_annotations}
        control_plane["service"] = {"annotations": annotations, "spec": spec}
    elif access.exposure == "nodePort":
        control_plane["service"] = {"httpsNodePort": access.node_port, "spec": {"type": "NodePort"}}
        if access.service_annotations:
            control_plane["service"]["annotations"] = dict(access.service_annotations)
    elif access.exposure == "gateway":
        gateway = access.gateway
        parent = {"name": gateway.name, **({"namespace": gateway.namespace} if gateway.namespace else {}),
                  **({"sectionName": gateway.section_name} if gateway.section_name else {})}
        control_plane["tlsRoute"] = {"enabled": True, "host": access.host, "parentRefs": [parent]}
    return {"controlPlane": control_plane, "exportKubeConfig": {"server": access.server}}


def authentication_config(access: Access) -> dict:
    """The virtual API server's AuthenticationConfiguration: one JWT issuer, prefixed user and group names, and
    sign-in for the team's own groups only."""
    oidc = access.oidc
    team_groups = [oidc.groups_prefix + group for group in (*oidc.admin_groups, *oidc.view_groups)]
    issuer: dict = {"url": oidc.issuer_url, "audiences": [oidc.client_id]}
    if oidc.certificate_authority:
        issuer["certificateAuthority"] = oidc.certificate_authority
    return {"apiVersion": AUTHENTICATION_API, "kind": "AuthenticationConfiguration", "jwt": [{
        "issuer": issuer,
        "claimMappings": {
            "username": {"claim": oidc.username_claim, "prefix": oidc.username_prefix},
            "groups": {"claim": oidc.groups_claim, "prefix": oidc.groups_prefix},
        },
        # The API's documented way to keep JWT names out of Kubernetes' own (system:masters bypasses RBAC): whatever
        # the prefixes and whoever names groups at the IdP, no token becomes one.
        "userValidationRules": [
            {"expression": f"!user.username.startsWith('{RESERVED_NAME_PREFIX}')",
             "message": f"OIDC user names may not start with {RESERVED_NAME_PREFIX}"},
            {"expression": f"user.groups.all(group, !group.startsWith('{RESERVED_NAME_PREFIX}'))",
             "message": f"OIDC groups may not start with {RESERVED_NAME_PREFIX}"},
            # Every team trusts the same issuer and audience: without this, another team's member would sign in here
            # as system:authenticated and get whatever the tenant binds to that group.
            {"expression": f"user.groups.exists(group, group in {json.dumps(team_groups)})",
             "message": f"only members of {', '.join(team_groups)} may sign in to this vCluster"},
        ],
    }]}


def oidc_values(access: Access) -> dict:
    """Mount the AuthenticationConfiguration into the control-plane container and point the API server at it."""
    if not access.oidc.enabled:
        return {}
    values: dict = {"controlPlane": {
        # The k8s distro runs kube-apiserver inside the main container and appends these arguments.
        "distro": {"k8s": {"apiServer": {"extraArgs": [
            f"--authentication-config={AUTHENTICATION_DIR}/{AUTHENTICATION_FILE}"]}}},
        "statefulSet": {"persistence": {
            "addVolumes": [{"name": AUTHENTICATION_VOLUME, "configMap": {"name": AUTHENTICATION_CONFIG_MAP}}],
            "addVolumeMounts": [{"name": AUTHENTICATION_VOLUME, "mountPath": AUTHENTICATION_DIR,
                                 "readOnly": True}],
        }},
    }}
    return values


def issuer_port(access: Access) -> int:
    return access.oidc.port


def group_bindings(access: Access) -> list[dict]:
    """ClusterRoleBindings inside the vCluster: each configured IdP group (as the API server prefixes it) to its
    role."""
    oidc = access.oidc
    if not oidc.enabled:
        return []
    documents = []
    for field, role in ROLE_FOR_GROUPS.items():
        groups = getattr(oidc, field)
        if not groups:
            continue
        documents.append({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"gpu-tenancy-oidc-{role}", "labels": dict(MANAGED_BY)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                          "name": f"{oidc.groups_prefix}{group}"} for group in groups],
        })
    return documents


def with_access(values: dict, team: Team) -> dict:
    """``values`` plus the team's endpoint and identity."""
    access = team.vcluster.access
    merged = deep_merge(values, deep_merge(exposure_values(access), oidc_values(access)))
    return with_vcluster_manifests(merged, group_bindings(access))


# --- kubeconfigs ----------------------------------------------------------------------------


def with_server(kubeconfig: str, server: Optional[str]) -> str:
    """The kubeconfig with every cluster pointing at ``server`` (unchanged without one)."""
    if not server or not kubeconfig:
        return kubeconfig
    config = yaml.safe_load(kubeconfig)
    for cluster in config.get("clusters") or []:
        cluster.setdefault("cluster", {})["server"] = server
    return yaml.safe_dump(config, sort_keys=False)


def certificate_authority(kubeconfig: str) -> str:
    """The base64 CA bundle of the first cluster: public, what a client needs to trust the vCluster."""
    config = yaml.safe_load(kubeconfig or "") or {}
    clusters = config.get("clusters") or [{}]
    return (clusters[0].get("cluster") or {}).get("certificate-authority-data", "")


def team_kubeconfig(team: Team, ca_data: str) -> str:
    """A kubeconfig safe to hand to every member and commit: the endpoint, the vCluster's CA and a kubelogin
    exec block that gets each person's own token."""
    access = team.vcluster.access
    oidc = access.oidc
    args = ["oidc-login", "get-token", f"--oidc-issuer-url={oidc.issuer_url}", f"--oidc-client-id={oidc.client_id}"]
    args += [f"--oidc-extra-scope={scope}" for scope in oidc.extra_scopes]
    if oidc.certificate_authority:
        args.append("--certificate-authority-data=" + base64.b64encode(oidc.certificate_authority.encode()).decode())
    name = team.vcluster_name
    user = f"{name}-oidc"
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": access.server, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "users": [{"name": user, "user": {"exec": {
            "apiVersion": EXEC_API, "command": "kubectl", "args": args, "interactiveMode": "IfAvailable"}}}],
    }, sort_keys=False)


# --- the component --------------------------------------------------------------------------


@dataclass
class TenantAccessArgs:
    team: Team
    provider: k8s.Provider
    namespace: KubernetesObject


class TenantAccess(pulumi.ComponentResource):
    """The host objects a team's access needs before its control plane starts (only with an endpoint)."""

    def __init__(self, name: str, args: TenantAccessArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(ACCESS_COMPONENT, name, None, opts)
        access = args.team.vcluster.access
        self.prerequisites: list[pulumi.Resource] = []
        if access.oidc.enabled:
            self.prerequisites.append(KubernetesObject(
                f"{name}-authentication", CONFIG_MAP,
                metadata={"name": AUTHENTICATION_CONFIG_MAP, "namespace": args.namespace.metadata["name"],
                          "labels": {**MANAGED_BY, TEAM_LABEL: args.team.name}},
                data={AUTHENTICATION_FILE: yaml.safe_dump(authentication_config(access), sort_keys=False)},
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
            ))
        self.register_outputs(access_outputs(access))


def access_outputs(access: Access) -> dict:
    return {"endpoint": access.server, "identity": identity_mode(access),
            "adminGroups": list(access.oidc.admin_groups), "viewGroups": list(access.oidc.view_groups)}


class TeamAccess:
    """What TenantCluster asks about a team's access; a site without an endpoint registers nothing for it, so
    its plan stays what it was before endpoints existed."""

    def __init__(self, name: str, args: TenantAccessArgs, parent: pulumi.Resource):
        self.team = args.team
        self.access = args.team.vcluster.access
        self.component = TenantAccess(name, args, pulumi.ResourceOptions(parent=parent)) \
            if self.access.exposed else None

    @property
    def prerequisites(self) -> list[pulumi.Resource]:
        return self.component.prerequisites if self.component else []

    def outputs(self) -> dict:
        return access_outputs(self.access) if self.component else {}

    def admin_kubeconfig(self, kubeconfig: pulumi.Output[str]) -> pulumi.Output[str]:
        """The break-glass kubeconfig (a secret), pointing at the endpoint rather than localhost."""
        server = self.access.server
        return pulumi.Output.secret(kubeconfig.apply(lambda text: with_server(text, server)))

    def member_kubeconfig(self, kubeconfig: pulumi.Output[str]) -> Optional[pulumi.Output[str]]:
        """The per-team OIDC kubeconfig, not secret (None without OIDC)."""
        if not self.access.oidc.enabled:
            return None
        # Only the CA certificate leaves the admin kubeconfig: public, and needed to trust the endpoint.
        ca_data = pulumi.Output.unsecret(kubeconfig.apply(certificate_authority))
        return ca_data.apply(lambda ca: team_kubeconfig(self.team, ca))
