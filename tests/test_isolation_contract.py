"""What the isolation tiers take from upstream, read at every accepted KAI and GPU Operator release (ACCEPTED_TAGS).

- KAI: the hamicore plugins' variable and optional reference (tests/isolation_sim.py models them), the chart
  value that turns them on, and the MIG quota units (config/mig.py).
- GPU Operator: every MIG layout config/mig.py offers is in the MIG manager's default config.
- dcgm-exporter: the labels a MIG slice's series carry and the per-instance busy field
  (components/observability_mig.py).
"""

from __future__ import annotations

import re

import pytest
import yaml

from components import observability_mig as mig_series
from components.isolation_admission import MEMORY_LIMIT, PROTECTED_PREFIX
from components.kai import kai_values
from config.mig import MIG_DISABLED, MIG_LAYOUTS, PROFILE_PATTERN, kai_units
from config.model import KaiScheduler
from tests.conftest import ACCEPTED_TAGS, MIRRORED_TAGS, git

KAI = "kai-scheduler/KAI-Scheduler"
OPERATOR = "NVIDIA/gpu-operator"
DCGM = "NVIDIA/dcgm-exporter"


def show(repository: str, tag: str, path: str) -> str:
    return git(repository, "show", f"{tag}:{path}")


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kais_hamicore_plugin_writes_the_variable_the_memory_rules_guard(tag):
    constants = show(KAI, tag, "pkg/binder/common/constants.go")
    assert re.search(rf'CudaDeviceMemoryLimit\s*=\s*"{MEMORY_LIMIT}"', constants)
    assert MEMORY_LIMIT.startswith(PROTECTED_PREFIX)
    plugin = show(KAI, tag, "pkg/admission/webhook/v1alpha2/hamicore/hamicore.go")
    # The reference is optional and names the fraction container's capabilities ConfigMap, as simulated.
    assert "Optional: ptr.To(true)" in plugin and "ExtractCapabilitiesConfigMapName" in plugin


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_the_chart_passes_binder_plugins_to_kai_config(tag):
    helpers = show(KAI, tag, "deployments/kai-scheduler/templates/_helpers.tpl")
    assert ".Values.binder.plugins" in helpers
    binder = show(KAI, tag, "pkg/apis/kai/v1/binder/binder.go")
    assert re.search(r'HamiCorePluginName\s*=\s*"hamicore"', binder)
    values = kai_values(KaiScheduler(version=tag, gpu_sharing=True, hamicore=True))
    assert values["binder"]["plugins"] == {"hamicore": {"enabled": True}}


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_counts_a_mig_slice_by_its_compute_slices(tag):
    source = show(KAI, tag, "pkg/scheduler/api/common_info/resources/mig.go")
    pattern = re.search(r"extractGpuAndMemoryFrom\(`(\^nvidia\.com/mig-[^`]+)`", source).group(1)
    for profiles in (layout for model in MIG_LAYOUTS.values() for layout in model.values()):
        for profile in profiles:
            match = re.fullmatch(pattern, f"nvidia.com/mig-{profile}")
            assert match and int(match.group(1)) == kai_units(profile) and PROFILE_PATTERN.fullmatch(profile)


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[OPERATOR])
def test_every_offered_mig_layout_is_in_the_mig_managers_default_config(tag):
    configmap = yaml.safe_load(show(OPERATOR, tag, "assets/state-mig-manager/0400_configmap.yaml"))
    configs = yaml.safe_load(configmap["data"]["config.yaml"])["mig-configs"]
    assert MIG_DISABLED in configs
    for model, layouts in MIG_LAYOUTS.items():
        for name, slices in layouts.items():
            offered = [entry.get("mig-devices") for entry in configs.get(name, [])]
            assert dict(slices) in offered, (model, name, offered)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[DCGM][-1:])
def test_dcgm_names_a_slice_by_profile_and_instance_and_exports_its_busy_ratio(tag):
    template = show(DCGM, tag, "internal/pkg/rendermetrics/render_metrics.go")
    assert (f'{mig_series.PROFILE_LABEL}="{{{{ $metric.MigProfile }}}}",'
            f'{mig_series.INSTANCE_LABEL}="{{{{ $metric.GPUInstanceID }}}}"') in template
    counters = show(DCGM, tag, "etc/dcp-metrics-included.csv")
    assert re.search(rf"^{mig_series.SLICE_BUSY_METRIC},\s*gauge", counters, re.M)
