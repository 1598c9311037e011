"""A pod asks only for MIG slices KAI charges the queue for (rule ``mig-names``).

KAI reads a MIG slice's compute units from its resource name and counts a name outside ``<n>g.<m>gb`` as zero GPUs
(``pkg/scheduler/api/common_info/resources/mig.go``, ``GetGpusQuota``), while the GPU Operator's default MIG manager
config offers media-extension layouts whose slices the device plugin advertises as ``nvidia.com/mig-1g.10gb+me`` and
the like. On a node split so (a site's own layout, or a node relabelled by hand), a team whose tier allows MIG slices
held as many as the node had, charged nothing, past its queue's limit.

- Attack: pods as vCluster syncs them asking for such slices, in a container or an init container, are refused.
- Honest: every profile the program's MIG layouts offer, and KAI's documented pods, pass (tests/test_admission_honest.py).
"""

from __future__ import annotations

import re

import pytest
import yaml

from components.admission_devices import KAI_MIG_NAME
from config.mig import MIG_LAYOUTS, kai_units
from tests.conftest import ACCEPTED_TAGS, git, mirrored_tag
from tests.test_admission_attacks import mixed_run, on_kai, rules, tenant  # noqa: F401 (fixtures)
from tests.tenant_sim import container

KAI = "kai-scheduler/KAI-Scheduler"
OPERATOR = "NVIDIA/gpu-operator"
UNCOUNTED = ("nvidia.com/mig-1g.10gb+me", "nvidia.com/mig-1g.24gb+me.all", "nvidia.com/mig-1c.3g.20gb",
             "nvidia.com/mig-1g.10GB")
# Names KAI counts but no GPU offers, each a distinct dimension of every resource vector KAI's scheduler builds.
UNOFFERED = ("nvidia.com/mig-1g.0010gb", "nvidia.com/mig-9g.10gb", "nvidia.com/mig-1g.123456gb")


def _offered_profiles() -> set[str]:
    return {profile for layouts in MIG_LAYOUTS.values() for slices in layouts.values() for profile in slices}


@pytest.mark.parametrize("name", UNCOUNTED + UNOFFERED)
def test_a_mig_slice_kai_would_not_charge_is_refused(tenant, name):
    for containers, init in (([container(mig=name)], []), ([container()], [container("warmup", mig=name)])):
        pod = on_kai(tenant, containers=containers)
        if init:
            pod["spec"]["initContainers"] = init
        assert "mig-names" in rules(tenant.create(pod))


def test_every_profile_the_program_offers_passes(tenant):
    pattern = KAI_MIG_NAME.replace("\\\\", "\\")
    assert sorted(p for p in _offered_profiles() if not re.fullmatch(pattern, f"nvidia.com/mig-{p}")) == []
    assert "mig-names" not in rules(tenant.create(on_kai(tenant, containers=[container(mig="nvidia.com/mig-3g.40gb")])))


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_counts_the_names_the_rule_admits_and_none_it_refuses(tag):
    source = git(KAI, "show", f"{mirrored_tag(KAI, tag)}:pkg/scheduler/api/common_info/resources/mig.go")
    kai_pattern = re.search(r"extractGpuAndMemoryFrom\(`(\^nvidia\.com/mig-[^`]+)`", source).group(1)
    quota = git(KAI, "show", f"{tag}:pkg/scheduler/api/resource_info/gpu_resource_requirment.go")
    # A name KAI cannot read adds nothing to the queue's GPUs.
    assert re.search(r"ExtractGpuAndMemoryFromMigResourceName\(migResource\.String\(\)\)\s*\n\s*if err != nil \{"
                     r"[^}]*continue", quota)
    ours = KAI_MIG_NAME.replace("\\\\", "\\")
    for name in [f"nvidia.com/mig-{p}" for p in _offered_profiles()] + list(UNCOUNTED + UNOFFERED):
        if re.fullmatch(ours, name):
            match = re.fullmatch(kai_pattern, name)
            assert match and int(match.group(1)) == kai_units(name[len("nvidia.com/mig-"):])
    for name in UNCOUNTED:
        assert not re.fullmatch(kai_pattern, name)


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[OPERATOR][-1:])
def test_the_operators_mig_manager_offers_slices_kai_counts_as_zero(tag):
    configmap = yaml.safe_load(git(OPERATOR, "show", f"{mirrored_tag(OPERATOR, tag)}:"
                                                     "assets/state-mig-manager/0400_configmap.yaml"))
    configs = yaml.safe_load(configmap["data"]["config.yaml"])["mig-configs"]
    profiles = {profile for entries in configs.values() for entry in entries
                for profile in (entry.get("mig-devices") or {})}
    assert {"1g.10gb+me", "1g.24gb+me.all"} <= profiles
