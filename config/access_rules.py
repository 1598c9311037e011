"""Rules that tie a team's ``vcluster.access`` to the host and to the other teams; the endpoint host each
team gets. No Pulumi here."""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence
from urllib.parse import urlparse

from config.access import RESERVED_NAME_PREFIX, Access
from config.errors import MISSING
from config.model import Cluster, Team
from config.reader import Reader
from config.vcluster_images import dig


def _key(index: int, name: str) -> str:
    return f"teams[{index}].vcluster.access.{name}"


def _default_host(access: Access, team: Team, cluster: Cluster) -> Optional[str]:
    if access.exposure in ("loadBalancer", "gateway") and access.domain:
        return f"{team.vcluster_name}.{access.domain}"
    if access.exposure == "nodePort" and cluster.microk8s is not None:
        if cluster.microk8s.host:
            return cluster.microk8s.host
        if cluster.microk8s.api_server_url:
            return urlparse(cluster.microk8s.api_server_url).hostname
    return None


def resolve_access(reader: Reader, cluster: Cluster, teams: list[Team]) -> list[Team]:
    """Each team with its endpoint host filled in; every broken rule is reported on ``reader``."""
    resolved = []
    for index, team in enumerate(teams):
        access = team.vcluster.access
        if access.exposed and not access.host:
            access = dataclasses.replace(access, host=_default_host(access, team, cluster))
        _check_endpoint(reader, index, access, cluster)
        _check_oidc(reader, index, access)
        resolved.append(dataclasses.replace(team, vcluster=dataclasses.replace(team.vcluster, access=access)))
    _check_unique(reader, resolved)
    return resolved


def _check_endpoint(reader: Reader, index: int, access: Access, cluster: Cluster) -> None:
    # Each error is filed under the team's key, where the merged settings are checked; the fix names that key
    # and the stack-wide one, since either may hold the value.
    def keys(name: str) -> str:
        return f"{_key(index, name)} (or vcluster.access.{name}, for every team)"

    if not access.exposed:
        return
    if not access.host:
        if access.exposure == "nodePort":
            fix = f"set {keys('host')} to the address clients reach the nodes at"
            if cluster.microk8s is not None:
                fix += ", or cluster.microk8s.host or apiServerUrl, whose host it then defaults to"
        else:
            fix = (f"set {keys('domain')}: the host becomes <vclusterName>.<domain>; or set "
                   f"{_key(index, 'host')}")
        reader.fail(_key(index, "host"), MISSING, f"{access.exposure} exposure needs an endpoint name", fix)
    if access.exposure == "nodePort" and access.node_port is None:
        reader.fail(_key(index, "nodePort"), MISSING, "nodePort exposure needs the team's node port",
                    f"set {_key(index, 'nodePort')} to a free port between 30000 and 32767, one per team")
    if access.exposure == "gateway" and not access.gateway.name:
        reader.fail(_key(index, "gateway.name"), MISSING, "gateway exposure needs the Gateway to attach to",
                    f"set {keys('gateway.name')} (and gateway.namespace) to a Gateway with a TLS Passthrough "
                    "listener")


def _check_oidc(reader: Reader, index: int, access: Access) -> None:
    oidc = access.oidc
    if not oidc.enabled:
        if oidc.admin_groups or oidc.view_groups:
            reader.fail(_key(index, "oidc.adminGroups"), list(oidc.admin_groups + oidc.view_groups),
                        "groups are bound but no OIDC issuer is configured", f"set {_key(index, 'oidc.issuerUrl')}")
        return
    url = urlparse(oidc.issuer_url)
    if url.scheme != "https" or not url.hostname or url.query or url.fragment:
        reader.fail(_key(index, "oidc.issuerUrl"), oidc.issuer_url, "is not an https URL without query or fragment",
                    "the Kubernetes API server accepts only https issuers, e.g. https://login.example.com/realms/ml")
    if not oidc.client_id:
        reader.fail(_key(index, "oidc.clientId"), MISSING, "OIDC needs the client ID tokens are issued for",
                    f"set {_key(index, 'oidc.clientId')} (the audience the API server checks)")
    for name, prefix in (("usernamePrefix", oidc.username_prefix), ("groupsPrefix", oidc.groups_prefix)):
        if prefix and (prefix.startswith(RESERVED_NAME_PREFIX) or RESERVED_NAME_PREFIX.startswith(prefix)):
            reader.fail(_key(index, f"oidc.{name}"), prefix,
                        f"can turn an IdP name into one of Kubernetes' own ({RESERVED_NAME_PREFIX}masters, which "
                        "bypasses RBAC, from an IdP group named 'masters' or ':masters'), and the virtual API server "
                        f"refuses every login with a user or group name starting {RESERVED_NAME_PREFIX}",
                        f"use a prefix that cannot start {RESERVED_NAME_PREFIX}, such as oidc: or sso:")
    if oidc.certificate_authority and "BEGIN CERTIFICATE" not in oidc.certificate_authority:
        reader.fail(_key(index, "oidc.certificateAuthority"), "...", "is not a PEM certificate bundle",
                    "paste the issuer's CA certificate(s), -----BEGIN CERTIFICATE----- included")
    if not access.exposed:
        reader.fail(_key(index, "exposure"), access.exposure,
                    "OIDC is configured but the vCluster has no endpoint: team members could not reach it",
                    f"set {_key(index, 'exposure')} to loadBalancer, nodePort or gateway")


