"""Defaults inside each tenant's vCluster, so that an unmodified chart runs and a bad pod fails at ``kubectl apply``.

The host admits a tenant pod only with ``schedulerName: kai-scheduler`` and the team's queue label
(components/admission.py). Charts set neither, and a refused sync shows only as a SyncError event on the
virtual pod, which stays Pending. vCluster 0.36.1 applies ``experimental.deploy.vcluster.manifests``
inside the virtual cluster (pkg/controllers/deploy), whose API server runs Kubernetes 1.36 by default,
where MutatingAdmissionPolicy is GA (``admissionregistration.k8s.io/v1``) and on without flags. So the
program ships:

- a MutatingAdmissionPolicy that sets both on every pod created in the virtual cluster;
- a MutatingAdmissionPolicy that switches the NVIDIA container toolkit's device features off in the env of every
  container that holds a GPU (the host's ``[device-features]`` rule asks for them, since it cannot read the image's
  ``ENV``), replacing a value the tenant set;
- a MutatingAdmissionPolicy that gives a container (or init container) requesting more CPU, memory or ephemeral
  storage than the host LimitRange's default limit, and setting no limit of it, its request as that limit: the
  host's LimitRanger would give it the default limit, below its request, and the host API server then refuses the
  pod as invalid (a common shape: charts that leave CPU limits out, JupyterHub's ``memory.guarantee``);
- for a memory-capped team, a MutatingAdmissionPolicy that loads HAMi-core into the fractional container of
  every fractional pod (the env, image volume and mount the host's ``[hami-core]`` rule asks for), as
  kai-resource-isolator's webhook does where KAI's own guide installs it, so KAI's examples run unmodified;
- with ``vcluster.alwaysPullImages``, a MutatingAdmissionPolicy that sets ``imagePullPolicy: Always`` on every
  container and init container (and ``pullPolicy: Always`` on image volumes) of every pod, replacing the
  virtual API server's default (``IfNotPresent`` for a tagged image), which the host's ``[image-pull-policy]``
  rule refuses;
- with ``vcluster.allowedRegistries``, a ValidatingAdmissionPolicy with the host's ``[image-registry]`` rule, on
  create and update (an image set later, a debug container added), since vCluster syncs image changes to the host
  and the syncer itself never changes an image in the virtual cluster;
- a ValidatingAdmissionPolicy with the host's pod rules (``policy_validations`` as they read a pod before the
  syncer rewrites its volumes, and the team's isolation tier rules as they read it before KAI's webhook), so a
  pod the host would refuse is refused when the tenant creates it, with the same ``[rule]`` message. Only CREATE
  is checked: vCluster's syncer copies KAI's host-side additions back into virtual pods, which the host's UPDATE
  rules would refuse from the tenant but must accept from the syncer;
- a ValidatingAdmissionPolicy with the host's ``[fixed-requests]`` rule on ``pods/resize``: a resize the syncer
  would carry to the host is refused there, after which the syncer stops updating the pod.
- for a team with load balancers on EKS, a MutatingAdmissionPolicy that sets the site's and the team's AWS tags on
  every LoadBalancer Service (config/load_balancer_tags.py), which the host's ``[service-load-balancer-tags]`` rule
  asks for.

These are conveniences, not the boundary: the tenant is cluster-admin inside and may delete them, and
the host policies still enforce everything. config/virtual_cluster.py refuses virtual clusters older
than Kubernetes 1.36. vCluster re-applies the manifests only when their text changes.
"""

from __future__ import annotations

from components.admission import (
    PULL_ALWAYS, fraction_annotated, fraction_container, image_registry_validations, policy_validations,
    policy_variables,
)
from components.admission_devices import TOOLKIT_FEATURES, with_gpu
from components.admission_metadata import cel_string
from components.admission_resize import fixed_requests
from components.isolation_admission import IMAGE_ROOT, LIBRARY, LIBRARY_NAMES, isolation_validations
from components.kai import SCHEDULER_NAME
from components.tenant_quota import host_limit_range
from components.yaml_text import yaml_documents
from config.load_balancer_keys import AWS_ADDITIONAL_TAGS
from config.load_balancer_tags import tags_annotation
from config.model import MEMORY_CAPPED, Team
from config.vcluster_images import hami_core_image
from config.vocabulary import QUEUE_LABEL

