"""The second round of attacks on the tenant boundary, each built from the upstream code it abuses.

Each test writes what a hostile tenant (cluster-admin in its vCluster) sends, syncs it as vCluster
0.36.1 does, mutates it as KAI's webhook does and walks it through API validation, the host policy,
KAI's post-bind writes and the tenant's later edits (tests/vcluster_pods.py, tests/kai_pods.py). Every attack
is refused, on dev, eks and a stack mixing ``restricted`` and ``privileged`` teams, with the rule it breaks named.
"""

from __future__ import annotations

import copy

import pytest

from config.vcluster_images import coredns_image
from config.vocabulary import KAI_NAMESPACE
from tests.conftest import ACCEPTED_TAGS, dev_config, eks_config, run
from tests.tenant_sim import KAI_BINDER, KAI_POD_GROUPER, KAI_SCHEDULER, Tenant, container, tenant_of, virtual_pod
from tests.test_admission_honest import mixed_config
from tests.kai_pods import kai_bind, kai_group
from tests.vcluster_pods import copy_back, syncer_update


@pytest.fixture(scope="module")
def mixed_run():
    return run(mixed_config(), stack="mixed")


@pytest.fixture(scope="module", params=["dev:team-nlp", "eks:team-legal", "mixed:team-vision"])
def tenant(request, dev_run, eks_run, mixed_run) -> Tenant:
    stack, team = request.param.split(":")
    program, config = {"dev": (dev_run, dev_config()), "eks": (eks_run, eks_config()),
                       "mixed": (mixed_run, mixed_config())}[stack]
    return tenant_of(program, config, team)


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def on_kai(tenant: Tenant, **kwargs) -> dict:
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, **kwargs)


def running(tenant: Tenant, pod: dict) -> tuple[dict, dict]:
    """(virtual pod as the tenant now sees it, host pod) after creation, grouping and binding by KAI."""
    host = kai_bind(kai_group(tenant.host_pod(pod)))
    return copy_back(host, pod, tenant.team), host


def tenant_edit(tenant: Tenant, pod: dict, edit) -> list[str]:
    """A later edit of a running pod's virtual copy, as the syncer applies it to the host pod."""
    seen, host = running(tenant, pod)
    edited = copy.deepcopy(seen)
    edit(edited["metadata"])
    return tenant.update(host, syncer_update(host, seen, edited, tenant.team))


# --- KAI's reservation and scaling pods ------------------------------------------------------------


@pytest.mark.parametrize("app", ["kai-resource-reservation", "scaling-pod"])
def test_a_pod_labelled_as_kais_reservation_or_scaling_pod_is_refused(tenant, app):
    # utility_pods.go: the scheduler counts no GPU of a reservation pod, so two teams would share this one.
    pod = on_kai(tenant, labels={"app": app}, containers=[container(gpus="1")])
    assert "reserved-values" in rules(tenant.create(pod))
    relabelled = tenant_edit(tenant, on_kai(tenant, containers=[container(gpus="1")]),
                             lambda metadata: metadata["labels"].update(app=app))
    assert "reserved-values" in rules(relabelled)


# --- KAI's post-bind keys, removed or changed through the virtual pod ----------------------------------


@pytest.mark.parametrize("change", [
    lambda m: m["labels"].pop("runai-gpu-group"),
    lambda m: m["labels"].update({"runai-gpu-group": "group-of-another-team"}),
    lambda m: m["annotations"].pop("received-resource-type"),
    lambda m: m["annotations"].update({"received-resource-type": "Regular"}),
    lambda m: m["annotations"].update({"pod-group-name": "pg-of-another-job"}),
    lambda m: m["annotations"].update({"nvidia.com/mig-1g.10gb": "1"}),
    lambda m: m["annotations"].update({"kai.scheduler/last-start-timestamp": "2099-01-01T00:00:00Z"}),
    lambda m: m["labels"].update({"kai.scheduler/preemptibility": "non-preemptible"}),
    lambda m: m["labels"].update({"priorityClassName": "inference"}),
    lambda m: m["annotations"].update({"gpu-fraction": "0.05"}),
    lambda m: m["annotations"].pop("runai/shared-gpu-configmap"),
], ids=["drop-gpu-group", "spoof-gpu-group", "drop-received", "change-received", "move-pod-group", "legacy-mig",
        "pin-min-runtime", "turn-non-preemptible", "raise-priority", "lower-fraction", "drop-device-list"])
def test_kais_keys_of_a_running_pod_cannot_be_changed_through_the_virtual_pod(tenant, change):
    assert "guarded-fields" in rules(tenant_edit(tenant, on_kai(tenant, annotations={"gpu-fraction": "0.5"}), change))


