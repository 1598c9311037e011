"""Spec of the ``cluster`` settings: each host kind's keys, the EKS network the program creates, and
layouts that cannot work or waste money."""

from __future__ import annotations


import pytest

from config import load_platform, versions
from config.errors import MISSING
from config.hosts import NODE_GROUP_NAME_PREFIX_MAX
from tests.config_spec import assert_rejected, dev_config, drop, eks_config, put
from tests.conftest import MIRRORED_TAGS


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


@pytest.mark.parametrize("version", ["latest", "v1.50.1", "1.50.1-eksbuild.1"])
def test_the_ebs_csi_addon_version_is_an_exact_eks_build(version):
    assert_rejected(put(eks_config(), "cluster.eks.ebsCsiAddonVersion", version), "cluster.eks.ebsCsiAddonVersion", version,
                    fix="vX.Y.Z-eksbuild.N")


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


@pytest.mark.parametrize("cidr", ["198.18.0.0/16", "11.0.0.0/16", "172.32.0.0/16", "100.128.0.0/16"])
def test_a_created_vpc_outside_the_private_ranges_is_rejected(cidr):
    # Nodes and pods take their addresses from the VPC, and a tenant pod's public egress leaves out only the
    # private ranges: 198.18.0.0/16 would put every kubelet and platform pod within every tenant pod's reach.
    assert_rejected(put(eks_config(), "cluster.eks.vpcCidr", cidr), "cluster.eks.vpcCidr", cidr,
                    fix="private block")


@pytest.mark.parametrize("cidr", ["100.64.0.0/16", "192.168.0.0/16", "172.31.0.0/16"])
def test_a_created_vpc_in_any_private_range_is_accepted(cidr):
    assert load_platform(put(eks_config(), "cluster.eks.vpcCidr", cidr)).cluster.eks.vpc_cidr == cidr


def test_a_gpu_node_group_cannot_take_the_system_pool_name():
    assert_rejected(put(eks_config(), "cluster.eks.gpuNodeGroups[0].name", "system"),
                    "cluster.eks.gpuNodeGroups[0].name", "system")


def test_a_node_group_name_aws_would_refuse_is_refused_with_the_key_that_makes_it():
    # EKS names each managed node group `<cluster>-<pool>-` plus a 26-character suffix, and refuses a name past 63.
    longest = "c" * (NODE_GROUP_NAME_PREFIX_MAX - len("--system"))
    pool_room = NODE_GROUP_NAME_PREFIX_MAX - len(longest) - 2

    def site(cluster: str, pool: str) -> dict:
        return put(put(eks_config(), "cluster.eks.name", cluster), "cluster.eks.gpuNodeGroups[0].name", pool)
    assert load_platform(site(longest, "g" * pool_room)).cluster.eks.name == longest
    found = assert_rejected(site(longest + "c", "gpu"), "cluster.eks.name", longest + "c",
                            fix=f"at most {len(longest)} characters")
    assert "system" in found.problem and "63" in found.problem
    found = assert_rejected(site(longest, "g" * (pool_room + 1)),
                            "cluster.eks.gpuNodeGroups[0].name", "g" * (pool_room + 1),
                            fix=f"at most {pool_room} characters, or a shorter cluster.eks.name")
    assert f"'{longest}-{'g' * (pool_room + 1)}-'" in found.problem


def test_the_microk8s_addon_and_an_installed_operator_cannot_both_run():
    config = put(put(dev_config(), "cluster.microk8s.enableNvidiaAddon", True), "gpuOperator.mode", "install")
    assert_rejected(config, "gpuOperator.mode", "install", fix="microk8s-addon")
    assert load_platform(put(config, "gpuOperator.mode", "microk8s-addon")).cluster.microk8s.enable_nvidia_addon


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


# --- risky layouts ----------------------------------------------------------------------------


def test_an_eks_system_node_group_scaled_to_zero_is_refused_with_the_reason():
    config = put(put(eks_config(), "cluster.eks.systemNodeGroup.minSize", 0), "cluster.eks.systemNodeGroup.desiredSize", 0)
    found = assert_rejected(config, "cluster.eks.systemNodeGroup.desiredSize", 0, fix="at least 1")
    assert "untainted" in found.fix and "vCluster control plane" in found.fix


