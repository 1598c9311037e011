"""What one team's pods can do to another team's pods through a shared node's disk and the kubelet's eviction order
(docs/security-pressure.md#node-pressure).

Attacks are pods a hostile tenant, cluster-admin inside its vCluster, would send, synced as vCluster 0.36.1 syncs
them and defaulted by the host's LimitRanger (tests/tenant_sim.py). The kubelet evicts a pod whose ephemeral storage
passes its own limit before looking at the node's pressure (pkg/kubelet/eviction/eviction_manager.go
``localStorageEviction``, read untagged), so a limit on every container is what keeps a tenant from filling the disk
other teams' pods write to. Honest pods (KAI's docs, the seeds) are admitted with the defaults:
tests/test_admission_honest.py runs them through the same LimitRanger and its maximum.
"""

from __future__ import annotations

import pytest

from components.tenant_quota import resource_quota_hard
from config.key_types import quantity_value
from tests.conftest import ACCEPTED_TAGS, ACCEPTED_VCLUSTER_TAGS, dev_config, git, go_function, run
from tests.tenant_sim import KAI_SCHEDULER, container, tenant_of, virtual_pod
from tools.deployability.quota import pod_usage

EPHEMERAL = "ephemeral-storage"
VCLUSTER, KAI = "loft-sh/vcluster", "kai-scheduler/KAI-Scheduler"


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, dev_config(), "team-nlp")


def hostile(tenant, *containers, **spec) -> dict:
    """A pod in the team's own queue (the host policy's other rules pass), filling the node with what it names."""
    return virtual_pod("filler", queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER,
                       containers=list(containers) or [container()], **spec)


def writer(name: str, **resources) -> dict:
    entry = container(name)
    for kind, amounts in resources.items():
        entry["resources"].setdefault(kind, {}).update(amounts)
    return entry


def test_a_container_that_sets_no_ephemeral_storage_limit_gets_one_the_kubelet_enforces(tenant):
    # An emptyDir without sizeLimit and an init container: the kubelet counts emptyDir, writable layers and logs
    # against the pod's limit, the sum of its containers' (podEphemeralStorageLimitEviction).
    pod = hostile(tenant, container("fill"), initContainers=[container("prepare")],
                  volumes=[{"name": "scratch", "emptyDir": {}}])
    host = tenant.host_pod(pod)
    for entry in host["spec"]["containers"] + host["spec"]["initContainers"]:
        assert entry["resources"]["limits"][EPHEMERAL] == "8Gi", entry["name"]
        # No node disk is reserved: the default request is 0, so scheduling is what it was without the limit.
        assert entry["resources"]["requests"][EPHEMERAL] == "0"
    assert tenant.create(pod) == []


@pytest.mark.parametrize("resources", [{"limits": {EPHEMERAL: "10Ti"}}, {"requests": {EPHEMERAL: "30Gi"}},
                                       {"limits": {EPHEMERAL: "21Gi"}, "requests": {EPHEMERAL: "1Gi"}}],
                         ids=["huge-limit", "request-above-max", "limit-just-above-max"])
def test_a_container_that_raises_its_own_limit_past_the_maximum_is_refused(tenant, resources):
    refusals = tenant.create(hostile(tenant, writer("fill", **resources)))
    assert refusals and "maximum ephemeral-storage usage per Container is 20Gi" in refusals[0]
    # Init containers are held to the same maximum.
    refusals = tenant.create(hostile(tenant, container("main"), initContainers=[writer("fill", **resources)]))
    assert refusals and "in container fill" in refusals[0]


def test_a_pod_at_the_maximum_is_admitted(tenant):
    assert tenant.create(hostile(tenant, writer("cache", limits={EPHEMERAL: "20Gi"}))) == []