def test_kais_service_accounts_may_only_write_the_keys_they_own(tenant):
    host = tenant.host_pod(on_kai(tenant, annotations={"gpu-fraction": "0.5"}))
    grouped = kai_group(host)
    grouped["metadata"]["labels"]["runai-gpu-group"] = "a-group"
    assert "kai-writes" in rules(tenant.update(host, grouped, user=KAI_POD_GROUPER))
    requeued = kai_bind(host)
    requeued["metadata"]["labels"]["kai.scheduler/queue"] = "another-queue"
    assert "kai-writes" in rules(tenant.update(host, requeued, user=KAI_BINDER))
    scheduler = f"system:serviceaccount:{KAI_NAMESPACE}:scheduler"
    pooled = copy.deepcopy(host)
    pooled["metadata"]["labels"]["kai.scheduler/node-pool"] = "pool-a"
    assert tenant.update(host, pooled, user=scheduler) == []


# --- values KAI's components read differently -----------------------------------------------------------


@pytest.mark.parametrize("annotations", [
    {"gpu-memory": "9223372036854775808"}, {"gpu-memory": "18446744073709551615"}, {"gpu-memory": "0"},
    {"gpu-memory": "+4096"}, {"gpu-memory": "1Ki"}, {"gpu-memory": "4e3"}, {"gpu-memory": "1"},
    {"gpu-fraction": "0.0001"}, {"gpu-fraction": "1e-9"}, {"gpu-fraction": "1"}, {"gpu-fraction": "1.0"},
    {"gpu-fraction": "0.99999999999999999"}, {"gpu-fraction": "NaN"}, {"gpu-fraction": ".5"}, {"gpu-fraction": "500m"},
    {"gpu-fraction": "0.999"}, {"gpu-fraction": "0.049"},
    {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "9"},
    {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "18446744073709551615"},
    {"gpu-fraction-num-devices": "2"},
    {"gpu-fraction": "0.5", "kai.scheduler/preemption-delay": "-5m"},
], ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()))
def test_gpu_values_outside_what_every_kai_component_parses_alike_are_refused(tenant, annotations):
    assert "granted-values" in rules(tenant.create(on_kai(tenant, annotations=annotations), mutated=False))


@pytest.mark.parametrize("labels", [{"priorityClassName": "system-node-critical"},
                                    {"priorityClassName": "another-teams-class"},
                                    {"kai.scheduler/preemptibility": "semi-preemptible"}])
def test_priority_only_from_kais_own_classes(tenant, labels):
    assert "granted-values" in rules(tenant.create(on_kai(tenant, labels=labels)))


def test_a_fraction_container_name_must_name_a_container(tenant):
    pod = on_kai(tenant, annotations={"gpu-fraction": "0.5", "gpu-fraction-container-name": "ghost"})
    assert rules(tenant.create(pod)) == {"kai-webhook"}
    assert "granted-values" in rules(tenant.create(pod, mutated=False))


# --- the device-list ConfigMap ---------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["my-devices-x-default", "", "-shared-gpu",
                                    "other-pod-x-default-x-team-nlp-bq2kd7x-shared-gpu",
                                    "model-x-default-x-team-nl-bq2kd7x-shared-gpu",
                                    "model-x-default-x-{release}-AAAAAAA-shared-gpu"])
def test_a_device_list_prefix_kai_did_not_derive_for_this_pod_is_refused(tenant, prefix):
    prefix = prefix.format(release=tenant.team.vcluster_name)
    pod = on_kai(tenant, annotations={"gpu-fraction": "0.5", "runai/shared-gpu-configmap": prefix})
    assert "device-list-name" in rules(tenant.create(pod))


def test_kais_derived_prefix_is_admitted_at_every_tag_long_names_included(tenant):
    for name in ("model", "a-very-long-model-name-that-is-cut.-x"):
        for tag in ACCEPTED_TAGS["kai-scheduler/KAI-Scheduler"]:
            assert tenant.create(on_kai(tenant, annotations={"gpu-fraction": "0.5"}, name=name), kai_version=tag) == []


def test_a_device_list_prefix_on_a_pod_without_a_fraction_is_refused(tenant):
    host = tenant.host_pod(on_kai(tenant, containers=[container(gpus="1")]))
    host["metadata"]["annotations"]["runai/shared-gpu-configmap"] = f"{host['metadata']['name']}-bq2kd7x-shared-gpu"
    assert "device-list-name" in rules(tenant.create_host(host))


# --- keys that move a pod between queues, shards, groups or GPUs ------------------------------------------


