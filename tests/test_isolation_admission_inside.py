"""A memory-capped and a MIG team's pods judged inside the vCluster as on the host, and an air-gapped site's.

The shipped copy of the tier rules (tests/test_virtual_defaults.py's ``Inside``) refuses at kubectl apply what
the host policies refuse, with the host's message, and patches HAMi-core into an honest fractional pod; every
pod of KAI's docs still runs for a memory-capped team, on a site that pulls HAMi-core from its registry mirror
too. The host boundary of each tier, tested by attack, is tests/test_isolation_admission.py.
"""

from __future__ import annotations

import copy

import pytest

from config import versions
from tests.conftest import ACCEPTED_TAGS, run
from tests.test_admission_honest import KAI, kai_doc_pods, refused_docs
from tests.isolation_sim import IsolationTenant, isolation_tenant_of, with_hami_core
from tests.tenant_sim import container, virtual_pod
from tests.test_isolation_admission import (  # noqa: F401 (capped, mig, site: fixtures)
    CONFIG, capped, fractional, mig, on_kai, rules, site)
from tests.test_virtual_defaults import Inside
from tests.apiserver_pods import pull_policy_defaults


# --- inside the vCluster: the same refusals at kubectl apply ------------------------------------------


@pytest.fixture(scope="module")
def inside_capped(capped):
    return Inside(capped)


@pytest.fixture(scope="module")
def inside_mig(mig):
    return Inside(mig)


def honest_capped_pod() -> dict:
    return with_hami_core(virtual_pod(annotations={"gpu-fraction": "0.5"}))


def test_an_honest_memory_capped_pod_passes_inside_and_on_the_host(inside_capped):
    mutated, refused = inside_capped.create(honest_capped_pod())
    assert refused == []
    assert inside_capped.tenant.create(mutated) == []


