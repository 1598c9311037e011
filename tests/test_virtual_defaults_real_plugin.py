"""The in-vCluster MutatingAdmissionPolicies (components/virtual_defaults.py) run by the API server's own plugin.

Every test of the defaults mutates pods with tests/virtual_sim.py (cel-python and a Python structured merge). Here
the mutations those tests make are made again by k8s.io/apiserver's MutatingAdmissionPolicy plugin
(tests/apiserver_map.py): each policy alone on the pods it was given (the device-features and limit defaults every
tenant pod of tenant_sim gets, KAI's documented workloads, the seeds' and ML charts' among them), and a team's whole
set of policies, as its vCluster's API server holds them, on the pods tests/test_virtual_defaults.py's ``Inside``
creates (reinvocation included). The real plugin must compile every policy, refuse nothing, and end with
virtual_sim's pod; the honest pods it mutates are then admitted inside and on the host. The load-balancer tags
policy of an EKS team with load balancers mutates Services, created and edited, and must end with virtual_sim's
Service too.
"""

from __future__ import annotations

import copy
import json
from typing import NamedTuple

import pytest

from components.virtual_defaults import DEFAULTS_NAME, LOAD_BALANCER_TAGS_NAME
from config.load_balancer_keys import AWS_ADDITIONAL_TAGS, AWS_PREFIX
from config.vocabulary import QUEUE_LABEL
from tests import test_admission_device_features as device_features
from tests import test_admission_honest_workloads as honest_workloads
from tests import test_admission_image_pull as image_pull
from tests import test_celgo_honest as celgo_honest
from tests import test_isolation_admission_inside as isolation_inside
from tests import test_load_balancer_tags as load_balancer_tags
from tests import test_virtual_defaults as virtual_defaults
from tests.apiserver_map import harness, mutate, policies_of, recorded
from tests.conftest import dev_config, eks_config
from tests.test_admission_image_pull import pulling, pulling_dev_run, pulling_eks_run  # noqa: F401 (fixtures)
from tests.test_admission_real_plugin import replay
from tests.test_isolation_admission import capped, mig, site  # noqa: F401 (fixtures)
from tests.test_isolation_admission_inside import honest_capped_pod, mirrored  # noqa: F401 (fixtures)
from tests.tenant_sim import KAI_SCHEDULER, container, tenant_of, virtual_pod
from tests.test_virtual_defaults import HONEST, LIVE_ENV, MERGED_ENV, PATCH_ENV, Inside
from tests.virtual_sim import Mutation, manifests


class Chain(NamedTuple):
    inside: Inside
    pod: dict  # as admission gets it
    mutated: dict  # virtual_sim's


class Corpus(NamedTuple):
    chains: list[Chain]
    mutations: list  # tests/apiserver_map.py Recorded
    names: dict  # json of a policy's spec -> its name


@pytest.fixture(scope="module")
def corpus(dev_run, eks_run, capped, mig, mirrored, pulling_dev_run, pulling_eks_run) -> Corpus:  # noqa: F811
    harness()  # built first, or the skip naming what is missing, before the corpus is made for nothing
    chains: list[Chain] = []
    original = Inside.mutate

    def recording(self, pod):
        mutated = original(self, pod)
        chains.append(Chain(self, self.defaulted(pod), copy.deepcopy(mutated)))  # a test may edit what it got
        return mutated

    tenants = [tenant_of(dev_run, dev_config(), "team-nlp"), tenant_of(eks_run, eks_config(), "team-legal")]
    pulling_tenants = [tenant_of(pulling_dev_run, pulling(dev_config()), "team-vision"),
                       tenant_of(pulling_eks_run, pulling(eks_config()), "team-legal")]
    with pytest.MonkeyPatch.context() as patch, recorded() as mutations:
        patch.setattr(Inside, "mutate", recording)
        for tenant in tenants:
            assert replay(virtual_defaults, {"inside": Inside(tenant)}) > 20
            assert replay(device_features, {"tenant": tenant}) > 10
            # ML charts' pods, those requesting more than the host's default limits without a limit among them.
            assert replay(honest_workloads, {"tenant": tenant}) > 10
        assert replay(isolation_inside, {"inside_capped": Inside(capped), "inside_mig": Inside(mig),
                                         "mirrored": mirrored}) > 20
        for tenant in pulling_tenants:
            assert replay(image_pull, {"tenant": tenant, "inside": Inside(tenant)}) > 10
        # KAI's documented workloads, the seeds', controllers' charts: every GPU pod gets the device-features default.
        celgo_honest.pod_reviews(dev_run, dev_config(), "team-nlp")
    names = {json.dumps(obj["spec"], sort_keys=True): obj["metadata"]["name"]
             for tenant in {id(t.team): t for t in [*tenants, *pulling_tenants, capped, mig, mirrored]}.values()
             for obj in manifests(tenant.team) if obj["kind"] == "MutatingAdmissionPolicy"}
    return Corpus(chains, mutations, names)


def request(namespace: str, user: str, pod: dict, expected: dict) -> dict:
    return {"namespace": namespace, "user": user, "object": pod, "expected": expected}