@pytest.mark.parametrize("metadata", [
    {"labels": {"kai.scheduler/node-pool": "pool-of-nobody"}},
    {"labels": {"project": "team-vision"}},
    {"labels": {"runai-gpu-group": "5c0a7f3e-group"}},
    {"labels": {"runai-gpu-group/5c0a7f3e": "5c0a7f3e"}},
    {"labels": {"kai.scheduler/subgroup-name": "leader"}},
    {"annotations": {"received-resource-type": "Regular"}},
    {"annotations": {"kai.scheduler/staleness-grace-period": "-1s"}},
    {"annotations": {"kai.scheduler/numa-placement-observed": "{}"}},
    {"annotations": {"nvidia.com/mig-3g.40gb": "1"}},
    {"annotations": {"mps": "true"}},
    {"annotations": {"cni.projectcalico.org/ipAddrs": "[\"10.1.0.10\"]"}},
    {"annotations": {"k8s.v1.cni.cncf.io/networks": "host-net"}},
    {"annotations": {"ipam.cilium.io/ip-pool": "platform-pool"}},
    {"annotations": {"policy.cilium.io/no-track-port": "53/udp"}},
    {"annotations": {"io.cilium.no-track-port": "53"}},
    {"annotations": {"config.cilium.io/disable-source-ip-verification": "true"}},
    {"annotations": {"vcluster.loft.sh/skip-translate": "true"}},
    {"labels": {"vcluster.loft.sh/paused": "true"}},
], ids=lambda m: next(iter(next(iter(m.values())))))
def test_reserved_keys_are_refused_at_creation(tenant, metadata):
    assert "reserved-keys" in rules(tenant.create(on_kai(tenant, **metadata)))


# --- API validation and the tenant's DNS ----------------------------------------------------------------


def test_a_device_list_reference_in_a_gpu_less_container_is_refused_by_the_api_server(tenant):
    # deviceaccess: KAI sets value "void" on the first entry and keeps its valueFrom; the API server then
    # refuses the pod (value and valueFrom together), so it is never created.
    reference = {"name": "NVIDIA_VISIBLE_DEVICES",
                 "valueFrom": {"configMapKeyRef": {"name": "all-gpus", "key": "NVIDIA_VISIBLE_DEVICES"}}}
    assert rules(tenant.create(on_kai(tenant, containers=[container(env_entries=[reference])]))) == {"api-validation"}


