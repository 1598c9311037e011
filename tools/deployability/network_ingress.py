"""NetworkPolicy ingress semantics (networking.k8s.io/v1), for one question: may a pod (namespace, labels)
open a TCP connection to a pod (namespace, labels) on a port?

A destination pod is isolated for ingress when a policy in its namespace selects it and lists ``Ingress`` in
``policyTypes`` (or, without ``policyTypes``, has an ``ingress`` section; every policy isolates for ingress
then). An isolated pod accepts a connection only when some ingress rule of some selecting policy admits both
the source and the port. A peer with only ``podSelector`` means pods of the policy's own namespace; with
``namespaceSelector`` (and optionally ``podSelector``) pods of the namespaces whose labels it selects. An
``ipBlock`` peer is counted as admitting any pod: CNIs such as Calico match pod addresses against it too,
so a policy that relies on it to keep pods out is not one this model trusts. A policy whose selectors the
API server refuses never exists, so it isolates and admits nothing. Named ports are not resolved here: a
rule with one admits only a request for that same name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Union

from policy.label_selectors import InvalidSelector, requirements, selector_matches
from tools.deployability.network_policy import port_matches

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str]
    # Labels of the pod's namespace besides kubernetes.io/metadata.name (which the API server sets to its name).
    namespace_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def all_namespace_labels(self) -> dict[str, str]:
        return {**self.namespace_labels, NAMESPACE_NAME_LABEL: self.namespace}


def isolates_ingress(policy: Mapping[str, Any]) -> bool:
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes")
    return "Ingress" in types if types else True


def _valid(policy: Mapping[str, Any]) -> bool:
    spec = policy.get("spec") or {}
    selectors = [spec.get("podSelector") or {}]
    for rule in spec.get("ingress") or []:
        for peer in rule.get("from") or []:
            selectors += [peer[key] for key in ("podSelector", "namespaceSelector") if peer.get(key) is not None]
    try:
        for selector in selectors:
            requirements(selector)
    except InvalidSelector:
        return False
    return True


def peer_selects(peer: Mapping[str, Any], policy_namespace: str, pod: Pod) -> bool:
    """A peer's selectors select ``pod``: pods of the policy's namespace unless a namespaceSelector says otherwise."""
    namespaces = peer.get("namespaceSelector")
    if namespaces is None:
        in_namespace = pod.namespace == policy_namespace
    else:
        in_namespace = selector_matches(namespaces, pod.all_namespace_labels)
    pods = peer.get("podSelector")
    return in_namespace and (pods is None or selector_matches(pods, pod.labels))


def _peer_admits(peer: Mapping[str, Any], policy_namespace: str, source: Pod) -> bool:
    return bool(peer.get("ipBlock")) or peer_selects(peer, policy_namespace, source)


def rule_admits(rule: Mapping[str, Any], policy_namespace: str, source: Pod, port: Union[int, str]) -> bool:
    peers, ports = rule.get("from"), rule.get("ports")
    return (not peers or any(_peer_admits(peer, policy_namespace, source) for peer in peers)) and \
        (not ports or any(port_matches(entry, port) for entry in ports))


def ingress_verdict(source: Pod, destination: Pod, policies: Iterable[Mapping[str, Any]],
                    port: Union[int, str]) -> tuple[bool, list[str]]:
    """Whether ``source`` may connect to ``destination`` on TCP ``port``, and the names of the policies that
    isolate the destination for ingress."""
    isolating = [policy for policy in policies
                 if (policy.get("metadata") or {}).get("namespace") == destination.namespace
                 and isolates_ingress(policy) and _valid(policy)
                 and selector_matches((policy.get("spec") or {}).get("podSelector") or {}, destination.labels)]
    if not isolating:
        return True, []
    admitted = any(rule_admits(rule, destination.namespace, source, port)
                   for policy in isolating for rule in (policy["spec"].get("ingress") or []))
    return admitted, [policy["metadata"]["name"] for policy in isolating]
