"""In-place resize (components/admission_resize.py), tested by attack.

On a 1.35+ host vCluster 0.36.1 patches a tenant's changed container resources onto the host pod through
``pods/resize`` (pkg/controllers/resources/pods/syncer.go, tests/vcluster_pods.py ``syncer_resize``). KAI checks a
queue's limit and its non-preemptible quota only when it places a pod (plugins/proportion/capacity_policy) and the
kubelet alone admits a resize: a non-preemptible pod placed at 500m would hold 15 cores past the team's quota, which
KAI never reclaims for another team. The synced-objects policy judges the syncer's resizes.

Nor can a resize take a pod past the bytes rule ``pod-entry-size`` counts it at (the pod policy does not see
``pods/resize``): the namespace's LimitRange (vCluster's ``policies.limitRange``, components/tenant_quota.py) gives
every container CPU and memory limits and requests when the pod is created, and the API server lets a resize change
only those two and remove none (``ValidatePodResize``), so a resize changes values, which are counted at their
largest, and never adds an entry.
"""

from __future__ import annotations

import copy

import pytest

from components.tenant_quota import limit_range_values
from config.pod_entry_bytes import SYNCED_POD_ENTRY_BYTES
from tests.conftest import dev_config, eks_config
from tests.kai_pods import kai_bind, kai_group
from tests.synced_objects_sim import SyncedObjectsAdmission, synced_objects_admission_for
from tests.tenant_sim import KAI_SCHEDULER, Tenant, container, tenant_of, virtual_pod
from tests.test_pod_entry_sizes import at_cap, stored
from tests.test_pod_sizes import text_bytes
from tests.vcluster_pods import copy_back, syncer_resize


@pytest.fixture(scope="module", params=["dev:team-nlp", "eks:team-legal"])
def tenant_and_policy(request, dev_run, eks_run) -> tuple[Tenant, SyncedObjectsAdmission]:
    stack, team = request.param.split(":")
    program, config = {"dev": (dev_run, dev_config()), "eks": (eks_run, eks_config())}[stack]
    return tenant_of(program, config, team), synced_objects_admission_for(program, team)


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def running(tenant: Tenant, **spec) -> tuple[dict, dict]:
    return bound(tenant, virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, **spec))


def bound(tenant: Tenant, pod: dict) -> tuple[dict, dict]:
    """(virtual pod as the tenant sees it, host pod) once KAI grouped and bound it."""
    assert tenant.create(pod) == []
    host = kai_bind(kai_group(tenant.host_pod(pod)))
    return copy_back(host, pod, tenant.team), host


def resized(tenant_and_policy, host: dict, virtual: dict) -> list[str]:
    tenant, policy = tenant_and_policy
    return policy.review(tenant.team.namespace, syncer_resize(host, virtual), operation="UPDATE", old=host,
                         user=tenant.syncer, subresource="resize")


def test_requests_may_not_change_through_an_in_place_resize(tenant_and_policy):
    tenant, _ = tenant_and_policy
    seen, host = running(tenant, labels={"kai.scheduler/preemptibility": "non-preemptible"})
    for cpu, memory in (("15", "60Gi"), ("250m", "1Gi"), ("500m", "2Gi")):
        changed = copy.deepcopy(seen)
        changed["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": memory},
                                                        "limits": {"cpu": cpu, "memory": memory}}
        assert syncer_resize(host, changed)["spec"]["containers"][0]["resources"]["requests"]["cpu"] == cpu
        assert rules(resized(tenant_and_policy, host, changed)) == {"fixed-requests"}


def test_the_syncers_other_resizes_pass(tenant_and_policy):
    # The syncer sends a resize on every sync of a pod whose host copy the LimitRanger gave defaults: it changes
    # nothing. A limit above the request may change (KAI and the kubelet's placement read requests only).
    tenant, _ = tenant_and_policy
    model = container("model")
    model["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
    seen, host = running(tenant, containers=[model])
    assert syncer_resize(host, seen) is not None and resized(tenant_and_policy, host, seen) == []
    roomier = copy.deepcopy(seen)
    roomier["spec"]["containers"][0]["resources"]["limits"]["memory"] = "4Gi"
    assert resized(tenant_and_policy, host, roomier) == []


def test_a_resize_adding_limits_to_every_container_of_a_pod_at_the_cap_adds_no_entry(tenant_and_policy):
    """The attack on ``pod-entry-size``: a pod storing exactly the cap, whose containers the tenant wrote without
    limits, then limits added to every container through the syncer's resize (370 bytes an entry, were they new).
    The host's LimitRange filled them in at creation, so the resize changes values only: the entries store what they
    did and the text is the same, within the bytes the worst case counts, and the resize passes."""
    tenant, _ = tenant_and_policy
    values = limit_range_values(tenant.team.vcluster)
    assert {"cpu", "memory"} <= set(values["default"]) & set(values["defaultRequest"])
    pod = at_cap(tenant, SYNCED_POD_ENTRY_BYTES)
    for entry in pod["spec"]["containers"]:
        del entry["resources"]["limits"]
    seen, host = bound(tenant, pod)
    assert stored(host["spec"]) == SYNCED_POD_ENTRY_BYTES
    grown = copy.deepcopy(seen)
    for entry in grown["spec"]["containers"]:
        entry["resources"]["limits"] = {"cpu": "64", "memory": "512Gi"}
    after = syncer_resize(host, grown)
    assert [entry["resources"]["limits"]["memory"] for entry in after["spec"]["containers"]] == ["512Gi"] * 2
    assert stored(after["spec"]) == SYNCED_POD_ENTRY_BYTES
    assert text_bytes(after["spec"]) == text_bytes(host["spec"])
    assert resized(tenant_and_policy, host, grown) == []
