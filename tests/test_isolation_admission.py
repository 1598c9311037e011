"""Each isolation tier's boundary, tested by attack (components/isolation_admission.py).

Pods are written as a hostile tenant would, synced as vCluster 0.36.1 syncs them, mutated by KAI's pod
webhook (tests/tenant_sim.py) and, on a site with memory-capped teams, by KAI's hamicore plugin
(tests/isolation_sim.py); then both host policies of the team judge them. Inside the vCluster the shipped
copy of the rules refuses the same pods at create: tests/test_isolation_admission_inside.py.
"""

from __future__ import annotations

import copy

import pytest

from components.isolation_admission import LIBRARY
from config.image_volumes import IMAGE_VOLUME_FLOOR
from tests.conftest import run
from tests.isolation_sim import MEMORY_LIMIT, IsolationTenant, isolation_tenant_of, with_hami_core
from tests.isolation_spec import isolation_config, prefixed
from tests.tenant_sim import KAI_SCHEDULER, POLICY, container, virtual_pod
from tools.deployability.pod_security import violations

CONFIG = prefixed(isolation_config())


@pytest.fixture(scope="module")
def site():
    return run(CONFIG, stack="isolation")


@pytest.fixture(scope="module")
def capped(site) -> IsolationTenant:
    return isolation_tenant_of(site, CONFIG, "team-nlp")


@pytest.fixture(scope="module")
def mig(site) -> IsolationTenant:
    return isolation_tenant_of(site, CONFIG, "team-llm")


@pytest.fixture(scope="module")
def exclusive(site) -> IsolationTenant:
    return isolation_tenant_of(site, CONFIG, "team-train")


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def on_kai(tenant: IsolationTenant, **kwargs) -> dict:
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, **kwargs)


def fractional(tenant: IsolationTenant, **kwargs) -> dict:
    return with_hami_core(on_kai(tenant, annotations={"gpu-fraction": "0.5"}, **kwargs))


# --- memory-capped ------------------------------------------------------------------------------


@pytest.mark.parametrize("pod", ["fraction", "gpu-memory", "whole-gpu", "cpu"])
def test_memory_capped_legitimate_pods_are_admitted(capped, pod):
    pods = {
        "fraction": fractional(capped),
        "gpu-memory": with_hami_core(on_kai(capped, annotations={"gpu-memory": "4096"})),
        "whole-gpu": on_kai(capped, containers=[container(gpus="1")]),
        "cpu": on_kai(capped),
    }
    assert capped.create(pods[pod]) == []


def test_a_restricted_fractional_pod_stays_restricted_once_it_loads_hami_core(capped):
    """A memory-capped team may enforce Pod Security restricted: what loading HAMi-core and KAI's limit add to a pod
    that meets restricted is an image volume, a read-only mount and environment, which restricted takes on every
    Kubernetes that runs image volumes (1.35 on); on 1.32, before restricted took image volumes, the volume is refused."""
    secure = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}
    pod = fractional(capped)
    for entry in pod["spec"]["containers"]:
        entry["securityContext"] = secure
    assert capped.create(pod) == []
    host = capped.host_pod(pod)
    assert any("image" in volume for volume in host["spec"]["volumes"])
    assert violations(host["spec"], "restricted", kubernetes_version=IMAGE_VOLUME_FLOOR) == []
    assert {v.control for v in violations(host["spec"], "restricted", kubernetes_version="1.32")} == {"Volume Types"}


def test_the_fractional_container_carries_kais_limit(capped):
    host = capped.host_pod(fractional(capped))
    entries = [entry for entry in host["spec"]["containers"][0]["env"] if entry["name"] == MEMORY_LIMIT]
    prefix = host["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    assert entries == [{"name": MEMORY_LIMIT, "valueFrom": {"configMapKeyRef": {
        "name": f"{prefix}-0", "key": MEMORY_LIMIT, "optional": True}}}]


