"""Stack config: ``vcluster.access``, how a team reaches its vCluster and who it is there, declared and read.

Two independent choices, each per site with per-team overrides (the ``vcluster`` block merge):

- ``exposure``: ``none`` (today: ``vcluster connect`` through the host), ``loadBalancer`` (a
  LoadBalancer Service, e.g. EKS), ``nodePort`` (a NodePort on the host's nodes, e.g. MicroK8s) or
  ``gateway`` (a TLS-passthrough route on the host's Gateway API gateway).
- ``oidc``: the virtual API server trusts an OpenID Connect issuer; the team's IdP groups are bound
  to ``cluster-admin`` and ``view`` inside its vCluster.

``resolve_access`` checks the rules that tie a team's access to the host and to the other teams,
and fixes each team's endpoint host. No Pulumi here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlparse

from config.key_collections import StringList, StringMap
from config.key_types import Integer, Text
from config.keys import Block, Derived, Key
from config.network_types import NetworkList
from config.reader import Section

EXPOSURES = ("none", "loadBalancer", "nodePort", "gateway")
# The port the chart's Service (and a gateway's TLS listener) serves the vCluster on.
HTTPS_PORT = 443
NODE_PORT_RANGE = (30000, 32767)
# Kubernetes' own user and group names start so (system:masters bypasses RBAC); no OIDC name may.
RESERVED_NAME_PREFIX = "system:"


@dataclass(frozen=True)
class GatewayRef:
    name: Optional[str] = None
    namespace: Optional[str] = None
    section_name: Optional[str] = None


@dataclass(frozen=True)
class Oidc:
    issuer_url: Optional[str] = None
    client_id: Optional[str] = None
    username_claim: str = "email"
    username_prefix: str = "oidc:"
    groups_claim: str = "groups"
    groups_prefix: str = "oidc:"
    certificate_authority: Optional[str] = None
    extra_scopes: tuple[str, ...] = ("email",)
    admin_groups: tuple[str, ...] = ()
    view_groups: tuple[str, ...] = ()
    # Where the control plane reaches the issuer, when not at public addresses (components/tenant_network.py).
    issuer_addresses: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        return self.issuer_url is not None

    @property
    def port(self) -> int:
        """The issuer's port, which the control plane's NetworkPolicy opens."""
        return urlparse(self.issuer_url or "").port or HTTPS_PORT


@dataclass(frozen=True)
class Access:
    exposure: str = "none"
    host: Optional[str] = None
    domain: Optional[str] = None
    node_port: Optional[int] = None
    load_balancer_source_ranges: tuple[str, ...] = ()
    service_annotations: dict = dataclasses.field(default_factory=dict)
    gateway: GatewayRef = GatewayRef()
    oidc: Oidc = Oidc()

    @property
    def exposed(self) -> bool:
        return self.exposure != "none"

    @property
    def port(self) -> int:
        return self.node_port if self.exposure == "nodePort" and self.node_port else HTTPS_PORT

    @property
    def server(self) -> Optional[str]:
        """The URL a kubeconfig names (``host`` is resolved by ``resolve_access``)."""
        if not self.exposed or not self.host:
            return None
        return f"https://{self.host}" + ("" if self.port == HTTPS_PORT else f":{self.port}")


_DEFAULT, _OIDC = Access(), Oidc()

GATEWAY = Block(keys=(
    Key("name", Text(dns_label=True), None, "The host's Gateway the TLS route attaches to.", example="platform"),
    Key("namespace", Text(dns_label=True), None, "Its namespace (left out: the tenant's namespace).",
        example="gateway-system"),
    Key("sectionName", Text(), None, "The listener of that Gateway (TLS, mode Passthrough).", example="vclusters"),
))

OIDC = Block(keys=(
    Key("issuerUrl", Text(form="`https://` URL"), None, "OpenID Connect issuer the virtual API server trusts; "
        "left out: no OIDC, the admin certificate only.", example="https://login.example.com/realms/ml",
        details="Written to an AuthenticationConfiguration (`apiserver.config.k8s.io/v1`) the virtual API server "
                "reads through `--authentication-config`. The control plane fetches the issuer's discovery document "
                "and keys, so with `vcluster.networkPolicy` on its NetworkPolicy opens the issuer's port (443 unless "
                "the URL names one) at the issuer's addresses: `issuerAddresses`, else the URL's IP address, else "
                "the public internet."),
    Key("clientId", Text(), None, "OAuth client ID; tokens must carry it in `aud`.", example="kubernetes"),
    Key("usernameClaim", Text(), _OIDC.username_claim, "Claim that names the person.", example="sub"),
    Key("usernamePrefix", Text(), _OIDC.username_prefix, "Prefix of every OIDC user name.", example="sso:",
        details="Required: it keeps IdP names apart from `system:` users and service accounts, so it may not start "
                "with `system:` nor be its start (`system`, `sys`)."),
    Key("groupsClaim", Text(), _OIDC.groups_claim, "Claim holding the person's groups.", example="roles"),
    Key("groupsPrefix", Text(), _OIDC.groups_prefix, "Prefix of every OIDC group name.", example="sso:",
        details="Required: an IdP group can then never be `system:masters`, so it may not start with `system:` nor "
                "be its start. Bindings use the prefixed name."),
    Key("issuerAddresses", NetworkList(exact=True), _OIDC.issuer_addresses,
        "Where the control plane reaches the issuer when its name resolves to a private address.",
        example="[10.20.0.15/32]", default_note="the URL's IP address, else the public internet",
        details="An issuer named by a host name is reached only at public addresses (`0.0.0.0/0` without the private "
                "ranges), so a tenant cannot use it to reach other teams' control planes (8443) or private services "
                "on the issuer's port. An issuer in the VPC, on the LAN or behind an internal load balancer: list its "
                "own addresses, not a network holding pods (on 8443 that reopens every other team's control plane; "
                "the plan warns). An issuer running in the cluster is reached at its pods' addresses: open it by "
                "its pods instead, with a rule in `vcluster.extraValues.policies.networkPolicy.controlPlane.egress` "
                "(`namespaceSelector` and `podSelector`, its port), which takes this rule's place."),
    Key("certificateAuthority", Text(form="PEM"), None, "CA bundle of the issuer, if its TLS certificate is not "
        "publicly trusted.", example="-----BEGIN CERTIFICATE-----..."),
    Key("extraScopes", StringList(), _OIDC.extra_scopes, "Scopes `kubectl oidc-login` asks for besides `openid`.",
        example="[email, groups]"),
    Key("adminGroups", StringList(), _OIDC.admin_groups, "IdP groups bound to `cluster-admin` in the vCluster.",
        example="[nlp-admins]", details="Usually set per team (`teams[].vcluster.access.oidc.adminGroups`)."),
    Key("viewGroups", StringList(), _OIDC.view_groups, "IdP groups bound to `view` in the vCluster.",
        example="[nlp-readers]"),
))

ACCESS = Block(keys=(
    Key("exposure", Text(choices=EXPOSURES), _DEFAULT.exposure, "How teams reach their vCluster's API server.",
        example="nodePort",
        details="`none`: only through the host (`vcluster connect`). `loadBalancer`: the control plane's Service "
                "becomes a LoadBalancer (EKS). `nodePort`: a NodePort on the host's nodes (MicroK8s). `gateway`: a "
                "Gateway API TLSRoute (passthrough) on the host's Gateway. The certificate and the exported "
                "kubeconfigs name the endpoint."),
    Key("host", Text(), Derived("`<vclusterName>.<domain>` for loadBalancer and gateway; `cluster.microk8s.host` "
                                "for nodePort on MicroK8s"),
        "DNS name or IP clients use for this team's API server.", example="nlp.vc.example.com",
        details="It is added to the serving certificate (`controlPlane.proxy.extraSANs`) and becomes the server of "
                "the exported kubeconfigs. For loadBalancer, point this name at the load balancer."),
    Key("domain", Text(), None, "DNS suffix: a team's host is `<vclusterName>.<domain>`.", example="vc.example.com"),
    Key("nodePort", Integer(minimum=NODE_PORT_RANGE[0], maximum=NODE_PORT_RANGE[1]), None,
        "The team's node port (nodePort exposure); unique per team.", example="30443",
        details="No team's Service may hold it, whether the tenant names it or the host's allocator picks it while "
                "it is free (rule `service-endpoint-node-ports`, docs/security-synced-objects.md)."),
    Key("loadBalancerSourceRanges", NetworkList(), _DEFAULT.load_balancer_source_ranges,
        "Client CIDRs a load balancer accepts; empty: any.", example="[203.0.113.0/24]"),
    Key("serviceAnnotations", StringMap(), {}, "Annotations of the control plane's Service (loadBalancer, nodePort).",
        example="{service.beta.kubernetes.io/aws-load-balancer-scheme: internal}"),
    Key("gateway", GATEWAY, {}, "The Gateway a TLS route attaches to (gateway exposure)."),
    Key("oidc", OIDC, {}, "Per-person identity through OpenID Connect."),
))


def read_access(section: Section, base: Access) -> Access:
    """Read a ``vcluster.access`` block; every key left out keeps its value from ``base``."""
    gateway, oidc = section.child("gateway"), section.child("oidc")
    return Access(
        exposure=section.read("exposure", base.exposure),
        host=section.read("host", base.host),
        domain=section.read("domain", base.domain),
        node_port=section.read("nodePort", base.node_port),
        load_balancer_source_ranges=section.read("loadBalancerSourceRanges", base.load_balancer_source_ranges),
        service_annotations={**base.service_annotations, **(section.read("serviceAnnotations", {}) or {})},
        gateway=GatewayRef(
            name=gateway.read("name", base.gateway.name),
            namespace=gateway.read("namespace", base.gateway.namespace),
            section_name=gateway.read("sectionName", base.gateway.section_name),
        ),
        oidc=Oidc(**{field: oidc.read(name, getattr(base.oidc, field)) for name, field in (
            ("issuerUrl", "issuer_url"), ("clientId", "client_id"), ("usernameClaim", "username_claim"),
            ("usernamePrefix", "username_prefix"), ("groupsClaim", "groups_claim"),
            ("groupsPrefix", "groups_prefix"), ("certificateAuthority", "certificate_authority"),
            ("extraScopes", "extra_scopes"), ("adminGroups", "admin_groups"), ("viewGroups", "view_groups"),
            ("issuerAddresses", "issuer_addresses"))}),
    )