ADMISSION_API = "admissionregistration.k8s.io/v1"
DEFAULTS_NAME = "gpu-tenancy-pod-defaults"
RULES_NAME = "gpu-tenancy-pod-rules"
HAMI_CORE_NAME = "gpu-tenancy-hami-core"  # the policy, and the image volume it adds
DEVICE_FEATURES_NAME = "gpu-tenancy-device-features"
LIMIT_DEFAULTS_NAME = "gpu-tenancy-limit-defaults"
IMAGE_PULL_NAME = "gpu-tenancy-image-pull"
IMAGE_REGISTRY_NAME = "gpu-tenancy-image-registry"
FIXED_REQUESTS_NAME = "gpu-tenancy-fixed-requests"
LOAD_BALANCER_TAGS_NAME = "gpu-tenancy-load-balancer-tags"
POD_CREATE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
POD_CHANGES = {**POD_CREATE, "operations": ["CREATE", "UPDATE"], "resources": ["pods", "pods/ephemeralcontainers"]}
POD_RESIZE = {**POD_CREATE, "operations": ["UPDATE"], "resources": ["pods/resize"]}
SERVICE_CHANGES = {**POD_CREATE, "operations": ["CREATE", "UPDATE"], "resources": ["services"]}


def pod_defaults_mutation(team: Team) -> str:
    """The apply configuration merged into every new pod: KAI's scheduler and the team's queue label."""
    labels = f"{{{cel_string(QUEUE_LABEL)}: {cel_string(team.queue_name)}}}"
    return (f"Object{{metadata: Object.metadata{{labels: {labels}}}, "
            f"spec: Object.spec{{schedulerName: {cel_string(SCHEDULER_NAME)}}}}}")


def _mutating_policy(name: str, *apply_configurations: str, **spec) -> dict:
    return {
        "apiVersion": ADMISSION_API, "kind": "MutatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            # Runs again after other mutations (a chart's own webhook may reset what it set).
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {"resourceRules": [POD_CREATE]},
            **spec,
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}
                          for expression in apply_configurations],
        },
    }


def pod_defaults_policy(team: Team) -> dict:
    return _mutating_policy(DEFAULTS_NAME, pod_defaults_mutation(team))


def device_features_mutations() -> tuple[str, str]:
    """Apply configurations merged by name into the containers and init containers that hold a GPU (whole GPUs, MIG
    slices, the fraction), each adding the toolkit's feature variables with the values that keep them off (an empty
    configuration where the pod has no such container)."""
    def switched_off(field: str) -> str:
        kind = f"Object.spec.{field}"
        env = ", ".join(f"{kind}.env{{name: '{name}', value: '{value}'}}" for name, value in TOOLKIT_FEATURES.items())
        holding = f"object.spec.{field}.filter(c, {with_gpu('c')})"
        configuration = f"Object{{spec: Object.spec{{{field}: {holding}.map(c, {kind}{{name: c.name, env: [{env}]}})}}}}"
        return f"has(object.spec.{field}) && object.spec.{field}.exists(c, {with_gpu('c')}) ? {configuration} : Object{{}}"

    return switched_off("containers"), switched_off("initContainers")


def device_features_policy(team: Team) -> dict:
    variables = [variable for variable in policy_variables(team) if variable["name"] in ("fractional", "fractionContainer")]
    return _mutating_policy(DEVICE_FEATURES_NAME, *device_features_mutations(), variables=variables)