@pytest.fixture(scope="module")
def each_policy(corpus) -> dict:
    """Each policy's name -> (recorded mutation, the real plugin's result) for every distinct pod it was given."""
    groups: dict = {}
    for recorded_mutation in corpus.mutations:
        key = json.dumps([recorded_mutation.policy, recorded_mutation.binding], sort_keys=True)
        sent = request(recorded_mutation.namespace, recorded_mutation.user, recorded_mutation.pod,
                       recorded_mutation.mutated)
        groups.setdefault(key, {})[json.dumps(sent, sort_keys=True)] = (recorded_mutation, sent)
    judged: dict = {}
    for key, cases in groups.items():
        policy, binding = json.loads(key)
        name = corpus.names[json.dumps(policy, sort_keys=True)]
        results = mutate({name: (policy, binding)}, [sent for _, sent in cases.values()])
        judged.setdefault(name, []).extend(zip([case for case, _ in cases.values()], results))
    return judged


def test_the_corpus_reaches_every_shipped_mutating_policy_and_each_changes_pods(each_policy):
    assert set(each_policy) == {"gpu-tenancy-pod-defaults", "gpu-tenancy-device-features", "gpu-tenancy-hami-core",
                                "gpu-tenancy-image-pull", "gpu-tenancy-limit-defaults"}
    for name, judged in each_policy.items():
        assert sum(case.mutated != case.pod for case, _ in judged) >= 3, name
    assert sum(len(judged) for judged in each_policy.values()) > 300


def test_the_real_plugin_compiles_every_policy_and_refuses_no_mutation(each_policy):
    # A policy whose expressions the plugin's compiler refuses fails every pod it matches (failurePolicy: Fail).
    errors = {name: sorted({result.error for _, result in judged if result.error}) for name, judged in each_policy.items()}
    assert errors == {name: [] for name in each_policy}


def test_the_real_plugin_ends_with_virtual_sims_pod_for_every_mutation_the_suite_makes(each_policy):
    differing = {name: [(case.pod["metadata"].get("name"), result.pod, result.expected)
                        for case, result in judged if result.pod != result.expected]
                 for name, judged in each_policy.items()}
    assert differing == {name: [] for name in each_policy}


@pytest.fixture(scope="module")
def whole_vcluster(corpus) -> list[tuple[Chain, object]]:
    """(chain, the real plugin's result) of every pod ``Inside`` created, with the team's policies all loaded."""
    groups: dict = {}
    for chain in corpus.chains:
        policies = policies_of(manifests(chain.inside.tenant.team))
        groups.setdefault(json.dumps(policies, sort_keys=True), []).append(chain)
    judged = []
    for key, chains in groups.items():
        results = mutate(json.loads(key), [request(chain.pod["metadata"]["namespace"], Inside.USER, chain.pod,
                                                   chain.mutated) for chain in chains])
        judged.extend(zip(chains, results))
    return judged


def env_unordered(pod: dict) -> dict:
    """``pod`` with each container's env in name order. The API server runs a vCluster's policies in no set order
    (k8s.io/apiserver generic/policy_source.go ``calculatePolicyData`` ranges over a map of them), and each appends
    the env items it adds: HAMi-core's may come before or after the device features'."""
    pod = copy.deepcopy(pod)
    for field in ("containers", "initContainers"):
        for entry in pod["spec"].get(field, []):
            if "env" in entry:
                entry["env"] = sorted(entry["env"], key=lambda item: item["name"])
    return pod


def test_a_teams_policies_together_end_with_virtual_sims_pod_reinvocation_included(whole_vcluster):
    # Memory-capped teams (HAMi-core), sites that always pull, MIG and plain teams.
    assert len({json.dumps(policies_of(manifests(chain.inside.tenant.team)), sort_keys=True)
                for chain, _ in whole_vcluster}) >= 5
    differing = [(chain.pod["metadata"].get("name"), result.error, result.pod, result.expected)
                 for chain, result in whole_vcluster
                 if result.error or env_unordered(result.pod) != env_unordered(result.expected)]
    assert differing == []


def test_honest_pods_as_the_real_plugin_mutates_them_are_admitted_inside_and_on_the_host(dev_run, eks_run, capped):
    insides = [Inside(tenant_of(dev_run, dev_config(), "team-nlp")),
               Inside(tenant_of(eks_run, eks_config(), "team-legal")), Inside(capped)]
    for inside in insides:
        pods = [make() for make in HONEST.values()] + ([honest_capped_pod()] if inside.tenant is capped else [])
        policies = policies_of(manifests(inside.tenant.team))
        results = mutate(policies, [request(pod["metadata"]["namespace"], Inside.USER, Inside.defaulted(pod), None)
                                    for pod in pods])
        for pod, result in zip(pods, results):
            assert result.error == "" and result.pod["spec"]["schedulerName"] == KAI_SCHEDULER
            assert result.pod["metadata"]["labels"][QUEUE_LABEL] == inside.tenant.team.queue_name
            assert inside.rules.review(pod["metadata"]["namespace"], result.pod, user=Inside.USER) == []
            assert inside.tenant.create(result.pod) == [], pod["metadata"]["name"]
            # Without the defaults the host refuses it: the test can fail.
            assert inside.tenant.create(Inside.defaulted(pod)) != []


