"""A pod names only the resources the platform charges or bounds (rule ``resource-names``).

KAI's scheduler builds, on every cycle, one vector per pod and per node with a dimension for every resource name any
pod of the cluster requests (``pkg/scheduler/cache/cluster_info/cluster_info.go``: ``AddResourceList`` over every
container's requests; ``resource_info/resource_vector.go``: ``NewResourceVector`` as long as the map), and
kube-state-metrics exports a series per container and resource name. The API server takes any extended resource name
with a domain, in any number, and vCluster copies requests as written: a team's pods naming thousands of made-up
resources made every KAI cycle allocate and walk vectors that wide for every team's pods and nodes (the scheduler
slows or runs out of memory for everyone) while staying Pending at no cost to the team. No queue charges an extended
resource either.

- Attack: pods as vCluster syncs them asking for made-up or unlisted resources (in a container or an init container,
  in requests or limits only) are refused.
- Honest: cpu, memory, ephemeral storage, huge pages, whole GPUs and MIG slices pass; so do KAI's documented pods and
  the seeds' (tests/test_admission_honest.py).
"""

from __future__ import annotations

import re

import pytest

from components.admission_devices import ALLOWED_RESOURCES
from tests.conftest import ACCEPTED_TAGS, git, mirrored_tag
from tests.test_admission_attacks import mixed_run, on_kai, rules, tenant  # noqa: F401 (fixtures)
from tests.tenant_sim import container

KAI = "kai-scheduler/KAI-Scheduler"


def _asking(**resources: str) -> dict:
    entry = container()
    for kind in ("limits", "requests"):
        entry["resources"][kind].update(resources)
    return entry


@pytest.mark.parametrize("name", ["example.com/widget", "rdma/hca_shared_devices_a", "hugepages-4Ki",
                                  "nvidia.com/gpu.shared", "amd.com/gpu"])
def test_a_resource_the_platform_does_not_charge_or_bound_is_refused(tenant, name):
    pod = on_kai(tenant, containers=[_asking(**{name: "1"})])
    assert "resource-names" in rules(tenant.create(pod))
    init = on_kai(tenant, containers=[container()])
    init["spec"]["initContainers"] = [_asking(**{name: "1"})]
    assert "resource-names" in rules(tenant.create(init))


def test_thousands_of_made_up_resources_are_refused(tenant):
    pod = on_kai(tenant, containers=[_asking(**{f"example.com/r{i}": "1" for i in range(2000)})])
    assert "resource-names" in rules(tenant.create(pod))


def test_what_the_platform_charges_or_bounds_passes(tenant):
    pod = on_kai(tenant, containers=[_asking(**{"ephemeral-storage": "1Gi", "hugepages-2Mi": "64Mi"}),
                                     container("trainer", gpus="1")])
    assert "resource-names" not in rules(tenant.create(pod))
    assert {"cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"} <= set(ALLOWED_RESOURCES)


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_gives_every_requested_resource_name_a_dimension_of_every_vector(tag):
    tag = mirrored_tag(KAI, tag)
    cluster = git(KAI, "show", f"{tag}:pkg/scheduler/cache/cluster_info/cluster_info.go")
    assert re.search(r"for _, container := range append\(pod\.Spec\.InitContainers, pod\.Spec\.Containers\.\.\.\) \{"
                     r"\s*vectorMap\.AddResourceList\(container\.Resources\.Requests\)", cluster)
    vectors = git(KAI, "show", f"{tag}:pkg/scheduler/api/resource_info/resource_vector.go")
    assert "return make(ResourceVector, len(indexMap.resourceNames))" in vectors
