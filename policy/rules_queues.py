"""The KAI queue guardrails: every queue renders its resources in full, its parent is a queue of the stack,
and its children's GPU quotas fit its own.

Like ``rules.py``, this module imports nothing from the project or from ``pulumi_policy``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

if __package__:  # imported as the `policy` package
    from .rule_model import EPSILON, QUEUE_FIELDS, QUEUE_RESOURCES, UNKNOWN, Finding, Resource, get, is_number, is_queue
else:  # the Pulumi CLI runs the pack from policy/ as top-level modules
    from rule_model import EPSILON, QUEUE_FIELDS, QUEUE_RESOURCES, UNKNOWN, Finding, Resource, get, is_number, is_queue


def queue_resources_complete(resource: Resource) -> list[str]:
    """A KAI queue renders gpu, cpu and memory, each with quota, limit and overQuotaWeight (numbers)."""
    if not is_queue(resource):
        return []
    resources = get(resource.inputs, "spec", "resources")
    if resources is UNKNOWN:
        return []
    problems = []
    if not isinstance(resources, Mapping):
        problems.append("spec.resources is missing")
    else:
        for kind in QUEUE_RESOURCES:
            entry = resources.get(kind)
            if entry is UNKNOWN:
                continue
            if not isinstance(entry, Mapping):
                problems.append(f"spec.resources.{kind} is missing")
                continue
            for key in QUEUE_FIELDS:
                value = entry.get(key)
                if value is UNKNOWN:
                    continue
                if value is None:
                    problems.append(f"spec.resources.{kind}.{key} is missing")
                elif not is_number(value):
                    problems.append(f"spec.resources.{kind}.{key} is {value!r}, not a number")
    if not problems:
        return []
    name = get(resource.inputs, "metadata", "name") or resource.name
    return [f"KAI queue {name}: {'; '.join(problems)}. An omitted limit is a hard cap of zero and an omitted "
            "overQuotaWeight gets no surplus: render gpu, cpu and memory with quota, limit and "
            "overQuotaWeight (-1 = unlimited)."]



def _queues(resources: Sequence[Resource]) -> list[Resource]:
    return [resource for resource in resources if is_queue(resource)]


def _queue_name(resource: Resource) -> Any:
    return get(resource.inputs, "metadata", "name")


def queue_parents_exist(resources: Sequence[Resource]) -> list[Finding]:
    """A queue's parentQueue is a Queue of the same stack (KAI silently drops orphans and their subtree)."""
    queues = _queues(resources)
    names = [_queue_name(queue) for queue in queues]
    if any(name is UNKNOWN for name in names):
        return []
    known = {name for name in names if isinstance(name, str)}
    findings = []
    for queue in queues:
        parent = get(queue.inputs, "spec", "parentQueue")
        if parent is None or parent is UNKNOWN or parent == "":
            continue
        if parent not in known:
            findings.append(Finding(
                f"KAI queue {_queue_name(queue) or queue.name} has parentQueue {parent!r}, which is not a Queue of "
                f"this stack (queues here: {', '.join(sorted(known)) or 'none'}). KAI silently ignores a queue "
                "whose parent does not exist, with all its children.", queue.urn))
    return findings


def _fmt(value: float) -> str:
    return f"{value:g}"


def queue_gpu_quota_fits_parent(resources: Sequence[Resource]) -> list[Finding]:
    """Children's GPU quotas add up to at most their parent's quota (unless the parent's is -1)."""
    queues = _queues(resources)
    findings = []
    for parent in queues:
        name = _queue_name(parent)
        if not isinstance(name, str):
            continue
        children = [queue for queue in queues if get(queue.inputs, "spec", "parentQueue") == name]
        if not children:
            continue
        parent_quota = get(parent.inputs, "spec", "resources", "gpu", "quota")
        if not is_number(parent_quota) or parent_quota == -1:
            continue  # unknown, missing (queue_resources_complete says so) or unlimited
        quotas = [(get(child.inputs, "spec", "resources", "gpu", "quota"), child) for child in children]
        if any(not is_number(quota) for quota, _ in quotas):
            continue
        unlimited = [child for quota, child in quotas if quota == -1]
        for child in unlimited:
            findings.append(Finding(
                f"KAI queue {_queue_name(child) or child.name} has an unlimited (-1) gpu quota under {name}, "
                f"whose gpu quota is {_fmt(parent_quota)}: a child cannot be guaranteed more than its parent.",
                child.urn))
        if unlimited:
            continue
        total = sum(quota for quota, _ in quotas)
        if total > parent_quota + EPSILON:
            shares = ", ".join(f"{_queue_name(child) or child.name}={_fmt(quota)}"
                               for quota, child in sorted(quotas, key=lambda item: str(_queue_name(item[1]))))
            findings.append(Finding(
                f"KAI queue {name} guarantees {_fmt(parent_quota)} GPU(s) but its children's gpu quotas add up to "
                f"{_fmt(total)} ({shares}): KAI over-commits silently. Lower the children's quotas or raise "
                f"{name}'s.", parent.urn))
    return findings
