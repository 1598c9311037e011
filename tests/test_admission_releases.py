"""The host's ValidatingAdmissionPolicies on every Kubernetes release a site may run, not only the pinned one.

``cluster.<kind>.kubernetesVersion`` accepts 1.30 to 1.37 (config/versions.py), and the other real-plugin tests
judge the policies as k8s.io/apiserver v0.36 does. Here tests/apiserver_vap.py's harness is built inside the
vCluster tag that vendors each release's k8s.io/apiserver (RELEASES), and at each release:

- every CEL expression of every host policy the committed stacks and the generated sites render compiles as a new
  expression on create (k8s.io/apiserver pkg/cel/environment: libraries gated by ``IntroducedVersion``, new
  expressions held to ``DefaultCompatibilityVersion()``), and an expression of a later library is refused there;
- the real plugin reaches the pinned release's verdict on the honest corpus, the objects at and past each size cap
  and the attack corpus, each object as that release serves it (a field its API lacks is dropped before any policy
  sees it): runtime CEL cost, which cel-go prices differently from release to release, stops none of them. The
  verdicts are equal to the word but for the order of the keys a message lists (``unordered``).

1.37 is accepted but no mirrored vCluster vendors k8s.io/apiserver v0.37: it is not checked here.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from config import versions
from tests.apiserver_vap import (
    PINNED, RELEASES, VCLUSTER, api_request, compile_new, harness, judge, named, policies_of, recorded, served,
)
from tests.conftest import COMMITTED_STACKS, git, run, stack_config
from tests.generated_sites import generated_sites, site_config  # noqa: F401 (the fixture)
from tests.test_admission_real_plugin import honest_reviews, replay_attacks
from tests.test_celgo_caps import size_caps
from tests.tenant_sim import namespaces_of

OTHER_RELEASES = [release for release in RELEASES if release != PINNED]
APISERVER = re.compile(r"^# k8s\.io/apiserver v0\.(\d+)\.(\d+)$", re.M)
# A refusal's rule: the bracketed name every team policy's message starts with.
RULE = re.compile(r"^'?\[([a-z0-9-]+)\]")
# A bracketed list in a refusal: a messageExpression that lists a map's offending keys ([reserved-keys]) lists them
# in the order CEL iterates the map, which is Go's random map order (cel-go common/types/map.go iterates with
# reflect's MapRange), so the same object's message orders them differently from one evaluation to the next, on
# every release and within one request (its denial and its warning). Which keys, rules and policies are the same.
LISTED = re.compile(r"\[([^\[\]]*)\]")


def vendored_apiserver(tag: str) -> tuple[int, int]:
    minor, patch = APISERVER.search(git(VCLUSTER, "show", f"{tag}:vendor/modules.txt")).groups()
    return int(minor), int(patch)


def accepted_minors() -> list[str]:
    low = versions.release_numbers(versions.KUBERNETES_MINIMUM_VERSION)[1]
    high = versions.release_numbers(versions.KUBERNETES_NEWEST_ACCEPTED_VERSION)[1]
    return [f"1.{minor}" for minor in range(low, high + 1)]


def test_each_release_is_run_at_the_newest_patch_of_its_apiserver_any_mirrored_vcluster_vendors():
    tags = git(VCLUSTER, "tag", "--list", "v0.*").split()
    newest: dict[int, int] = {}
    for tag in tags:
        found = APISERVER.search(git(VCLUSTER, "show", f"{tag}:vendor/modules.txt"))
        if found:
            minor, patch = map(int, found.groups())
            newest[minor] = max(patch, newest.get(minor, patch))
    for release, (tag, *_) in RELEASES.items():
        minor = int(release.split(".")[1])
        assert vendored_apiserver(tag) == (minor, newest[minor]), (release, tag)
    unchecked = [release for release in accepted_minors() if release not in RELEASES]
    # A release a site may state and no mirrored vCluster vendors: when one appears, add it to RELEASES.
    assert unchecked == [versions.KUBERNETES_NEWEST_ACCEPTED_VERSION]
    assert int(unchecked[0].split(".")[1]) not in newest


def host_policies(programs) -> dict[str, dict]:
    """Every distinct host policy spec the programs render, by the first name it is rendered under."""
    specs: dict[str, dict] = {}
    for program in programs:
        for name, (spec, _) in policies_of(program).items():
            specs.setdefault(json.dumps(spec, sort_keys=True), (name, spec))
    return dict(specs.values())


@pytest.fixture(scope="module")
def rendered(generated_sites) -> dict[str, dict]:  # noqa: F811 (the fixture)
    harness()  # the skip naming what is missing, before a minute of sites is rendered for nothing
    programs = [run(stack_config(stack), stack=stack) for stack in COMMITTED_STACKS]
    programs += [run(site_config(site), stack=site) for site in generated_sites]
    return host_policies(programs)


def expression_count(spec: dict) -> int:
    return sum(len(spec.get(key, [])) for key in ("variables", "matchConditions", "validations", "auditAnnotations")) \
        + sum("messageExpression" in validation for validation in spec.get("validations", []))


@pytest.mark.parametrize("release", list(RELEASES))
def test_every_host_policy_compiles_as_a_new_expression_at_every_release(rendered, release):
    """A policy one expression of which does not compile is refused on create: the team has no boundary at all."""
    assert len(rendered) > 20 and sum(map(expression_count, rendered.values())) > 1000
    compiled = compile_new(rendered, release)
    minor = int(release.split(".")[1])
    # 1.30 holds new expressions to 1.29's libraries; later releases to the release before (n-1).
    assert compiled.compatibility == ("1.29" if minor == 30 else f"1.{minor - 1}")
    assert {name: errors for name, errors in compiled.errors.items() if errors} == {}
    assert set(compiled.errors) == set(rendered)


# Expressions of libraries base.go introduces later than 1.29: (the option's text in base.go, a validation using it).
LATER_LIBRARIES = {
    "ext.TwoVarComprehensions": "object.metadata.?labels.orValue({}).all(key, value, value != '')",
    "ext.ListsVersion(3)": "[2, 1].sort() == [1, 2]",
}


def introduced(release: str, option: str):
    """(major, minor) base.go at ``release``'s tag introduces ``option`` in, or None when it has no such option."""
    tag = RELEASES[release][0]
    base = git(VCLUSTER, "show", f"{tag}:vendor/k8s.io/apiserver/pkg/cel/environment/base.go")
    if option not in base:
        return None
    before = base[:base.index(option)]
    return tuple(map(int, re.findall(r"IntroducedVersion: version\.MajorMinor\((\d+), (\d+)\)", before)[-1]))


