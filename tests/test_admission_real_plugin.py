"""The tenant boundary's policies judged by the API server's own ValidatingAdmissionPolicy plugin.

Every security test judges the rendered policies with tests/tenant_sim.py's ``Admission``, a re-implementation of
the plugin's matching and messages around cel-python. Here the reviews it makes are sent again to k8s.io/apiserver's
plugin (tests/apiserver_vap.py), with every policy and binding of the committed stack loaded, and must get the same
verdict: the same refusals of the reviewing policy, none from another policy, and the API server's answer following
from them.
"""

from __future__ import annotations

import copy
import inspect
import json
import re

import pytest
from _pytest.mark.structures import ParameterSet

from tests import test_admission as admission
from tests import test_admission_attacks as attacks
from tests import test_admission_deletion as deletion
from tests import test_admission_resize as resize
from tests import test_admission_volumes as volumes
from tests import test_celgo_honest as celgo_honest
from tests import test_smoke as smoke
from tests import test_synced_claims_admission as claims
from tests import test_synced_endpoints as endpoints
from tests import test_synced_objects_admission as synced
from tests.apiserver_vap import (
    HARNESS, TAG, VCLUSTER, Review, Verdict, api_request, disagreements, harness, judge, plugin_verdicts, policies_of,
    recorded,
)
from tests.conftest import git, mirrored_tag, run, stack_config
from tests.fake_site import FakeSite
from tests.reference_cel import unordered_lists
from tests.synced_objects_sim import SyncedObjectsAdmission, synced_objects_admission_for
from tests.tenant_sim import (
    KAI_SCHEDULER, Admission, container, namespaces_of, platform_of, tenant_of, virtual_pod,
)


@pytest.fixture(scope="module")
def programs(dev_run) -> dict:
    harness()  # built first, or the skip naming what is missing, before minutes of corpus are made for nothing
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
                                                                     (request, by_another, admitted_request)],
                                       namespaces=namespaces_of(programs["dev"]))
    assert any("[own-queue]" in message for message in refusals)
    assert not refused.allowed and refused.of("gpu-tenancy-team-nlp") == [message.strip() for message in refusals]
    assert refused.error.startswith(f'pods "{host["metadata"]["name"]}" is forbidden: ValidatingAdmissionPolicy '
                                    "'gpu-tenancy-team-nlp' with binding 'gpu-tenancy-team-nlp' denied request: ")
    assert ignored.allowed and ignored.refusals == {}
    assert admitted.allowed and admitted.refusals == {}


def honest_reviews(program, stack: str) -> None:
    """tests/test_celgo_honest.py's honest corpus and the smoke run's, reviewed by tenant_sim."""
    config = stack_config(stack)
    first = platform_of(config).teams[0].name
    celgo_honest.pod_reviews(program, config, first)
    celgo_honest.synced_reviews(program, config, first)
    site = FakeSite([tenant_of(program, config, team.name) for team in platform_of(config).teams])
    try:
        smoke.run(site)
    finally:
        site.close()


@pytest.fixture(scope="module")
def honest(programs) -> dict:
    """(policy name, review, real verdict) of every honest review of tests/test_celgo_honest.py's corpus, by stack."""
    judged = {}
    for stack, program in programs.items():
        with recorded() as reviews:
            honest_reviews(program, stack)
        judged[stack] = plugin_verdicts(reviews, program)
    return judged


def test_the_honest_corpus_reaches_every_kind_of_policy(honest):
    for stack, judged in honest.items():
        policies = {name for name, _, _ in judged}
        first = platform_of(stack_config(stack)).teams[0].name
        assert {f"gpu-tenancy-{first}", f"gpu-tenancy-{first}-synced-objects"} <= policies, stack
        assert 50 < sum(verdict.allowed for _, _, verdict in judged) < len(judged), stack  # and some but for the queue


def test_the_real_plugin_reaches_tenant_sims_verdict_on_every_honest_review(honest):
    assert {stack: disagreements(judged) for stack, judged in honest.items()} == {stack: [] for stack in honest}


# The attack test modules replayed here, each with its own fixtures' tenants: ``tenant`` on each committed stack,
# ``nlp`` on dev and ``legal`` on eks (a test taking another fixture is left to its own module).
TEAMS = {"dev": "team-nlp", "eks": "team-legal"}
PER_TENANT = (attacks, volumes, deletion, resize)
PER_PAIR = {admission: False, synced: True, claims: True, endpoints: True}  # module: takes synced tenants


