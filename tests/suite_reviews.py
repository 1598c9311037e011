"""Every review the suite's tenant_sim makes, recorded from a pytest run of the test modules that make them, for the
API server's own plugin to judge again (tests/test_admission_suite_real_plugin.py).

tests/test_admission_real_plugin.py replays a chosen set of attack modules in-process, with the fixtures it can
build. The attacks on many rules live elsewhere (the field contracts, the size, name and status modules), with
fixtures of their own: variant sites, guarded configs, teams allowed node ports. Here those modules run as pytest
runs them, in a child pytest with this module loaded as a plugin (``-p tests.suite_reviews``): each worker records
every review ``Admission`` makes (tests/tenant_sim.py ADMISSION_OBSERVERS) with the policy and binding it was
judged by, and writes them to ``$GPU_TENANCY_REVIEWS_DIR`` when its session ends.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from tests.go_toolchain import GO_VARIABLE
from tests.tenant_sim import ADMISSION_OBSERVERS

TESTS = Path(__file__).parent
OUTPUT_VARIABLE = "GPU_TENANCY_REVIEWS_DIR"
# The modules whose reviews tenant_sim makes: those that build a tenant or a synced-objects policy from these.
REVIEWING_SOURCES = {"tests.tenant_sim", "tests.synced_objects_sim", "tests.test_synced_objects_admission",
                     "tests.test_admission", "tests.test_admission_attacks"}
# Modules that send the reviews to the real plugin themselves (or build Go): not run again in the child.
JUDGING_MODULES = {"test_admission_real_plugin", "test_admission_releases", "test_admission_suite_real_plugin",
                   "test_virtual_defaults_real_plugin"}


class SuiteReview(NamedTuple):
    policy: str  # a name made from the policy's and binding's content
    inputs: dict  # {object, oldObject, request}, each object as tenant_sim served it
    messages: list  # tenant_sim's refusals
    test: str  # the test that made it: its file, relative to the project, and its name


def reviewing_modules() -> list[str]:
    """Every test module that imports a tenant or a synced-objects policy maker (tests/test_*.py), less the judges."""
    found = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.stem in JUDGING_MODULES:
            continue
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        if imported & REVIEWING_SOURCES:
            found.append(str(path.relative_to(TESTS.parent)))
    return found


def policy_name(spec: dict, binding: dict) -> str:
    return "suite-" + hashlib.sha256(json.dumps([spec, binding], sort_keys=True).encode()).hexdigest()[:16]


# --- the plugin, in each worker of the child pytest -------------------------------------------------------------

_policies: dict = {}
_reviews: list = []
_current = {"test": ""}


def _observe(admission, inputs: dict, messages: list) -> None:
    name = policy_name(admission.spec, admission.binding)
    _policies.setdefault(name, {"spec": admission.spec, "binding": admission.binding})
    _reviews.append({"policy": name, "inputs": inputs, "messages": messages, "test": _current["test"]})


def pytest_configure(config) -> None:
    if os.environ.get(OUTPUT_VARIABLE):
        ADMISSION_OBSERVERS.append(_observe)


def pytest_runtest_setup(item) -> None:
    _current["test"] = f"{os.path.relpath(item.path, TESTS.parent)}::{item.name}"


def pytest_sessionfinish(session) -> None:
    folder = os.environ.get(OUTPUT_VARIABLE)
    if folder and _reviews:  # an xdist controller made none: its workers did
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(folder, f"{worker}.json").write_text(json.dumps({"policies": _policies, "reviews": _reviews}))


# --- the parent's side -----------------------------------------------------------------------------------------


def run_and_record(folder: Path, modules: list[str]) -> tuple[dict, list[SuiteReview]]:
    """Run ``modules`` in a child pytest recording every review: (policies by name as {spec, binding}, reviews).
    The child is given no Go toolchain, so no test in it builds or runs upstream code again; it must pass."""
    environment = {**os.environ, OUTPUT_VARIABLE: str(folder), GO_VARIABLE: str(folder / "no-go-in-the-child")}
    folder.mkdir(parents=True, exist_ok=True)
    ran = subprocess.run([sys.executable, "-m", "pytest", "-c", str(TESTS.parent / "pytest.ini"),
                          "-p", "tests.suite_reviews", "-q", "-p", "no:cacheprovider", *modules],
                         cwd=TESTS.parent, env=environment, capture_output=True, text=True, timeout=3600)
    assert ran.returncode == 0, f"the recorded modules failed:\n{ran.stdout[-6000:]}\n{ran.stderr[-2000:]}"
    policies: dict = {}
    reviews: list[SuiteReview] = []
    for path in sorted(folder.glob("*.json")):
        recorded = json.loads(path.read_text())
        policies.update(recorded["policies"])
        reviews.extend(SuiteReview(**review) for review in recorded["reviews"])
    return policies, reviews