def _check_unique(reader: Reader, teams: list[Team]) -> None:
    seen_ports: dict[int, int] = {}
    seen_hosts: dict[str, int] = {}
    for index, team in enumerate(teams):
        access = team.vcluster.access
        for port, key in _pinned_node_ports(index, team).items():
            first = seen_ports.setdefault(port, index)
            if first != index:
                reader.fail(key, port, f"is already used by teams[{first}]",
                            "give every team its own node port (a port pinned in the stack-wide vcluster.extraValues "
                            "is every team's: pin it in teams[].vcluster.extraValues, one per team)")
        if access.exposure in ("loadBalancer", "gateway") and access.host:
            first = seen_hosts.setdefault(access.host, index)
            if first != index:
                reader.fail(_key(index, "host"), access.host, f"is already the endpoint of teams[{first}]",
                            "give every team its own host name, or use vcluster.access.domain")


def _pinned_node_ports(index: int, team: Team) -> dict[int, str]:
    """Each node port the team's control-plane Service takes, with the key that sets it: its ``access.nodePort``
    and the ports its ``extraValues`` pin on the chart's Service (``httpsNodePort``, ``spec.ports``), which replace
    the program's."""
    access = team.vcluster.access
    service = dig(team.vcluster.extra_values, "controlPlane", "service")
    ports = dig(service, "spec").get("ports")
    extra = f"teams[{index}].vcluster.extraValues.controlPlane.service"
    pinned = [(access.node_port if access.exposure == "nodePort" else None, _key(index, "nodePort")),
              (service.get("httpsNodePort"), f"{extra}.httpsNodePort"),
              *((port.get("nodePort"), f"{extra}.spec.ports[{position}].nodePort")
                for position, port in enumerate(ports if isinstance(ports, list) else []) if isinstance(port, dict))]
    found: dict[int, str] = {}
    for port, key in pinned:
        if isinstance(port, int) and not isinstance(port, bool) and port > 0:
            found.setdefault(port, key)
    return found


def endpoint_node_ports(teams: Sequence[Team]) -> tuple[int, ...]:
    """The node ports the site holds for its teams' vCluster endpoints (each team's, ``_pinned_node_ports``). The
    host's allocator hands out the same range, and the Service only takes its port when the team's release is
    installed or its Service re-created."""
    return tuple(sorted({port for index, team in enumerate(teams) for port in _pinned_node_ports(index, team)}))


def access_warnings(cluster: Cluster, teams: tuple[Team, ...]) -> list[str]:
    """Combinations that can work but need something the config cannot show."""
    warnings = []
    for index, team in enumerate(teams):
        access = team.vcluster.access
        if access.exposure == "loadBalancer" and cluster.microk8s is not None:
            warnings.append(
                f"teams[{index}] ({team.name}) uses loadBalancer exposure on MicroK8s: its Service gets an address "
                "only with a load-balancer provider (`microk8s enable metallb:<range>`). Use nodePort otherwise.")
        if access.exposure == "nodePort" and cluster.eks is not None:
            warnings.append(
                f"teams[{index}] ({team.name}) uses nodePort exposure on EKS: the nodes run in private subnets, so "
                "only clients inside the VPC reach the port. Use loadBalancer for clients outside it.")
        if access.oidc.enabled and not (access.oidc.admin_groups or access.oidc.view_groups):
            warnings.append(
                f"teams[{index}] ({team.name}) trusts OIDC but binds no group: members can log in and do nothing. "
                "Set teams[].vcluster.access.oidc.adminGroups or viewGroups.")
    return warnings