def raised_limits_mutations(team: Team) -> list[str]:
    """Apply configurations, one for each container list and each resource the host's LimitRange gives a default
    limit of, setting a container's missing limit to its own request where that request is above the default (an
    empty configuration where no container needs it). A request at or below the default keeps the host's default
    limit; a request above the LimitRange's maximum is refused on the host with the LimitRanger's own message."""
    mutations = []
    for field in ("containers", "initContainers"):
        kind = f"Object.spec.{field}"
        # The LimitRange the host really has: a site's extraValues may lower its defaults below the config's.
        for resource, default in host_limit_range(team.vcluster).get("default", {}).items():
            name = cel_string(resource)
            above = (f"has(c.resources) && has(c.resources.requests) && {name} in c.resources.requests && "
                     f"!(has(c.resources.limits) && {name} in c.resources.limits) && "
                     f"quantity(c.resources.requests[{name}]).isGreaterThan(quantity({cel_string(str(default))}))")
            raised = (f"object.spec.{field}.filter(c, {above}).map(c, {kind}{{name: c.name, "
                      f"resources: {kind}.resources{{limits: {{{name}: c.resources.requests[{name}]}}}}}})")
            mutations.append(f"has(object.spec.{field}) && object.spec.{field}.exists(c, {above}) ? "
                             f"Object{{spec: Object.spec{{{field}: {raised}}}}} : Object{{}}")
    return mutations


def limit_defaults_policy(team: Team) -> dict:
    return _mutating_policy(LIMIT_DEFAULTS_NAME, *raised_limits_mutations(team))


def hami_core_mutation(image: str) -> str:
    """The apply configuration that loads HAMi-core in the fractional container (a container or, as KAI allows, an
    init container): merged by name (the volume, the container, its env) and by mount path, so the pod keeps
    everything else it has. The image is mounted whole (no subPath, which containerd 2.1 ignores and 2.2 honours)
    and LD_PRELOAD and CUDA_REDIRECT name the library in it."""
    volume = (f"Object.spec.volumes{{name: '{HAMI_CORE_NAME}', "
              f"image: Object.spec.volumes.image{{reference: '{image}'}}}}")

    def loaded(containers: str) -> str:
        kind = f"Object.spec.{containers}"
        env = ", ".join(f"{kind}.env{{name: '{name}', value: '{LIBRARY}'}}" for name in LIBRARY_NAMES)
        mount = f"{kind}.volumeMounts{{name: '{HAMI_CORE_NAME}', mountPath: '{IMAGE_ROOT}', readOnly: true}}"
        container = f"{kind}{{name: variables.fractionContainer, env: [{env}], volumeMounts: [{mount}]}}"
        return f"Object{{spec: Object.spec{{volumes: [{volume}], {containers}: [{container}]}}}}"

    return (f"object.spec.containers.exists(c, c.name == variables.fractionContainer) ? {loaded('containers')} : "
            f"{loaded('initContainers')}")


def hami_core_policy(team: Team) -> dict:
    # A fraction KAI gives to a container the pod lacks is refused by the pod rules, not patched in here.
    named = (f"({fraction_annotated()}) && (object.spec.containers.exists(c, c.name == {fraction_container()}) || "
             f"(has(object.spec.initContainers) && object.spec.initContainers.exists(c, c.name == {fraction_container()})))")
    variables = [variable for variable in policy_variables(team) if variable["name"] in ("fractional", "fractionContainer")]
    return _mutating_policy(HAMI_CORE_NAME, hami_core_mutation(hami_core_image(team.vcluster)),
                            matchConditions=[{"name": "fractional-container", "expression": named}], variables=variables)


def image_pull_mutations() -> tuple[str, str, str]:
    """Apply configurations merged by name into the pod's containers, init containers and image volumes, each
    setting its pull policy only (an empty configuration where the pod has none of them)."""
    always = f"'{PULL_ALWAYS}'"

    def pulled(field: str, items: str, setting: str) -> str:
        return f"Object{{spec: Object.spec{{{field}: {items}.map(c, Object.spec.{field}{{name: c.name, {setting}}})}}}}"

    init = pulled("initContainers", "object.spec.initContainers", f"imagePullPolicy: {always}")
    volumes = pulled("volumes", "object.spec.volumes.filter(v, has(v.image))",
                     f"image: Object.spec.volumes.image{{pullPolicy: {always}}}")
    return (pulled("containers", "object.spec.containers", f"imagePullPolicy: {always}"),
            f"has(object.spec.initContainers) ? {init} : Object{{}}",
            f"has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.image)) ? {volumes} : Object{{}}")


