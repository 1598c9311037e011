"""Golden plans: the committed plan of each committed stack, which tests/test_golden.py compares to a fresh one.

    python -m tools.plan.golden [STACK ...]

Writes ``tests/golden/STACK/plan.json`` and ``summary.md`` (the files ``python -m tools.plan STACK``
writes) for every ``Pulumi.*.yaml`` in the project root, or for the stacks named. Run it after a
change that is meant to change a plan, and review the diff of tests/golden/ like any other code.

Exit codes: 0 written; 2 a stack file is missing or invalid (printed to stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from config import ConfigError
from config.stack_file import PROJECT_DIR, StackFileError, stack_names
from tools.offline import mockrun
from tools.offline.recording import ProgramRun
from tools.plan.document import PLAN_FILE, build_plan, render_plan_json
from tools.plan.summary import SUMMARY_FILE, render_summary

GOLDEN_DIR = PROJECT_DIR / "tests" / "golden"
REGENERATE = "python -m tools.plan.golden"


def golden_files(run: ProgramRun, stack: str) -> dict[str, str]:
    """File name -> text of the golden plan of one program run."""
    plan = build_plan(run, stack)
    return {PLAN_FILE: render_plan_json(plan), SUMMARY_FILE: render_summary(plan)}


def write_golden(stack: str, golden_dir: Path = GOLDEN_DIR) -> Path:
    with mockrun.owned_event_loops():
        run = mockrun.run_program(mockrun.load_stack_file(stack), stack=stack)
    out = golden_dir / stack
    out.mkdir(parents=True, exist_ok=True)
    for name, text in golden_files(run, stack).items():
        temporary = out / f".{name}.tmp"
        temporary.write_text(text, encoding="utf-8", newline="\n")
        os.replace(temporary, out / name)
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description="Rewrite the golden plans in tests/golden/.")
    parser.add_argument("stacks", metavar="STACK", nargs="*", help="stack names (default: every Pulumi.*.yaml)")
    args = parser.parse_args(argv)
    for stack in args.stacks or stack_names():
        try:
            out = write_golden(stack)
        except (StackFileError, ConfigError) as error:
            print(f"error: stack {stack}: {error}", file=sys.stderr)
            return 2
        print(f"golden plan {stack} -> {out.relative_to(PROJECT_DIR)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