def test_only_the_shipped_dns_wears_the_dns_label(tenant):
    shipped = coredns_image(tenant.team.vcluster)

    def dns_pod(image: str) -> dict:
        entry = container("coredns", env={"NVIDIA_VISIBLE_DEVICES": "void"})
        entry["image"] = image
        return on_kai(tenant, namespace="kube-system", labels={"k8s-app": "vcluster-kube-dns"}, containers=[entry])
    assert tenant.create(dns_pod(shipped)) == []
    assert "reserved-values" in rules(tenant.create(dns_pod("busybox:1.36")))
    elsewhere = dns_pod(shipped)
    elsewhere["metadata"]["namespace"] = "default"
    assert "reserved-values" in rules(tenant.create(elsewhere))
    dns = tenant.host_pod(dns_pod(shipped))
    debugged = copy.deepcopy(dns)
    debugged["spec"]["ephemeralContainers"] = [{"name": "shell", "image": "busybox:1.36",
                                                "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}]
    assert "reserved-values" in rules(tenant.update(dns, debugged, subresource="ephemeralcontainers"))
    # vCluster syncs a later image change (diff.go calcContainerImageDiff): the label would then open the host's
    # DNS to any image the tenant picks.
    seen, host = running(tenant, dns_pod(shipped))
    swapped = copy.deepcopy(seen)
    swapped["spec"]["containers"][0]["image"] = "busybox:1.36"
    assert "reserved-values" in rules(tenant.update(host, syncer_update(host, seen, swapped, tenant.team)))


def test_a_device_list_reference_to_a_configmap_kai_does_not_make_is_refused(tenant):
    host = tenant.host_pod(on_kai(tenant, annotations={"gpu-fraction": "0.5"}))
    prefix = host["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    for name in (f"{prefix}-mine-shared-gpu-0", f"{prefix}-0-evar", f"{prefix}-0x"):
        tampered = copy.deepcopy(host)
        entry = next(e for e in tampered["spec"]["containers"][0]["env"] if e["name"] == "NVIDIA_VISIBLE_DEVICES")
        entry["valueFrom"]["configMapKeyRef"]["name"] = name
        assert "device-env" in rules(tenant.create_host(tampered)), name


# --- what the node gives a pod beyond what KAI allocates and charges ------------------------------------------


# envFrom keys that complete the prefix to the device plugin's variable: a ConfigMap or Secret of the tenant's
# with VISIBLE_DEVICES (or VIDIA_VISIBLE_DEVICES) set to "all" shows the container every GPU of the node under
# the device plugin's envvar strategy, whose list the pod's own env overrides.
DEVICE_LIST_SOURCES = [
    {"prefix": "NVIDIA_", "configMapRef": {"name": "gpus"}},
    {"prefix": "N", "secretRef": {"name": "gpus"}},
    {"prefix": "NVIDIA_VISIBLE_", "configMapRef": {"name": "gpus", "optional": True}},
]


def gpu_container(name: str, source: dict, *, mig: bool = False) -> dict:
    return container(name, mig="nvidia.com/mig-1g.10gb", env_from=[source]) if mig else \
        container(name, gpus="1", env_from=[source])


@pytest.mark.parametrize("source", DEVICE_LIST_SOURCES, ids=lambda source: source["prefix"])
@pytest.mark.parametrize("where", ["containers", "initContainers"])
def test_an_env_from_prefix_that_spells_the_device_list_is_refused(tenant, source, where):
    held = gpu_container("model", source)
    pod = on_kai(tenant, containers=[held]) if where == "containers" else \
        on_kai(tenant, containers=[container()], initContainers=[held])
    assert rules(tenant.create(pod)) == {"gpu-env-from"}


@pytest.mark.parametrize("source", DEVICE_LIST_SOURCES, ids=lambda source: source["prefix"])
def test_an_env_from_prefix_that_spells_the_device_list_of_a_mig_slice_is_refused(tenant, source):
    assert rules(tenant.create(on_kai(tenant, containers=[gpu_container("model", source, mig=True)]))) == {
        "gpu-env-from"}


def test_pod_level_resources_are_refused(tenant):
    # KAI's pod_info sums the containers' requests (and overhead); the kubelet reserves spec.resources. The pod
    # would be charged 100m and 128Mi while 32 cores and 128Gi of the node are held.
    small = container("model")
    small["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    big = {"requests": {"cpu": "32", "memory": "128Gi"}, "limits": {"cpu": "32", "memory": "128Gi"}}
    pod = on_kai(tenant, containers=[small], resources=big)
    assert tenant.host_pod(pod)["spec"]["resources"] == big, "vCluster keeps spec.resources on a 1.34+ host"
    assert rules(tenant.create(pod)) == {"pod-resources"}
    # On any later write of such a pod too (a pod created before the rule, a debug container added).
    host = tenant.host_pod(on_kai(tenant, containers=[small]))
    widened = copy.deepcopy(host)
    widened["spec"]["resources"] = big
    assert "pod-resources" in rules(tenant.update(host, widened))
    debugged = copy.deepcopy(widened)
    debugged["spec"]["ephemeralContainers"] = [{"name": "shell", "image": "busybox:1.36",
                                                "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}]
    assert rules(tenant.update(widened, debugged, subresource="ephemeralcontainers")) == {"pod-resources"}


@pytest.mark.parametrize("fraction", ["0.054", "0.055", "0.125", "0.333", "0.995", "0.0501", "0.0500001", "0.040"])
def test_a_fraction_finer_than_kai_charges_is_refused(tenant, fraction):
    # getExtendedResourceGpus rounds a portion to hundredths for the queue: 0.054 is charged as 0.05.
    pod = on_kai(tenant, annotations={"gpu-fraction": fraction})
    assert "granted-values" in rules(tenant.create(pod, mutated=False))
    assert "granted-values" in rules(tenant.create(pod))


# --- two kinds of GPU in one pod ---------------------------------------------------------------------------


@pytest.mark.parametrize("pod", [
    {"containers": [container("model", gpus="1"), container("slice", mig="nvidia.com/mig-1g.10gb")]},
    {"containers": [container("model", gpus="2", mig="nvidia.com/mig-3g.40gb")]},
    {"containers": [container("slice", mig="nvidia.com/mig-1g.10gb")], "initContainers": [container("warm", gpus="4")]},
    {"annotations": {"gpu-fraction": "0.05"},
     "containers": [container(), container("slice", mig="nvidia.com/mig-7g.80gb")]},
    {"annotations": {"gpu-memory": "1024"},
     "containers": [container(), container("slice", mig="nvidia.com/mig-1g.10gb")]},
], ids=["whole-and-slice", "one-container", "whole-init", "fraction-and-slice", "memory-and-slice"])
def test_a_mig_slice_with_whole_gpus_or_a_fraction_is_refused(tenant, pod):
    # KAI's scheduler (node_info.go setAcceptedResources) charges a running MIG pod for its slices only, so whole GPUs
    # beside them leave the queue's and the node's books and KAI places other teams' pods on them; a fraction
    # replaces the slices in its accounting (pod_info.go updatePodAdditionalFields). KAI's webhook refuses a fraction
    # with nvidia.com/gpu only.
    spec = dict(pod)
    assert rules(tenant.create(on_kai(tenant, annotations=spec.pop("annotations", None), **spec))) == {"gpu-kinds"}
