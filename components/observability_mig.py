"""MIG slices in the per-team GPU accounting, as PromQL (plain data, no resources).

The DCGM exporter (dcgm-exporter 4.5.3-4.8.2, internal/pkg/rendermetrics and collector) reports a MIG-split
GPU per GPU instance: every series of a slice carries the parent GPU's ``gpu`` and ``UUID`` plus
``GPU_I_PROFILE`` (the profile, ``3g.40gb``) and ``GPU_I_ID`` (the instance); a whole GPU's series carry
neither. Its Kubernetes mapping names the pod holding the slice. So two slices of one card share a UUID: a
count or max ``by (UUID)`` folds them into one GPU, and a slice is not a GPU either.

The platform counts a slice in KAI's units, the ones queue quotas and allocations use (config/mig.py):
its compute slices, the ``<n>`` of ``<n>g.<m>gb``. A GPU split by ``all-1g.10gb`` is worth 7, like its
quota. Busy time per slice is ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a 0-1 ratio DCGM measures per GPU
instance; ``DCGM_FI_DEV_GPU_UTIL`` is a whole-device field), weighted by the same units.
"""

from __future__ import annotations

INSTANCE_LABEL = "GPU_I_ID"
PROFILE_LABEL = "GPU_I_PROFILE"
SLICE_BUSY_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
# Compute slices of a MIG profile: 1 to 7 (config/mig.py's PROFILE_PATTERN).
COMPUTE_SLICES = range(1, 8)
# Select the series of whole GPUs only, of MIG slices only.
WHOLE_GPU = f'{INSTANCE_LABEL}=""'
SLICES_ONLY = f'{INSTANCE_LABEL}!=""'
# Appended to a per-UUID vector: drops the cards DCGM also reports slices of (a MIG-split card's card-level
# series, if any, says nothing about its use).
UNLESS_SPLIT = f"unless on (UUID) count by (UUID) ({SLICE_BUSY_METRIC}{{{SLICES_ONLY}}})"


def _per_slice(metric: str, by: str, value: str) -> str:
    """Per slice (``by`` plus its UUID and instance): ``value`` of the slice's series, ``units`` standing for
    its compute slices. One term per profile size, so every term's label set is distinct for ``or``."""
    labels = f"{by}, UUID, {INSTANCE_LABEL}" if by else f"UUID, {INSTANCE_LABEL}"
    terms = [f"(max by ({labels}) ({metric}{{{PROFILE_LABEL}=~\"{units}g[.].+\"}}) {value.format(units=units)})"
             for units in COMPUTE_SLICES]
    return f"({' or '.join(terms)})"


def slice_busy_by_namespace() -> str:
    """Per (namespace, UUID, GPU_I_ID): the slice's busy time in KAI units (busy ratio x compute slices)."""
    return _per_slice(SLICE_BUSY_METRIC, "namespace", "* {units}")


def slice_units_by_namespace() -> str:
    """Per (namespace, UUID, GPU_I_ID): the slice's size in KAI units."""
    return _per_slice(SLICE_BUSY_METRIC, "namespace", "* 0 + {units}")


def slices_present() -> str:
    """The MIG slices DCGM sees, in KAI units (each instance once, whichever pod holds it, or none)."""
    return f"sum({_per_slice(SLICE_BUSY_METRIC, '', '* 0 + {units}')})"


def card_busy(by: str) -> str:
    """Per (``by``, UUID): how busy each GPU card is, 0 to 1. A whole GPU's is its device utilisation; a MIG-split
    card's is its slices' busy time over its slices, in KAI units. DCGM reports no device utilisation for a
    MIG-split card (nothing, or 0), so its card-level series, if any, is left out."""
    whole = f"max by ({by}, UUID) (DCGM_FI_DEV_GPU_UTIL{{{WHOLE_GPU}}}) / 100 {UNLESS_SPLIT}"
    busy = f"sum by ({by}, UUID) {_per_slice(SLICE_BUSY_METRIC, by, '* {units}')}"
    units = f"sum by ({by}, UUID) {_per_slice(SLICE_BUSY_METRIC, by, '* 0 + {units}')}"
    return f"({whole}) or ({busy} / {units})"
