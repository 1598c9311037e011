"""HostCluster on EKS: the cluster, its GPU and system node groups, network, storage driver and class."""

from __future__ import annotations

import json

import pytest

from config import ConfigError
from config.hosts import NODE_GROUP_NAME_PREFIX_MAX
from tests.conftest import eks_config, run
from tools.plan.document import build_plan
from tools.plan.summary import render_summary


def test_eks_cluster_has_no_default_node_group_and_uses_api_authentication(eks_run):
    cluster = eks_run.of_type("eks:index:Cluster")[0].inputs
    assert cluster["skipDefaultNodeGroup"] is True
    assert cluster["authenticationMode"] == "API"
    assert cluster["version"] == "1.33"
    assert cluster["name"] == "vcluster-gpu"


def test_eks_vpc_cni_enforces_tenant_network_policies(eks_run):
    cluster = eks_run.of_type("eks:index:Cluster")[0].inputs
    assert cluster["vpcCniOptions"]["enableNetworkPolicy"] is True


def test_eks_gpu_node_group_is_tainted_labelled_and_picks_its_sharing_profile(eks_run):
    group = eks_run.named("host-gpu-gpu").inputs
    assert group["amiType"] == "AL2023_x86_64_NVIDIA"
    assert group["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 1}
    assert group["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    profile_keys = eks_run.outputs["timeSlicing"]["profileKeys"]
    assert group["labels"]["nvidia.com/device-plugin.config"] == profile_keys["exclusive"]
    assert group["labels"]["gpu-tenancy/pool"] == "gpu"


def test_eks_system_node_group_is_a_small_untainted_cpu_pool(eks_run):
    system = eks_run.named("host-system").inputs
    assert system["amiType"] == "AL2023_x86_64_STANDARD"
    assert system["instanceTypes"] == ["m6i.large"]
    assert "taints" not in system


def test_eks_node_groups_share_one_node_role_with_the_worker_policies(eks_run):
    role = eks_run.named("host-node-role")
    attachments = {r.inputs["policyArn"].rsplit("/", 1)[1] for r in eks_run.of_type(
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment") if r.name.startswith("host-node-role-")}
    assert attachments == {"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"}
    for group in eks_run.of_type("eks:index:ManagedNodeGroup"):
        assert group.inputs["nodeRole"] == "host-node-role-id"
        assert role.urn in group.dependencies


def test_eks_resources_use_an_explicit_provider_for_the_configured_region(eks_run):
    provider = eks_run.of_type("pulumi:providers:aws")
    assert len(provider) == 1 and provider[0].inputs["region"] == "us-east-2"
    for resource in eks_run.resources:
        if resource.type.startswith("aws:"):
            assert resource.provider == provider[0].urn


def test_eks_creates_a_vpc_with_public_and_private_subnets_when_none_is_given(eks_run):
    subnets = eks_run.of_type("aws:ec2/subnet:Subnet")
    assert len(subnets) == 4
    private = [s.inputs for s in subnets if "private" in s.name]
    assert all("kubernetes.io/role/internal-elb" in s["tags"] for s in private)
    assert len({s.inputs["cidrBlock"] for s in subnets}) == 4
    cluster = eks_run.of_type("eks:index:Cluster")[0].inputs
    assert len(cluster["privateSubnetIds"]) == 2


def test_eks_uses_given_vpc_and_subnets_without_creating_a_network():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"].update(vpcId="vpc-123", privateSubnetIds=["subnet-a", "subnet-b"])
    program = run(config)
    assert program.of_type("aws:ec2/vpc:Vpc") == []
    cluster = program.of_type("eks:index:Cluster")[0].inputs
    assert cluster["vpcId"] == "vpc-123"
    assert cluster["privateSubnetIds"] == ["subnet-a", "subnet-b"]


def test_each_gpu_node_group_is_its_own_managed_node_group():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"].append(
        {"name": "l40s", "instanceTypes": ["g6e.xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 2,
         "sharingProfile": "time-sliced", "labels": {"gpu-model": "l40s"}})
    config["gpu-tenancy:kaiScheduler"]["gpuSharing"] = False
    program = run(config)
    group = program.named("host-gpu-l40s").inputs
    assert group["instanceTypes"] == ["g6e.xlarge"]
    assert group["labels"]["gpu-model"] == "l40s"
    assert group["labels"]["nvidia.com/device-plugin.config"] == \
        program.outputs["timeSlicing"]["profileKeys"]["time-sliced"]


def node_groups(program):
    return program.of_type("eks:index:ManagedNodeGroup")


def test_eks_node_groups_run_in_the_private_subnets_only(eks_run):
    private = [s.urn.rsplit("::", 1)[1] + "-id" for s in eks_run.of_type("aws:ec2/subnet:Subnet") if "private" in s.name]
    assert len(private) == 2
    for group in node_groups(eks_run):
        assert group.inputs["subnetIds"] == private


def test_eks_node_groups_in_a_given_vpc_use_its_private_subnets():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"].update(vpcId="vpc-123", publicSubnetIds=["subnet-p"],
                                                privateSubnetIds=["subnet-a", "subnet-b"])
    for group in node_groups(run(config)):
        assert group.inputs["subnetIds"] == ["subnet-a", "subnet-b"]


def test_a_given_vpc_without_private_subnets_is_a_config_error():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"].update(vpcId="vpc-123", publicSubnetIds=["subnet-p"])
    with pytest.raises(ConfigError) as error:
        run(config)
    assert "cluster.eks.privateSubnetIds" in error.value.keys


def test_eks_nodes_keep_pods_away_from_instance_metadata(eks_run):
    groups = node_groups(eks_run)
    assert len(groups) == 2
    for group in groups:
        template = eks_run.named(f"{group.name}-template")
        assert group.inputs["launchTemplate"]["id"] == f"{group.name}-template-id"
        assert template.inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required",
                                                      "httpPutResponseHopLimit": 1}
        # EKS refuses diskSize next to a launch template: the template sizes the root volume.
        assert "diskSize" not in group.inputs
    sizes = {name: eks_run.named(f"host-{name}-template").inputs["blockDeviceMappings"][0]
             for name in ("system", "gpu-gpu")}
    assert sizes["system"]["deviceName"] == "/dev/xvda"
    assert sizes["system"]["ebs"]["volumeSize"] == 50 and sizes["gpu-gpu"]["ebs"]["volumeSize"] == 100
    assert sizes["gpu-gpu"]["ebs"]["encrypted"] == "true"


def test_every_kubernetes_object_waits_for_the_nodes_and_the_storage_driver(eks_run):
    provider = eks_run.named("host-k8s")
    addon = eks_run.named("host-ebs-csi-driver")
    for group in node_groups(eks_run):
        assert group.urn in provider.dependencies
        assert group.urn in addon.dependencies
    assert addon.urn in provider.dependencies
    kubernetes_objects = [r for r in eks_run.resources if r.type.startswith("kubernetes:") and r.custom]
    assert kubernetes_objects
    assert {r.provider for r in kubernetes_objects} == {provider.urn}


def test_eks_installs_the_ebs_csi_driver_with_its_own_irsa_role(eks_run):
    from components.eks_resources import ebs_csi_trust_policy
    from tools.offline.mocks import MOCK_ADDON_VERSION

    cluster = eks_run.of_type("eks:index:Cluster")[0]
    assert cluster.inputs["createOidcProvider"] is True
    addon = eks_run.named("host-ebs-csi-driver").inputs
    assert addon["addonName"] == "aws-ebs-csi-driver"
    assert addon["addonVersion"] == MOCK_ADDON_VERSION  # the AWS lookup's (mock) answer
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["ebsCsiAddonVersion"] = "v1.50.1-eksbuild.2"
    assert run(config).named("host-ebs-csi-driver").inputs["addonVersion"] == "v1.50.1-eksbuild.2"
    assert addon["clusterName"] == "vcluster-gpu"
    assert addon["serviceAccountRoleArn"] == "arn:aws:offline:::host-ebs-csi-role"
    policy = eks_run.named("host-ebs-csi-role-policy").inputs
    assert policy["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
    trust = json.loads(ebs_csi_trust_policy("arn:aws:iam::1:oidc-provider/oidc.eks.x/id/AB",
                                            "https://oidc.eks.x/id/AB"))["Statement"]
    assert trust == [{"Effect": "Allow", "Principal": {"Federated": "arn:aws:iam::1:oidc-provider/oidc.eks.x/id/AB"},
                      "Action": "sts:AssumeRoleWithWebIdentity",
                      "Condition": {"StringEquals": {
                          "oidc.eks.x/id/AB:sub": "system:serviceaccount:kube-system:ebs-csi-controller-sa",
                          "oidc.eks.x/id/AB:aud": "sts.amazonaws.com"}}}]
    # The role the program creates trusts the cluster's own OIDC provider (never a null principal).
    role_trust = json.loads(eks_run.named("host-ebs-csi-role").inputs["assumeRolePolicy"])["Statement"][0]
    assert role_trust["Principal"]["Federated"].endswith("/id/host-eks")


def test_eks_gets_a_default_gp3_storage_class_before_any_tenant(eks_run):
    storage = eks_run.named("host-storage-class")
    assert storage.inputs["metadata"]["name"] == "gp3"
    assert storage.inputs["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert storage.inputs["provisioner"] == "ebs.csi.aws.com"
    assert storage.inputs["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert storage.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    for team, vcluster in (("team-legal", "rag-legal"), ("team-support", "rag-support")):
        release = eks_run.named(f"tenant-{team}-vcluster")
        assert storage.urn in release.dependencies
        claim = release.inputs["values"]["controlPlane"]["statefulSet"]["persistence"]["volumeClaim"]
        assert claim == {"storageClass": "gp3"}


def test_eks_exports_no_microk8s_certificate_ends(eks_run):
    assert "hostCertificateExpiry" not in eks_run.outputs
    assert not [r for r in eks_run.resources if r.name.endswith("read-serving-certificates")]


def test_microk8s_creates_no_storage_class_and_tenants_use_hostpath(dev_run):
    assert dev_run.of_type("kubernetes:storage.k8s.io/v1:StorageClass") == []
    values = dev_run.named("tenant-team-nlp-vcluster").inputs["values"]
    assert values["controlPlane"]["statefulSet"]["persistence"]["volumeClaim"]["storageClass"] == "microk8s-hostpath"


def test_gpu_node_groups_share_the_role_label_tenants_select_by_default(eks_run):
    assert eks_run.named("host-gpu-gpu").inputs["labels"]["gpu-tenancy/role"] == "gpu"
    assert eks_run.named("host-system").inputs["labels"] == {"gpu-tenancy/pool": "system", "gpu-tenancy/role": "system"}


def test_the_role_label_is_reserved_on_gpu_node_groups():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"][0]["labels"] = {"gpu-tenancy/role": "system"}
    with pytest.raises(ConfigError) as error:
        run(config)
    assert "cluster.eks.gpuNodeGroups[0].labels" in error.value.keys


def test_a_new_eks_stack_gets_the_newest_kubernetes_version():
    from config import versions

    config = eks_config()
    del config["gpu-tenancy:cluster"]["eks"]["kubernetesVersion"]
    cluster = run(config).of_type("eks:index:Cluster")[0].inputs
    assert cluster["version"] == versions.EKS_KUBERNETES_VERSION == "1.36"


def test_eks_names_each_node_group_as_the_config_checked_it():
    # config/load_host.py refuses a cluster and pool name AWS would refuse as a node group name prefix; the program
    # must build the prefix the same way, so the longest accepted names reach the limit and no further.
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["name"] = "c" * 29
    config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"][0]["name"] = "g" * 6
    config["gpu-tenancy:vcluster"]["nodeLabels"] = {"gpu-tenancy/pool": "g" * 6}
    prefixes = sorted(group.inputs["nodeGroupNamePrefix"] for group in node_groups(run(config)))
    assert prefixes == sorted([f"{'c' * 29}-system-", f"{'c' * 29}-{'g' * 6}-"])
    assert max(map(len, prefixes)) == NODE_GROUP_NAME_PREFIX_MAX


def test_every_node_group_follows_the_clusters_kubernetes_version():
    # pulumi-eks (nodejs/eks/nodes/nodegroup.ts, createManagedNodeGroup, v4.3.0 and its main branch) gives a managed
    # node group the cluster's version only when it has no launch template; every group here has one, so without
    # a version of their own the groups would stay on the minor they were created with. EKS updates a cluster only
    # while its managed node groups run its own minor, so the second upgrade of the site would be refused.
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["kubernetesVersion"] = "1.34"
    groups = node_groups(run(config))
    assert len(groups) == 2
    assert {group.name: group.inputs.get("version") for group in groups} == {"host-system": "1.34",
                                                                           "host-gpu-gpu": "1.34"}


def test_the_plan_summary_shows_each_node_groups_root_disk_from_its_launch_template():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"][0]["diskSize"] = 500
    summary = render_summary(build_plan(run(config), "test"))
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ")[5] for line in summary.splitlines()
            if line.startswith("| `host-") and " / " in line}
    assert rows == {"host-gpu-gpu": "500", "host-system": "50"}
