"""One host policy for every team's pods: the size rules ``pod-size`` and ``pod-entry-size``
(components/admission_pod_size.py), compiled once for the whole site.

The API server compiles every ValidatingAdmissionPolicy when it starts, and refuses every write it is asked to admit
until it has (k8s.io/apiserver policy/generic plugin.go ``Dispatch``); it holds each compiled policy in memory.
The size sums are most of a team pod policy's compile time and text, and the same for every team: held in a policy
of each team, they made each API server's start-up and memory grow with the teams
(docs/security-object-sizes.md, "Compiled once for the site"). A team's own figure, the bytes of free text its pods
may carry, is an annotation of its host namespace, which the policy reads as ``namespaceObject``: no tenant can
write its host namespace (tests/test_synced_kinds_contract.py), and a namespace without it admits no pod.

Matched as each team's own pod policy is, for any team: pods its vCluster's syncer writes, and pods carrying
vCluster's managed-by label (written after by KAI), in a team's host namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.admission import POD_RESOURCE_RULES, deny_binding, team_namespace_selector
from components.admission_metadata import has_key
from components.admission_pod_size import pod_entry_size, pod_size, pod_size_variables
from components.kubernetes_resources import VALIDATING_ADMISSION_POLICY, KubernetesObject
from config.model import Team
from config.synced_data import pod_text_bytes
from config.vocabulary import (
    MANAGED_BY, NAMESPACE_NAME_LABEL, POD_SIZE_ADMISSION_COMPONENT, POD_TEXT_BYTES_ANNOTATION, TEAM_LABEL,
    VCLUSTER_MANAGED_BY_LABEL,
)

POD_SIZE_POLICY = "gpu-tenancy-pod-size"


@dataclass
class PodSizeAdmissionArgs:
    teams: Sequence[Team]
    provider: k8s.Provider


def namespace_annotations(team: Team) -> dict[str, str]:
    """What the policy reads from the team's host namespace."""
    return {POD_TEXT_BYTES_ANNOTATION: str(pod_text_bytes(team.vcluster))}


def teams_namespaces(teams: Sequence[Team]) -> dict:
    """The teams' host namespaces, as the policy's matchConstraints select them."""
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In",
                                  "values": sorted(team.namespace for team in teams)}]}


def synced_by_the_namespaces_vcluster() -> dict:
    """A pod the vCluster of its namespace writes or labels. Match conditions cannot read the namespace, so any
    vCluster account and any managed-by value count: a superset of each team's own policy's match, judged as
    strictly."""
    syncer = "request.userInfo.username.startsWith('system:serviceaccount:' + request.namespace + ':vc-')"
    labelled = has_key("object", "labels", VCLUSTER_MANAGED_BY_LABEL)
    old_labelled = f"(request.operation == 'UPDATE' && {has_key('oldObject', 'labels', VCLUSTER_MANAGED_BY_LABEL)})"
    return {"name": "synced-by-a-vcluster", "expression": f"{syncer} || {labelled} || {old_labelled}"}


def text_byte_cap() -> dict:
    """The namespace's figure; -1, which no pod fits, when it states none (a namespace the program did not make)."""
    present = has_key("namespaceObject", "annotations", POD_TEXT_BYTES_ANNOTATION)
    return {"name": "podTextByteCap",
            "expression": f"{present} ? int(namespaceObject.metadata.annotations['{POD_TEXT_BYTES_ANNOTATION}']) : -1"}


def pod_size_policy_spec(teams: Sequence[Team]) -> dict:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": POD_RESOURCE_RULES, "namespaceSelector": teams_namespaces(teams)},
        "matchConditions": [synced_by_the_namespaces_vcluster()],
        "variables": [text_byte_cap(), *pod_size_variables()],
        "validations": [pod_size(), pod_entry_size()],
    }


def pod_size_binding_name(team: Team) -> str:
    """The team's binding of the site's policy: the API server's admission metrics name the binding, so a team's
    refusals are its own (components/observability_rules.py POLICY_INFO)."""
    return f"{POD_SIZE_POLICY}-{team.name}"


class PodSizeAdmission(pulumi.ComponentResource):
    policy: KubernetesObject
    bindings: dict[str, KubernetesObject]  # by team name

    def __init__(self, name: str, args: PodSizeAdmissionArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(POD_SIZE_ADMISSION_COMPONENT, name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.policy = KubernetesObject(f"{name}-policy", VALIDATING_ADMISSION_POLICY,
                                       metadata={"name": POD_SIZE_POLICY, "labels": dict(MANAGED_BY)},
                                       spec=pod_size_policy_spec(args.teams), opts=child)
        # One binding a team, each selecting its namespace: the API server compiles a policy once, whatever binds it
        # (k8s.io/apiserver policy/generic policy_source.go compilePolicyLocked).
        self.bindings = {team.name: deny_binding(self, f"{name}-{team.name}", self.policy, POD_SIZE_POLICY,
                                                 {"name": pod_size_binding_name(team),
                                                  "labels": {**MANAGED_BY, TEAM_LABEL: team.name}},
                                                 team_namespace_selector(team), child)
                         for team in args.teams}
        self.register_outputs({"policy": POD_SIZE_POLICY,
                               "bindings": {team.name: pod_size_binding_name(team) for team in args.teams}})

    def judging(self, team: Team) -> list[pulumi.Resource]:
        """What judges the team's pod sizes: the policy and the team's binding (not every team's, which would make
        each team wait on all of them)."""
        return [self.policy, self.bindings[team.name]]
