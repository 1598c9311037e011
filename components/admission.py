"""Host-side admission for one tenant: what its vCluster syncs may only use the GPU share KAI gives it.

A tenant is cluster-admin inside its vCluster, and vCluster copies a pod's labels, annotations,
env, ``schedulerName``, ``runtimeClassName`` and ``nodeName`` to the host unchanged; no
open-source vCluster setting can force them. This ValidatingAdmissionPolicy, bound to the tenant's
host namespace, checks every pod the tenant's syncer writes (matched by the syncer's service
account and by vCluster's managed-by label) after KAI's own pod webhook has mutated it. Each
rule below is named in its rejection message; docs/security-admission.md explains why each exists.

The vCluster control-plane pod is created by the StatefulSet controller and carries no managed-by
label, so it is never matched. Which labels and annotations a pod may carry, and which keys KAI's
own service accounts add later, is components/admission_metadata.py (over admission_keys.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.admission_deletion import deletion_policy_name, deletion_policy_spec
from components.admission_devices import (
    CONTAINER_LISTS, MIG_SLICE, SCHEDULED_LISTS, WHOLE_GPU, device_env, device_features, device_paths, every_container,
    gpu_env_from, mig_names, pod_holds, resource_names,
)
from components.admission_images import allowed_image
from components.admission_metadata import (
    has_key, key_value, metadata_validations, metadata_variables, pod_metadata_size, refusal,
)
from components.admission_pod_fields import pod_field_validations
from components.admission_pod_size import (
    pod_containers, pod_object_references, pod_ports, pod_tolerations, pod_volumes,
)
from components.admission_volumes import volume_validations
from components.kai import SCHEDULER_NAME
from components.kubernetes_resources import (
    VALIDATING_ADMISSION_POLICY, VALIDATING_ADMISSION_POLICY_BINDING, KubernetesObject,
)
from config.model import Team
from config.synced_data import pod_list_bytes
from config.vcluster_images import rewrite_hosts_image
from config.vocabulary import (
    ADMISSION_COMPONENT, MANAGED_BY, NAMESPACE_NAME_LABEL, QUEUE_LABEL, TEAM_LABEL, VCLUSTER_MANAGED_BY_LABEL,
    syncer_account,
)

FRACTION_ANNOTATIONS = ("gpu-fraction", "gpu-memory")
FRACTION_CONTAINER_ANNOTATION = "gpu-fraction-container-name"
PROTECTED_RUNTIME_PREFIX = "nvidia"
# The kubelet sends probes and lifecycle hooks from the node's own network: a handler naming a host reaches what
# the node reaches, past the team's network policy. Pod Security's baseline level refuses that only from
# Kubernetes 1.34; the host floor is 1.30.
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
LIFECYCLE_HOOKS = ("postStart", "preStop")
HOST_ACTIONS = ("httpGet", "tcpSocket")
# With vcluster.alwaysPullImages, the kubelet starts no container from a node's cache without asking the registry
# with the pod's own credentials, so no team runs another team's private image cached on a shared node.
PULL_ALWAYS = "Always"
# vCluster's syncer puts this init container, without a pull policy, first in a pod with a subdomain (a
# StatefulSet's): it rewrites /etc/hosts from a public image the site's values name.
REWRITE_HOSTS_CONTAINER = "vcluster-rewrite-hosts"


# What a tenant's pod policies match: its pods as created and updated, and the ephemeral containers it adds.
POD_RESOURCE_RULES = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                       "resources": ["pods", "pods/ephemeralcontainers"]}]


@dataclass
class TenantAdmissionArgs:
    team: Team
    provider: k8s.Provider
    # In place before the pod policy changes: the namespace with what the shared pod-size policy reads, and that
    # policy (components/pod_size_admission.py), which judges the sizes this policy no longer does.
    prerequisites: Sequence[pulumi.Resource] = ()


def syncer_username(team: Team) -> str:
    """The identity the team's vCluster syncer writes host pods as."""
    return syncer_account(team.namespace, team.vcluster_name)


# --- the policy -----------------------------------------------------------------------------


def _no_host_in(handler: str) -> str:
    """``handler`` (a probe or lifecycle hook) is absent or sends nothing to a host of its own."""
    actions = " && ".join(f"(!has({handler}.{action}) || !has({handler}.{action}.host) || "
                          f"{handler}.{action}.host == '')" for action in HOST_ACTIONS)
    return f"(!has({handler}) || ({actions}))"


def _no_probe_host() -> str:
    hooks = " && ".join(_no_host_in(f"c.lifecycle.{hook}") for hook in LIFECYCLE_HOOKS)
    handlers = " && ".join([*(_no_host_in(f"c.{probe}") for probe in PROBES), f"(!has(c.lifecycle) || ({hooks}))"])
    return every_container(CONTAINER_LISTS, handlers)


