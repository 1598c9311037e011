"""The tenant boundary, tested by attack.

Each test writes the pod a hostile tenant (cluster-admin in its own vCluster) would send, turns it
into the host pod vCluster 0.36.1 syncs (and, where KAI's webhook runs first, the pod KAI v0.16.4
mutates), and evaluates the ValidatingAdmissionPolicy the program renders with cel-python. Every
attack must be refused with a message naming its rule; legitimate work must be admitted.
"""

from __future__ import annotations

import copy

import pytest

from tests.conftest import dev_config, eks_config
from tests.tenant_sim import (
    BINDING, KAI_POD_GROUPER, KAI_SCHEDULER, POLICY, Tenant, container, platform_of, tenant_of, vcluster_sync,
    virtual_pod,
)


@pytest.fixture(scope="module")
def nlp(dev_run) -> Tenant:
    return tenant_of(dev_run, dev_config(), "team-nlp")


@pytest.fixture(scope="module")
def legal(eks_run) -> Tenant:
    return tenant_of(eks_run, eks_config(), "team-legal")


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def on_kai(tenant: Tenant, **kwargs) -> dict:
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, **kwargs)


# --- legitimate work is admitted, as the tenant writes it and as KAI's webhook mutates it --------

LEGITIMATE = {
    "fractional": dict(annotations={"gpu-fraction": "0.33"}),
    "gpu-memory": dict(annotations={"gpu-memory": "4096"}),
    "whole-gpu": dict(containers=[container(gpus="1")]),
    "mig": dict(containers=[container(mig="nvidia.com/mig-1g.10gb")]),
    "cpu": dict(),
    "fraction-in-a-named-sidecar": dict(annotations={"gpu-fraction": "0.5", "gpu-fraction-container-name": "model"},
                                        containers=[container("proxy"), container("model")]),
    "whole-gpu-with-prefixed-env-from": dict(containers=[container(
        gpus="1", env_from=[{"prefix": "APP_", "configMapRef": {"name": "settings"}}])]),
    "cpu-with-env-from": dict(containers=[container(env_from=[{"secretRef": {"name": "hf-token"}}])]),
}


@pytest.mark.parametrize("mutated", [False, True], ids=["as-synced", "after-kai"])
@pytest.mark.parametrize("kind", LEGITIMATE)
def test_legitimate_pods_in_the_teams_queue_are_admitted(nlp, kind, mutated):
    assert nlp.create(on_kai(nlp, **LEGITIMATE[kind]), mutated=mutated) == []


def test_the_tenants_own_dns_is_admitted_in_every_stack(nlp, legal, dev_run, eks_run):
    for tenant, program in ((nlp, dev_run), (legal, eks_run)):
        values = program.named(f"tenant-{tenant.team.name}-vcluster").inputs["values"]
        import yaml
        documents = list(yaml.safe_load_all(values["controlPlane"]["coredns"]["overwriteManifests"]))
        deployment = next(d for d in documents if d["kind"] == "Deployment")
        template = deployment["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "coredns-5d8f9", "namespace": "kube-system", **template["metadata"]},
               "spec": template["spec"]}
        assert tenant.create(pod) == [], tenant.team.name


def test_kais_post_bind_updates_pass(nlp):
    running = nlp.host_pod(on_kai(nlp, annotations={"gpu-fraction": "0.33"}))
    grouped = copy.deepcopy(running)
    grouped["metadata"]["annotations"]["pod-group-name"] = "pg-model-0-abc"
    grouped["metadata"]["labels"]["kai.scheduler/subgroup-name"] = "default"
    grouped["spec"]["nodeName"] = "gpu-node-1"
    assert nlp.update(running, grouped, user=KAI_POD_GROUPER) == []