def test_an_eks_system_node_group_that_may_scale_to_zero_warns():
    config = put(eks_config(), "cluster.eks.systemNodeGroup.minSize", 0)
    # Nothing scales the group but an autoscaler: it keeps its desired two nodes.
    assert not [w for w in load_platform(config).warnings if "systemNodeGroup.minSize is 0" in w]
    platform = load_platform(put(config, "cluster.eks.autoscaler", "cluster-autoscaler"))
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
    config = put(put(eks_config(), "cluster.eks.gpuNodeGroups[0].maxSize", 4), "vcluster.allowedRegistries", ["nvcr.io"])
    put(config, "cluster.eks.autoscaler", "cluster-autoscaler")
    # CPU and memory the four nodes hold: the GPUs are the point here.
    put(config, "vcluster.resourceQuota", {"cpu": "2", "memory": "8Gi", "pods": 10})
    # ... and who reaches the API server: the default public endpoint has a note of its own.
    put(config, "cluster.eks.apiEndpoint", {"publicAccess": False})
    put(config, "ci.runner", ["self-hosted", "vpc"])
    platform = load_platform(config)
    guaranteed = sum(team.resources.gpu.quota for team in platform.teams)
    assert platform.notes[0].startswith("cluster.eks.apiEndpoint.publicAccess is false")
    assert platform.notes[1:] == (f"{4 - guaranteed:g} of 4 GPU(s) are guaranteed to no team (the teams' gpu quotas "
                              f"add up to {guaranteed:g}): teams only get them over quota, by priority and "
                              "overQuotaWeight.",)
    assert not platform.warnings
    # 0.99 of 1: rounding, not a forgotten GPU
    sized = put(put(dev_config(), "cluster.microk8s.cpu", "64"), "cluster.microk8s.memory", "256Gi")
    # ... its teams' claims and control planes on a class that enforces sizes (the hostpath notes:
    # tests/test_review_notes_claims.py).
    put(sized, "vcluster.storageClasses", ["openebs-lvm"])
    put(sized, "vcluster.extraValues", {"controlPlane": {"statefulSet": {"persistence": {"volumeClaim": {
        "storageClass": "openebs-lvm"}}}}})
    assert load_platform(put(sized, "vcluster.allowedRegistries", ["nvcr.io"])).notes == ()


def test_kai_fractions_on_time_sliced_gpus_are_warned_about_where_the_config_puts_them():
    """KAI would split each time-slice replica again: the default profile and each EKS GPU node group on it."""
    dev = load_platform(put(dev_config(), "gpuOperator.timeSlicing.defaultProfile", "time-sliced"))
    assert [w for w in dev.warnings if w.startswith("gpuOperator.timeSlicing.defaultProfile is time-sliced while "
                                                    "kaiScheduler.gpuSharing is on: KAI counts each of the 4 ")]
    eks = load_platform(put(eks_config(), "cluster.eks.gpuNodeGroups[0].sharingProfile", "time-sliced"))
    group = eks.cluster.eks.gpu_node_groups[0].name
    assert [w for w in eks.warnings if w.startswith(f"GPU node group {group} uses the time-sliced profile")]
    unshared = put(put(dev_config(), "gpuOperator.timeSlicing.defaultProfile", "time-sliced"),
                   "kaiScheduler.gpuSharing", False)
    assert not [w for w in load_platform(unshared).warnings if "time-sliced" in w]
    assert not [w for w in load_platform(dev_config()).warnings if "time-sliced" in w]


@pytest.mark.parametrize("kind, key", [("eks", "cluster.eks.kubernetesVersion"),
                                       ("microk8s", "cluster.microk8s.kubernetesVersion")])
def test_a_kubernetes_newer_than_the_newest_checked_is_accepted_with_a_note(kind, key):
    base = put(eks_config() if kind == "eks" else dev_config(), "vcluster.allowedRegistries", ["nvcr.io"])
    newest = versions.KUBERNETES_NEWEST_CHECKED_VERSION
    newer = f"1.{versions.release_numbers(newest)[1] + 1}"
    assert not [note for note in load_platform(put(base, key, newest)).notes if "kubernetesVersion" in note]
    [note] = [note for note in load_platform(put(base, key, newer)).notes if "kubernetesVersion" in note]
    assert note.startswith(f"{key} is {newer}, newer than Kubernetes {newest}")


def test_the_newest_checked_kubernetes_is_the_newest_api_server_the_contract_tests_read():
    newest = max((tag for tag in MIRRORED_TAGS["kubernetes/apiserver"]), key=versions.release_order)
    assert f"1.{versions.release_numbers(newest)[1]}" == versions.KUBERNETES_NEWEST_CHECKED_VERSION
