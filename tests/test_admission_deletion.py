"""The syncer's pod deletions (components/admission_deletion.py), tested by attack.

A tenant deletes its virtual pod with a grace period of its choosing, and vCluster 0.36.1's syncer deletes the host
pod with the virtual pod's DeletionGracePeriodSeconds (pkg/controllers/resources/pods/syncer.go, SyncToHost). KAI
stops charging a deleted pod to its queue at once (a Releasing pod is not in pod_status ``AllocatedStatus``, which
plugins/proportion ``updateQueuesCurrentResourceUsage`` counts, v0.16.0 to v0.17.0) while the kubelet lets it run for
that period: a pod that ignores SIGTERM would keep its GPUs uncharged for as long as the tenant asked, and the team
could start as many again within its queue's limit.
"""

from __future__ import annotations

import pytest

from components.admission_deletion import deletion_policy_name
from config.vocabulary import KAI_NAMESPACE
from tests.apiserver_pods import delete_options
from tests.conftest import dev_config, eks_config
from tests.kai_pods import kai_bind, kai_group
from tests.tenant_sim import BINDING, KAI_SCHEDULER, POLICY, Admission, Tenant, container, tenant_of, virtual_pod

# KAI's evictor deletes pods as the scheduler's service account.
KAI_EVICTOR = f"system:serviceaccount:{KAI_NAMESPACE}:scheduler"


@pytest.fixture(scope="module", params=["dev:team-nlp", "eks:team-legal"])
def tenant_and_deletion(request, dev_run, eks_run) -> tuple[Tenant, Admission]:
    stack, team = request.param.split(":")
    program, config = {"dev": (dev_run, dev_config()), "eks": (eks_run, eks_config())}[stack]
    tenant = tenant_of(program, config, team)
    return tenant, deletion_admission(program, tenant)


def deletion_admission(program, tenant: Tenant) -> Admission:
    name = deletion_policy_name(tenant.team)
    policy = next(p for p in program.of_type(POLICY) if p.inputs["metadata"]["name"] == name)
    binding = next(b for b in program.of_type(BINDING) if b.inputs["spec"]["policyName"] == name)
    return Admission(policy.inputs["spec"], binding.inputs["spec"])


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def running_gpu_pod(tenant: Tenant, own_grace_period: int) -> dict:
    """A whole-GPU pod KAI placed, as stored (the API server defaults terminationGracePeriodSeconds to 30)."""
    pod = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, containers=[container(gpus="1")],
                      terminationGracePeriodSeconds=own_grace_period)
    host = kai_bind(kai_group(tenant.host_pod(pod)))
    host["status"] = {"phase": "Running"}
    return host


def test_a_deletion_may_not_outlast_the_pods_own_grace_period(tenant_and_deletion):
    tenant, deletion = tenant_and_deletion
    cap = tenant.team.vcluster.max_termination_grace_seconds
    host = running_gpu_pod(tenant, cap)

    def deleted(grace_period, user=tenant.syncer):
        return deletion.review(tenant.team.namespace, None, operation="DELETE", old=host, user=user,
                               options=delete_options(host, grace_period))

    # kubectl delete --grace-period=86400 in the vCluster: a day of GPUs off the queue's books.
    for grace_period in (86400, cap + 1):
        assert rules(deleted(grace_period)) == {"deletion-grace-period"}
    # A plain delete (the pod's own period), a shorter or forced one pass; so does KAI's eviction, which names none.
    for grace_period in (None, cap, 30, 0):
        assert deleted(grace_period) == []
    assert deleted(None, user=KAI_EVICTOR) == []
    # A pod left at the API server's default (30 s) may not be deleted with more either.
    default = running_gpu_pod(tenant, 30)
    assert rules(deletion.review(tenant.team.namespace, None, operation="DELETE", old=default, user=tenant.syncer,
                                 options=delete_options(default, 600))) == {"deletion-grace-period"}
