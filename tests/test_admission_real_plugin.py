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

from tests import test_celgo_honest as celgo_honest
from tests import test_smoke as smoke
from tests.apiserver_vap import api_request, disagreements, judge, named, policies_of, recorded
from tests.conftest import run, stack_config
from tests.fake_site import FakeSite
from tests.tenant_sim import KAI_SCHEDULER, container, platform_of, tenant_of, virtual_pod


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


@pytest.fixture(scope="module")
def honest(programs) -> dict:
    """(policy name, review, real verdict) of every honest review of tests/test_celgo_honest.py's corpus, by stack."""
    judged = {}
    for stack, program in programs.items():
        config = stack_config(stack)
        with recorded() as reviews:
            first = platform_of(config).teams[0].name
            celgo_honest.pod_reviews(program, config, first)
            celgo_honest.synced_reviews(program, config, first)
            site = FakeSite([tenant_of(program, config, team.name) for team in platform_of(config).teams])
            try:
                smoke.run(site)
            finally:
                site.close()
        policies = policies_of(program)
        reviewed = named(reviews, policies)
        judged[stack] = [(name, review, verdict) for (name, review), verdict in
                         zip(reviewed, judge(policies, [api_request(review.inputs) for _, review in reviewed]))]
    return judged


def test_the_honest_corpus_reaches_every_kind_of_policy(honest):
    for stack, judged in honest.items():
        policies = {name for name, _, _ in judged}
        first = platform_of(stack_config(stack)).teams[0].name
        assert {f"gpu-tenancy-{first}", f"gpu-tenancy-{first}-synced-objects"} <= policies, stack
        assert 50 < sum(verdict.allowed for _, _, verdict in judged) < len(judged), stack  # and some but for the queue


def test_the_real_plugin_reaches_tenant_sims_verdict_on_every_honest_review(honest):
    assert {stack: disagreements(judged) for stack, judged in honest.items()} == {stack: [] for stack in honest}
