"""The NetworkPolicies of a team's host namespace, rendered by the program in place of vCluster's chart.

They are vCluster's own (``chart/templates/networkpolicy.yaml``, the same at every accepted release and held to it by
tests/test_control_plane_egress.py) but for two rules, and a site's backup store they add. vCluster opens its control
plane's egress to every address on 443, 8443 and 6443, so a tenant, cluster-admin inside, can make its virtual API
server open connections there: ``pods/NAME/proxy`` to a pod status it writes, ``services/NAME/proxy`` to Endpoints it
writes, an APIService or a webhook to an ``ExternalName`` Service or a URL. Here the control plane reaches only the
host API server's port (on EKS outside the Service ranges but for the ``kubernetes`` Service: ``api_server_rules``),
and the OIDC issuer's and the site's backup store's at their addresses (the public internet unless stated: every
other team's control plane serves on 8443, Keycloak's port), besides what vCluster's other rules
give it: the host's DNS, its own namespace's control plane and workloads (where a tenant's webhooks and aggregated APIs
run). vCluster also opens the host's DNS pods to its control plane, DNS and snapshot pods on every port, CoreDNS'
metrics (9153), health (8080) and readiness (8181) among them; here they reach DNS only, on UDP and TCP (truncated
answers are retried over TCP), and where the site says its DNS answers (``cluster.kubeconfig.dns``: other DNS pods, a
node-local cache's addresses). The chart's values can only add rules to its policy and have one switch for all of
them, so the chart's are off and these take their place.

The site's ``vcluster.extraValues.policies.networkPolicy`` settings are applied here as the chart would apply them.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlparse

from components.tenant_access import issuer_port
from config.control_plane_egress import CONTROL_PLANE_PORT, api_server_ports
from config.hosts import KUBERNETES_SERVICE_PORT, TENANT_EGRESS_EXCEPTIONS
from config.merge import deep_merge
from config.model import Team
from config.network_types import is_ip_address
from config.vocabulary import MANAGED_BY, TEAM_LABEL

VIRTUAL_DNS_PORT = 1053
# The port DNS clients send to: the tenant DNS forwards to the host DNS Service without a port, the control plane
# uses the kubelet's nameserver. A node-local cache answers there untranslated; the host's DNS pods answer on their
# own port (cluster.kubeconfig.dns.port, 53 on EKS' CoreDNS add-on, MicroK8s' dns addon, kubeadm and k3s).
DNS_PORT = 53
# The label of vCluster's snapshot and restore pods, which its snapshot policy selects (the teams' snapshot jobs too).
SNAPSHOT_APP = {"app": "vcluster-snapshot"}
SYNCED_BY = "vcluster.loft.sh/managed-by"
NAMESPACE_NAME = "kubernetes.io/metadata.name"


def network_policy_values(team: Team) -> dict:
    """``policies.networkPolicy`` as vCluster's chart would take it for the team: the program's settings, the OIDC
    issuer's port at its addresses, then the site's extraValues."""
    settings = team.vcluster
    block: dict = {"enabled": settings.network_policy, "workload": {"publicEgress": {
        "enabled": True, "cidr": "0.0.0.0/0", "except": list(TENANT_EGRESS_EXCEPTIONS)}}}
    if settings.access.oidc.enabled:
        # The virtual API server fetches the issuer's discovery document and keys from the control-plane pod.
        block["controlPlane"] = {"egress": [{"ports": [_tcp(issuer_port(settings.access))],
                                             "to": [{"ipBlock": peer} for peer in issuer_blocks(team)]}]}
    extra = (settings.extra_values.get("policies") or {}).get("networkPolicy") or {}
    return deep_merge(block, extra)


def issuer_blocks(team: Team) -> list[dict]:
    """Where the control plane may reach the OIDC issuer: the addresses the site states, the URL's own IP address, or
    else the public internet, as the team's workloads reach it. Every other team's control plane serves on 8443, a
    common port for an issuer too (Keycloak's), and on a private address."""
    oidc = team.vcluster.access.oidc
    if oidc.issuer_addresses:
        return [{"cidr": block} for block in oidc.issuer_addresses]
    host = urlparse(oidc.issuer_url or "").hostname or ""
    return [_single(str(ipaddress.ip_address(host))) if is_ip_address(host) else _public_internet()]


def tenant_network_policies(team: Team) -> dict[str, dict]:
    """The team's NetworkPolicy manifests by role (none with the network policy off)."""
    values = network_policy_values(team)
    if not values.get("enabled"):
        return {}
    release = team.vcluster_name
    control_plane = {"podSelector": {"matchLabels": {"release": release}}}
    workloads = {"podSelector": {"matchLabels": {SYNCED_BY: release}}}
    host_dns = host_dns_rules(team)
    # vCluster Platform's agent, as vCluster's own policies admit it (a tenant's pod cannot wear app=loft).
    platform = {"podSelector": {"matchLabels": {"app": "loft"}}, "namespaceSelector": {}}
    api_server = api_server_rules(team)
    dns_and_api = [{"port": VIRTUAL_DNS_PORT, "protocol": "UDP"}, _tcp(VIRTUAL_DNS_PORT), _tcp(CONTROL_PLANE_PORT)]
    workload, plane = values.get("workload") or {}, values.get("controlPlane") or {}
    store = backup_store_rules(team)
    public = workload.get("publicEgress") or {}

    return {
        "workloads": _policy(team, values, "workloads", {SYNCED_BY: release}, egress=[
            {"ports": dns_and_api, "to": [control_plane]},
            {"to": [workloads]},
            *([{"to": [{"ipBlock": {"cidr": public["cidr"], "except": public.get("except")}}]}]
              if public.get("enabled") else []),
            *(workload.get("egress") or []),
        ], ingress=[{"from": [control_plane]}, {"from": [workloads]}, *(workload.get("ingress") or [])]),
        "control-plane": _policy(team, values, "control-plane", {"release": release}, egress=[
            *host_dns, *api_server, {"to": [control_plane]}, {"to": [workloads]}, {"to": [platform]},
            *store, *(plane.get("egress") or []),
        ], ingress=[
            {"ports": [_tcp(CONTROL_PLANE_PORT)]},
            {"from": [control_plane]},
            {"ports": dns_and_api, "from": [workloads]},
            {"from": [{"podSelector": {"matchLabels": SNAPSHOT_APP}}]},
            {"from": [platform]},
            *(plane.get("ingress") or []),
        ]),
        "dns": _policy(team, values, "dns", {"k8s-app": "vcluster-kube-dns", SYNCED_BY: release}, egress=[
            *host_dns, {"ports": [_tcp(CONTROL_PLANE_PORT)], "to": [control_plane]},
        ], ingress=[{"ports": [_tcp(VIRTUAL_DNS_PORT), {"port": VIRTUAL_DNS_PORT, "protocol": "UDP"}],
                     "from": [workloads]}]),
        "snapshot": _policy(team, values, "snapshot", SNAPSHOT_APP,
                            egress=[{"to": [control_plane]}, *host_dns, *api_server, *store], ingress=None),
    }


def api_server_rules(team: Team) -> list[dict]:
    """The egress to the host API server's port: at the addresses the site states, else at every address. Where the
    network plugin judges egress before a Service's address is translated (EKS' VPC CNI), every address would open
    every Service listening on that port, another team's vCluster Service (443, its control plane's 8443) among
    them: there the Service ranges are left out, of stated addresses too, and the control plane, which reaches the
    API server through the ``kubernetes`` Service, gets that Service's address on its port, which kube-apiserver
    sets to 443 whatever its own."""
    ports = [_tcp(port) for port in api_server_ports(team)]
    ranges = [ipaddress.ip_network(block) for block in team.vcluster.untranslated_service_ranges]
    kubernetes = [{"ipBlock": {"cidr": address}} for address in team.vcluster.kubernetes_service_addresses]
    if team.vcluster.api_server_addresses:
        blocks = [ipaddress.ip_network(block, strict=False) for block in team.vcluster.api_server_addresses]
    elif ranges:
        blocks = [ipaddress.ip_network(every) for every in ("0.0.0.0/0", "::/0")
                  if any(found.version == ipaddress.ip_network(every).version for found in ranges) or every[0] == "0"]
    else:
        return [{"ports": ports}]
    to = [{"ipBlock": {"cidr": str(block), **({"except": inside} if inside else {})}} for block in blocks
          if (inside := [str(found) for found in ranges if found.version == block.version and found.subnet_of(block)])
          or not any(block.version == found.version and block.subnet_of(found) for found in ranges)]
    service_ports = [_tcp(KUBERNETES_SERVICE_PORT)]
    if not kubernetes or ports == service_ports:
        return [{"ports": ports, "to": [*to, *kubernetes]}]
    # A rule with no peer left would admit every address (config/host_networking.py refuses what leaves none).
    return [*([{"ports": ports, "to": to}] if to else []), {"ports": service_ports, "to": kubernetes}]


def backup_store_rules(team: Team) -> list[dict]:
    """The egress to the site's backup store (config/snapshots.py) for the pods that talk to it: the control plane,
    which uploads each snapshot, and vCluster's snapshot pods (the restore pod; the snapshot job needs only the API
    server). A store named by its IP address is opened at that address only; AWS S3 or a store named by a host
    name, on the public internet as the team's workloads reach it. Nothing where the API server's rule already
    opens the port to every address (EKS, on 443, outside the Service ranges), which stated API server addresses
    narrow."""
    backup = team.vcluster.backup
    if backup is None or (backup.port in api_server_ports(team) and not team.vcluster.api_server_addresses):
        return []
    address = backup.endpoint_address
    return [{"ports": [_tcp(backup.port)], "to": [{"ipBlock": _single(address) if address else _public_internet()}]}]


def host_dns_rules(team: Team) -> list[dict]:
    """The egress rules to the host's DNS: its pods on their DNS port and any node-local cache's addresses on 53."""
    dns = team.vcluster.host_dns
    rules = [{"ports": _dns(dns.port), "to": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: dns.namespace}},
                                                "podSelector": {"matchLabels": dict(dns.pod_labels)}}]}]
    if dns.node_local_addresses:
        # A hostNetwork process answers here: no pod selector matches it, only its address does.
        rules.append({"ports": _dns(DNS_PORT), "to": [{"ipBlock": _single(address)}
                                                      for address in dns.node_local_addresses]})
    return rules


def policy_name(team: Team, role: str) -> str:
    return f"{team.vcluster_name}-{role}"


def _public_internet() -> dict:
    """As the team's workloads reach it: no private, loopback or link-local address."""
    return {"cidr": "0.0.0.0/0", "except": list(TENANT_EGRESS_EXCEPTIONS)}


def _single(address: str) -> dict:
    return {"cidr": f"{address}/{ipaddress.ip_address(address).max_prefixlen}"}


def _dns(port: int) -> list[dict]:
    return [{"port": port, "protocol": "UDP"}, _tcp(port)]


def _tcp(port: int) -> dict:
    return {"port": port, "protocol": "TCP"}


def _policy(team: Team, values: dict, role: str, selected: dict, *, egress: list, ingress) -> dict:
    spec: dict = {"podSelector": {"matchLabels": selected}, "policyTypes": ["Egress", "Ingress"], "egress": egress}
    if ingress is not None:
        spec["ingress"] = ingress
    metadata: dict = {"name": policy_name(team, role), "namespace": team.namespace,
                      "labels": {**(values.get("labels") or {}), **MANAGED_BY, TEAM_LABEL: team.name}}
    if values.get("annotations"):
        metadata["annotations"] = dict(values["annotations"])
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata, "spec": spec}
