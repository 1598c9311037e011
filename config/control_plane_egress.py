"""Where a team's control plane may open connections on the port every vCluster control plane serves on, and what the
loader warns of. Plain data in, text out.

A tenant, cluster-admin in its vCluster, makes its virtual API server connect where its objects say
(``pods/NAME/proxy``, ``services/NAME/proxy``, a webhook or APIService); the control plane's NetworkPolicy is the
boundary (components/tenant_network.py, docs/security-isolation.md, "The control plane's egress"). Every control
plane admits 8443 from anywhere (vCluster's rule, for its Service), so any rule opening 8443 to an address that may
hold another team's pod lets one team's tenant call another team's virtual API server.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from urllib.parse import urlparse

from config.hosts import PRIVATE_NETWORKS
from config.model import Platform, Team
from config.network_types import is_ip_address

CONTROL_PLANE_PORT = 8443
# The API server ports vCluster's rule opens: still the rule on a host whose API server port the program is not told.
VCLUSTER_API_SERVER_PORTS = (443, 8443, 6443)


def api_server_ports(team: Team) -> tuple[int, ...]:
    """The ports the team's control plane may reach the host API server on: the site's, else vCluster's three."""
    port = team.vcluster.api_server_port
    return (port,) if port is not None else VCLUSTER_API_SERVER_PORTS


_HARM = ("a tenant, cluster-admin in its vCluster, can make its virtual API server call another team's, "
         "unauthenticated "
         "(pods/NAME/proxy, services/NAME/proxy, a webhook or APIService URL)")


def control_plane_egress_warnings(platform: Platform) -> list[str]:
    """Nothing on a one-team site, or where no team's egress is fenced: no other control plane to reach, or no rule
    that opens less."""
    fenced = [team for team in platform.teams if team.vcluster.network_policy]
    if len(platform.teams) < 2 or not fenced:
        return []
    return _api_server_port_warnings(platform, fenced) + _issuer_warnings(platform, fenced)


def _api_server_port_warnings(platform: Platform, fenced: list[Team]) -> list[str]:
    """A kubeconfig host's API server port opens at the addresses the site states, else at every address, so 8443,
    stated or among vCluster's three, reaches the other control planes unless the addresses are the API server's
    own. EKS serves on 443, MicroK8s on 16443."""
    existing = platform.cluster.kubeconfig
    if existing is None or existing.api_server_port not in (None, CONTROL_PLANE_PORT):
        return []
    names = ", ".join(team.name for team in fenced)
    endpoints = "(kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes)"
    if existing.api_server_addresses:
        wide = [block for block in existing.api_server_addresses if _may_hold_pods(block)]
        return [f"cluster.kubeconfig.apiServerAddresses lists {', '.join(wide)}, where the control planes of {names} "
                f"may open connections to the API server's port{'s' if existing.api_server_port is None else ''}, "
                f"{CONTROL_PLANE_PORT} among them: a private network of more than one address may hold other teams' "
                f"control planes: {_HARM}. List the API server's own addresses {endpoints}."] if wide else []
    addresses = f"or list the API server's own addresses in cluster.kubeconfig.apiServerAddresses {endpoints}"
    if existing.api_server_port is None:
        return [f"cluster.kubeconfig.apiServerPort is not set, so the control planes of {names} may open connections "
                f"to ports 443, 8443 and 6443 at every address, and another team's control plane serves on "
                f"{CONTROL_PLANE_PORT}: {_HARM}. Set cluster.kubeconfig.apiServerPort to the port of the API "
                f"server's endpoints, {addresses}."]
    return [f"cluster.kubeconfig.apiServerPort is {CONTROL_PLANE_PORT}, the port every vCluster control plane serves "
            f"on: the control planes of {names} reach the host API server there, so they may open connections to "
            f"{CONTROL_PLANE_PORT} at every address, other teams' control planes among them: {_HARM}. List the API "
            f"server's own addresses in cluster.kubeconfig.apiServerAddresses {endpoints}, serve the host API "
            "server on another port (minikube: `minikube start --apiserver-port=6443`; kubeadm: "
            "`localAPIEndpoint.bindPort`) and set cluster.kubeconfig.apiServerPort to it, or give each team a "
            "cluster of its own."]


def _issuer_warnings(platform: Platform, fenced: list[Team]) -> list[str]:
    """An issuer on 8443 at stated private networks wider than one address: those may hold other teams' control
    planes. A single address is the issuer's own; the public internet (unstated) holds no pod of the site."""
    index = {team.name: position for position, team in enumerate(platform.teams)}
    wide: dict[tuple[str, ...], list[Team]] = defaultdict(list)
    for team in fenced:
        oidc = team.vcluster.access.oidc
        if oidc.enabled and oidc.port == CONTROL_PLANE_PORT:
            blocks = tuple(block for block in oidc.issuer_addresses if _may_hold_pods(block))
            if blocks:
                wide[blocks].append(team)
    return [f"teams[{index[teams[0].name]}].vcluster.access.oidc.issuerAddresses (or vcluster.access.oidc."
            f"issuerAddresses, for every team) lists {', '.join(blocks)} for an OIDC issuer on "
            f"{CONTROL_PLANE_PORT}, the port every vCluster control plane serves on: a private network of more than "
            f"one address may hold other teams' control planes, which the control planes of "
            f"{', '.join(team.name for team in teams)} then reach: {_HARM}. List the issuer's own addresses "
            "(e.g. its internal load balancer's, as /32), or serve the issuer on another port."
            for blocks, teams in wide.items()]


def _may_hold_pods(block: str) -> bool:
    network = ipaddress.ip_network(block, strict=False)
    return network.num_addresses > 1 and any(
        network.version == private.version and network.overlaps(private)
        for private in map(ipaddress.ip_network, PRIVATE_NETWORKS))


def named_issuer_notes(platform: Platform) -> list[str]:
    """An issuer named by host name, with no stated addresses, on a port the API server rule does not open: the
    control plane reaches it at public addresses only, so an issuer resolving to a private one is cut off. One note
    for each issuer and port, naming the teams that sign in there."""
    teams_by_issuer: dict[tuple[str, int], list[str]] = {}
    for position, team in enumerate(platform.teams):
        oidc = team.vcluster.access.oidc
        host = urlparse(oidc.issuer_url or "").hostname or ""
        if (team.vcluster.network_policy and oidc.enabled and not oidc.issuer_addresses and not is_ip_address(host)
                and oidc.port not in api_server_ports(team)):
            teams_by_issuer.setdefault((host, oidc.port), []).append(f"teams[{position}] ({team.name})")
    return [f"{', '.join(teams)}: the control plane reaches the OIDC issuer {host} on port {port} at public "
            f"addresses only. If {host} resolves to a private address (an issuer in the VPC or on the LAN), list its "
            "addresses in vcluster.access.oidc.issuerAddresses, or sign-ins fail while the admin certificate still "
            "works." for (host, port), teams in teams_by_issuer.items()]