def _pulls_always(container: str) -> str:
    return f"(has({container}.imagePullPolicy) && {container}.imagePullPolicy == '{PULL_ALWAYS}')"


def _unpulled_ephemeral(obj: str) -> str:
    field = f"{obj}.spec.ephemeralContainers"
    return f"(has({field}) ? size({field}.filter(c, !{_pulls_always('c')})) : 0)"


def _unpulled_images(obj: str, field: str) -> str:
    """The images, in order, of the containers of ``field`` that do not pull on start."""
    return f"(has({obj}.spec.{field}) ? {obj}.spec.{field}.filter(c, !{_pulls_always('c')}).map(c, c.image) : [])"


def _image_pull_policy(team: Team) -> str:
    """On CREATE every container and image volume pulls on start, vCluster's hosts-rewriting init container aside.
    Pull policies and volumes cannot be updated, nor containers added, removed or reordered, and ephemeral
    containers are only added (the API server validates that before this policy runs). Images of containers and
    init containers can be updated, and vCluster syncs the change (diff.go calcContainerImageDiff), which the kubelet
    would start from the cache in a container that does not pull (a pod from before the setting, or a tenant's own
    init container wearing the hosts-rewriting one's name and image). So on UPDATE the containers that do not pull
    keep their images, and no ephemeral container that does not pull is added: a pod running from before the setting
    keeps its other updates. Counted and compared as lists, not matched by name, to keep the cost linear."""
    image = json.dumps(rewrite_hosts_image(team.vcluster))
    vclusters_own = f"(c.name == '{REWRITE_HOSTS_CONTAINER}' && c.image == {image})"
    created = " && ".join([
        every_container(("containers",), _pulls_always('c')),
        every_container(("initContainers",), f"{_pulls_always('c')} || {vclusters_own}"),
        f"(!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.image) || "
        f"(has(v.image.pullPolicy) && v.image.pullPolicy == '{PULL_ALWAYS}')))",
        f"{_unpulled_ephemeral('object')} == 0"])
    kept = " && ".join(f"{_unpulled_images('object', field)} == {_unpulled_images('oldObject', field)}"
                       for field in SCHEDULED_LISTS)
    return f"request.operation == 'CREATE' ? ({created}) : " \
           f"({kept} && {_unpulled_ephemeral('object')} <= {_unpulled_ephemeral('oldObject')})"


def _image_pull_validations(team: Team) -> list[dict]:
    if not team.vcluster.always_pull_images:
        return []
    return [refusal(
        "image-pull-policy", _image_pull_policy(team),
        "this site has every container pull its image on start (vcluster.alwaysPullImages), so that no team starts "
        "another team's private image from a node's cache without that team's pull secret",
        "set imagePullPolicy: Always on every container and init container, and pullPolicy: Always on image volumes "
        "(the vCluster sets it on new pods; for kubectl debug add --image-pull-policy=Always); to change the image of "
        "a container that does not pull, re-create the pod")]


def _images(obj: str, field: str) -> str:
    return f"(has({obj}.spec.{field}) ? {obj}.spec.{field}.map(c, c.image) : [])"


def _image_registry(team: Team) -> str:
    """On CREATE every image and image volume is allowed. Images of containers and init containers can be updated
    (vCluster syncs the change), so on UPDATE a list whose images changed must hold allowed ones only; ephemeral
    containers are only added, so none that is not allowed may be. Image volumes cannot be updated. A pod running
    from before the setting keeps its updates while its images stay."""
    allowed = allowed_image(team, "c.image")
    volumes = (f"(!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.image) || "
               f"(has(v.image.reference) && {allowed_image(team, 'v.image.reference')})))")

    def refused_ephemeral(obj: str) -> str:
        field = f"{obj}.spec.ephemeralContainers"
        return f"(has({field}) ? size({field}.filter(c, !{allowed})) : 0)"

    changed = " && ".join(f"({_images('object', field)} == {_images('oldObject', field)} || "
                          f"{every_container((field,), allowed)})" for field in SCHEDULED_LISTS)
    return (f"request.operation == 'CREATE' ? ({every_container(CONTAINER_LISTS, allowed)} && {volumes}) : "
            f"({changed} && {refused_ephemeral('object')} <= {refused_ephemeral('oldObject')})")


