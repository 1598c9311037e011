"""The honest set is admitted as a host of every Kubernetes a site may run serves it (tests/served_releases.json).

A host of 1.30 to 1.33 serves an unset creationTimestamp as ``null`` (its converter ignores ``omitzero``), drops
the fields its types lack and serves ``null`` where its types say so: a policy that reads one of those unguarded
refuses honest objects on that host only. Each honest synced object and each honest pod the suite builds
(tests/synced_objects_corpus.py, the seeds, KAI's docs, controllers' pods) is judged as each release serves it.
1.37, which a site may state, has no k8s.io/api release to read yet (tests/test_served_objects_contract.py).
"""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.conftest import ACCEPTED_TAGS, stack_config
from tests.served_objects import RELEASES, as_served, null_when_unset
from tests.synced_objects_corpus import honest_objects
from tests.synced_objects_sim import allocated, synced_objects_admission_for
from tests.tenant_sim import container, served, served_by, tenant_of, virtual_pod
from tests.test_admission_honest import KAI, SEED_000, SEED_003, controller_pods, in_queue, kai_doc_pods, refused_docs

ALLOCATED_IP = "10.96.143.7"


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, stack_config("dev"), "team-nlp")


@pytest.fixture(scope="module")
def synced(dev_run):
    return synced_objects_admission_for(dev_run, "team-nlp")


def test_each_release_serves_the_same_pod_its_own_way():
    """What differs: 1.33 writes an unset creationTimestamp as null, 1.34 leaves it out; 1.30 has no
    restartPolicyRules (dropped) and no image volumes; the pin keeps a field of another release as written."""
    pod = virtual_pod(containers=[{**container(), "restartPolicyRules": [{"action": "Restart"}]}],
                      workloadRef={"name": "w", "podGroup": "g"})
    assert as_served("Pod", pod, "1.33")["metadata"]["creationTimestamp"] is None
    assert "creationTimestamp" not in as_served("Pod", pod, "1.34")["metadata"]
    assert "restartPolicyRules" not in as_served("Pod", pod, "1.30")["spec"]["containers"][0]
    assert as_served("Pod", pod, "1.36")["spec"]["containers"][0]["restartPolicyRules"] == [{"action": "Restart"}]
    assert "workloadRef" in as_served("Pod", pod, "1.35")["spec"] and "workloadRef" not in as_served(
        "Pod", pod, "1.36")["spec"]
    assert as_served("Pod", pod)["spec"]["workloadRef"] == {"name": "w", "podGroup": "g"}
    assert "metadata.creationTimestamp" in null_when_unset("Pod", "1.30")
    with served_by("1.33"):  # what the policies are handed inside the block
        assert served(pod)["metadata"]["creationTimestamp"] is None
    assert "creationTimestamp" not in served(pod)["metadata"]
    with pytest.raises(AssertionError, match="1.37 is not modelled"):
        as_served("Pod", pod, "1.37")


def _refused(judge, objects: dict[str, dict]) -> dict[str, list[str]]:
    return {name: messages for name, obj in objects.items() if (messages := judge(obj))}


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_the_honest_synced_objects_are_admitted_as_every_release_serves_them(tenant, synced, release):
    objects = {}
    for name, (kind, virtual, _, simulate) in honest_objects(tenant.team).items():
        host = simulate(copy.deepcopy(virtual), tenant.team)
        if kind == "Service":  # the host's allocator, then its DefaultStorageClass admission, run before the policy
            host = allocated(host, ALLOCATED_IP)
        elif kind == "PersistentVolumeClaim":
            host["spec"].setdefault("storageClassName", tenant.team.vcluster.storage_class)
        objects[name] = host
    assert len(objects) > 10
    with served_by(release):
        assert _refused(lambda obj: synced.review(tenant.team.namespace, obj, user=tenant.syncer), objects) == {}


def _honest_pods(tenant) -> dict[str, dict]:
    seeds = {name: in_queue({"apiVersion": "v1", "kind": "Pod", **yaml.safe_load(text)}, tenant)
             for name, text in (("seed 000", SEED_000), ("seed 003", SEED_003))}
    return {**seeds, **{f"controller {kind}": pod for kind, pod in controller_pods(tenant).items()}}


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_the_honest_pods_are_admitted_as_every_release_serves_them(tenant, release):
    pods = _honest_pods(tenant)
    with served_by(release):
        assert _refused(tenant.create, pods) == {}
        # KAI's later writes and the syncer's resync of them.
        virtual = virtual_pod(queue=tenant.team.queue_name, scheduler="kai-scheduler",
                              annotations={"gpu-fraction": "0.5"})
        assert tenant.run_and_edit(virtual, lambda pod: pod["metadata"]["labels"].update(app="web")) == []


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_the_pods_of_kais_docs_are_admitted_as_every_release_serves_them(tenant, release):
    """Every pod of KAI's docs at the newest accepted tag but those the platform refuses on purpose
    (tests/test_admission_honest.py ``refused_docs``)."""
    tag, refused = ACCEPTED_TAGS[KAI][-1], refused_docs(tenant)
    pods = {f"{path}#{index}": in_queue(pod, tenant) for path, found in kai_doc_pods(tag).items()
            if path not in refused for index, pod in enumerate(found)}
    assert len(pods) > 10
    with served_by(release):
        assert _refused(lambda pod: tenant.create(pod, kai_version=tag), pods) == {}


def test_a_judged_object_without_kind_is_an_error_naming_it(tenant):
    """The model picks the Go type by kind: one without would reach the policy unserved, its unknown fields kept."""
    pod = tenant.host_pod(virtual_pod("kindless", queue=tenant.team.queue_name, scheduler="kai-scheduler"))
    del pod["kind"]
    with pytest.raises(AssertionError, match="without kind: v1 'kindless-x-default-x-"):
        tenant.create_host(pod)