ENV_ATTACKS = {
    # HAMi-core prefers a per-device limit to the plain one KAI writes.
    "per-device-limit": [{"name": "CUDA_DEVICE_MEMORY_LIMIT_0", "value": "80g"}],
    # A cache file of its own gives each process a fresh shared region, so each gets the whole limit.
    "own-shared-cache": [{"name": "CUDA_DEVICE_MEMORY_SHARED_CACHE", "value": "/tmp/mine"}],
    "redirect-library": [{"name": "CUDA_REDIRECT", "value": "/opt/fake.so"}],
    "other-preload": [{"name": "LD_PRELOAD", "value": "/opt/noop.so"}],
}


@pytest.mark.parametrize("attack", ENV_ATTACKS)
def test_memory_capped_env_cannot_loosen_the_limit(capped, attack):
    pod = fractional(capped)
    pod["spec"]["containers"][0]["env"] = ENV_ATTACKS[attack] + pod["spec"]["containers"][0]["env"]
    assert "memory-limit" in rules(capped.create(pod))


def test_an_own_limit_is_replaced_by_kai_and_still_refused_before_kai(capped):
    pod = fractional(capped)
    pod["spec"]["containers"][0]["env"].append({"name": MEMORY_LIMIT, "value": "80g"})
    # KAI's hamicore plugin replaces the entry: the pod KAI forwards is admitted with KAI's limit.
    assert capped.create(pod) == []
    # A pod KAI's webhook did not mutate (the plugin off, or a pod KAI does not handle) is refused.
    assert "memory-limit" in rules(capped.create(pod, mutated=False))


def test_memory_capped_needs_the_hamicore_plugin(capped):
    without_plugin = IsolationTenant(capped.admission, capped.tier, capped.team, hamicore=False,
                                     size_admission=capped.size_admission)
    assert "memory-limit" in rules(without_plugin.create(fractional(capped)))


@pytest.mark.parametrize("source", [
    {"configMapRef": {"name": "limits"}},
    {"prefix": "CUDA_DEVICE_MEMORY_", "configMapRef": {"name": "limits"}},
    {"prefix": "LD_", "secretRef": {"name": "preload"}},
    {"prefix": "CUDA_", "configMapRef": {"name": "limits"}},
], ids=["unprefixed", "limit-prefix", "preload-prefix", "cuda-prefix"])
def test_memory_capped_env_from_cannot_spell_a_hami_core_name(capped, source):
    pod = fractional(capped)
    pod["spec"]["containers"][0]["envFrom"] = [source]
    assert "memory-limit" in rules(capped.create(pod))


def test_memory_capped_env_from_with_a_safe_prefix_is_admitted(capped):
    pod = fractional(capped)
    pod["spec"]["containers"][0]["envFrom"] = [{"prefix": "APP_", "configMapRef": {"name": "settings"}}]
    assert capped.create(pod) == []


@pytest.mark.parametrize("change", ["no-preload", "no-mount", "other-image", "shadowed", "parent-mount"])
def test_the_fractional_container_must_load_hami_core(capped, change):
    pod = fractional(capped)
    main = pod["spec"]["containers"][0]
    if change == "no-preload":
        main["env"] = [entry for entry in main["env"] if entry["name"] != "LD_PRELOAD"]
    elif change == "no-mount":
        main["volumeMounts"] = []
    elif change == "other-image":
        pod["spec"]["volumes"][0]["image"]["reference"] = "docker.io/someone/fake-vgpu:1"
    elif change == "shadowed":
        pod["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
        main["volumeMounts"].append({"name": "scratch", "mountPath": LIBRARY, "subPath": "x"})
    else:
        pod["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
        main["volumeMounts"].append({"name": "scratch", "mountPath": "/usr/local"})
    assert "hami-core" in rules(capped.create(pod))


def test_an_ephemeral_container_cannot_bring_its_own_limit(capped):
    host = capped.host_pod(fractional(capped))
    debug = copy.deepcopy(host)
    debug["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox", "env": [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}, {"name": "CUDA_DEVICE_MEMORY_LIMIT", "value": "80g"}]}]
    assert "memory-limit" in rules(capped.update(host, debug, subresource="ephemeralcontainers"))
    debug["spec"]["ephemeralContainers"][0]["env"].pop()
    assert capped.update(host, debug, subresource="ephemeralcontainers") == []


