"""Every review the suite makes, judged again by the API server's own ValidatingAdmissionPolicy plugin.

tests/test_admission_real_plugin.py replays the attack modules it can build fixtures for; the attacks on the
rules for fields, names, sizes and status live in modules with fixtures of their own (a guarded site, a team
allowed node ports, the field contracts' examples). Here every module that makes a tenant or a synced-objects
policy runs as pytest runs it, in a child pytest that records each review tenant_sim makes with the policy and
binding it judged (tests/suite_reviews.py); each review is then sent to k8s.io/apiserver's plugin with that policy
and binding loaded (tests/apiserver_vap.py), at the release that serves its objects as sent (as that release's
harness decodes them, the serving the comparison of releases uses too), and must get tenant_sim's verdict; every
rule of every policy the suite judges must be reached (refused by the real plugin on some object the suite sends),
and every other release must reach the pinned release's verdict on each review.

Needs Go and the mirror of loft-sh/vcluster (tests/apiserver_vap.py); the child run takes about as long as those
modules do in the suite (about 22 minutes on two cores), each release a few minutes more.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections import defaultdict
from typing import Optional

import pytest

from config import versions
from tests.apiserver_vap import PINNED, RELEASES, Bound, api_request, disagreements, harness, judge
from tests.served_objects import as_served, other_release_fields, struct_holding
from tests.suite_reviews import JUDGING_MODULES, reviewing_modules, run_and_record
from tests.test_admission_releases import OTHER_RELEASES, as_served_by, unordered

# The rule a refusal names: every host policy's messages start with it.
RULE = re.compile(r"\[([a-z0-9-]+)\]")
# The modules tests/test_admission_real_plugin.py cannot replay, whose attacks reach rules nothing else does.
FIELD_CONTRACTS = ("tests/test_pod_fields_contract.py", "tests/test_synced_fields_contract.py",
                   "tests/test_synced_metadata_contract.py", "tests/test_pod_object_references.py")


def rules_of(spec: dict) -> set[str]:
    """The rule each validation of a policy names in its message or messageExpression."""
    found = set()
    for validation in spec["validations"]:
        named = RULE.search(validation.get("message", "") + " " + validation.get("messageExpression", ""))
        assert named, f"a validation names no rule: {validation['expression'][:200]}"
        found.add(named.group(1))
    return found


def serving_releases(requests: list[dict]) -> list[Optional[str]]:
    """The Kubernetes release whose plugin judges each request: the pinned one when it serves the request's objects
    as sent, else the newest of RELEASES that does (a pod field of an older release only, ``workloadRef`` of 1.35);
    None when none does (a field only an unmirrored release has). Served by each release's harness
    (``as_served_by``), as the comparison of releases serves them, each release asked once for the requests left."""
    others = sorted((release for release in RELEASES if release != PINNED), key=versions.release_order, reverse=True)
    chosen: list[Optional[str]] = [None] * len(requests)
    left = list(range(len(requests)))
    for release in (PINNED, *others):
        if not left:
            break
        served = as_served_by([requests[index] for index in left], release)
        for index, request in zip(left, served):
            if request == requests[index]:
                chosen[index] = release
        left = [index for index in left if chosen[index] is None]
    return chosen


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> dict:
    """The recorded policies and reviews, (policy name, review, real verdict) of each distinct review judged at its
    serving release, and the reviews no mirrored release serves."""
    harness()  # built first, or the skip naming what is missing, before the child run is made for nothing
    policies, reviews = run_and_record(tmp_path_factory.mktemp("reviews"), reviewing_modules())
    distinct: dict = {}
    for review in reviews:
        distinct.setdefault(json.dumps([review.policy, review.inputs, review.messages], sort_keys=True), review)
    requests = {key: api_request(review.inputs) for key, review in distinct.items()}
    # Judged in groups of one release, one policy and one namespace as the review read it: sites of different
    # figures (a team's pod-size cap) share a policy and differ in their namespaces.
    by_release_and_policy, unjudged = defaultdict(list), []
    for (key, review), release in zip(distinct.items(), serving_releases(list(requests.values()))):
        if release is None:
            unjudged.append(review)
        else:
            namespace = json.dumps(review.inputs.get("namespaceObject"), sort_keys=True)
            by_release_and_policy[release, review.policy, namespace].append((review, requests[key]))
    judged, pinned = [], defaultdict(list)
    for (release, name, namespace), made in by_release_and_policy.items():
        verdicts = judge(loaded(policies, name), [request for _, request in made], release, read(namespace))
        judged.extend((name, review, verdict) for (review, _), verdict in zip(made, verdicts))
        if release == PINNED:
            pinned[name, namespace].extend((request, verdict) for (_, request), verdict in zip(made, verdicts))
    return {"policies": policies, "reviews": reviews, "judged": judged, "unjudged": unjudged, "pinned": pinned,
            "releases": {release for release, _, _ in by_release_and_policy}}


def read(namespace: str) -> dict:
    """The namespaces a group's reviews read (one, or none for cluster-scoped requests), by name."""
    found = json.loads(namespace)
    return {found["metadata"]["name"]: found} if found else {}


