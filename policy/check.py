"""Run the policy pack's rules on an offline plan, without the Pulumi CLI.

    python -m policy.check PLAN_JSON [--json]

PLAN_JSON is the plan.json written by ``python -m tools.plan STACK --out DIR`` (or DIR itself,
or ``-`` for stdin). Every violation is printed with its rule, level and resource URN.

Exit codes: 0 no mandatory violation (advisory warnings are printed, they do not fail);
1 at least one mandatory violation; 2 the plan cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from .adapters import from_plan, read_plan
from .rule_model import Violation
from .rules import RULES, evaluate


def _report(violations: Sequence[Violation], plan: dict, resource_count: int) -> str:
    lines = []
    for violation in violations:
        lines.append(f"[{violation.level}] {violation.rule}: {violation.message}")
        if violation.urn:
            lines.append(f"    at {violation.urn}")
    mandatory = sum(1 for violation in violations if violation.mandatory)
    advisory = len(violations) - mandatory
    where = f"stack {plan['stack']}" if plan.get("stack") else "plan"
    lines.append(f"gpu-tenancy policies ({len(RULES)} rules, {resource_count} resources, {where}): "
                 f"{mandatory} mandatory violation(s), {advisory} advisory warning(s)")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policy.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("plan", help="plan.json of `python -m tools.plan` (or its directory, or - for stdin)")
    parser.add_argument("--json", action="store_true", help="print the violations as a JSON list")
    args = parser.parse_args(argv)
    try:
        plan = read_plan(args.plan)
        resources = from_plan(plan)
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"policy.check: cannot read {args.plan}: {error}", file=sys.stderr)
        return 2
    violations = evaluate(resources)
    if args.json:
        print(json.dumps([{"rule": v.rule, "level": v.level, "message": v.message, "urn": v.urn}
                          for v in violations], indent=2))
    else:
        print(_report(violations, plan, len(resources)))
    return 1 if any(violation.mandatory for violation in violations) else 0


if __name__ == "__main__":
    sys.exit(main())