def test_an_update_cannot_drop_kais_limit(capped):
    host = capped.host_pod(fractional(capped))
    changed = copy.deepcopy(host)
    changed["spec"]["containers"][0]["env"] = [entry for entry in changed["spec"]["containers"][0]["env"]
                                               if entry["name"] != MEMORY_LIMIT]
    assert "memory-limit" in rules(capped.update(host, changed))


def test_memory_capped_gets_no_mig_slices(capped):
    assert "no-mig" in rules(capped.create(on_kai(capped, containers=[container(mig="nvidia.com/mig-1g.10gb")])))


# --- mig ------------------------------------------------------------------------------------------


def test_mig_team_gets_its_profile(mig):
    assert mig.create(on_kai(mig, containers=[container(mig="nvidia.com/mig-1g.10gb")])) == []
    assert mig.create(on_kai(mig)) == []


@pytest.mark.parametrize("attack", ["other-profile", "whole-gpu", "fraction", "gpu-memory", "init-container"])
def test_mig_team_cannot_take_other_gpu_shares(mig, attack):
    pods = {
        "other-profile": on_kai(mig, containers=[container(mig="nvidia.com/mig-3g.40gb")]),
        "whole-gpu": on_kai(mig, containers=[container(gpus="1")]),
        "fraction": on_kai(mig, annotations={"gpu-fraction": "0.5"}),
        "gpu-memory": on_kai(mig, annotations={"gpu-memory": "2048"}),
        "init-container": on_kai(mig, initContainers=[container("warm", mig="nvidia.com/mig-7g.80gb")]),
    }
    assert "mig-profile" in rules(mig.create(pods[attack]))


def test_mig_team_under_the_single_strategy_stays_on_its_pool(site):
    config = isolation_config()
    config["gpuOperator"]["migStrategy"] = "single"
    config["cluster"]["eks"]["gpuNodeGroups"][0]["migConfig"] = "all-1g.10gb"
    del config["teams"][1]
    single = prefixed(config)
    tenant = isolation_tenant_of(run(single, stack="isolation-single"), single, "team-llm")
    assert tenant.create(on_kai(tenant, containers=[container(gpus="1")])) == []
    assert "mig-profile" in rules(tenant.create(on_kai(tenant, containers=[container(mig="nvidia.com/mig-1g.10gb")])))
    host = tenant.host_pod(on_kai(tenant, containers=[container(gpus="1")]))
    host["spec"]["nodeSelector"]["gpu-tenancy/pool"] = "l40s"
    assert "mig-profile" in rules(tenant.admission.review(tenant.team.namespace, host, user=tenant.syncer)
                                  + tenant.tier.review(tenant.team.namespace, host, user=tenant.syncer))


# --- exclusive ------------------------------------------------------------------------------------


def test_exclusive_team_gets_whole_gpus(exclusive):
    assert exclusive.create(on_kai(exclusive, containers=[container(gpus="2")])) == []


@pytest.mark.parametrize("attack", ["fraction", "gpu-memory", "mig"])
def test_exclusive_team_cannot_request_fractions(exclusive, attack):
    pods = {
        "fraction": on_kai(exclusive, annotations={"gpu-fraction": "0.5"}),
        "gpu-memory": on_kai(exclusive, annotations={"gpu-memory": "2048"}),
        "mig": on_kai(exclusive, containers=[container(mig="nvidia.com/mig-1g.10gb")]),
    }
    assert "whole-gpus" in rules(exclusive.create(pods[attack]))
    assert "whole-gpus" in rules(exclusive.create(pods[attack], mutated=False))


def test_shared_teams_get_no_tier_policy(dev_run):
    names = {policy.inputs["metadata"]["name"] for policy in dev_run.of_type(POLICY)}
    assert not any(name.endswith("-isolation") for name in names)


# --- init containers and later updates, for every tier ----------------------------------------------