def replay_attacks(programs: dict) -> int:
    tenants = {stack: tenant_of(programs[stack], stack_config(stack), team) for stack, team in TEAMS.items()}
    synced_tenants = {stack: synced.Synced(synced_objects_admission_for(programs[stack], team),
                                           synced.team_of(stack_config(stack), team)) for stack, team in TEAMS.items()}
    ran = 0
    for stack, tenant in tenants.items():
        policy = synced_objects_admission_for(programs[stack], tenant.team.name)
        fixtures = {"tenant": tenant, "tenant_and_policy": (tenant, policy),
                    "tenant_and_deletion": (tenant, deletion.deletion_admission(programs[stack], tenant))}
        ran += sum(replay(module, fixtures) for module in PER_TENANT)
    for module, takes_synced in PER_PAIR.items():
        pair = synced_tenants if takes_synced else tenants
        ran += replay(module, {"nlp": pair["dev"], "legal": pair["eks"]})
    return ran


def calls(function) -> list[dict]:
    """The arguments of each case a test's parametrize marks make."""
    cases = [{}]
    for mark in getattr(function, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = [name.strip() for name in (mark.args[0].split(",") if isinstance(mark.args[0], str) else mark.args[0])]
        values = [value.values if isinstance(value, ParameterSet) else (value,) if len(names) == 1 else value
                  for value in mark.args[1]]
        cases = [{**case, **dict(zip(names, value))} for case in cases for value in values]
    return cases


def replay(module, fixtures: dict) -> int:
    """Run every test of ``module`` whose fixtures are all in ``fixtures`` (Hypothesis' properties aside): how many
    cases ran."""
    ran = 0
    for name, function in inspect.getmembers(module, inspect.isfunction):
        if not name.startswith("test_") or function.__module__ != module.__name__ \
                or getattr(function, "is_hypothesis_test", False):
            continue
        for case in calls(function):
            wanted = set(inspect.signature(function).parameters) - set(case)
            if not wanted <= set(fixtures):
                break
            function(**case, **{fixture: fixtures[fixture] for fixture in wanted})
            ran += 1
    return ran


@pytest.fixture(scope="module")
def hostile(programs) -> dict:
    """(policy name, review, real verdict) of every review the attack modules make, by stack."""
    with recorded() as reviews:
        assert replay_attacks(programs) > 300
    return {stack: plugin_verdicts(reviews, program) for stack, program in programs.items()}


def test_the_hostile_corpus_is_mostly_refused_by_the_real_plugin(hostile):
    for stack, judged in hostile.items():
        refused = sum(not verdict.allowed for _, _, verdict in judged)
        assert refused > 200 and {name for name, _, _ in judged} >= {
            f"gpu-tenancy-{TEAMS[stack]}", f"gpu-tenancy-{TEAMS[stack]}-synced-objects",
            f"gpu-tenancy-{TEAMS[stack]}-deletion"}, (stack, refused)


def test_the_real_plugin_reaches_tenant_sims_verdict_on_every_hostile_review(hostile):
    assert {stack: disagreements(judged) for stack, judged in hostile.items()} == {stack: [] for stack in hostile}


def test_a_denial_that_lists_keys_in_another_order_than_its_warning_is_the_same_refusal():
    # The denying and the warning plugin evaluate the policy apart, each listing a map's keys in Go's map order.
    review = Review(None, {"object": {"metadata": {"name": "web"}}, "oldObject": None,
                           "request": {"operation": "CREATE", "subResource": ""}}, ["[a, b] are reserved"])

    def judged(denied: str) -> list:
        error = f"pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'p' denied request: {denied}"
        return [("p", review, Verdict(False, error, {"p": ["[b, a] are reserved"]}))]

    assert disagreements(judged("[a, b] are reserved")) == disagreements(judged("[b, a] are reserved")) == []
    assert disagreements(judged("[a, c] are reserved")) != []


def test_one_request_judged_in_two_namespaces_keeps_each_verdict():
    """The same pod under the same policy, in a namespace stating the team's cap (admitted) and in one without it
    (refused): each review is held to its own verdict, not to the other's."""
    request = {"operation": "CREATE", "subResource": "", "namespace": "team"}
    pod = {"metadata": {"name": "web"}}
    stated, bare = ({"metadata": {"name": "team", "annotations": annotations}} for annotations in ({"cap": "1"}, {}))
    admitted = Review(None, {"object": pod, "oldObject": None, "request": request, "namespaceObject": stated}, [])
    refused = Review(None, {"object": pod, "oldObject": None, "request": request, "namespaceObject": bare},
                     ["[pod-size] no cap"])
    error = "pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'p' denied request: " \
            "[pod-size] no cap"
    allowed, denied = Verdict(True, "", {}), Verdict(False, error, {"p": ["[pod-size] no cap"]})
    assert disagreements([("p", admitted, allowed), ("p", refused, denied)]) == []
    assert disagreements([("p", admitted, denied), ("p", refused, allowed)]) != []


# How else the API server sees a hostile pod: written through a subresource, deleted (past any grace period), sent
# by another user or into another namespace, bound or evicted; (operation, subresource, user, namespace) with None for the
# review's own.
ANOTHER_USER = "system:serviceaccount:kube-system:replicaset-controller"
PROBES = (("UPDATE", "status", None, None), ("UPDATE", "resize", None, None),
          ("UPDATE", "ephemeralcontainers", None, None), ("DELETE", "", None, None),
          ("CREATE", "", ANOTHER_USER, None), ("CREATE", "", None, "default"), ("CREATE", "binding", None, None),
          ("CREATE", "eviction", None, None))
# The object of a subresource request of another kind, for a pod's metadata.
SUBRESOURCE_OBJECTS = {
    "binding": lambda metadata: {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
                                 "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1"}},
    "eviction": lambda metadata: {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": metadata},
}
PROBED_PODS = 30  # per stack: each probe runs every policy of the stack in cel-python


def admissions_of(program) -> list[tuple[str, Admission]]:
    """(policy name, its model) for each binding of each policy of ``program``."""
    return [(name, (SyncedObjectsAdmission if name.endswith("-synced-objects") else Admission)(
                spec, binding, namespaces_of(program)))
            for name, (spec, bindings) in policies_of(program).items() for binding in bindings.values()]


def probe_inputs(review, probe) -> dict:
    operation, subresource, user, namespace = probe
    request = review.inputs["request"]
    pod = review.inputs["object"]
    if subresource in SUBRESOURCE_OBJECTS:
        metadata = {"name": pod["metadata"].get("name", ""), "namespace": pod["metadata"].get("namespace", "")}
        pod = SUBRESOURCE_OBJECTS[subresource](metadata)
    return {"object": None if operation == "DELETE" else pod,
            "oldObject": (review.inputs["oldObject"] or pod) if operation != "CREATE" else None,
            "request": {**request, "operation": operation, "subResource": subresource,
                        "namespace": namespace or request["namespace"],
                        "userInfo": {"username": user or request["userInfo"]["username"]},
                        "options": {"gracePeriodSeconds": 86400} if operation == "DELETE" else None}}


def tenant_sims_refusals(admissions: list[tuple[str, Admission]], inputs: dict) -> dict:
    request = inputs["request"]
    found: dict = {}
    for name, model in admissions:
        found.setdefault(name, []).extend(model.review(
            request["namespace"], inputs["object"], operation=request["operation"], subresource=request["subResource"],
            old=inputs["oldObject"], user=request["userInfo"]["username"], options=request["options"]))
    return {name: sorted(unordered_lists(message.strip()) for message in messages)
            for name, messages in found.items() if messages}


def test_the_real_matcher_takes_each_hostile_pod_as_tenant_sim_does_through_every_other_door(hostile, programs):
    differing, probed = [], 0
    for stack, judged in hostile.items():
        admissions = admissions_of(programs[stack])
        pods = {json.dumps(review.inputs["object"], sort_keys=True): review for name, review, _ in judged
                if name == f"gpu-tenancy-{TEAMS[stack]}" and review.inputs["object"] is not None
                and review.inputs["request"]["subResource"] == ""}
        sample = list(pods.values())[::max(1, len(pods) // PROBED_PODS)]
        inputs = [probe_inputs(review, probe) for review in sample for probe in PROBES]
        verdicts = judge(policies_of(programs[stack]), [api_request(each) for each in inputs],
                         namespaces=namespaces_of(programs[stack]))
        for each, verdict in zip(inputs, verdicts):
            python = tenant_sims_refusals(admissions, each)
            real = {name: sorted(unordered_lists(message) for message in messages)
                    for name, messages in verdict.refusals.items()}
            if real != python or verdict.allowed != (not real):
                differing.append((stack, each["request"]["operation"], each["request"]["subResource"],
                                  each["request"]["namespace"], each["request"]["userInfo"]["username"],
                                  (each["object"] or each["oldObject"])["metadata"]["name"], real, python))
        probed += len(inputs)
    assert probed > 200 and differing == []


# The defaults the API server's registry gives a stored policy and binding, which the harness applies itself
# (k8s.io/kubernetes, which sets them, is not vendored): (struct, field, what its comment documents).
DOCUMENTED_DEFAULTS = (("Rule", "Scope", 'Default is "*".'),
                       ("ValidatingAdmissionPolicySpec", "FailurePolicy", "Defaults to Fail."),
                       ("MatchResources", "NamespaceSelector", "Default to the empty LabelSelector"),
                       ("MatchResources", "ObjectSelector", "Default to the empty LabelSelector"),
                       ("MatchResources", "MatchPolicy", 'Defaults to "Equivalent"'))


def test_the_defaults_the_harness_gives_policies_are_the_ones_the_api_documents():
    types = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, TAG)}:vendor/k8s.io/api/admissionregistration/v1/types.go")
    harness = HARNESS.read_text()
    for struct, field, documented in DOCUMENTED_DEFAULTS:
        body = re.search(rf"^type {struct} struct {{\n(.*?)^}}", types, re.M | re.S).group(1)
        comment = re.search(rf"((?:^\s*//.*\n)+)\s*{field} ", body, re.M).group(1)
        assert documented in comment, (struct, field)
        assert f".{field} == nil" in harness, field