def variant(dev_run, expression: str) -> tuple[dict, dict, Mutation]:
    """The pod-defaults policy of team-nlp with ``expression`` as its apply configuration."""
    objects = manifests(tenant_of(dev_run, dev_config(), "team-nlp").team)
    policy, binding = copy.deepcopy(policies_of(objects)[DEFAULTS_NAME])
    policy["mutations"][0]["applyConfiguration"]["expression"] = expression
    return policy, binding, Mutation(policy, binding)


# Apply configurations virtual_sim merges but the real plugin refuses: the comparison above can fail.
WRONG = {
    # tolerations are an atomic list: an apply configuration may not set one (patch/smd.go validatePatch).
    "atomic-list": ("Object{spec: Object.spec{tolerations: [Object.spec.tolerations{key: 'gpu', operator: 'Exists'}]}}",
                    "may not mutate atomic arrays"),
    # A container built as an init container's type (patch/smd.go CheckTypeNamesMatchFieldPathNames).
    "type-name": ("Object{spec: Object.spec{containers: [Object.spec.initContainers{name: 'main', "
                  "env: [Object.spec.initContainers.env{name: 'A', value: 'b'}]}]}}", "type mismatch"),
}


@pytest.mark.parametrize("case", WRONG)
def test_an_apply_configuration_virtual_sim_merges_is_refused_by_the_real_plugin_naming_the_policy(dev_run, case):
    expression, refusal = WRONG[case]
    policy, binding, simulated = variant(dev_run, expression)
    pod = Inside.defaulted(virtual_pod(containers=[container(gpus="1")]))
    changed = simulated.mutate("default", pod, Inside.USER)
    assert changed != pod  # virtual_sim merged it
    result, = mutate({DEFAULTS_NAME: (policy, binding)}, [request("default", Inside.USER, pod, changed)])
    assert refusal in result.error and f"'{DEFAULTS_NAME}'" in result.error
    assert result.pod != result.expected


def test_an_expression_the_compiler_refuses_fails_every_pod_naming_the_policy(dev_run):
    policy, binding, _ = variant(dev_run, "Object{spec: Object.spec{schedulerName: 1 + 'a'}}")
    pod = Inside.defaulted(virtual_pod())
    result, = mutate({DEFAULTS_NAME: (policy, binding)}, [request("default", Inside.USER, pod, None)])
    assert f"'{DEFAULTS_NAME}'" in result.error and "compil" in result.error.lower()


def test_the_real_plugin_merges_a_list_map_in_virtual_sims_order_and_collapses_a_duplicate_as_it_does(dev_run):
    env = ", ".join(f"Object.spec.containers.env{{name: '{e['name']}', value: '{e['value']}'}}" for e in PATCH_ENV)
    policy, binding, simulated = variant(
        dev_run, f"Object{{spec: Object.spec{{containers: [Object.spec.containers{{name: 'main', env: [{env}]}}]}}}}")
    pod = Inside.defaulted(virtual_pod(containers=[{**container(), "env": LIVE_ENV}]))
    changed = simulated.mutate("default", pod, Inside.USER)
    result, = mutate({DEFAULTS_NAME: (policy, binding)}, [request("default", Inside.USER, pod, changed)])
    assert result.error == "" and result.pod == result.expected
    assert result.pod["spec"]["containers"][0]["env"] == MERGED_ENV


def test_the_real_plugin_tags_load_balancers_created_and_edited_as_virtual_sim_does(eks_run):
    tagged = load_balancer_tags.tenant(eks_run)
    inside = load_balancer_tags.Inside(tagged.team)
    policies = policies_of(manifests(tagged.team))
    assert LOAD_BALANCER_TAGS_NAME in policies
    load_balancer, service = load_balancer_tags.load_balancer, load_balancer_tags.service
    cases = [(load_balancer({AWS_PREFIX + "type": "nlb"}), None),
             (load_balancer({AWS_ADDITIONAL_TAGS: "gpu-tenancy/team=team-support"}), None),
             (service(), None),
             (load_balancer(), service()),
             (load_balancer(loadBalancerSourceRanges=["192.0.2.0/24"]), load_balancer())]
    requests = [{"namespace": "default", "user": Inside.USER, "kind": "Service", "object": new, "old": old,
                 "expected": inside.write(new, old=old)} for new, old in cases]
    answers = mutate(policies, requests)
    assert [answer.error for answer in answers] == [""] * len(cases)
    assert [answer.pod for answer in answers] == [answer.expected for answer in answers]
    value = load_balancer_tags.platform_value(tagged)
    assert [(answer.pod["metadata"].get("annotations") or {}).get(AWS_ADDITIONAL_TAGS) for answer in answers] == [
        value, value, None, value, value]