@pytest.mark.parametrize("entry", [
    {"name": "CUDA_DEVICE_MEMORY_LIMIT", "value": "80g"},
    {"name": "LD_PRELOAD", "value": "/opt/noop.so"},
    {"name": "CUDA_DEVICE_MEMORY_SHARED_CACHE", "value": "/tmp/mine"},
], ids=["limit", "preload", "shared-cache"])
def test_memory_capped_init_containers_cannot_set_hami_core_names(capped, entry):
    pod = fractional(capped, initContainers=[container("warm", env_entries=[entry])])
    assert "memory-limit" in rules(capped.create(pod))


def test_memory_capped_init_container_env_from_needs_a_safe_prefix(capped):
    pod = fractional(capped, initContainers=[container("warm", env_from=[{"configMapRef": {"name": "limits"}}])])
    assert "memory-limit" in rules(capped.create(pod))


def test_a_fraction_given_to_an_init_container_must_load_hami_core_there(capped):
    pod = fractional(capped, initContainers=[container("warm")])
    pod["metadata"]["annotations"]["gpu-fraction-container-name"] = "warm"
    assert "hami-core" in rules(capped.create(pod))


def test_exclusive_init_containers_get_no_mig_slices(exclusive):
    pod = on_kai(exclusive, initContainers=[container("warm", mig="nvidia.com/mig-1g.10gb")])
    assert "whole-gpus" in rules(exclusive.create(pod))


@pytest.mark.parametrize("tenant_name", ["mig", "exclusive"])
def test_a_fraction_cannot_be_added_by_a_later_update(request, tenant_name):
    tenant = request.getfixturevalue(tenant_name)
    host = tenant.host_pod(on_kai(tenant))
    assert tenant.create_host(host) == []
    changed = copy.deepcopy(host)
    changed["metadata"].setdefault("annotations", {})["gpu-fraction"] = "0.5"
    refused = rules(tenant.update(host, changed))
    assert {"guarded-fields", "mig-profile" if tenant_name == "mig" else "whole-gpus"} <= refused


# --- the tenant's own pod rules hold on every tier --------------------------------------------------------

TIERS = ["capped", "mig", "exclusive"]


def holding_gpus(tenant: IsolationTenant, name: str = "model", **kwargs) -> dict:
    """A container holding what the tier hands out whole: the team's MIG slice, else one GPU."""
    profile = tenant.team.isolation.mig_profile
    if profile:
        return container(name, mig=f"nvidia.com/mig-{profile}", **kwargs)
    return container(name, gpus="1", **kwargs)


@pytest.mark.parametrize("prefix", ["NVIDIA_", "N", "APP_"])
@pytest.mark.parametrize("tenant_name", TIERS)
def test_env_from_cannot_spell_the_device_list_on_any_tier(request, tenant_name, prefix):
    tenant = request.getfixturevalue(tenant_name)
    source = {"prefix": prefix, "configMapRef": {"name": "gpus"}}
    warm = holding_gpus(tenant, "warm", env_from=[source])
    pods = [on_kai(tenant, containers=[holding_gpus(tenant, env_from=[source])]),
            on_kai(tenant, containers=[container()], initContainers=[warm])]
    expected = set() if prefix == "APP_" else {"gpu-env-from"}
    assert [rules(tenant.create(pod)) for pod in pods] == [expected, expected]


@pytest.mark.parametrize("tenant_name", TIERS)
def test_pod_level_resources_are_refused_on_any_tier(request, tenant_name):
    tenant = request.getfixturevalue(tenant_name)
    pod = on_kai(tenant, containers=[holding_gpus(tenant)], resources={"requests": {"cpu": "32", "memory": "128Gi"}})
    assert rules(tenant.create(pod)) == {"pod-resources"}
    del pod["spec"]["resources"]
    assert tenant.create(pod) == []


def test_memory_capped_fractions_are_charged_in_hundredths(capped):
    assert capped.create(with_hami_core(on_kai(capped, annotations={"gpu-fraction": "0.25"}))) == []
    assert rules(capped.create(with_hami_core(on_kai(capped, annotations={"gpu-fraction": "0.054"})))) == {
        "granted-values"}