@pytest.mark.parametrize("release", list(RELEASES))
def test_an_expression_of_a_later_library_is_refused_where_new_expressions_lack_it(rendered, release):
    """The negative control: the same compile path refuses what the release's new-expressions environment lacks."""
    name, spec = next((name, spec) for name, spec in rendered.items() if spec.get("validations"))
    variants = {}
    for option, expression in LATER_LIBRARIES.items():
        variant = copy.deepcopy(spec)
        variant["validations"].append({"expression": expression, "message": "[later-library] control"})
        variants[option] = variant
    compiled = compile_new(variants, release)
    compatibility = tuple(map(int, compiled.compatibility.split(".")))
    for option in LATER_LIBRARIES:
        available = (since := introduced(release, option)) is not None and since <= compatibility
        index = len(variants[option]["validations"]) - 1
        refused = [error for error in compiled.errors[option] if error.startswith(f"validations[{index}].expression")]
        assert compiled.errors[option] == refused and bool(refused) != available, (release, option, compiled.errors)
    assert introduced("1.30", "ext.TwoVarComprehensions") is None and introduced(PINNED, "ext.ListsVersion(3)")


@pytest.fixture(scope="module")
def corpus(dev_run) -> dict:
    """Per committed stack: its program, its host policies, and the requests of the honest corpus, the size caps
    (dev) and the attack modules, with each one's rule names, and the pinned release's verdict on each."""
    harness()
    programs = {"dev": dev_run, "eks": run(stack_config("eks"), stack="eks")}
    with recorded() as reviews:
        for stack, program in programs.items():
            honest_reviews(program, stack)
    with recorded() as hostile:
        # The objects one byte past each cap are attacks on the size rules; those at the cap must pass.
        size_caps(dev_run)
        assert replay_attacks(programs) > 300
    made = {}
    for stack, program in programs.items():
        policies = policies_of(program)
        honest = named(reviews, policies)
        attacks = named(hostile, policies)
        requests = [api_request(review.inputs) for _, review in honest + attacks]
        namespaces = namespaces_of(program)
        made[stack] = {"policies": policies, "requests": requests, "honest": len(honest), "namespaces": namespaces,
                       "pinned": judge(policies, requests, namespaces=namespaces)}
    return made