def image_registry_validations(team: Team) -> list[dict]:
    if team.vcluster.allowed_registries is None:
        return []
    return [refusal(
        "image-registry", _image_registry(team),
        "this site's nodes pull tenant images only from the registries it lists (vcluster.allowedRegistries: "
        f"{', '.join(team.vcluster.allowed_registries)}); a name without a host is Docker Hub's (docker.io/library/ "
        "for one component)",
        "use an image from one of those registries, or ask the platform team to list yours")]


def match_conditions(team: Team) -> list[dict]:
    labelled = f"{key_value('object', 'labels', VCLUSTER_MANAGED_BY_LABEL)} == '{team.vcluster_name}'"
    old_value = key_value('oldObject', 'labels', VCLUSTER_MANAGED_BY_LABEL)
    old_labelled = f"(request.operation == 'UPDATE' && {old_value} == " \
                   f"'{team.vcluster_name}')"
    return [{"name": "synced-by-this-vcluster",
             "expression": f"request.userInfo.username == '{syncer_username(team)}' || {labelled} || {old_labelled}"}]


def fraction_annotated() -> str:
    """The pod asks KAI for a fraction of a GPU (by share or by memory)."""
    return " || ".join(has_key("object", "annotations", name) for name in FRACTION_ANNOTATIONS)


def fraction_container() -> str:
    """The container KAI gives a pod's fraction to: the one the annotation names, else the first."""
    named = has_key("object", "annotations", FRACTION_CONTAINER_ANNOTATION)
    named_container = f"object.metadata.annotations['{FRACTION_CONTAINER_ANNOTATION}']"
    return f"({named} ? {named_container} : object.spec.containers[0].name)"


def policy_variables(team: Team) -> list[dict]:
    fractional = fraction_annotated()
    return [
        {"name": "queue", "expression": key_value("object", "labels", QUEUE_LABEL)},
        {"name": "scheduler",
         "expression": "has(object.spec.schedulerName) ? object.spec.schedulerName : 'default-scheduler'"},
        {"name": "fractional", "expression": fractional},
        {"name": "fractionContainer", "expression": f"!variables.fractional ? '' : {fraction_container()}"},
        {"name": "wholeGpus", "expression": pod_holds(WHOLE_GPU)},
        {"name": "migSlices", "expression": pod_holds(MIG_SLICE)},
        {"name": "usesGpu", "expression": "variables.fractional || variables.wholeGpus || variables.migSlices"},
        *metadata_variables(),
    ]


def policy_validations(team: Team, before_sync: bool = False) -> list[dict]:
    """The pod rules, judging the host pod; ``before_sync``, the virtual pod as the tenant writes it (inside its
    vCluster, before the syncer rewrites its volumes)."""
    queue = team.queue_name
    return [
        {"expression": f"variables.scheduler == '{SCHEDULER_NAME}' && variables.queue == '{queue}'",
         "messageExpression": f"'[own-queue] every pod of team {team.name} is scheduled by KAI in queue {queue}, "
                              f"this one has scheduler ' + variables.scheduler + ' and queue \\'' + variables.queue + "
                              f"'\\': set spec.schedulerName: {SCHEDULER_NAME} and the label {QUEUE_LABEL}: {queue}'",
         "reason": "Forbidden"},
        refusal("node-name",
                "request.operation != 'CREATE' || !has(object.spec.nodeName) || object.spec.nodeName == ''",
                "a pod created with spec.nodeName skips the scheduler and every queue quota",
                "remove spec.nodeName; use a nodeSelector or affinity and let KAI place the pod"),
        refusal("runtime-class",
                f"!has(object.spec.runtimeClassName) || !object.spec.runtimeClassName.startsWith("
                f"'{PROTECTED_RUNTIME_PREFIX}') || variables.usesGpu",
                "only pods that KAI allocates a GPU to may use an nvidia runtime class",
                "remove spec.runtimeClassName, or request a GPU (gpu-fraction, gpu-memory or nvidia.com/gpu)"),
        device_env(),
        gpu_env_from(),
        device_features(),
        refusal("gpu-kinds",
                "!(variables.migSlices && (variables.fractional || variables.wholeGpus))",
                "a pod asks for GPUs one way: MIG slices go alone, without nvidia.com/gpu, gpu-fraction or "
                "gpu-memory (KAI then charges the queue and the node for one of the two kinds only)",
                "split the pod, or request one kind of GPU"),
        mig_names(),
        resource_names(),
        pod_tolerations(team),
        pod_containers(),
        pod_volumes(),
        pod_ports(),
        pod_object_references(),
        refusal("pod-resources", "!has(object.spec.resources)",
                "KAI charges the team's queue only for its containers' requests, while the kubelet reserves "
                "spec.resources (pod-level resources) on the node",
                "remove spec.resources and set resources on each container"),
        *pod_field_validations(team),
        refusal("probe-host", _no_probe_host(),
                "the kubelet sends probes and lifecycle hooks from the node, past the team's network policy, so "
                "they may not name a host",
                "remove host from httpGet and tcpSocket probes and hooks: they then reach the pod itself"),
        device_paths(),
        *volume_validations(team, before_sync),
        *_image_pull_validations(team),
        # Judged inside each vCluster by a policy of its own, on update too (components/virtual_defaults.py).
        *([] if before_sync else image_registry_validations(team)),
        *metadata_validations(team),
        # The size of what the host stores: the virtual pod lacks what vCluster adds and carries keys the syncer drops.
        # The spec's size is judged by one policy for all teams (components/pod_size_admission.py).
        *([] if before_sync else [pod_metadata_size()]),
    ]


