"""How a pod asks for a GPU in each isolation tier's terms (docs/isolation.md): the host's tier policy
(components/isolation_admission.py) refuses any other ask, so the smoke test's GPU pod asks this way (ops/smoke.py)
and the plan summary says so (tools/plan/summary_access.py).

- ``shared``, ``memory-capped``: a KAI fraction (the ``gpu-fraction`` annotation);
- ``exclusive``: one whole ``nvidia.com/gpu`` (``[whole-gpus]`` refuses fractions);
- ``mig``: one slice of the team's profile, ``nvidia.com/mig-<profile>`` under the ``mixed`` strategy; under
  ``single`` each slice is advertised as a plain ``nvidia.com/gpu``, which the pod may ask for only on the team's
  pool, named in its node selector (``[mig-profile]``, inside the vCluster too).

Both read a team's isolation as its tenant registers and the stack exports it
(components/isolation_admission.py ``isolation_outputs``); a site deployed before the stack exported it has none,
which reads as the default tier, shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from config.capacity import WHOLE_GPU_RESOURCE
from config.mig import resource_name
from config.model import EXCLUSIVE, MIG, SHARED
from config.vocabulary import POOL_LABEL


@dataclass(frozen=True)
class GpuAsk:
    """Either a fraction (the ``gpu-fraction`` annotation) or one of a GPU resource (a container limit), the latter
    on the pool ``node_pool`` (a node selector) where the tier asks for it."""

    fraction: Optional[str] = None
    resource: Optional[str] = None
    node_pool: Optional[str] = None

    def describe(self) -> str:
        if self.fraction is not None:
            return f"gpu-fraction: {self.fraction}"
        return f"{self.resource}: 1" + (f", nodeSelector {POOL_LABEL}: {self.node_pool}" if self.node_pool else "")


def gpu_ask(isolation: Mapping, fraction: str) -> GpuAsk:
    """The ask of a team whose exported isolation is ``isolation``, with ``fraction`` for the fractional tiers."""
    tier = isolation.get("tier") or SHARED
    if tier == EXCLUSIVE:
        return GpuAsk(resource=WHOLE_GPU_RESOURCE)
    if tier == MIG:
        if isolation.get("migStrategy") == "single":
            return GpuAsk(resource=WHOLE_GPU_RESOURCE, node_pool=isolation.get("nodePool"))
        return GpuAsk(resource=resource_name(isolation["migProfile"]))
    return GpuAsk(fraction=fraction)