def loaded(policies: dict, name: str) -> dict:
    """A recorded policy with its binding, loaded under its own name: the binding names the policy it binds."""
    return {name: Bound(policies[name]["spec"], {name: {**policies[name]["binding"], "policyName": name}})}


def test_the_field_contracts_attacks_are_among_the_reviews(suite):
    tests = {review.test.partition("::")[0] for review in suite["reviews"]}
    assert set(FIELD_CONTRACTS) <= tests
    assert len(tests) > 30 and len(suite["judged"]) > 2000, (len(tests), len(suite["judged"]))


def test_the_real_plugin_reaches_tenant_sims_verdict_on_every_review_the_suite_makes(suite):
    assert disagreements(suite["judged"]) == []


def unserved(sent, served, path: str = "") -> set[str]:
    """The paths of ``sent`` that ``served`` lacks."""
    if isinstance(sent, dict) and isinstance(served, dict):
        return {found for key, value in sent.items() for found in (
            {f"{path}.{key}"} if key not in served else unserved(value, served[key], f"{path}.{key}"))}
    if isinstance(sent, list) and isinstance(served, list):
        return {found for item, kept in zip(sent, served) for found in unserved(item, kept, f"{path}[]")}
    return set()


def misplaced(kind: str, paths: set[str], release: str) -> set[str]:
    """The paths among ``paths`` (each a key a host of ``release`` drops) whose last key is a field of no accepted
    Kubernetes' struct at that place: the struct holding it is read off the path (``struct_holding``), so a
    field of another release is accepted in its own struct only."""
    return {path for path in paths
            if path.rpartition(".")[2] not in other_release_fields(struct_holding(kind, path, release))}


def test_only_objects_with_a_field_of_an_unmirrored_release_go_unjudged(suite):
    """A field that only a release no mirrored vCluster vendors has (1.37's pod ``evictionResponders``, a probe's
    ``httpGet.protocol``) is judged by no real plugin here: every review left unjudged has a key the newest mirrored
    release drops (served by its harness), and each such key is a field of an accepted Kubernetes' schema in the
    very struct that holds it. A review no release serves as sent for another reason (a value the harness writes
    otherwise) has no such key and fails here."""
    newest = max(RELEASES, key=versions.release_order)
    requests = [api_request(review.inputs) for review in suite["unjudged"]]
    found = {}
    for review, request, served in zip(suite["unjudged"], requests, as_served_by(requests, newest)):
        paths = set().union(*(unserved(request[key], served[key]) for key in ("object", "oldObject")))
        kind = (request["object"] or request["oldObject"])["kind"]
        found[review.test] = (paths, misplaced(kind, paths, newest))
    assert all(paths and not wrong for paths, wrong in found.values()), found
    assert len(found) < 10, found
    assert "1.35" in suite["releases"]  # workloadRef, which 1.36 dropped, is judged where it is served


def test_every_rule_of_every_policy_the_suite_judges_is_refused_by_the_real_plugin(suite):
    judged_rules = set().union(*(rules_of(policies["spec"]) for policies in suite["policies"].values()))
    refused = {RULE.match(message.lstrip("'")).group(1) for _, _, verdict in suite["judged"]
               for messages in verdict.refusals.values() for message in messages if RULE.match(message.lstrip("'"))}
    assert judged_rules - refused == set()
    assert {"own-queue", "object-references", "snapshot-requests", "claim-selected-node"} <= refused