def refused_rules(verdicts) -> set[str]:
    return {RULE.match(message).group(1) for verdict in verdicts for messages in verdict.refusals.values()
            for message in messages if RULE.match(message)}


def unordered(verdict):
    """The verdict with every key a message lists in sorted order: what must be equal from release to release."""
    def sort(text: str) -> str:
        return LISTED.sub(lambda found: "[" + ", ".join(sorted(found.group(1).split(", "))) + "]", text)
    return (verdict.allowed, sort(verdict.error),
            {policy: sorted(map(sort, messages)) for policy, messages in verdict.refusals.items()})


def test_the_pinned_release_admits_the_honest_corpus_and_refuses_the_attacks(corpus):
    reached = set()
    for stack, made in corpus.items():
        honest, attacks = made["pinned"][:made["honest"]], made["pinned"][made["honest"]:]
        assert sum(verdict.allowed for verdict in honest) > 50 and sum(not v.allowed for v in attacks) > 200, stack
        reached |= refused_rules(attacks)
    # The objects one byte past each size cap reach the size rules; the attack modules the rest they replay.
    assert {"pod-size", "pod-entry-size", "metadata-size", "object-size", "reserved-keys"} <= reached


def as_served_by(requests: list[dict], release: str) -> list[dict]:
    """The requests with each object and old object as Kubernetes ``release`` serves it: a field its API does not
    have yet (pod-level ``spec.resources`` before 1.32) is dropped on decoding, never stored, never run."""
    objects = [request[key] for request in requests for key in ("object", "oldObject") if request[key]]
    converted = iter(served(objects, release))
    return [{**request, **{key: next(converted) for key in ("object", "oldObject") if request[key]}}
            for request in requests]


@pytest.mark.parametrize("release", OTHER_RELEASES)
def test_every_release_reaches_the_pinned_releases_verdict_on_every_request_as_it_serves_it(corpus, release):
    """Each release's verdict is the pinned release's on the object that release would store: where they differ,
    the older API drops the field a rule refuses, and the pod it stores runs without it."""
    differing, dropped = [], 0
    for stack, made in corpus.items():
        as_served = as_served_by(made["requests"], release)
        pinned = [verdict if request == served_request else None
                  for request, served_request, verdict in zip(made["requests"], as_served, made["pinned"])]
        changed = [index for index, verdict in enumerate(pinned) if verdict is None]
        for index, verdict in zip(changed, judge(made["policies"], [as_served[index] for index in changed],
                                                 namespaces=made["namespaces"])):
            pinned[index] = verdict
        dropped += sum(unordered(made["pinned"][index]) != unordered(pinned[index]) for index in changed)
        for request, expected, verdict in zip(made["requests"], pinned,
                                              judge(made["policies"], made["requests"], release,
                                                    made["namespaces"])):
            if unordered(verdict) != unordered(expected):
                differing.append((stack, request["operation"], request["subResource"], request["name"],
                                  {"pinned": expected, release: verdict}))
    assert differing == []
    # Pod-level resources (k8s.io/api v0.32) that a rule refuses on the pinned release are dropped before it.
    assert dropped > 0 or release not in ("1.30", "1.31")
