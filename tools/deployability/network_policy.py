"""NetworkPolicy egress semantics (networking.k8s.io/v1), for one question: can a pod open a TCP
connection on a given port to every address of some networks outside the pod network (where the API server is)?

A pod is isolated for egress when a policy in its namespace selects it and lists ``Egress`` in
``policyTypes`` (or, without ``policyTypes``, has an ``egress`` section). An isolated pod may
connect only where some egress rule of some selecting policy allows both the peer and the port.
The API server is not a pod, so only ``ipBlock`` peers (or a rule without ``to``) can match it.
Where it is: the networks the site states for it (``cluster.kubeconfig.apiServerAddresses``), on EKS the
``kubernetes`` Service's address (the VPC CNI's policy agent judges egress before kube-proxy translates a Service's
address, config/hosts.py), else a node or control-plane address somewhere in the private ranges; each of those
networks must be allowed whole, by one rule or another. Ports are the API server's own (Calico matches after Service
translation; EKS serves its API server and the ``kubernetes`` Service on the same port).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from policy.label_selectors import InvalidSelector, requirements, selector_matches

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
# Where an API server whose address the site does not state may be.
PRIVATE_RANGES: tuple[Network, ...] = tuple(
    ipaddress.ip_network(cidr) for cidr in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def pod_selector(policy: Mapping[str, Any]) -> Any:
    """The policy's podSelector; absent, the empty one (the field is not a pointer), which selects every pod."""
    return (policy.get("spec") or {}).get("podSelector") or {}


def pod_selector_problem(policy: Mapping[str, Any]) -> Optional[str]:
    """Why the API server refuses the policy's podSelector; None when it accepts it."""
    try:
        requirements(pod_selector(policy))
    except InvalidSelector as error:
        return f"spec.podSelector: {error}"
    return None


def isolates_egress(policy: Mapping[str, Any]) -> bool:
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes")
    return "Egress" in types if types else "egress" in spec


def _peer_covers(peer: Mapping[str, Any], destination: Network) -> bool:
    """The peer allows every address of ``destination``: an ipBlock holding it with no exception cutting into it."""
    block = peer.get("ipBlock")
    if not block:
        return False  # pod and namespace selectors select pods, never the API server
    network = ipaddress.ip_network(block["cidr"], strict=False)
    if network.version != destination.version or not destination.subnet_of(network):
        return False
    excepted = (ipaddress.ip_network(cidr, strict=False) for cidr in block.get("except") or [])
    return not any(hole.version == destination.version and destination.overlaps(hole) for hole in excepted)


def port_matches(entry: Mapping[str, Any], port: Union[int, str], protocol: str = "TCP") -> bool:
    """A NetworkPolicy port entry admits ``port`` of ``protocol``: a number (within ``endPort``), or a named
    container port, which matches only the same name (a number's name is unknown without the destination pod)."""
    if entry.get("protocol", "TCP") != protocol:
        return False
    wanted = entry.get("port")
    if wanted is None:
        return True
    if isinstance(wanted, str) and not wanted.isdigit():
        return wanted == port
    if isinstance(port, str):
        return False
    low, high = int(wanted), int(entry.get("endPort") or wanted)
    return low <= port <= high


def rule_allows(rule: Mapping[str, Any], port: int, destination: Network) -> bool:
    peers = rule.get("to")
    ports = rule.get("ports")
    return (not peers or any(_peer_covers(peer, destination) for peer in peers)) and \
        (not ports or any(port_matches(entry, port) for entry in ports))


def egress_verdict(namespace: str, labels: Mapping[str, str], policies: Iterable[Mapping[str, Any]],
                   port: int, destinations: Sequence[Network]) -> tuple[list[Network], list[str]]:
    """Which of ``destinations`` (networks outside the pod network) a pod (namespace, labels) may not reach on TCP
    ``port``, each by some egress rule, and the names of the policies that isolate it for egress. A policy whose
    podSelector the API server refuses never exists on the cluster, so it isolates nothing."""
    isolating = [policy for policy in policies
                 if (policy.get("metadata") or {}).get("namespace") == namespace and isolates_egress(policy)
                 and pod_selector_problem(policy) is None
                 and selector_matches(pod_selector(policy), labels)]
    if not isolating:
        return [], []
    rules = [rule for policy in isolating for rule in (policy["spec"].get("egress") or [])]
    unreachable = [destination for destination in destinations
                   if not any(rule_allows(rule, port, destination) for rule in rules)]
    return unreachable, [policy["metadata"]["name"] for policy in isolating]
