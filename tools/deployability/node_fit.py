"""Whether a pod spec can land on a node pool: node selector, required node affinity and taints.

A pool's labels are those the site states plus, for the prefixes its node manager writes (``managed_prefixes``),
any value: the plan cannot know those, so they are assumed to fit.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from config.model_host import NodePool
from tools.deployability.inputs import ANY


def _label_matches(pool: NodePool, key: str, wanted: Optional[Sequence[str]], operator: str) -> bool:
    managed = any(key.startswith(prefix) for prefix in pool.managed_prefixes)
    present = key in pool.labels or managed
    value = pool.labels.get(key, ANY if managed else None)
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator == "In":
        return present and (value == ANY or value in (wanted or []))
    if operator == "NotIn":
        return not present or value == ANY or value not in (wanted or [])
    if operator in ("Gt", "Lt"):
        return present  # numeric node labels: not modelled, assume the site has a fitting node
    return False


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Any) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.effect:
            continue
        if toleration.get("operator") == "Exists" and not toleration.get("key"):
            return True
        if toleration.get("key") != taint.key:
            continue
        if toleration.get("operator") == "Exists" or str(toleration.get("value", "")) == taint.value:
            return True
    return False


def fits(spec: Mapping[str, Any], pool: NodePool) -> list[str]:
    """Why a pod spec cannot land on the pool (empty: it can)."""
    reasons = [f"nodeSelector {key}={value}" for key, value in (spec.get("nodeSelector") or {}).items()
               if not _label_matches(pool, key, [str(value)], "In")]
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    if terms and not any(all(_label_matches(pool, e["key"], e.get("values"), e["operator"])
                             for e in term.get("matchExpressions") or []) for term in terms):
        reasons.append("required node affinity")
    for taint in pool.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not _tolerates(spec.get("tolerations") or [], taint):
            reasons.append(f"untolerated taint {taint.key}={taint.value}:{taint.effect}")
    return reasons