@pytest.mark.parametrize("release", OTHER_RELEASES)
def test_every_release_reaches_the_pinned_verdict_on_every_review_as_it_serves_it(suite, release):
    """Each other release 1.30 to 1.35 reaches the pinned release's verdict on every review the pinned one judged,
    each object as that release serves it; where it drops a field (pod-level ``spec.resources`` before 1.32), the
    verdict it must reach is the pinned release's on the object without that field (tests/test_admission_releases.py
    does the same for its own corpus)."""
    differing = []
    for (name, namespace), judged in suite["pinned"].items():
        requests = [request for request, _ in judged]
        served = as_served_by(requests, release)
        expected = [verdict for _, verdict in judged]
        changed = [index for index, request in enumerate(requests) if request != served[index]]
        policy, namespaces = loaded(suite["policies"], name), read(namespace)
        if changed:
            for index, verdict in zip(changed, judge(policy, [served[i] for i in changed], namespaces=namespaces)):
                expected[index] = verdict
        for request, want, got in zip(served, expected, judge(policy, served, release, namespaces)):
            if unordered(got) != unordered(want):
                differing.append((name, request["operation"], request["name"], {"pinned": want, release: got}))
    assert differing == []


# --- the selection, the recorder and the check of unjudged reviews, without Go ------------------------------------


def test_an_unserved_key_is_accepted_only_as_a_field_of_the_struct_its_path_reaches():
    """1.37's probe ``httpGet.protocol``, mount ``bindMountOptions`` and pod ``evictionResponders``, dropped by 1.36,
    are fields of HTTPGetAction, VolumeMount and PodSpec, read off their paths; the negative controls put 1.37's
    fields one struct off, or write a key of no release, and are reported."""
    probe = {"httpGet": {"port": 80, "protocol": "HTTP"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.37", "startupProbe": probe,
                                    "volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": ["ro"]}]}],
                    "evictionResponders": [{"name": "acme.io/keeper", "priority": 1}]}}
    paths = unserved(as_served("Pod", pod), as_served("Pod", pod, "1.36"))
    assert paths == {".spec.containers[].startupProbe.httpGet.protocol", ".spec.evictionResponders",
                     ".spec.containers[].volumeMounts[].bindMountOptions"}
    assert struct_holding("Pod", ".spec.containers[].startupProbe.httpGet.protocol") == "core/v1.HTTPGetAction"
    assert misplaced("Pod", paths, "1.36") == set()
    off = {".spec.containers[].startupProbe.protocol", ".spec.containers[].evictionResponders",
           ".spec.initContainers[].bindMountOptions", ".metadata.evictionResponders", ".spec.noSuchField"}
    assert misplaced("Pod", paths | off, "1.36") == off
    with pytest.raises(AssertionError, match="core/v1.PodSpec has no .workloadRef"):
        struct_holding("Pod", ".spec.workloadRef.name", "1.36")  # every key before the last is one 1.36 has
    with pytest.raises(AssertionError, match="not a struct's field but in a map"):
        struct_holding("Pod", ".metadata.labels.app")


def test_every_module_that_builds_a_tenant_is_run_and_no_judge_is():
    modules = reviewing_modules()
    assert set(FIELD_CONTRACTS) <= set(modules)
    assert {"tests/test_admission_attacks.py", "tests/test_synced_objects_admission.py",
            "tests/test_pod_sizes.py"} <= set(modules)
    assert not {f"tests/{judge_module}.py" for judge_module in JUDGING_MODULES} & set(modules)


def test_the_child_run_records_each_review_with_its_policy_and_test(tmp_path):
    planted = tmp_path / "test_planted_review.py"
    planted.write_text(textwrap.dedent("""
        from tests.tenant_sim import Admission

        SPEC = {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "resources": ["pods"],
                                                        "apiGroups": [""], "apiVersions": ["v1"]}]},
                "validations": [{"expression": "object.metadata.name != 'bad'", "message": "[planted] no"}]}
        BINDING = {"matchResources": {"namespaceSelector": {}}, "validationActions": ["Deny"]}

        def test_reviews():
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "team-a"},
                   "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}
            assert Admission(SPEC, BINDING).review("team-a", pod) == ["[planted] no"]
            pod["metadata"]["name"] = "good"
            assert Admission(SPEC, BINDING).review("team-a", pod) == []
    """))
    policies, reviews = run_and_record(tmp_path / "out", [str(planted), "-n0"])
    assert [(review.messages, review.inputs["object"]["metadata"]["name"]) for review in reviews] == [
        (["[planted] no"], "bad"), ([], "good")]
    assert reviews[0].test.endswith("test_planted_review.py::test_reviews")
    assert [policy["spec"]["validations"][0]["message"] for policy in policies.values()] == ["[planted] no"]
    assert {review.policy for review in reviews} == set(policies)
