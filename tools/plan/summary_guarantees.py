"""summary.md: per pool, the CPU and memory the teams' KAI queues guarantee against what the pool can give them
(config/cpu_memory_capacity.py, recorded by the queue hierarchy)."""

from __future__ import annotations

from typing import Any, Optional

from config.cpu_memory_capacity import RESOURCES, SHOWN
from config.vocabulary import QUEUES_COMPONENT
from tools.plan.lookup import PlanIndex
from tools.plan.markdown import code, table


def _cell(resource: str, entry: dict[str, Any]) -> str:
    allocatable: Optional[int] = entry.get("allocatable")
    guaranteed = SHOWN[resource](entry["guaranteed"])
    unlimited = entry.get("unlimited") or []
    extra = f" + {len(unlimited)} unlimited" if unlimited else ""
    if allocatable is None:
        return f"{guaranteed}{extra} (allocatable not known)"
    verdict = "**over**" if entry["guaranteed"] > allocatable else "fits"
    return f"{guaranteed}{extra} of {SHOWN[resource](allocatable)}: {verdict}"


def guarantees_section(index: PlanIndex) -> list[str]:
    found = index.registered(QUEUES_COMPONENT, "cpuMemoryGuarantees")
    if not found:
        return []
    rows = [[", ".join(code(pool) for pool in entry["pools"]), ", ".join(code(team) for team in entry["teams"]),
             *(_cell(resource, entry[resource]) for resource in RESOURCES), entry["basis"]] for entry in found]
    lines = ["## CPU and memory guarantees", "",
             "What the teams whose pods run only on these pools are guaranteed by their KAI queues' cpu and memory "
             "quotas, against what the pools can give them (allocatable less the platform's pods' requests, the "
             "node groups at their desiredSize, or at maxSize when the site's autoscaler sizes them). KAI does not check it: past it, a team under its quota can keep Pending pods "
             "(docs/operations-running.md, CPU and memory guarantees). Unlimited (-1) quotas are not summed.", ""]
    lines += table(["Pools", "Teams", "CPU guaranteed of allocatable", "Memory guaranteed of allocatable",
                    "Allocatable from"], rows)
    return lines + [""]
