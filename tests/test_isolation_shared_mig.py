"""A shared team on a site with a MIG-split pool takes no MIG slices (components/isolation_admission.py, [no-mig]).

KAI charges a shared team's ``nvidia.com/mig-3g.40gb`` to its own queue as 3 GPUs, so inside its own quota it could
hold the slices a mig team's quota promises, and a queue inside its quota is never reclaimed from. The red-team
probe: a shared team with the default node labels (which reach the MIG pool) had 8 such slices admitted on the host.
"""

from __future__ import annotations

import pytest

from tests.conftest import run
from tests.isolation_sim import IsolationTenant, isolation_tenant_of
from tests.isolation_spec import isolation_config, prefixed
from tests.tenant_sim import container
from tests.test_isolation_admission import on_kai, rules
from tests.test_virtual_defaults import Inside


def hostile_config() -> dict:
    config = isolation_config()
    config["teams"].append({"name": "team-hostile", "resources": {"gpu": {"quota": 24, "limit": 24}}})
    return prefixed(config)


CONFIG = hostile_config()


@pytest.fixture(scope="module")
def hostile() -> IsolationTenant:
    return isolation_tenant_of(run(CONFIG, stack="isolation-hostile"), CONFIG, "team-hostile")


def slices(count: str, profile: str = "3g.40gb") -> dict:
    model = container(mig=f"nvidia.com/mig-{profile}")
    model["resources"]["limits"][f"nvidia.com/mig-{profile}"] = count
    model["resources"]["requests"] = dict(model["resources"]["limits"])
    return model


def test_the_hostile_team_reaches_the_mig_pool(hostile):
    # What makes the attack real: nothing in its host nodeSelector keeps its pods off the h100 pool.
    host = hostile.host_pod(on_kai(hostile, containers=[slices("8")]))
    assert "gpu-tenancy/pool" not in host["spec"].get("nodeSelector", {})


@pytest.mark.parametrize("pod", [
    lambda tenant: on_kai(tenant, containers=[slices("8")]),
    lambda tenant: on_kai(tenant, containers=[slices("1", "1g.10gb")]),
    lambda tenant: on_kai(tenant, containers=[container()], initContainers=[slices("1", "7g.80gb")]),
], ids=["eight-3g", "one-1g", "init-container"])
def test_a_shared_team_cannot_take_mig_slices_on_the_host(hostile, pod):
    assert "no-mig" in rules(hostile.create(pod(hostile)))


@pytest.mark.parametrize("pod", [
    lambda tenant: on_kai(tenant, containers=[container(gpus="2")]),
    lambda tenant: on_kai(tenant, annotations={"gpu-fraction": "0.5"}),
], ids=["whole", "fraction"])
def test_a_shared_teams_own_gpus_still_pass(hostile, pod):
    assert hostile.create(pod(hostile)) == []


def test_inside_the_vcluster_the_same_pod_is_refused_with_the_hosts_message(hostile):
    inside = Inside(hostile)
    mutated, refused = inside.create(on_kai(hostile, containers=[slices("8")]))
    assert "no-mig" in rules(refused)
    assert set(refused) <= set(hostile.create(mutated))

