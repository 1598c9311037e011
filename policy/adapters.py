"""Turn what each caller has into the neutral ``rule_model.Resource``.

- ``from_policy_resource``: a pulumi_policy ``ResourceValidationArgs`` or ``PolicyResource``
  (inside ``pulumi preview --policy-pack policy``). Their ``props`` are proxies that raise
  ``UnknownValueError`` on a value the engine does not know yet: each such value becomes
  ``rule_model.UNKNOWN`` instead, so one unknown field does not stop every rule.
- ``from_plan`` / ``load_plan``: the offline plan.json of ``python -m tools.plan`` (or the
  ``to_json()`` of ``tools.offline.recording`` resources), where unknowns read ``"[unknown]"``.

pulumi_policy is optional here: ``python -m policy.check`` runs without it.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Iterable, Union

if __package__:  # imported as the `policy` package (tests, `python -m policy.check`)
    from .rule_model import UNKNOWN, Resource
else:  # run by the Pulumi CLI, which puts the policy pack's directory on sys.path
    from rule_model import UNKNOWN, Resource

PLAN_UNKNOWN = "[unknown]"  # tools.offline.recording's rendering of an unknown value
PLAN_FILE = "plan.json"


def _plain(value: Any, unknowns: frozenset, raised: tuple = ()) -> Any:
    """Deep copy into dicts and lists, with unknown values (sentinels, or ``raised`` on access) as UNKNOWN."""
    if isinstance(value, str):
        return UNKNOWN if value in unknowns else value
    if isinstance(value, Mapping):
        result = {}
        for key in list(value):
            try:
                result[key] = _plain(value[key], unknowns, raised)
            except raised:
                result[key] = UNKNOWN
        return result
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        items = []
        for index in range(len(value)):
            try:
                items.append(_plain(value[index], unknowns, raised))
            except raised:
                items.append(UNKNOWN)
        return items
    return value


# --- pulumi_policy ------------------------------------------------------------------------------


@functools.cache
def _engine_unknowns() -> tuple[frozenset, tuple]:
    """The engine's unknown sentinels and the error pulumi_policy's proxies raise on them.

    Imported here, not at module level, so the offline checker does not load pulumi_policy.
    """
    from pulumi_policy import proxy

    sentinels = frozenset((proxy.UNKNOWN_BOOLEAN_VALUE, proxy.UNKNOWN_NUMBER_VALUE, proxy.UNKNOWN_STRING_VALUE,
                           proxy.UNKNOWN_ARRAY_VALUE, proxy.UNKNOWN_ASSET_VALUE, proxy.UNKNOWN_ARCHIVE_VALUE,
                           proxy.UNKNOWN_OBJECT_VALUE))
    return sentinels, (proxy.UnknownValueError,)


def from_policy_resource(resource: Any) -> Resource:
    """A ``ResourceValidationArgs`` or ``PolicyResource`` (both carry type, props, urn, name, provider)."""
    provider = getattr(resource, "provider", None)
    return Resource(
        type=resource.resource_type,
        name=resource.name,
        urn=resource.urn,
        inputs=_plain(resource.props, *_engine_unknowns()),
        provider=getattr(provider, "urn", None) or None,
    )


def from_stack_args(args: Any) -> list[Resource]:
    """The resources of a ``StackValidationArgs``."""
    return [from_policy_resource(resource) for resource in args.resources]


# --- offline plan -------------------------------------------------------------------------------


def from_plan_resource(entry: Mapping[str, Any]) -> Resource:
    """One entry of plan.json's ``resources`` (``RecordedResource.to_json()``)."""
    return Resource(
        type=entry["type"],
        name=entry.get("name") or entry["urn"].rsplit("::", 1)[-1],
        urn=entry.get("urn") or "",
        inputs=_plain(entry.get("inputs") or {}, frozenset({PLAN_UNKNOWN})),
        provider=entry.get("provider") or None,
    )


def from_plan(plan: Union[Mapping[str, Any], Iterable[Mapping[str, Any]]]) -> list[Resource]:
    """A plan document ``{"resources": [...], ...}``, or just its list of resources."""
    entries = plan.get("resources") if isinstance(plan, Mapping) else plan
    if entries is None or isinstance(entries, (str, bytes)):
        raise ValueError("not a plan: expected a JSON object with a 'resources' list")
    return [from_plan_resource(entry) for entry in entries]


def read_plan(path: Union[str, Path]) -> dict[str, Any]:
    """plan.json from a file, a directory holding plan.json, or ``-`` (stdin)."""
    if str(path) == "-":
        document = json.load(sys.stdin)
    else:
        path = Path(path)
        if path.is_dir():
            path = path / PLAN_FILE
        with path.open(encoding="utf-8") as handle:
            document = json.load(handle)
    if isinstance(document, list):
        document = {"resources": document}
    if not isinstance(document, dict):
        raise ValueError("not a plan: expected a JSON object with a 'resources' list")
    return document


def load_plan(path: Union[str, Path]) -> list[Resource]:
    return from_plan(read_plan(path))