def test_a_fractional_pod_without_the_library_gets_it_inside_and_keeps_everything_else(inside_capped):
    pod = virtual_pod(annotations={"gpu-fraction": "0.5", "gpu-fraction-container-name": "model"}, containers=[
        container("sidecar"), {**container("model"), "env": [{"name": "MODEL", "value": "llama"}],
                               "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}])
    pod["spec"]["volumes"] = [{"name": "cache", "emptyDir": {}}]
    # Without the in-vCluster policies the host refuses it: the test can fail.
    assert "hami-core" in rules(inside_capped.tenant.create(pod))
    mutated, refused = inside_capped.create(pod)
    assert refused == [] and inside_capped.tenant.create(mutated) == []
    sidecar, model = mutated["spec"]["containers"]
    assert sidecar == pull_policy_defaults(pod)["spec"]["containers"][0], "only the fractional container is changed"
    assert model["env"][0] == {"name": "MODEL", "value": "llama"} and model["volumeMounts"][0]["name"] == "cache"
    assert [v["name"] for v in mutated["spec"]["volumes"]][0] == "cache"
    # Applied again (reinvocation), nothing changes.
    assert inside_capped.mutate(mutated) == mutated


def test_the_library_is_not_patched_into_pods_without_a_fraction_or_into_a_container_the_pod_lacks(inside_capped):
    whole = virtual_pod(containers=[container(gpus="1")])
    assert "volumes" not in inside_capped.mutate(whole)["spec"]
    missing = virtual_pod(annotations={"gpu-fraction": "0.5", "gpu-fraction-container-name": "absent"})
    mutated, refused = inside_capped.create(missing)
    assert [c["name"] for c in mutated["spec"]["containers"]] == [c["name"] for c in missing["spec"]["containers"]]
    assert refused, "a fraction for a container the pod lacks is refused, not patched"


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_every_pod_of_kais_docs_runs_unmodified_for_a_memory_capped_team(inside_capped, tag):
    refused_paths = refused_docs(inside_capped.tenant)
    for path, found in kai_doc_pods(tag).items():
        for pod in found:
            pod = copy.deepcopy(pod)
            pod["metadata"].setdefault("namespace", "default")
            mutated, refused = inside_capped.create(pod)
            host = refused or inside_capped.tenant.create(mutated, kai_version=tag)
            if path in refused_paths:
                assert refused_paths[path] in " ".join(host), path
            else:
                assert host == [], f"{path}: {pod['metadata']['name']}"


@pytest.mark.parametrize("attack", ["per-device-limit", "mig-slice"])
def test_a_memory_capped_attack_is_refused_inside_with_the_hosts_message(inside_capped, attack):
    pods = {
        "per-device-limit": honest_capped_pod(),
        "mig-slice": virtual_pod(containers=[container(mig="nvidia.com/mig-1g.10gb")]),
    }
    pod = pods[attack]
    if attack == "per-device-limit":
        pod["spec"]["containers"][0]["env"].append({"name": "CUDA_DEVICE_MEMORY_LIMIT_0", "value": "80g"})
    mutated, refused = inside_capped.create(pod)
    host = inside_capped.tenant.create(mutated)
    assert refused and set(refused) <= set(host)


@pytest.mark.parametrize("rule, pod", [
    ("gpu-env-from", lambda: virtual_pod(containers=[container(gpus="1", env_from=[
        {"prefix": "NVIDIA_", "configMapRef": {"name": "gpus"}}])])),
    ("pod-resources", lambda: virtual_pod(resources={"requests": {"cpu": "32", "memory": "128Gi"}})),
    ("granted-values", lambda: with_hami_core(virtual_pod(annotations={"gpu-fraction": "0.054"}))),
], ids=["env-from-device-list", "pod-level-resources", "fraction-in-thousandths"])
def test_a_memory_capped_team_meets_the_tenant_rules_inside_with_the_hosts_message(inside_capped, rule, pod):
    mutated, refused = inside_capped.create(pod())
    assert rules(refused) == {rule}
    assert set(refused) <= set(inside_capped.tenant.create(mutated))


@pytest.mark.parametrize("rule, pod", [
    ("gpu-env-from", lambda: virtual_pod(containers=[container(mig="nvidia.com/mig-1g.10gb", env_from=[
        {"prefix": "N", "secretRef": {"name": "gpus"}}])])),
    ("pod-resources", lambda: virtual_pod(containers=[container(mig="nvidia.com/mig-1g.10gb")],
                                          resources={"limits": {"cpu": "32", "memory": "128Gi"}})),
], ids=["env-from-device-list", "pod-level-resources"])
def test_a_mig_team_meets_the_tenant_rules_inside_with_the_hosts_message(inside_mig, rule, pod):
    mutated, refused = inside_mig.create(pod())
    assert rules(refused) == {rule}
    assert set(refused) <= set(inside_mig.tenant.create(mutated))


@pytest.mark.parametrize("pod, admitted", [
    (lambda: virtual_pod(containers=[container(mig="nvidia.com/mig-1g.10gb")]), True),
    (lambda: virtual_pod(containers=[container(mig="nvidia.com/mig-3g.40gb")]), False),
    (lambda: virtual_pod(annotations={"gpu-fraction": "0.5"}), False),
], ids=["own-profile", "other-profile", "fraction"])
def test_a_mig_teams_pods_are_judged_inside_as_on_the_host(inside_mig, pod, admitted):
    mutated, refused = inside_mig.create(pod())
    host = inside_mig.tenant.create(mutated)
    assert (refused == [] and host == []) if admitted else (refused and set(refused) <= set(host))


# --- an air-gapped site: HAMi-core comes from the site's registry mirror ------------------------------------

MIRROR = "registry.lab.internal:5000/dockerhub"


@pytest.fixture(scope="module")
def mirrored() -> IsolationTenant:
    config = copy.deepcopy(CONFIG)
    config["gpu-tenancy:vcluster"] = {"extraValues": {"controlPlane": {"advanced": {"defaultImageRegistry": MIRROR}}}}
    return isolation_tenant_of(run(config, stack="isolation"), config, "team-nlp")


def test_a_mirrored_site_loads_hami_core_from_its_mirror_and_the_host_accepts_only_that(mirrored):
    inside = Inside(mirrored)
    mirror_image = f"{MIRROR}/{versions.HAMI_CORE_IMAGE}"
    mutated, refused = inside.create(virtual_pod(annotations={"gpu-fraction": "0.5"}))
    assert refused == [] and mirrored.create(mutated) == []
    assert [volume["image"]["reference"] for volume in mutated["spec"]["volumes"]] == [mirror_image]
    # The image the site cannot pull (docker.io) is not the library the platform vouches for there.
    assert "hami-core" in rules(mirrored.create(fractional(mirrored)))
    assert mirrored.create(with_hami_core(on_kai(mirrored, annotations={"gpu-fraction": "0.5"}),
                                          image=mirror_image)) == []


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_every_pod_of_kais_docs_runs_unmodified_for_a_memory_capped_team_of_a_mirrored_site(mirrored, tag):
    inside = Inside(mirrored)
    for path, found in kai_doc_pods(tag).items():
        if path in refused_docs(mirrored):
            continue
        for pod in found:
            pod = copy.deepcopy(pod)
            pod["metadata"].setdefault("namespace", "default")
            mutated, refused = inside.create(pod)
            assert (refused or mirrored.create(mutated, kai_version=tag)) == [], f"{path}: {pod['metadata']['name']}"
