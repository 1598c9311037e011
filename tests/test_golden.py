"""The committed stacks' plans are the golden ones in tests/golden/: any change to what the program
registers for dev or eks, or to how the review summary reads, shows up here as a reviewed diff.

Regenerate after an intended change with ``python -m tools.golden`` and review ``git diff tests/golden``.
"""

from __future__ import annotations

import difflib

import pytest

from tests.conftest import COMMITTED_STACKS
from tools.golden import GOLDEN_DIR, REGENERATE, golden_files


def _difference(name: str, golden: str, fresh: str) -> str:
    lines = list(difflib.unified_diff(golden.splitlines(), fresh.splitlines(), f"golden/{name}", f"fresh/{name}",
                                      lineterm="", n=1))
    shown = "\n".join(lines[:40]) + ("\n..." if len(lines) > 40 else "")
    return f"{name} differs from the golden plan (if the change is intended, run `{REGENERATE}`):\n{shown}"


def test_every_committed_stack_has_a_golden_plan():
    assert sorted(path.name for path in GOLDEN_DIR.iterdir() if path.is_dir()) == COMMITTED_STACKS, \
        f"golden plans and committed stacks differ: run `{REGENERATE}`"


@pytest.mark.parametrize("stack", ["dev", "eks"])
def test_a_fresh_plan_equals_the_golden_plan(stack, request):
    fresh = golden_files(request.getfixturevalue(f"{stack}_run"), stack)
    for name, text in fresh.items():
        golden_file = GOLDEN_DIR / stack / name
        assert golden_file.is_file(), f"{golden_file} is missing: run `{REGENERATE}`"
        golden = golden_file.read_text(encoding="utf-8")
        assert golden == text, _difference(f"{stack}/{name}", golden, text)
