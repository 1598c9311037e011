"""The golden plans in tests/golden/: any change to what the program registers for a stack that has one
(the reference stacks dev and eks, and any site given one), or to how the review summary reads, shows up
here as a reviewed diff. A newly committed site needs none to keep CI green (``python -m tools.plan.golden SITE``
adds it when its plan should be reviewed the same way).

Regenerate after an intended change with ``python -m tools.plan.golden`` and review ``git diff tests/golden``.
"""

from __future__ import annotations

import difflib

import pytest

from tests.conftest import COMMITTED_STACKS
from tools.offline import mockrun
from tools.plan.golden import GOLDEN_DIR, REGENERATE, golden_files

GOLDEN_STACKS = sorted(path.name for path in GOLDEN_DIR.iterdir() if path.is_dir())


def _difference(name: str, golden: str, fresh: str) -> str:
    lines = list(difflib.unified_diff(golden.splitlines(), fresh.splitlines(), f"golden/{name}", f"fresh/{name}",
                                      lineterm="", n=1))
    shown = "\n".join(lines[:40]) + ("\n..." if len(lines) > 40 else "")
    return f"{name} differs from the golden plan (if the change is intended, run `{REGENERATE}`):\n{shown}"


def test_the_reference_stacks_have_golden_plans_and_no_golden_plan_outlives_its_stack():
    assert {"dev", "eks"} <= set(GOLDEN_STACKS)
    stale = sorted(set(GOLDEN_STACKS) - set(COMMITTED_STACKS))
    assert not stale, f"golden plans without a Pulumi.<stack>.yaml: {stale}; delete tests/golden/<stack>"


@pytest.mark.parametrize("stack", GOLDEN_STACKS)
def test_a_fresh_plan_equals_the_golden_plan(stack, request):
    run = request.getfixturevalue(f"{stack}_run") if stack in ("dev", "eks") else \
        mockrun.run_program(mockrun.load_stack_file(stack), stack=stack)
    fresh = golden_files(run, stack)
    for name, text in fresh.items():
        golden_file = GOLDEN_DIR / stack / name
        assert golden_file.is_file(), f"{golden_file} is missing: run `{REGENERATE}`"
        golden = golden_file.read_text(encoding="utf-8")
        assert golden == text, _difference(f"{stack}/{name}", golden, text)