def load_balancer_tags_mutation(team: Team) -> str:
    """The apply configuration that sets the platform's tags annotation, replacing a value the tenant wrote."""
    value = tags_annotation(team.vcluster.services.load_balancer_tags)
    annotations = f"{{{cel_string(AWS_ADDITIONAL_TAGS)}: {cel_string(value)}}}"
    return f"Object{{metadata: Object.metadata{{annotations: {annotations}}}}}"


def load_balancer_tags_policy(team: Team) -> dict:
    # On UPDATE too: a Service made a load balancer later, and one from before the policy whenever it is edited.
    load_balancer = "has(object.spec.type) && object.spec.type == 'LoadBalancer'"
    return _mutating_policy(LOAD_BALANCER_TAGS_NAME, load_balancer_tags_mutation(team),
                            matchConstraints={"resourceRules": [SERVICE_CHANGES]},
                            matchConditions=[{"name": "load-balancer", "expression": load_balancer}])


def pod_rules_policy(team: Team) -> dict:
    return {
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": RULES_NAME},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [POD_CREATE]},
            "variables": policy_variables(team),
            "validations": [*policy_validations(team, before_sync=True),
                            *isolation_validations(team, mutated_by_kai=False)],
        },
    }


def image_registry_policy(team: Team) -> dict:
    return {
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": IMAGE_REGISTRY_NAME},
        "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [POD_CHANGES]},
                 "validations": image_registry_validations(team)},
    }


def fixed_requests_policy() -> dict:
    return {
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": FIXED_REQUESTS_NAME},
        "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [POD_RESIZE]},
                 "validations": [fixed_requests()]},
    }


def _binding(kind: str, policy: str, **spec) -> dict:
    # An empty namespace selector matches every namespace of the virtual cluster.
    return {"apiVersion": ADMISSION_API, "kind": kind, "metadata": {"name": policy},
            "spec": {"policyName": policy, "matchResources": {"namespaceSelector": {}}, **spec}}


def virtual_manifests(team: Team) -> list[dict]:
    hami_core = ([hami_core_policy(team), _binding("MutatingAdmissionPolicyBinding", HAMI_CORE_NAME)]
                 if team.isolation.tier == MEMORY_CAPPED else [])
    # HAMi-core's image volume pulls too, whichever of the two the API server runs first (it follows no set order:
    # k8s.io/apiserver generic/policy_source.go ranges over a map): a policy reinvoked IfNeeded runs again when a
    # later one changes the pod.
    image_pull = ([_mutating_policy(IMAGE_PULL_NAME, *image_pull_mutations()),
                   _binding("MutatingAdmissionPolicyBinding", IMAGE_PULL_NAME)]
                  if team.vcluster.always_pull_images else [])
    image_registry = ([image_registry_policy(team),
                       _binding("ValidatingAdmissionPolicyBinding", IMAGE_REGISTRY_NAME, validationActions=["Deny"])]
                      if team.vcluster.allowed_registries is not None else [])
    load_balancer_tags = ([load_balancer_tags_policy(team),
                           _binding("MutatingAdmissionPolicyBinding", LOAD_BALANCER_TAGS_NAME)]
                          if team.vcluster.services.load_balancer_tags else [])
    return [
        pod_defaults_policy(team),
        _binding("MutatingAdmissionPolicyBinding", DEFAULTS_NAME),
        device_features_policy(team),
        _binding("MutatingAdmissionPolicyBinding", DEVICE_FEATURES_NAME),
        limit_defaults_policy(team),
        _binding("MutatingAdmissionPolicyBinding", LIMIT_DEFAULTS_NAME),
        *hami_core,
        *image_pull,
        pod_rules_policy(team),
        _binding("ValidatingAdmissionPolicyBinding", RULES_NAME, validationActions=["Deny"]),
        fixed_requests_policy(),
        _binding("ValidatingAdmissionPolicyBinding", FIXED_REQUESTS_NAME, validationActions=["Deny"]),
        *image_registry,
        *load_balancer_tags,
    ]


def virtual_defaults_values(team: Team) -> dict:
    """vCluster values that apply the defaults inside the team's virtual cluster."""
    text = yaml_documents(virtual_manifests(team), sort_keys=False, width=1_000_000)
    return {"experimental": {"deploy": {"vcluster": {"manifests": text}}}}