def test_the_syncer_may_resync_a_pod_kai_has_grouped(nlp):
    grouped = nlp.host_pod(on_kai(nlp))
    grouped["metadata"]["annotations"]["pod-group-name"] = "pg-model-0-abc"
    relabelled = copy.deepcopy(grouped)
    relabelled["metadata"]["labels"]["app"] = "web"
    assert nlp.update(grouped, relabelled) == []


def test_the_vcluster_control_plane_pod_is_never_matched(nlp):
    control_plane = {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "team-nlp-0", "namespace": nlp.team.namespace,
                                  "labels": {"app": "vcluster", "release": "team-nlp"}},
                     "spec": {"containers": [{"name": "syncer"}]}}
    user = "system:serviceaccount:kube-system:statefulset-controller"
    assert not nlp.admission.matches(nlp.team.namespace, control_plane, user=user)


def test_a_policy_only_covers_its_own_tenant_namespace(nlp, dev_run):
    vision_team = next(t for t in platform_of(dev_config()).teams if t.name == "team-vision")
    vision_pod = vcluster_sync(virtual_pod(queue="team-nlp", scheduler=KAI_SCHEDULER), vision_team)
    assert not nlp.admission.matches(vision_team.namespace, vision_pod,
                                     user=f"system:serviceaccount:{vision_team.namespace}:vc-team-vision")


# --- 1. a GPU without a GPU allocation -----------------------------------------------------------


