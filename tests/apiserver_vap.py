"""The API server's own ValidatingAdmissionPolicy plugin, run: tests/apiserver_vap/main.go built inside vCluster's
source at a mirrored tag, whose vendor/ holds k8s.io/apiserver and k8s.io/client-go at the pinned Kubernetes.

tests/tenant_sim.py's ``Admission`` re-implements the plugin's matching and message rules and evaluates the CEL with
cel-python; this module sends the reviews it makes (``recorded``) to the real plugin, with every policy and binding
a program renders loaded through informers as the API server loads them, and reads back each request's verdict:
the API server's error and every refusal message by policy (``Verdict``).

Needs the mirror of loft-sh/vcluster and a Go toolchain (tests/go_toolchain.py); without them the tests skip and
say which is missing. The first build takes several minutes; the binary is kept under ``$GPU_TENANCY_GO_CACHE``.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from pathlib import Path
from typing import NamedTuple, Optional

from tests.conftest import mirror, mirrored_tag
from tests.go_toolchain import built_in_tree
from tests.reference_cel import unordered_lists
from tests.synced_objects_sim import RESOURCES
from tests.tenant_sim import (
    ADMISSION_OBSERVERS, BINDING, POLICY, Admission, namespace_object, namespaces_of, recording,
)

VCLUSTER = "loft-sh/vcluster"
# vCluster v0.36.1 vendors k8s.io/apiserver v0.36.0, the pinned Kubernetes minor.
TAG = "v0.36.1"
FOLDER = Path(__file__).with_name("apiserver_vap")
HARNESS = FOLDER / "main.go"
# Starting a policy plugin as the API server does, shared with tests/apiserver_map.py's harness.
PLUGIN_START = Path(__file__).with_name("apiserver_common") / "plugin_start.go"
PACKAGE = "cmd/gpu-tenancy-vap-real"
# Each Kubernetes minor a site may run (config/versions.py) with a mirrored vCluster tag that vendors its
# k8s.io/apiserver at the newest patch any mirrored tag holds, and the harness files for that release's API
# (tests/test_admission_releases.py checks both against the mirror). 1.37 has none: no mirrored vCluster vendors
# k8s.io/apiserver v0.37 yet.
RELEASES = {
    "1.30": ("v0.20.6", "plugin_v030.go", "compiler_v030.go"),
    "1.31": ("v0.22.6", "plugin_v030.go", "compiler_v030.go"),
    "1.32": ("v0.26.5", "plugin_v030.go", "compiler_v030.go"),
    "1.33": ("v0.29.3", "plugin_v030.go", "compiler_v030.go"),
    "1.34": ("v0.31.3", "plugin_v030.go", "compiler_v030.go"),
    "1.35": ("v0.34.7", "plugin_v030.go", "compiler_v035.go"),
    "1.36": (TAG, "plugin_v036.go", "compiler_v035.go"),
}
PINNED = "1.36"
# Build tags a release's tree needs with the Go toolchain the tests build with: v0.34.7 vendors golang.org/x/net
# v0.54, whose http2 under Go 1.27 wraps the standard library's and lacks what its vendored grpc calls
# (http2.TrailerPrefix) unless built as the legacy package.
BUILD_TAGS = {"1.35": "http2legacy"}
# How the plugin words a failed validation of a binding that warns (dispatcher.go).
WARNING = re.compile(r"Validation failed for ValidatingAdmissionPolicy '([^']*)' with binding '([^']*)': (.*)", re.S)
# Kinds a subresource request carries that are not its resource's.
SUBRESOURCE_KINDS = {"binding": ("", "v1", "Binding"), "eviction": ("policy", "v1", "Eviction")}


def harness(release: str = PINNED) -> Path:
    """The harness built inside the vCluster tag of Kubernetes ``release`` (the pinned one unless named)."""
    tag, *shims = RELEASES[release]
    paths = (HARNESS, FOLDER / "compile.go", PLUGIN_START, *(FOLDER / shim for shim in shims))
    files = {path: PACKAGE for path in paths}
    return built_in_tree(mirror(VCLUSTER), mirrored_tag(VCLUSTER, tag), files, PACKAGE, "apiserver-vap",
                         BUILD_TAGS.get(release, ""))


class Verdict(NamedTuple):
    allowed: bool
    error: str
    refusals: dict  # policy name -> its refusal messages, in the policy's order

    def of(self, policy: str) -> list[str]:
        return self.refusals.get(policy, [])


class Bound(NamedTuple):
    """A policy's spec and its bindings' (name -> spec): one, or one per team (the site's pod-size policy)."""
    spec: dict
    bindings: dict


def policies_of(program) -> dict[str, Bound]:
    """Every ValidatingAdmissionPolicy a program renders, by name, with its bindings."""
    found = {policy.inputs["metadata"]["name"]: Bound(policy.inputs["spec"], {})
             for policy in program.of_type(POLICY)}
    for binding in program.of_type(BINDING):
        found[binding.inputs["spec"]["policyName"]].bindings[binding.inputs["metadata"]["name"]] = \
            binding.inputs["spec"]
    return found


def api_request(inputs: dict, *, kind: Optional[tuple] = None) -> dict:
    """The admission attributes of a review's {object, oldObject, request}: the resource and kind of its object
    (tests/synced_objects_sim.py RESOURCES), or ``kind`` (group, version, kind) for a subresource of another kind."""
    obj = inputs["object"] or inputs["oldObject"]
    request = inputs["request"]
    group, resource = RESOURCES[obj["kind"]]
    version = obj.get("apiVersion", "v1").rpartition("/")[2]
    kind = kind or SUBRESOURCE_KINDS.get(request["subResource"]) or (group, version, obj["kind"])
    return {"operation": request["operation"], "subResource": request["subResource"],
            "namespace": request["namespace"], "name": obj["metadata"].get("name", ""),
            "kind": dict(zip(("group", "version", "kind"), kind)),
            "resource": {"group": group, "version": version, "resource": resource},
            "userInfo": request["userInfo"], "object": inputs["object"], "oldObject": inputs["oldObject"],
            "options": request.get("options")}


def judge(policies: dict[str, Bound], requests: list[dict], release: str = PINNED,
          namespaces: Optional[dict[str, dict]] = None) -> list[Verdict]:
    """The real plugin's verdict on each request, every policy of ``policies`` loaded with its binding, and every
    namespace a request names present: as ``namespaces`` holds it (tests/tenant_sim.py namespace_object), else with
    only the label the API server gives it; the plugin of Kubernetes ``release``."""
    named = sorted({request["namespace"] for request in requests if request["namespace"]})
    known = {name: (namespaces or {}).get(name) or namespace_object(name) for name in named}
    payload = {"policies": [{"name": name, "spec": spec} for name, (spec, _) in policies.items()],
               "bindings": [{"name": name, "spec": binding} for _, (_, bindings) in policies.items()
                            for name, binding in bindings.items()],
               "namespaces": [{"name": name, "labels": namespace["metadata"]["labels"],
                               "annotations": namespace["metadata"].get("annotations", {})}
                              for name, namespace in known.items()],
               "requests": requests}
    ran = subprocess.run([str(harness(release))], input=json.dumps(payload), capture_output=True, text=True,
                         timeout=1200)
    assert ran.returncode == 0, f"the admission harness failed:\n{ran.stderr[-4000:]}"
    verdicts = []
    for answer in json.loads(ran.stdout):
        refusals: dict = {}
        for text in answer["warnings"]:
            policy, _, message = WARNING.fullmatch(text).groups()
            refusals.setdefault(policy, []).append(message)
        assert not answer.get("observerError"), answer["observerError"]
        verdicts.append(Verdict(answer["allowed"], answer.get("error", ""), refusals))
    return verdicts


class Compiled(NamedTuple):
    compatibility: str  # the version new expressions are held to, "1.29"
    errors: dict  # policy name -> ["<field>: <error>"] of each expression that does not compile


def compile_new(specs: dict[str, dict], release: str = PINNED) -> Compiled:
    """Each policy spec's expressions compiled as new expressions are on create by Kubernetes ``release``."""
    payload = {"policies": [{"name": name, "spec": spec} for name, spec in specs.items()]}
    ran = subprocess.run([str(harness(release)), "compile"], input=json.dumps(payload), capture_output=True,
                         text=True, timeout=600)
    assert ran.returncode == 0, f"the admission harness failed:\n{ran.stderr[-4000:]}"
    answer = json.loads(ran.stdout)
    return Compiled(answer["compatibility"], {each["name"]: each["errors"] for each in answer["policies"]})


def served(objects: list[dict], release: str = PINNED) -> list[dict]:
    """Each object as the plugin of Kubernetes ``release`` hands it to a policy: decoded into that release's Go type
    of its kind, converted back."""
    items = [{"kind": {"group": obj["apiVersion"].rpartition("/")[0], "version": obj["apiVersion"].rpartition("/")[2],
                       "kind": obj["kind"]}, "object": obj} for obj in objects]
    ran = subprocess.run([str(harness(release)), "served"], input=json.dumps(items), capture_output=True,
                         text=True, timeout=600)
    assert ran.returncode == 0, f"the admission harness failed:\n{ran.stderr[-4000:]}"
    return json.loads(ran.stdout)


class Review(NamedTuple):
    admission: Admission
    inputs: dict
    messages: list


def recorded() -> contextlib.AbstractContextManager[list[Review]]:
    """Every review tests/tenant_sim.py's Admission makes inside the block, matched or not."""
    return recording(ADMISSION_OBSERVERS, Review)


def named(reviews: list[Review], policies: dict[str, Bound]) -> list[tuple[str, Review]]:
    """Each review with the name of its policy among ``policies``; a review of a policy the program does not render
    (a test's variant) is left out."""
    names = {json.dumps(spec, sort_keys=True): name for name, (spec, _) in policies.items()}
    return [(names[key], review) for review in reviews
            if (key := json.dumps(review.admission.spec, sort_keys=True)) in names]


def plugin_verdicts(reviews: list[Review], program) -> list[tuple[str, Review, Verdict]]:
    """(policy name, review, real verdict) of each review of a policy ``program`` renders, all of them loaded, in the
    program's namespaces."""
    policies = policies_of(program)
    reviewed = named(reviews, policies)
    requests = [api_request(review.inputs) for _, review in reviewed]
    return [(name, review, verdict) for (name, review), verdict in
            zip(reviewed, judge(policies, requests, namespaces=namespaces_of(program)))]


def disagreements(judged: list[tuple[str, Review, Verdict]]) -> list[tuple]:
    """The reviews whose real verdict is not tenant_sim's: the policy's refusals differ (a listed ``[...]`` compared
    without its order), another policy refuses what tenant_sim did not refuse by it for the same request (a team's
    pods are judged by its own policy and the site's pod-size one), or the API server's answer does not follow from
    the refusals."""
    def key(review: Review) -> str:
        """The request and the namespace it was judged in: one pod may be judged in a namespace with the team's cap
        and in one without it."""
        return json.dumps({part: review.inputs.get(part) for part in ("object", "oldObject", "request",
                                                                      "namespaceObject")}, sort_keys=True)

    expected: dict = {}
    for name, review, _ in judged:
        expected.setdefault(key(review), {})[name] = sorted(unordered_lists(message.strip())
                                                            for message in review.messages)
    found = []
    for name, review, verdict in judged:
        python = expected[key(review)][name]
        real = sorted(unordered_lists(message) for message in verdict.of(name))
        others = {policy: messages for policy, messages in verdict.refusals.items() if policy != name
                  and sorted(unordered_lists(message) for message in messages) != expected[key(review)].get(policy)}
        # The denying plugin evaluates apart from the warning one, so a listed map's keys may come in another order.
        error = unordered_lists(verdict.error)
        answered = verdict.allowed == (not verdict.refusals) and (
            verdict.allowed or any(error.endswith(f"denied request: {unordered_lists(message)}")
                                   for messages in verdict.refusals.values() for message in messages))
        if real != python or others or not answered:
            obj = review.inputs["object"] or review.inputs["oldObject"]
            found.append((name, review.inputs["request"]["operation"], review.inputs["request"]["subResource"],
                          obj["metadata"].get("name"), {"real": real, "tenant_sim": python, "others": others,
                                                        "error": verdict.error}))
    return found
