"""plan.json: the plan document of one offline program run.

Every registered resource (type, name, URN, parent, provider, dependencies, options, inputs with
secrets replaced by ``[secret]``, and for components the outputs they registered), the stack
outputs, the names of the secret outputs, and the program's warnings and notes. Keys are sorted,
set-like lists are sorted and nothing depends on time, paths or randomness, so two runs give
byte-identical files and a diff of two plans is a review of a change.
"""

from __future__ import annotations

import json
from typing import Any

from config.vocabulary import PROJECT
from tools.offline.recording import ProgramRun, integral_numbers

PLAN_FILE = "plan.json"


def _options(options: dict[str, Any]) -> dict[str, Any]:
    """Resource options: every list in them (additionalSecretOutputs, ignoreChanges...) is a set."""
    return {key: sorted(value, key=_sort_key) if isinstance(value, list) else value
            for key, value in options.items()}


def _sort_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def build_plan(run: ProgramRun, stack: str, project: str = PROJECT) -> dict[str, Any]:
    """The plan document of one program run (a plain JSON-able dict)."""
    resources = []
    for resource in sorted(run.resources, key=lambda r: (r.urn, r.read)):
        entry = integral_numbers(resource.to_json())
        entry["dependencies"] = sorted(set(entry.get("dependencies") or []))
        entry["options"] = _options(entry.get("options") or {})
        if resource.urn in run.component_outputs:
            entry["outputs"] = integral_numbers(run.component_outputs[resource.urn])
        resources.append(entry)
    return {
        "project": project,
        "stack": stack,
        "resources": resources,
        "outputs": integral_numbers(run.outputs),
        "secretOutputs": sorted(run.secret_outputs),
        # Warnings are logged asynchronously: their arrival order is not part of the plan.
        "warnings": sorted(run.warnings),
        "notes": sorted(run.notes),
    }


def render_plan_json(plan: dict[str, Any]) -> str:
    return json.dumps(plan, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