def policy_spec(team: Team) -> dict:
    return pod_policy_spec(team, policy_validations(team))


def pod_policy_spec(team: Team, validations: list[dict]) -> dict:
    """A policy on the team's host pods, matched as the syncer writes them, judging them with ``validations``."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": POD_RESOURCE_RULES, "namespaceSelector": team_namespace_selector(team)},
        "matchConditions": match_conditions(team),
        "variables": policy_variables(team),
        "validations": validations,
    }


def policy_name(team: Team) -> str:
    return f"gpu-tenancy-{team.name}"


def team_namespace_selector(team: Team) -> dict:
    """The team's host namespace, as its policies' matchConstraints and their bindings' matchResources select it."""
    return {"matchLabels": {NAMESPACE_NAME_LABEL: team.namespace}}


def policy_with_deny_binding(component: pulumi.ComponentResource, name: str, team: Team, provider: k8s.Provider,
                             name_in_cluster: str, spec: dict,
                             depends_on: Sequence[pulumi.Resource] = ()) -> tuple[KubernetesObject, KubernetesObject]:
    """A policy of the team's and the binding that denies what it refuses in the team's host namespace, both
    children of ``component`` after ``depends_on``; the binding waits for its policy."""
    return deny_bound_policy(component, name, provider, {"name": name_in_cluster,
                                                         "labels": {**MANAGED_BY, TEAM_LABEL: team.name}},
                             spec, team_namespace_selector(team), depends_on)


def deny_bound_policy(component: pulumi.ComponentResource, name: str, provider: k8s.Provider, metadata: dict,
                      spec: dict, namespaces: dict,
                      depends_on: Sequence[pulumi.Resource] = ()) -> tuple[KubernetesObject, KubernetesObject]:
    """A policy and the binding that denies what it refuses in the ``namespaces`` it selects, both children of
    ``component``, after ``depends_on``; the binding waits for its policy."""
    child = pulumi.ResourceOptions(parent=component, provider=provider, depends_on=list(depends_on))
    policy = KubernetesObject(f"{name}-policy", VALIDATING_ADMISSION_POLICY, metadata=metadata, spec=spec, opts=child)
    return policy, deny_binding(component, name, policy, metadata["name"], metadata, namespaces, child)


def deny_binding(component: pulumi.ComponentResource, name: str, policy: KubernetesObject, policy_name: str,
                 metadata: dict, namespaces: dict, opts: pulumi.ResourceOptions) -> KubernetesObject:
    """A binding, child of ``component``, that denies what ``policy`` refuses in the ``namespaces`` it selects; it
    waits for its policy."""
    return KubernetesObject(
        f"{name}-binding", VALIDATING_ADMISSION_POLICY_BINDING, metadata=metadata,
        spec={"policyName": policy_name, "validationActions": ["Deny"],
              "matchResources": {"namespaceSelector": namespaces}},
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])))


class TenantAdmission(pulumi.ComponentResource):
    policy: KubernetesObject
    binding: KubernetesObject
    deletion_policy: KubernetesObject
    deletion_binding: KubernetesObject

    def __init__(self, name: str, args: TenantAdmissionArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(ADMISSION_COMPONENT, name, None, opts)
        team = args.team
        self.policy, self.binding = policy_with_deny_binding(self, name, team, args.provider, policy_name(team),
                                                             policy_spec(team), args.prerequisites)
        self.deletion_policy, self.deletion_binding = policy_with_deny_binding(
            self, f"{name}-deletion", team, args.provider, deletion_policy_name(team),
            deletion_policy_spec(syncer_username(team), team_namespace_selector(team)))
        self.register_outputs({"policy": policy_name(team), "deletionPolicy": deletion_policy_name(team),
                               "syncer": syncer_username(team),
                               "podListBytes": pod_list_bytes(team.vcluster),
                               "maxGracePeriodSeconds": team.vcluster.max_termination_grace_seconds})
