"""MIG: which GPU models can be split, into which layouts, and how KAI counts the slices.

A GPU node pool is split by the GPU Operator's MIG manager: the node label ``nvidia.com/mig.config``
names one layout of the manager's config, which the manager applies to every GPU of the node. The
layouts below are those of the operator's default config (``default-mig-parted-config``, file
``assets/state-mig-manager/0400_configmap.yaml`` of NVIDIA/gpu-operator, the same at v26.3.3 and
v26.7.0), per GPU model: layout name -> {MIG profile: slices per GPU}. The same layout name can mean
different slices on different models (``all-1g.10gb`` is 7 slices on an 80 GB card, 4 on a 40 GB one).
Only the models the instance-type table (config/capacity.py) can name are listed; a model missing
here has no MIG (T4, A10G, L4, L40S have none, NVIDIA's MIG user guide lists the supported ones).
Profiles with a media-extension suffix (``+me``) are left out on purpose: KAI cannot read them (below).

KAI counts a MIG request in a queue's gpu quota by the profile's compute slices: ``nvidia.com/mig-3g.40gb``
costs 3 (``GetGpusQuota`` and ``ExtractGpuAndMemoryFromMigResourceName`` at KAI v0.16.4/v0.17.0, pattern
``^nvidia.com/mig-(\\d+)g\\.(\\d+)gb$``). A name outside that pattern is counted as zero, which is why the
program only accepts profiles of that form. A whole GPU split 7 ways is worth 7 quota units.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional, Sequence

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STRATEGIES = ("mixed", "single")
# The resource name a pod asks for a MIG slice by, under the device plugin's `mixed` strategy.
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
PROFILE_PATTERN = re.compile(r"^([1-7])g\.([0-9]+)gb$")


def _uniform(*profiles: tuple[str, int]) -> dict[str, dict[str, int]]:
    return {f"all-{profile}": {profile: count} for profile, count in profiles}


_A100_80_H100_80 = {
    **_uniform(("1g.10gb", 7), ("1g.20gb", 4), ("2g.20gb", 3), ("3g.40gb", 2), ("4g.40gb", 1), ("7g.80gb", 1)),
    "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
}

MIG_LAYOUTS: Mapping[str, Mapping[str, Mapping[str, int]]] = {
    "A100-40GB": {
        **_uniform(("1g.5gb", 7), ("1g.10gb", 4), ("2g.10gb", 3), ("3g.20gb", 2), ("4g.20gb", 1), ("7g.40gb", 1)),
        "all-balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    },
    "A100-80GB": _A100_80_H100_80,
    "H100-80GB": _A100_80_H100_80,
    "H200-141GB": {
        **_uniform(("1g.18gb", 7), ("1g.35gb", 4), ("2g.35gb", 3), ("3g.71gb", 2), ("4g.71gb", 1), ("7g.141gb", 1)),
        "all-balanced": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    },
}
# Models with MIG whose layouts are not listed above. The operator's default config gives B200 (device 0x2901) its
# layouts (all-1g.23gb to all-7g.180gb, and an all-balanced entry) only from v25.3.0 on, and the program accepts
# v24.9.x, whose MIG manager would not find them; a migConfig there is refused rather than offered for some releases.
MIG_WITHOUT_LAYOUTS = ("B200-180GB",)
# What the MIG manager applies to a node without the label, and a valid value for "no MIG" on any model.
MIG_DISABLED = "all-disabled"


def supports_mig(model: Optional[str]) -> bool:
    return model in MIG_LAYOUTS


def layout(model: Optional[str], config_name: Optional[str]) -> dict[str, int]:
    """Slices per GPU of a layout ({} for no MIG, an unknown model or layout)."""
    if model is None or config_name is None:
        return {}
    return dict(MIG_LAYOUTS.get(model, {}).get(config_name, {}))


def pool_slices(models: Sequence[Optional[str]], config_name: Optional[str]) -> dict[str, int]:
    """Slices per GPU of a layout on a pool that may scale on any of these models: each profile every model's
    layout has, at the fewest slices any of them gives it."""
    layouts = [layout(model, config_name) for model in models]
    if not layouts:
        return {}
    return {profile: min(slices.get(profile, 0) for slices in layouts) for profile in layouts[0]
            if all(profile in slices for slices in layouts)}


def kai_units(profile: str) -> int:
    """What one slice of ``profile`` costs in a KAI queue's gpu quota: its compute slices."""
    match = PROFILE_PATTERN.fullmatch(profile)
    return int(match.group(1)) if match else 0


def kai_units_per_gpu(model: Optional[str], config_name: Optional[str]) -> int:
    """A GPU's worth in KAI quota units: 1 unsplit, the sum of its slices' compute units when split."""
    slices = layout(model, config_name)
    return sum(kai_units(profile) * count for profile, count in slices.items()) if slices else 1


def resource_name(profile: str) -> str:
    return f"{MIG_RESOURCE_PREFIX}{profile}"
