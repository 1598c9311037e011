"""The tenant boundary's policies judged by the API server's own ValidatingAdmissionPolicy plugin.

Every security test judges the rendered policies with tests/tenant_sim.py's ``Admission``, a re-implementation of
the plugin's matching and messages around cel-python. Here the reviews it makes are sent again to k8s.io/apiserver's
plugin (tests/apiserver_vap.py), with every policy and binding of the committed stack loaded, and must get the same
verdict: the same refusals of the reviewing policy, none from another policy, and the API server's answer following
from them.
"""

from __future__ import annotations

import copy

import pytest

from tests.apiserver_vap import api_request, judge, policies_of
from tests.conftest import run, stack_config
from tests.tenant_sim import KAI_SCHEDULER, container, tenant_of, virtual_pod


@pytest.fixture(scope="module")
def programs(dev_run) -> dict:
    return {"dev": dev_run, "eks": run(stack_config("eks"), stack="eks")}


def test_the_real_plugin_refuses_a_pod_outside_its_queue_and_ignores_a_request_it_does_not_match(programs):
    tenant = tenant_of(programs["dev"], stack_config("dev"), "team-nlp")
    host = tenant.host_pod(virtual_pod(containers=[container(gpus="1")]))
    refusals = tenant.create_host(host)
    other = copy.deepcopy(host)
    other["metadata"]["labels"].pop("vcluster.loft.sh/managed-by")
    request = {"object": host, "oldObject": None,
               "request": {"operation": "CREATE", "subResource": "", "namespace": tenant.team.namespace,
                           "userInfo": {"username": tenant.syncer}}}
    by_another = copy.deepcopy(request)
    by_another.update(object=other)
    by_another["request"]["userInfo"] = {"username": "system:serviceaccount:kube-system:replicaset-controller"}
    kai_pod = tenant.host_pod(virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER,
                                          containers=[container(gpus="1")]))
    assert tenant.create_host(kai_pod) == []
    admitted_request = copy.deepcopy(request)
    admitted_request.update(object=kai_pod)
    refused, ignored, admitted = judge(policies_of(programs["dev"]), [api_request(each) for each in
                                                                     (request, by_another, admitted_request)])
    assert any("[own-queue]" in message for message in refusals)
    assert not refused.allowed and refused.of("gpu-tenancy-team-nlp") == [message.strip() for message in refusals]
    assert refused.error.startswith(f'pods "{host["metadata"]["name"]}" is forbidden: ValidatingAdmissionPolicy '
                                    "'gpu-tenancy-team-nlp' with binding 'gpu-tenancy-team-nlp' denied request: ")
    assert ignored.allowed and ignored.refusals == {}
    assert admitted.allowed and admitted.refusals == {}
