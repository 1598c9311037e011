"""HostCluster: MicroK8s over SSH or locally, EKS with GPU node groups, or an existing cluster."""

from __future__ import annotations

import pytest

from config import ConfigError
from tests.conftest import dev_config, eks_config, run
from tools.mockrun import REDACTED, run_program

SECRET = {"secure": "v1:encrypted"}


def commands(program):
    return {r.name.removeprefix("host-"): r for r in program.resources if r.type.startswith("command:")}


# --- MicroK8s ------------------------------------------------------------------------------------


def test_local_microk8s_runs_the_seed_steps_in_order_on_this_machine(dev_run):
    steps = commands(dev_run)
    assert {r.type for r in steps.values()} == {"command:local:Command"}
    assert steps["hold-refresh"].inputs["create"] == "sudo snap refresh --hold microk8s"
    assert steps["hold-refresh"].inputs["delete"] == "sudo snap refresh --unhold microk8s"
    assert steps["enable-dns"].inputs["create"].endswith("sudo microk8s enable dns")
    assert steps["enable-hostpath-storage"].inputs["create"].endswith("sudo microk8s enable hostpath-storage")
    assert steps["read-kubeconfig"].inputs["create"] == "sudo microk8s config"
    order = [("enable-dns", "hold-refresh"), ("enable-hostpath-storage", "enable-dns"),
             ("read-kubeconfig", "enable-hostpath-storage")]
    for step, before in order:
        assert steps[before].urn in steps[step].dependencies
    assert "enable-nvidia" not in steps, "the dev site's addon is already enabled"


def test_reading_the_kubeconfig_keeps_it_out_of_logs_and_state(dev_run):
    read = commands(dev_run)["read-kubeconfig"]
    assert read.options["additionalSecretOutputs"] == ["stdout"]
    assert read.inputs["logging"] == "none"


def test_setup_commands_only_run_on_create_so_a_rerun_runs_nothing(dev_run):
    for step in commands(dev_run).values():
        assert "update" not in step.inputs
        assert "triggers" not in step.inputs


def test_remote_microk8s_connects_over_ssh_with_the_secret_key():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"].update(host="gpu-box.lab", user="ops", port=2222, useSudo=False)
    config["gpu-tenancy:sshPrivateKey"] = SECRET
    program = run(config)
    steps = commands(program)
    assert {r.type for r in steps.values()} == {"command:remote:Command"}
    assert steps["read-kubeconfig"].inputs["connection"] == REDACTED
    connection = steps["read-kubeconfig"].raw_inputs["connection"]
    assert connection["host"] == "gpu-box.lab"
    assert connection["user"] == "ops"
    assert connection["port"] == 2222
    assert connection["privateKey"] == "offline-plan-placeholder"
    assert steps["read-kubeconfig"].inputs["create"] == "microk8s config"


def test_remote_microk8s_without_a_key_is_a_config_error():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "gpu-box.lab"
    with pytest.raises(ConfigError) as error:
        # As `pulumi up` runs it: no offline placeholder for the unset secret.
        run_program(config, stack="test", secret_placeholders=False)
    assert "sshPrivateKey" in error.value.keys


def test_a_secret_set_in_plain_text_is_refused():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "gpu-box.lab"
    config["gpu-tenancy:sshPrivateKey"] = "-----BEGIN OPENSSH PRIVATE KEY-----"
    with pytest.raises(ConfigError) as error:
        run(config)
    assert "--secret" in str(error.value)
    assert "BEGIN OPENSSH" not in str(error.value)


def test_the_nvidia_addon_is_enabled_with_a_pinned_operator_version_when_asked():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["enableNvidiaAddon"] = True
    steps = commands(run(config))
    assert steps["enable-nvidia"].inputs["create"].endswith(
        "sudo microk8s enable nvidia --gpu-operator-version v26.3.3")
    assert steps["enable-nvidia"].urn in steps["read-kubeconfig"].dependencies


def test_api_server_url_rewrites_the_kubeconfig_server():
    from components.host import _with_server
    from tools.mockrun import fake_kubeconfig

    rewritten = _with_server(fake_kubeconfig("microk8s", "https://10.0.0.10:16443"), "https://gpu-box.lab:16443")
    assert "https://gpu-box.lab:16443" in rewritten
    assert "10.0.0.10" not in rewritten


# --- EKS -----------------------------------------------------------------------------------------


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
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
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


# --- existing cluster ------------------------------------------------------------------------------


def test_existing_cluster_uses_the_secret_kubeconfig_and_context():
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"context": "gke-prod", "gpus": 4}}
    config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    config["gpu-tenancy:kubeconfig"] = SECRET
    program = run(config)
    provider = program.of_type("pulumi:providers:kubernetes")[0].inputs
    assert provider["kubeconfig"] == REDACTED
    assert provider["context"] == "gke-prod"
    assert not any(r.type.startswith(("command:", "aws:", "eks:")) for r in program.resources)
