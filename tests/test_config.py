"""Spec of the stack-config validation in config/.

``load_platform(raw, secrets_set=..., stack=...)`` takes the ``gpu-tenancy:*`` values with the
prefix stripped and returns a ``Platform`` (with ``.warnings``) or raises one ``ConfigError``
whose issues each name the full key path, the bad value and a fix.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from config import ConfigError, load_platform
from config.errors import MISSING
from config.stack_file import StackFileError, read_stack_file
from config.sharing import EXCLUSIVE, TIME_SLICED, config_map_data, default_key, profile_documents, profile_keys

DEV_STACK = Path(__file__).resolve().parent.parent / "Pulumi.dev.yaml"
_DEV = {key.split(":", 1)[1]: value for key, value in read_stack_file(DEV_STACK)["config"].items()}


# --- fixtures and helpers ---------------------------------------------------------------------


def dev_config() -> dict:
    """The committed dev stack: MicroK8s, one GPU, three teams of 0.33 under ml-org (quota 1)."""
    return copy.deepcopy(_DEV)


def eks_config() -> dict:
    """A valid EKS stack: one g4dn.xlarge GPU node group, GPU operator installed by Helm."""
    config = dev_config()
    config["cluster"] = {"kind": "eks", "eks": {"region": "us-east-2", "gpuNodeGroups": [
        {"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1}]}}
    config["gpuOperator"] = {"mode": "install", "timeSlicing": {"replicas": 2, "defaultProfile": "exclusive"}}
    return config


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def put(config: dict, path: str, value: object) -> dict:
    """Set ``teams[1].resources.gpu.limit``-style paths, creating missing maps on the way."""
    steps = [name or int(index) for name, index in _STEP.findall(path)]
    node = config
    for step in steps[:-1]:
        node = node[step] if isinstance(step, int) else node.setdefault(step, {})
    node[steps[-1]] = value
    return config


def drop(config: dict, path: str) -> dict:
    *parent, last = path.split(".")
    node = config
    for step in parent:
        node = node[step]
    del node[last]
    return config


def rejected(config: dict, *, secrets=()) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_platform(config, secrets_set=set(secrets))
    return info.value


def issue(error: ConfigError, key: str, value: object = MISSING):
    """The issue at ``key``; checks that its message names the value and a fix."""
    matches = [found for found in error.issues if found.key == key]
    assert matches, f"no issue at {key!r}; got {error.keys}"
    found = matches[0]
    assert found.value == value
    assert found.problem and found.fix
    text = str(found)
    assert text.startswith(f"gpu-tenancy:{key} = ")
    assert ("<not set>" if value is MISSING else repr(value)[:60]) in text
    assert "Fix: " + found.fix in text and text in str(error)
    return found


def assert_rejected(config: dict, key: str, value: object = MISSING, *, fix: str = "", secrets=()):
    found = issue(rejected(config, secrets=secrets), key, value)
    assert fix in found.fix
    return found


# --- valid examples ---------------------------------------------------------------------------


def test_dev_stack_is_valid_and_raises_no_warnings():
    platform = load_platform(dev_config(), secrets_set=set(), stack="dev")
    assert platform.stack == "dev" and platform.project == "gpu-tenancy"
    assert platform.organization.name == "ml-org"
    assert [team.name for team in platform.teams] == ["team-nlp", "team-vision", "team-recommender"]
    assert platform.cluster.kind == "microk8s" and platform.cluster.microk8s.gpus == 1
    assert platform.gpu_operator.mode == "microk8s-addon"
    assert platform.gpu_operator.namespace == "gpu-operator-resources"
    assert platform.kai_scheduler.version == "v0.16.4" and platform.kai_scheduler.gpu_sharing is True
    assert platform.warnings == ()


def test_eks_fixture_is_valid():
    platform = load_platform(eks_config())
    eks = platform.cluster.eks
    assert platform.cluster.kind == "eks" and eks.region == "us-east-2"
    assert [(g.name, g.instance_types, g.scaling.max_size) for g in eks.gpu_node_groups] == [
        ("gpu", ("g4dn.xlarge",), 1)]
    assert eks.creates_network
    # AL2023 NVIDIA AMIs ship the driver and the toolkit.
    assert not platform.gpu_operator.driver_enabled and not platform.gpu_operator.toolkit_enabled
    assert platform.warnings == ()


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["teams[0].name", "organization.name"])
@pytest.mark.parametrize("name", ["a", "team-1", "9lives", "x" * 63])
def test_dns_1123_names_are_accepted(path, name):
    platform = load_platform(put(dev_config(), path, name))
    assert name in (platform.organization.name, platform.teams[0].name)


@pytest.mark.parametrize("path", ["teams[0].name", "organization.name"])
@pytest.mark.parametrize("name", ["Team-NLP", "team_nlp", "-team", "team-", "team.nlp", "x" * 64])
def test_names_that_are_not_dns_1123_labels_are_rejected(path, name):
    assert_rejected(put(dev_config(), path, name), path, name, fix="lowercase")


def test_team_names_must_be_unique():
    found = assert_rejected(put(dev_config(), "teams[2].name", "team-nlp"), "teams[2].name", "team-nlp")
    assert "teams[0]" in found.problem


def test_vcluster_names_must_be_unique_and_the_namespace_derived_from_one_is_not_a_second_problem():
    error = rejected(put(dev_config(), "teams[2].vclusterName", "team-nlp"))
    assert "teams[0]" in issue(error, "teams[2].vclusterName", "team-nlp").problem
    assert error.keys == ["teams[2].vclusterName"]


def test_namespaces_must_be_unique():
    config = put(dev_config(), "teams[1].namespace", "vcluster-team-nlp")
    assert_rejected(config, "teams[1].namespace", "vcluster-team-nlp", fix="namespace")
    assert load_platform(put(dev_config(), "teams[1].namespace", "vision")).teams[1].namespace == "vision"


@pytest.mark.parametrize("path", ["teams[1].name", "organization.name"])
@pytest.mark.parametrize("name", ["default-queue", "default-parent-queue"])
def test_names_of_the_queues_kai_creates_are_reserved(path, name):
    found = assert_rejected(put(dev_config(), path, name), path, name)
    assert "KAI" in found.problem


def test_a_team_cannot_be_named_like_the_organization():
    found = assert_rejected(put(dev_config(), "teams[1].name", "ml-org"), "teams[1].name", "ml-org")
    assert "organization.name" in found.fix


# --- queue resources ----------------------------------------------------------------------------

GPU = "teams[1].resources.gpu"


@pytest.mark.parametrize("entry", [
    {"quota": 0.33, "limit": -1, "overQuotaWeight": 1},
    {"quota": 0, "limit": 0, "overQuotaWeight": 0},
    {"quota": 0.33, "limit": 0.33, "overQuotaWeight": 2.5},
    {"quota": 0.2},
])
def test_valid_queue_resource_entries(entry):
    gpu = load_platform(put(dev_config(), GPU, entry)).teams[1].resources.gpu
    assert (gpu.quota, gpu.limit, gpu.over_quota_weight) == (
        entry["quota"], entry.get("limit", -1), entry.get("overQuotaWeight", 1))


@pytest.mark.parametrize("field, value, fix", [
    ("quota", -2, "-1 (unlimited) or >= 0"),
    ("limit", -0.5, "-1 (unlimited) or >= 0"),
    ("overQuotaWeight", -1, ">= 0"),
    ("limit", 0.2, "raise limit to at least the quota"),  # below quota 0.33
    ("quota", "one", "set it to a number"),
    ("quota", True, "set it to a number"),
    ("limit", [1], "set it to a number"),
])
def test_invalid_queue_resource_values(field, value, fix):
    assert_rejected(put(dev_config(), f"{GPU}.{field}", value), f"{GPU}.{field}", value, fix=fix)


def test_a_teams_omitted_cpu_and_memory_follow_its_namespace_quota():
    """KAI schedules CPU pods too: the queue guarantees and caps what the ResourceQuota allows (16 CPU, 64Gi)."""
    team = load_platform(dev_config()).teams[0]
    assert (team.resources.cpu.quota, team.resources.cpu.limit, team.resources.cpu.over_quota_weight) == \
        (16000, 16000, 1)
    assert (team.resources.memory.quota, team.resources.memory.limit) == (68719, 68719)
    assert (team.resources.gpu.quota, team.resources.gpu.limit) == (0.33, 1)
    smaller = load_platform(put(dev_config(), "teams[0].vcluster.resourceQuota", {"cpu": "1500m", "memory": "512Mi"}))
    assert (smaller.teams[0].resources.cpu.quota, smaller.teams[0].resources.memory.limit) == (1500, 536)
    explicit = load_platform(put(dev_config(), "teams[0].resources.cpu", {"quota": 2000, "limit": -1}))
    assert (explicit.teams[0].resources.cpu.quota, explicit.teams[0].resources.cpu.limit) == (2000, -1)


def test_the_organization_queue_keeps_unlimited_cpu_and_memory():
    org = load_platform(dev_config()).organization
    for resource in (org.resources.cpu, org.resources.memory):
        assert (resource.quota, resource.limit, resource.over_quota_weight) == (-1, -1, 1)


def test_the_retired_strict_switch_says_what_replaced_it():
    config = put(dev_config(), "teams[0].strict", True)
    found = assert_rejected(config, "teams[0].strict", True, fix="remove the key")
    assert "scheduled by KAI in the team's queue" in found.problem
    assert len(rejected(config).issues) == 1, "one problem, one message"


@pytest.mark.parametrize("namespace", ["kube-system", "default", "kai-scheduler", "gpu-operator-resources"])
def test_a_tenant_cannot_live_in_a_platform_namespace(namespace):
    assert_rejected(put(dev_config(), "teams[0].namespace", namespace), "teams[0].namespace", namespace,
                    fix="namespace of its own")


@pytest.mark.parametrize("name", ["shared-gpu-0", "nlp-shared-gpu-i1"])
def test_a_vcluster_name_cannot_pass_for_a_kai_device_list(name):
    assert_rejected(put(dev_config(), "teams[0].vclusterName", name), "teams[0].vclusterName", name,
                    fix="does not end in shared-gpu")


@pytest.mark.parametrize("version", ["latest", "v1.50.1", "1.50.1-eksbuild.1"])
def test_the_ebs_csi_addon_version_is_an_exact_eks_build(version):
    assert_rejected(put(eks_config(), "cluster.eks.ebsCsiAddonVersion", version), "cluster.eks.ebsCsiAddonVersion", version,
                    fix="vX.Y.Z-eksbuild.N")


def test_a_privileged_tenant_is_warned_about():
    platform = load_platform(put(dev_config(), "teams[1].vcluster", {"podSecurity": "privileged"}))
    assert any("teams[1] (team-vision)" in warning and "every GPU" in warning for warning in platform.warnings)


def test_team_gpu_quotas_that_fit_the_organization_quota_pass():
    assert sum(t.resources.gpu.quota for t in load_platform(dev_config()).teams) == pytest.approx(0.99)
    config = dev_config()
    for index in range(3):
        put(config, f"teams[{index}].resources.gpu.quota", 1 / 3)
    assert load_platform(config).organization.resources.gpu.quota == 1  # 3 x 1/3 fits despite rounding


def test_team_gpu_quotas_above_the_organization_quota_fail():
    config = dev_config()
    for index in range(3):
        put(config, f"teams[{index}].resources.gpu.quota", 0.5)
    found = assert_rejected(config, "organization.resources.gpu.quota", 1, fix="at least 1.5")
    assert "1.5" in found.problem


def test_an_unlimited_organization_quota_allows_any_team_quotas():
    config = put(dev_config(), "organization.resources.gpu.quota", -1)
    for index in range(3):
        put(config, f"teams[{index}].resources.gpu", {"quota": 5, "limit": -1})
    put(config, "teams[0].resources.gpu.quota", -1)
    assert [t.resources.gpu.quota for t in load_platform(config).teams] == [-1, 5, 5]


def test_an_unlimited_team_quota_does_not_fit_a_finite_organization_quota():
    config = put(dev_config(), "teams[1].resources.gpu", {"quota": -1, "limit": -1})
    assert_rejected(config, "teams[1].resources.gpu.quota", -1, fix="-1")


# --- warnings -----------------------------------------------------------------------------------


def _eks_group(instance_type: str, max_size: int) -> dict:
    return {"name": "gpu", "instanceTypes": [instance_type], "minSize": 1, "desiredSize": 1, "maxSize": max_size}


@pytest.mark.parametrize("make, org_quota, capacity", [
    (lambda: put(dev_config(), "cluster.microk8s.gpus", 1), 2, 1),
    (lambda: put(dev_config(), "cluster.microk8s.gpus", 2), 2, None),
    (lambda: put(dev_config(), "cluster.microk8s.gpus", 0), 1, 0),
    (lambda: eks_config(), 2, 1),
    (lambda: eks_config(), 1, None),
    (lambda: put(eks_config(), "cluster.eks.gpuNodeGroups[0]", _eks_group("g4dn.12xlarge", 2)), 8, None),
    (lambda: put(eks_config(), "cluster.eks.gpuNodeGroups[0]", _eks_group("g4dn.12xlarge", 2)), 9, 8),
    (lambda: put(eks_config(), "organization.resources.gpu.quota", -1), -1, None),
    (lambda: put(put(dev_config(), "cluster", {"kind": "kubeconfig"}), "gpuOperator.mode", "install"), 100, None),
])
def test_organization_gpu_quota_above_known_host_capacity_warns(make, org_quota, capacity):
    # A kubeconfig host without cluster.kubeconfig.gpus has no known capacity.
    platform = load_platform(put(make(), "organization.resources.gpu.quota", org_quota), secrets_set={"kubeconfig"})
    warnings = [w for w in platform.warnings if w.startswith("organization.resources.gpu.quota")]
    if capacity is None:
        assert warnings == []
    else:
        assert len(warnings) == 1
        assert f"is {org_quota:g} but the host has at most {capacity:g} GPU(s)" in warnings[0]


@pytest.mark.parametrize("profile, gpu_sharing, warns", [
    ("time-sliced", True, True),
    ("time-sliced", False, False),
    ("exclusive", True, False),
])
def test_time_slicing_under_kai_gpu_sharing_warns(profile, gpu_sharing, warns):
    config = put(dev_config(), "gpuOperator.timeSlicing.defaultProfile", profile)
    platform = load_platform(put(config, "kaiScheduler.gpuSharing", gpu_sharing))
    sliced = [w for w in platform.warnings if w.startswith("gpuOperator.timeSlicing.defaultProfile")]
    assert len(sliced) == int(warns)
    if warns:
        assert "4 time-slice replicas" in sliced[0]


@pytest.mark.parametrize("replicas, ok", [(2, True), (64, True), (1, False), (0, False), ("4", False), (2.5, False)])
def test_time_slicing_replicas_are_a_whole_number_of_at_least_two(replicas, ok):
    config = put(dev_config(), "gpuOperator.timeSlicing.replicas", replicas)
    if ok:
        assert load_platform(config).gpu_operator.time_slicing.replicas == replicas
    else:
        assert_rejected(config, "gpuOperator.timeSlicing.replicas", replicas, fix=">= 2")


# --- chart versions -----------------------------------------------------------------------------


@pytest.mark.parametrize("path, version", [
    ("kaiScheduler.version", "v0.16.4"),
    ("kaiScheduler.version", "v0.16.0"),
    ("gpuOperator.version", "v26.3.3"),
    ("vcluster.version", "0.36.1"),
    ("vcluster.version", "0.27.0-rc.1"),
])
def test_pinned_chart_versions_pass(path, version):
    platform = load_platform(put(dev_config(), path, version))
    assert version in (platform.kai_scheduler.version, platform.gpu_operator.version,
                       platform.teams[0].vcluster.version)


@pytest.mark.parametrize("path, version", [
    ("kaiScheduler.version", "latest"),
    ("kaiScheduler.version", ""),
    ("kaiScheduler.version", "^0.16"),
    ("kaiScheduler.version", "v0.16.x"),
    ("kaiScheduler.version", "v0.16"),
    ("kaiScheduler.version", "0.16.4"),
    ("gpuOperator.version", "26.3.3"),
    ("gpuOperator.version", "stable"),
    ("vcluster.version", "v0.36.1"),
    ("vcluster.version", "latest"),
    ("vcluster.version", "~0.36"),
])
def test_unpinned_or_misprefixed_chart_versions_fail(path, version):
    assert_rejected(put(dev_config(), path, version), path, version)


@pytest.mark.parametrize("path, version", [
    ("kaiScheduler.version", "0.16.4"),
    ("gpuOperator.version", "26.3.3"),
    ("vcluster.version", "v0.36.1"),
    ("kaiScheduler.version", "^0.16"),
])
def test_a_version_fix_that_says_write_it_as_names_a_valid_version(path, version):
    fix = assert_rejected(put(dev_config(), path, version), path, version).fix
    if not fix.startswith("write it as "):
        assert "exact version" in fix
        return
    fixed = fix[len("write it as "):]
    platform = load_platform(put(dev_config(), path, fixed))
    assert fixed in (platform.kai_scheduler.version, platform.gpu_operator.version, platform.teams[0].vcluster.version)


# --- per-kind host settings ---------------------------------------------------------------------


@pytest.mark.parametrize("mutate, key, value, fix", [
    (lambda c: drop(c, "cluster.eks.region"), "cluster.eks.region", MISSING, "region"),
    (lambda c: put(c, "cluster.eks.gpuNodeGroups", []), "cluster.eks.gpuNodeGroups", [], "instanceTypes"),
    (lambda c: drop(c, "cluster.eks.gpuNodeGroups"), "cluster.eks.gpuNodeGroups", MISSING, "at least one"),
    (lambda c: put(c, "gpuOperator.mode", "microk8s-addon"), "gpuOperator.mode", "microk8s-addon", "install"),
    (lambda c: put(c, "cluster.microk8s", {"gpus": 1}), "cluster.microk8s", {"gpus": 1}, "cluster.kind"),
])
def test_eks_host_requirements(mutate, key, value, fix):
    assert_rejected(mutate(eks_config()), key, value, fix=fix)


def test_kubeconfig_kind_needs_the_kubeconfig_secret():
    config = put(put(dev_config(), "cluster", {"kind": "kubeconfig"}), "gpuOperator.mode", "install")
    assert_rejected(config, "kubeconfig", fix="pulumi config set --secret gpu-tenancy:kubeconfig")
    assert load_platform(config, secrets_set={"kubeconfig"}).cluster.kubeconfig.context is None


def test_a_remote_microk8s_host_needs_the_ssh_private_key_secret():
    config = put(dev_config(), "cluster.microk8s.host", "10.0.0.5")
    assert_rejected(config, "sshPrivateKey", fix="gpu-tenancy:sshPrivateKey")
    assert load_platform(config, secrets_set={"sshPrivateKey"}).cluster.microk8s.remote
    assert not load_platform(dev_config()).cluster.microk8s.remote  # local needs no key


def test_settings_block_for_another_kind_is_rejected():
    config = put(dev_config(), "cluster.eks", {"region": "us-east-2"})
    found = assert_rejected(config, "cluster.eks", {"region": "us-east-2"}, fix="remove cluster.eks")
    assert "microk8s" in found.problem


@pytest.mark.parametrize("sizes, ok", [
    ((0, 0, 1), True), ((1, 1, 1), True), ((1, 2, 3), True),
    ((2, 1, 3), False), ((1, 4, 3), False),
])
def test_eks_node_group_sizes_are_ordered(sizes, ok):
    config = eks_config()
    for field, size in zip(("minSize", "desiredSize", "maxSize"), sizes):
        put(config, f"cluster.eks.gpuNodeGroups[0].{field}", size)
    if ok:
        assert load_platform(config).cluster.eks.gpu_node_groups[0].scaling.desired_size == sizes[1]
    else:
        assert_rejected(config, "cluster.eks.gpuNodeGroups[0].desiredSize", sizes[1], fix="minSize <= desiredSize")


def test_an_existing_vpc_needs_its_subnets_and_subnets_need_their_vpc():
    assert_rejected(put(eks_config(), "cluster.eks.vpcId", "vpc-123"), "cluster.eks.vpcId", "vpc-123",
                    fix="privateSubnetIds")
    assert_rejected(put(eks_config(), "cluster.eks.privateSubnetIds", ["subnet-a"]), "cluster.eks.vpcId",
                    fix="set cluster.eks.vpcId")
    config = put(put(eks_config(), "cluster.eks.vpcId", "vpc-123"), "cluster.eks.privateSubnetIds", ["subnet-a"])
    assert not load_platform(config).cluster.eks.creates_network


# --- unknown keys and malformed types ----------------------------------------------------------


@pytest.mark.parametrize("parent, typo, known", [
    ("", "organisation", "organization"),
    ("teams[0].", "resourcs", "resources"),
    ("cluster.microk8s.", "hots", "host"),
    ("kaiScheduler.", "gpuSharng", "gpuSharing"),
    ("teams[0].", "colour", None),
])
def test_unknown_keys_are_rejected_with_a_suggestion(parent, typo, known):
    value = {"name": "x"}
    found = assert_rejected(put(dev_config(), parent + typo, value), parent + typo, value)
    assert found.problem == "unknown key"
    assert found.fix == (f"did you mean '{known}'?" if known else "remove it")


@pytest.mark.parametrize("path, value, fix", [
    ("cluster.microk8s.gpus", "two", "whole number"),
    ("cluster.microk8s.gpus", True, "whole number"),
    ("teams[0].priority", True, "whole number"),
    ("teams[0].resources", [{"gpu": 1}], "YAML map"),
    ("cluster", ["microk8s"], "YAML map"),
    ("teams", {}, "YAML list"),
    ("teams", [], "add at least one team"),
    ("teams[0]", "team-nlp", "YAML map"),
    ("teams[0].name", 42, "quote it"),
    ("organization.name", ["ml-org"], "ml-org"),
    ("kaiScheduler.gpuSharing", 1, "true or false"),
    ("teams[0].vcluster.nodeLabels", ["gpu"], "map"),
])
def test_values_of_the_wrong_type_are_rejected(path, value, fix):
    assert_rejected(put(dev_config(), path, value), path, value, fix=fix)


def test_all_problems_are_reported_together():
    config = dev_config()
    put(config, "teams[0].resources.gpu.quota", "one")
    put(config, "cluster.microk8s.gpus", "two")
    put(config, "kaiScheduler.version", "latest")
    put(config, "organisation", {})
    error = rejected(config)
    assert set(error.keys) >= {"teams[0].resources.gpu.quota", "cluster.microk8s.gpus", "kaiScheduler.version",
                               "organisation"}
    assert f"({len(error.issues)} problem(s))" in str(error) and len(error.issues) >= 4


# --- vcluster settings and defaults -------------------------------------------------------------


def test_team_vcluster_overrides_merge_over_the_stack_defaults():
    config = dev_config()
    config["vcluster"] = {"version": "0.30.0", "nodeLabels": {"pool": "shared"},
                          "resourceQuota": {"cpu": "8"}, "extraValues": {"a": {"x": 1}}}
    put(config, "teams[1].vcluster", {"nodeLabels": {"pool": "vision"}, "resourceQuota": {"pods": 10},
                                      "extraValues": {"a": {"y": 2}}})
    nlp, vision, _ = load_platform(config).teams
    assert nlp.vcluster.node_labels == {"pool": "shared"} and nlp.vcluster.version == "0.30.0"
    assert vision.vcluster.version == "0.30.0"
    assert vision.vcluster.node_labels == {"pool": "vision"}
    assert (vision.vcluster.resource_quota.cpu, vision.vcluster.resource_quota.pods) == ("8", 10)
    assert vision.vcluster.extra_values == {"a": {"x": 1, "y": 2}}
    assert vision.vcluster.sync_runtime_classes is True  # built-in default survives both layers


@pytest.mark.parametrize("key, value", [
    ("version", "latest"),
    ("resourceQuota.pods", 0),
    ("limitRange.defaultMemory", "lots"),
    ("networkPolicy", "on"),
])
def test_a_bad_team_vcluster_override_is_reported_at_the_team_key(key, value):
    path = f"teams[2].vcluster.{key}"
    assert_rejected(put(dev_config(), path, value), path, value)


def test_team_defaults():
    team = load_platform(dev_config()).teams[0]
    assert team.vcluster_name == "team-nlp" and team.namespace == "vcluster-team-nlp"
    assert team.display_name == "team-nlp" and team.queue_name == "team-nlp"
    assert team.protect is True
    renamed = load_platform(put(dev_config(), "teams[0].vclusterName", "nlp")).teams[0]
    assert (renamed.vcluster_name, renamed.namespace) == ("nlp", "vcluster-nlp")


# --- sharing profiles and chart references ------------------------------------------------------


def _time_slicing(replicas: int = 4, default_profile: str = EXCLUSIVE):
    config = put(dev_config(), "gpuOperator.timeSlicing", {"replicas": replicas, "defaultProfile": default_profile})
    return load_platform(config).gpu_operator.time_slicing


def test_profile_keys_carry_a_content_hash():
    keys = profile_keys(_time_slicing())
    assert set(keys) == {EXCLUSIVE, TIME_SLICED}
    for name, key in keys.items():
        assert re.fullmatch(rf"{name}-[0-9a-f]{{8}}", key)
    assert set(config_map_data(_time_slicing())) == set(keys.values()) | {EXCLUSIVE, TIME_SLICED}


def test_changing_replicas_changes_only_the_time_sliced_key():
    four, eight = profile_keys(_time_slicing(4)), profile_keys(_time_slicing(8))
    assert four[EXCLUSIVE] == eight[EXCLUSIVE]
    assert four[TIME_SLICED] != eight[TIME_SLICED]
    assert profile_keys(_time_slicing(4)) == four  # stable


def test_time_sliced_document():
    documents = profile_documents(_time_slicing(3))
    assert documents[EXCLUSIVE] == {"version": "v1"}
    sliced = documents[TIME_SLICED]["sharing"]["timeSlicing"]
    assert sliced["renameByDefault"] is False and sliced["failRequestsGreaterThanOne"] is True
    assert sliced["resources"] == [{"name": "nvidia.com/gpu", "replicas": 3}]
    rendered = yaml.safe_load(config_map_data(_time_slicing(3))[profile_keys(_time_slicing(3))[TIME_SLICED]])
    assert rendered == documents[TIME_SLICED]


@pytest.mark.parametrize("profile", [EXCLUSIVE, TIME_SLICED])
def test_default_key_follows_the_default_profile(profile):
    time_slicing = _time_slicing(default_profile=profile)
    assert default_key(time_slicing) == profile_keys(time_slicing)[profile]
    assert default_key(time_slicing).startswith(profile + "-")


@pytest.mark.parametrize("version", ["v0.8.4", "v0.13.0", "v0.15.3"])
def test_kai_releases_that_cannot_blank_visible_devices_are_refused(version):
    found = assert_rejected(put(dev_config(), "kaiScheduler.version", version), "kaiScheduler.version", version,
                            fix="v0.16.0 or later")
    assert "NVIDIA_VISIBLE_DEVICES" in found.problem


@pytest.mark.parametrize("version", ["v0.16.0", "v0.16.4", "v0.17.0"])
def test_kai_releases_with_blocking_pass(version):
    assert load_platform(put(dev_config(), "kaiScheduler.version", version)).kai_scheduler.version == version


# --- known bugs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path, value", [("teams[0].name", "team-nlp\n"), ("vcluster.version", "0.36.1\n")])
def test_a_trailing_newline_is_not_part_of_a_valid_name_or_version(path, value):
    assert_rejected(put(dev_config(), path, value), path, value)


def test_a_huge_integer_quota_is_a_config_error_not_a_crash():
    assert_rejected(put(dev_config(), f"{GPU}.limit", 10 ** 400), f"{GPU}.limit", 10 ** 400)


# --- created EKS network -------------------------------------------------------------------------


@pytest.mark.parametrize("cidr, zones", [("10.0.0.0/16", 2), ("172.20.0.0/18", 2), ("10.8.0.0/17", 4)])
def test_a_created_vpc_needs_room_for_a_public_and_a_private_subnet_per_zone(cidr, zones):
    config = put(put(eks_config(), "cluster.eks.vpcCidr", cidr), "cluster.eks.availabilityZones", zones)
    assert load_platform(config).cluster.eks.vpc_cidr == cidr


@pytest.mark.parametrize("cidr, zones, fix", [
    ("10.0.0.0/19", 2, "larger block"),
    ("10.0.0.0/18", 3, "fewer availabilityZones"),
    ("10.0.0.1/16", 2, "10.0.0.0/16"),
    ("fd00::/64", 2, "10.0.0.0/16"),
])
def test_a_vpc_cidr_without_room_or_not_a_network_is_rejected(cidr, zones, fix):
    config = put(put(eks_config(), "cluster.eks.vpcCidr", cidr), "cluster.eks.availabilityZones", zones)
    assert_rejected(config, "cluster.eks.vpcCidr", cidr, fix=fix)


def test_a_gpu_node_group_cannot_take_the_system_pool_name():
    assert_rejected(put(eks_config(), "cluster.eks.gpuNodeGroups[0].name", "system"),
                    "cluster.eks.gpuNodeGroups[0].name", "system")


def test_the_microk8s_addon_and_an_installed_operator_cannot_both_run():
    config = put(put(dev_config(), "cluster.microk8s.enableNvidiaAddon", True), "gpuOperator.mode", "install")
    assert_rejected(config, "gpuOperator.mode", "install", fix="microk8s-addon")
    assert load_platform(put(config, "gpuOperator.mode", "microk8s-addon")).cluster.microk8s.enable_nvidia_addon


def test_vcluster_names_fit_helm_release_names():
    assert_rejected(put(dev_config(), "teams[0].vclusterName", "v" * 54), "teams[0].vclusterName", "v" * 54,
                    fix="at most 53")
    long_team = "t" * 60
    platform = load_platform(put(dev_config(), "teams[0].name", long_team))
    assert platform.teams[0].vcluster_name == "t" * 53
    assert len(platform.teams[0].namespace) <= 63


def test_gpu_node_group_labels_cannot_take_the_pool_label():
    config = put(eks_config(), "cluster.eks.gpuNodeGroups[0].labels", {"gpu-tenancy/pool": "other"})
    assert_rejected(config, "cluster.eks.gpuNodeGroups[0].labels", {"gpu-tenancy/pool": "other"},
                    fix="remove gpu-tenancy/pool")


def test_an_unquoted_version_number_is_asked_to_be_quoted():
    assert_rejected(put(eks_config(), "cluster.eks.kubernetesVersion", 1.33), "cluster.eks.kubernetesVersion", 1.33,
                    fix='"1.33"')


def test_pod_security_is_one_of_the_kubernetes_levels():
    assert load_platform(put(dev_config(), "vcluster.podSecurity", "restricted")).teams[0].vcluster.pod_security \
        == "restricted"
    assert_rejected(put(dev_config(), "teams[0].vcluster.podSecurity", "strict"), "teams[0].vcluster.podSecurity",
                    "strict", fix="restricted")


# --- stack files: read as Pulumi reads them (YAML 1.2) -----------------------------------------


def _stack_file(tmp_path, body: str):
    path = tmp_path / "Pulumi.site.yaml"
    path.write_text("config:\n" + body)
    return path


@pytest.mark.parametrize("line, key, fix", [
    ("  gpu-tenancy:teams:\n    - name: a\n      protect: yes\n", "teams[0].protect", "write true for a boolean"),
    ("  gpu-tenancy:teams:\n    - name: a\n      displayName: 2026-01-01\n", "teams[0].displayName",
     'quote it ("2026-01-01")'),
    ("  gpu-tenancy:kaiScheduler:\n    gpuSharing: off\n", "kaiScheduler.gpuSharing", "write false"),
    ("  aws:region: on\n", "aws:region", 'quote it ("on") for text'),
    ("  gpu-tenancy:vcluster:\n    nodeLabels:\n      gpu-tenancy/pool: 0777\n",
     'vcluster.nodeLabels["gpu-tenancy/pool"]', 'quote it ("0777")'),
])
def test_a_value_yaml_1_1_reads_differently_is_a_config_error_naming_its_key(tmp_path, line, key, fix):
    with pytest.raises(ConfigError) as raised:
        read_stack_file(_stack_file(tmp_path, line))
    assert raised.value.keys == [key]
    assert fix in raised.value.issues[0].fix and "YAML 1.2" in raised.value.issues[0].problem


def test_quoted_values_are_text_and_true_false_are_booleans(tmp_path):
    config = read_stack_file(_stack_file(tmp_path, '  gpu-tenancy:teams:\n    - name: a\n      displayName: '
                                                   '"2026-01-01"\n      protect: true\n      strict: False\n'
                                                   "      vclusterName: 'on'\n"))["config"]
    assert config["gpu-tenancy:teams"] == [{"name": "a", "displayName": "2026-01-01", "protect": True,
                                            "strict": False, "vclusterName": "on"}]


def test_a_key_set_twice_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as raised:
        read_stack_file(_stack_file(tmp_path, "  gpu-tenancy:organization:\n    name: a\n    name: b\n"))
    assert raised.value.keys == ["organization.name"]


def test_broken_yaml_names_the_file_and_line(tmp_path):
    with pytest.raises(StackFileError, match=r"Pulumi.site.yaml line 4, column \d+: not valid YAML"):
        read_stack_file(_stack_file(tmp_path, "  gpu-tenancy:organization:\n    name: [a\n  x: 1\n"))


def test_explicit_tags_are_refused(tmp_path):
    with pytest.raises(ConfigError) as raised:
        read_stack_file(_stack_file(tmp_path, "  gpu-tenancy:organization: !!python/object:os.system {}\n"))
    assert raised.value.keys == ["organization"]


@pytest.mark.parametrize("stack", sorted(p.name[len("Pulumi."):-len(".yaml")]
                                         for p in DEV_STACK.parent.glob("Pulumi.*.yaml")))
def test_committed_stack_files_mean_the_same_to_yaml_1_1_and_1_2_readers(stack):
    path = DEV_STACK.parent / f"Pulumi.{stack}.yaml"
    assert read_stack_file(path) == yaml.safe_load(path.read_text())


# --- one problem, one message -----------------------------------------------------------------


def test_a_misspelt_quota_is_one_problem_without_a_limit_follow_on():
    config = dev_config()
    config["teams"][0]["resources"]["gpu"] = {"qouta": 0.33, "limit": 1}
    error = rejected(config)
    assert error.keys == ["teams[0].resources.gpu.qouta"]
    assert "did you mean 'quota'?" in error.issues[0].fix


def test_a_duplicate_team_name_is_one_problem():
    config = dev_config()
    config["teams"][1]["name"] = config["teams"][0]["name"]
    error = rejected(config)
    assert error.keys == ["teams[1].name"]



# --- risky layouts ----------------------------------------------------------------------------


def test_an_eks_system_node_group_scaled_to_zero_is_refused_with_the_reason():
    config = put(put(eks_config(), "cluster.eks.systemNodeGroup.minSize", 0), "cluster.eks.systemNodeGroup.desiredSize", 0)
    found = assert_rejected(config, "cluster.eks.systemNodeGroup.desiredSize", 0, fix="at least 1")
    assert "untainted" in found.problem and "vCluster control plane" in found.problem


def test_an_eks_system_node_group_that_may_scale_to_zero_warns():
    platform = load_platform(put(eks_config(), "cluster.eks.systemNodeGroup.minSize", 0))
    assert [w for w in platform.warnings if "systemNodeGroup.minSize is 0" in w]


def test_the_operator_driver_on_the_al2023_nvidia_ami_is_refused():
    found = assert_rejected(put(eks_config(), "gpuOperator.driverEnabled", True), "gpuOperator.driverEnabled", True)
    assert "ships the NVIDIA driver" in found.problem
    assert load_platform(put(eks_config(), "gpuOperator.driverEnabled", False)).gpu_operator.driver_enabled is False


def test_the_operator_toolkit_on_the_al2023_nvidia_ami_warns():
    platform = load_platform(put(eks_config(), "gpuOperator.toolkitEnabled", True))
    assert [w for w in platform.warnings if "toolkitEnabled is true on EKS" in w]


def test_team_quotas_beyond_the_host_under_an_unlimited_org_warn():
    config = put(dev_config(), "organization.resources.gpu.quota", -1)
    config = put(config, "teams[0].resources.gpu.quota", 1)
    platform = load_platform(config)
    assert [w for w in platform.warnings if "add up to 1.66 but the host has at most 1 GPU" in w]


def test_gpus_guaranteed_to_no_team_are_a_note_not_a_warning():
    config = put(eks_config(), "cluster.eks.gpuNodeGroups[0].maxSize", 4)
    platform = load_platform(config)
    guaranteed = sum(team.resources.gpu.quota for team in platform.teams)
    assert platform.notes == (f"{4 - guaranteed:g} of 4 GPU(s) are guaranteed to no team (the teams' gpu quotas "
                              f"add up to {guaranteed:g}): teams only get them over quota, by priority and "
                              "overQuotaWeight.",)
    assert not platform.warnings
    assert load_platform(dev_config()).notes == ()  # 0.99 of 1: rounding, not a forgotten GPU