def test_a_literal_visible_devices_list_is_refused_even_where_kai_blanks_the_first_entry(nlp):
    sneaky = container(env_entries=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    assert "device-env" in rules(nlp.create(on_kai(nlp, containers=[sneaky])))


# What turns the toolkit's device features on in a container without a GPU, once it asks for "none".
FEATURES_ON = [{"name": name, "value": "enabled"}
               for name in ("NVIDIA_MOFED", "NVIDIA_GDS", "NVIDIA_GDRCOPY", "NVIDIA_NVSWITCH")] + \
    [{"name": "NVIDIA_IMEX_CHANNELS", "value": "all"}]


def test_none_behind_kais_blank_is_refused_in_a_container_without_a_gpu(nlp, legal):
    """KAI rewrites the first entry only; the kubelet gives the container the last, and the toolkit reads none as a
    request for no GPU, which adds the node's RDMA, GPUDirect, GDRCopy and NVSwitch devices the env turns on."""
    for tenant in (nlp, legal):
        side = container("side", env_entries=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
                                              {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}, *FEATURES_ON])
        pod = on_kai(tenant, containers=[container("model"), side], initContainers=[container("fetch")])
        assert "device-env" in rules(tenant.create(pod)), tenant.team.name
        # The same container with KAI's blank alone is admitted: its features need a device list to act on.
        side["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}, *FEATURES_ON]
        assert tenant.create(pod) == [], tenant.team.name


def test_an_ephemeral_container_asking_for_none_is_refused(nlp):
    running = nlp.host_pod(on_kai(nlp))
    debugged = _with_debug_container(running, {"NVIDIA_VISIBLE_DEVICES": "none", "NVIDIA_MOFED": "enabled"})
    assert "device-env" in rules(nlp.update(running, debugged, subresource="ephemeralcontainers"))


def test_a_single_none_is_refused_as_written_and_admitted_once_kai_blanks_it(nlp):
    """A tenant's own none in a container without a GPU: the in-vCluster rule names the fix (void); on the host KAI
    has already written void over it."""
    pod = on_kai(nlp, containers=[container("model", env={"NVIDIA_VISIBLE_DEVICES": "none"})])
    assert "device-env" in rules(nlp.create(pod, mutated=False))
    assert nlp.create(pod) == []


@pytest.mark.parametrize("mutated", [False, True], ids=["as-synced", "after-kai"])
@pytest.mark.parametrize("devices", ["all", "none"])
def test_a_whole_gpu_container_may_not_widen_its_device_list(nlp, mutated, devices):
    widened = container(gpus="1", env={"NVIDIA_VISIBLE_DEVICES": devices})
    assert "device-env" in rules(nlp.create(on_kai(nlp, containers=[widened]), mutated=mutated))


def test_a_visible_devices_reference_is_refused_outside_kais_own(nlp):
    own_map = {"name": "NVIDIA_VISIBLE_DEVICES",
               "valueFrom": {"configMapKeyRef": {"name": "all-gpus", "key": "NVIDIA_VISIBLE_DEVICES"}}}
    assert "device-env" in rules(nlp.create(on_kai(nlp, containers=[container(gpus="1", env_entries=[own_map])])))
    # In a fractional pod, KAI replaces the tenant's reference with its own; as written it is refused.
    fractional = on_kai(nlp, annotations={"gpu-fraction": "0.5"}, containers=[container(env_entries=[own_map])])
    assert "device-env" in rules(nlp.create(fractional, mutated=False))
    assert nlp.create(fractional) == []


def test_a_fractional_pod_cannot_point_kai_at_a_configmap_of_its_own(nlp):
    pod = on_kai(nlp, annotations={"gpu-fraction": "0.5", "runai/shared-gpu-configmap": "my-devices-x-default"})
    assert "device-env" in rules(nlp.create(pod))


def test_kai_blanks_an_image_env_in_every_container_without_a_gpu(nlp):
    host = nlp.host_pod(on_kai(nlp, annotations={"gpu-fraction": "0.5"},
                               containers=[container("model"), container("sidecar")],
                               initContainers=[container("fetch")]))
    blanks = {entry["name"]: [e for e in entry.get("env", []) if e["name"] == "NVIDIA_VISIBLE_DEVICES"]
              for entry in host["spec"]["containers"] + host["spec"]["initContainers"]}
    assert blanks["sidecar"] == blanks["fetch"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert "valueFrom" in blanks["model"][0]


@pytest.mark.parametrize("runtime_class", ["nvidia", "nvidia-cdi", "nvidia-legacy"])
def test_an_nvidia_runtime_class_without_a_gpu_is_refused(nlp, runtime_class):
    assert "runtime-class" in rules(nlp.create(on_kai(nlp, runtimeClassName=runtime_class)))


def test_a_whole_gpu_container_may_not_take_unprefixed_env_from(nlp):
    pod = on_kai(nlp, containers=[container(gpus="1", env_from=[{"configMapRef": {"name": "all-gpus"}}])])
    assert "gpu-env-from" in rules(nlp.create(pod))


def test_naming_devices_to_the_runtime_directly_is_refused(nlp):
    messages = nlp.create(on_kai(nlp, annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}))
    assert "reserved-keys" in rules(messages) and "cdi.k8s.io/gpu" in messages[0]
    mounted = container()
    mounted["volumeMounts"] = [{"name": "scratch", "mountPath": "/var/run/nvidia-container-devices/all"}]
    pod = on_kai(nlp, containers=[mounted], volumes=[{"name": "scratch", "emptyDir": {}}])
    assert "device-paths" in rules(nlp.create(pod))


def test_kai_is_configured_to_blank_visible_devices(dev_run, eks_run):
    for program in (dev_run, eks_run):
        release = next(r for r in program.of_type("kubernetes:helm.sh/v3:Release")
                       if r.inputs["name"] == KAI_SCHEDULER)
        assert release.inputs["values"]["global"]["blockNvidiaVisibleDevices"] is True


# --- 2. every pod in the team's own leaf queue, no PodGroup choice ------------------------------


@pytest.mark.parametrize("pod", [
    virtual_pod(scheduler=KAI_SCHEDULER, labels={"project": "team-vision"}),
    virtual_pod(scheduler=KAI_SCHEDULER),
    virtual_pod(scheduler=KAI_SCHEDULER, queue="team-vision", annotations={"gpu-fraction": "0.33"}),
    virtual_pod(scheduler=KAI_SCHEDULER, queue="default-queue"),
    virtual_pod(scheduler=KAI_SCHEDULER, queue="ml-org"),
    virtual_pod(queue="team-nlp"),
    virtual_pod(queue="team-nlp", scheduler="default-scheduler", containers=[container(gpus="1")]),
    virtual_pod(queue="team-nlp", containers=[container(mig="nvidia.com/mig-3g.20gb")]),
], ids=["project-label", "no-queue", "other-team", "default-queue", "org-queue", "default-scheduler",
        "whole-gpu-default-scheduler", "mig-outside-kai"])
def test_pods_outside_the_teams_leaf_queue_are_refused(nlp, pod):
    messages = nlp.create(pod)
    assert "own-queue" in rules(messages)
    assert "kai.scheduler/queue: team-nlp" in next(m for m in messages if m.startswith("[own-queue]"))


def test_no_namespace_is_exempt_the_virtual_kube_system_included(nlp):
    assert "own-queue" in rules(nlp.create(virtual_pod(namespace="kube-system")))


@pytest.mark.parametrize("metadata", [
    {"annotations": {"pod-group-name": "pg-of-another-job"}},
    {"annotations": {"kai.scheduler/skip-podgrouper": "true"}},
    {"labels": {"spark-app-name": "etl", "spark-app-selector": "spark-of-another-job"}},
], ids=["pod-group-name", "skip-podgrouper", "spark-selector"])
def test_choosing_a_pod_group_is_refused(nlp, metadata):
    assert "reserved-keys" in rules(nlp.create(on_kai(nlp, **metadata)))


def test_the_syncer_cannot_move_a_running_pod_to_another_pod_group(nlp):
    grouped = nlp.host_pod(on_kai(nlp))
    grouped["metadata"]["annotations"]["pod-group-name"] = "pg-model-0-abc"
    moved = copy.deepcopy(grouped)
    moved["metadata"]["annotations"]["pod-group-name"] = "pg-of-another-job"
    assert "guarded-fields" in rules(nlp.update(grouped, moved))


# --- 3. no scheduler bypass ----------------------------------------------------------------------


def test_a_pod_created_with_a_node_name_is_refused(nlp):
    assert "node-name" in rules(nlp.create(on_kai(nlp, nodeName="gpu-node-1", containers=[container(gpus="1")])))


# --- 4. ephemeral containers ---------------------------------------------------------------------


def _with_debug_container(host: dict, env: dict) -> dict:
    debugged = copy.deepcopy(host)
    debug = {"name": "debugger", "image": "busybox:1.36", "targetContainerName": "main"}
    if env:
        debug["env"] = [{"name": key, "value": value} for key, value in env.items()]
    debugged["spec"]["ephemeralContainers"] = [debug]
    return debugged


@pytest.mark.parametrize("env", [{}, {"NVIDIA_VISIBLE_DEVICES": "all"}], ids=["image-env", "literal-all"])
def test_an_ephemeral_container_without_a_blank_device_list_is_refused(nlp, env):
    running = nlp.host_pod(on_kai(nlp))
    messages = nlp.update(running, _with_debug_container(running, env), subresource="ephemeralcontainers")
    assert "device-env" in rules(messages)


def test_an_ephemeral_debug_container_with_a_blank_device_list_is_admitted(nlp):
    running = nlp.host_pod(on_kai(nlp))
    debugged = _with_debug_container(running, {"NVIDIA_VISIBLE_DEVICES": "void"})
    assert nlp.update(running, debugged, subresource="ephemeralcontainers") == []


# --- changes to a running pod --------------------------------------------------------------------


@pytest.mark.parametrize("change", ["drop-fraction", "raise-fraction", "drop-queue", "switch-queue"])
def test_the_gpu_share_and_queue_of_a_running_pod_are_fixed(nlp, change):
    running = nlp.host_pod(on_kai(nlp, annotations={"gpu-fraction": "0.33"}))
    changed = copy.deepcopy(running)
    annotations, labels = changed["metadata"]["annotations"], changed["metadata"]["labels"]
    if change == "drop-fraction":
        del annotations["gpu-fraction"]
    elif change == "raise-fraction":
        annotations["gpu-fraction"] = "0.9"
    elif change == "drop-queue":
        del labels["kai.scheduler/queue"]
    else:
        labels["kai.scheduler/queue"] = "team-vision"
    assert "guarded-fields" in rules(nlp.update(running, changed))


# --- network policy selectors --------------------------------------------------------------------


@pytest.mark.parametrize("labels", [{"app": "loft"}, {"app": "vcluster-snapshot"}, {"app": "vcluster"},
                                    {"k8s-app": "kube-dns"}, {"k8s-app": "vcluster-kube-dns"}])
def test_workloads_cannot_wear_the_control_planes_network_labels(nlp, labels):
    assert "reserved-values" in rules(nlp.create(on_kai(nlp, labels=labels)))


@pytest.mark.parametrize("labels", [{"app": "loft"}, {"k8s-app": "vcluster-kube-dns"}])
def test_a_running_workload_cannot_put_them_on_later(nlp, labels):
    # vCluster copies label changes to the host pod; vc-kube-dns would then open the host DNS pods to it, and
    # vc-cp-<release> of every team would admit an app=loft pod from any namespace.
    running = nlp.host_pod(on_kai(nlp))
    relabelled = copy.deepcopy(running)
    relabelled["metadata"]["labels"].update(labels)
    assert "reserved-values" in rules(nlp.update(running, relabelled))


def test_the_release_label_never_reaches_the_host_and_is_refused_there(nlp):
    host = nlp.host_pod(on_kai(nlp, labels={"release": "team-nlp"}))
    # vCluster renames it (pkg/util/translate LabelsToTranslate), so its policies never select a synced pod by it.
    assert "release" not in host["metadata"]["labels"]
    assert nlp.create_host(host) == []
    host["metadata"]["labels"]["release"] = "team-nlp"
    assert "reserved-values" in rules(nlp.create_host(host))


def test_a_helm_release_label_of_the_tenants_own_is_fine(nlp):
    assert nlp.create(on_kai(nlp, labels={"release": "prometheus", "app": "web"})) == []


# --- every tenant of every stack ------------------------------------------------------------------


def test_every_tenant_of_every_stack_has_its_policy_and_binding(dev_run, eks_run):
    for program in (dev_run, eks_run):
        teams = set(program.outputs["tenants"])
        policies = {p.inputs["metadata"]["name"] for p in program.of_type(POLICY)}
        bindings = {b.inputs["spec"]["policyName"]: b for b in program.of_type(BINDING)}
        expected = {name for team in teams for name in (f"gpu-tenancy-{team}", f"gpu-tenancy-{team}-synced-objects",
                                                         f"gpu-tenancy-{team}-deletion")} | {"gpu-tenancy-pod-size"}
        assert policies == expected == set(bindings)
        assert all(b.inputs["spec"]["validationActions"] == ["Deny"] for b in bindings.values())


def test_the_policy_is_in_place_before_the_vcluster_syncs_pods(dev_run):
    release = next(r for r in dev_run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "team-nlp")
    for binding in ("tenant-team-nlp-admission-binding", "tenant-team-nlp-admission-deletion-binding"):
        assert dev_run.named(binding).urn in release.dependencies


def test_eks_policies_use_the_configured_namespace_and_vcluster_name(legal):
    assert legal.team.namespace == "team-legal" and legal.team.vcluster_name == "rag-legal"
    assert legal.create(on_kai(legal, annotations={"gpu-fraction": "0.5"})) == []
    assert "own-queue" in rules(legal.create(virtual_pod(queue="team-support", scheduler=KAI_SCHEDULER)))