def test_many_containers_at_the_maximum_do_not_add_up_past_the_teams_total(tenant):
    """Each container may hold 20Gi; the quota pools the limits, so no pod (and no set of pods) of the team
    holds more than its total, whatever its count of containers."""
    hard = resource_quota_hard(tenant.team.vcluster)
    total = quantity_value(hard["limits.ephemeral-storage"])
    pod = hostile(tenant, *[writer(f"fill-{index}", limits={EPHEMERAL: "20Gi"}) for index in range(50)])
    host = tenant.host_pod(pod)
    assert tenant.create(pod) == []  # the LimitRange and the policy pass it ...
    usage, unset = pod_usage(host["spec"], ({}, {}))
    assert not unset and usage[f"limits.{EPHEMERAL}"] == 50 * 20 * 2 ** 30
    assert usage[f"limits.{EPHEMERAL}"] > total  # ... and the ResourceQuota refuses it (1000Gi > 818Gi)


def test_a_tenant_cannot_rank_its_pods_behind_other_teams_for_eviction(tenant):
    """The kubelet ranks pods for disk and memory pressure by usage above requests, then by ``spec.priority``, then
    by usage (pkg/kubelet/eviction/helpers.go ``rankDiskPressureFunc``, ``rankMemoryPressure``). A tenant's KAI
    priority is a label KAI reads; a Kubernetes priority class on the pod is dropped by the syncer, so every team's
    pods share priority 0 and the largest consumer goes first."""
    pod = hostile(tenant, container("fill"), priorityClassName="system-node-critical", priority=2000001000)
    pod["metadata"]["labels"]["priorityClassName"] = "inference"
    host = tenant.host_pod(pod)
    assert "priorityClassName" not in host["spec"] and "priority" not in host["spec"]
    assert host["metadata"]["labels"]["priorityClassName"] == "inference"  # KAI's own ordering, inside its queue


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_syncer_drops_a_pods_priority_at_every_accepted_vcluster(tag):
    """What tests/vcluster_pods.py does, read from the translator: with neither priority-class sync on (the config
    refuses both), the host pod keeps neither the class nor the number."""
    source = git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/pods/translate/translator.go")
    body = go_function(source, "(t *translator) Translate")
    branch = "} else if allPriorityClassesSyncingDisabled {"
    reset = body[body.index(branch) + len(branch):]
    reset = reset[:reset.index("}")]
    assert 'pPod.Spec.PriorityClassName = ""' in reset and "pPod.Spec.Priority = nil" in reset


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_gives_pods_without_a_class_no_priority(tag):
    """KAI's chart creates its priority classes (train, build, inference, ...) as Kubernetes PriorityClasses, but
    none is the global default, so a synced pod without a class gets priority 0 on the host like every other team's."""
    listing = git(KAI, "ls-tree", "-r", "--name-only", tag, "deployments/kai-scheduler/templates")
    classes = [path for path in listing.splitlines() if "priorityclass" in path.lower()]
    texts = [git(KAI, "show", f"{tag}:{path}") for path in classes]
    assert all("globalDefault: true" not in text for text in texts)


def test_a_team_with_a_bigger_disk_budget_gets_it_and_only_it():
    config = dev_config()
    config["gpu-tenancy:teams"][1]["vcluster"] = {"limitRange": {"defaultEphemeralStorage": "16Gi",
                                                                 "maxEphemeralStorage": "64Gi"}}
    program = run(config, stack="dev")
    big, other = (tenant_of(program, config, config["gpu-tenancy:teams"][index]["name"]) for index in (1, 0))
    model_cache = hostile(big, writer("ollama", limits={EPHEMERAL: "60Gi"}))
    model_cache["metadata"]["labels"]["kai.scheduler/queue"] = big.team.queue_name
    assert big.create(model_cache) == []
    model_cache["metadata"]["labels"]["kai.scheduler/queue"] = other.team.queue_name
    assert other.create(model_cache)  # the other teams keep the stack's maximum
    assert big.host_pod(hostile(big, container("x")))["spec"]["containers"][0]["resources"]["limits"][EPHEMERAL] \
        == "16Gi"
