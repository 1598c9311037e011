"""The host cluster: a MicroK8s GPU machine, an EKS cluster, or an existing cluster.

Whatever the kind, the component ends with a secret kubeconfig and ONE explicit Kubernetes
provider built from it; every Kubernetes resource of the platform uses that provider, never the
ambient kubeconfig of whoever runs ``pulumi up``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s
import yaml
from pulumi_command import local, remote

from components.eks_network import EksNetwork, EksNetworkArgs
from config import sharing
from config.load import POOL_LABEL
from config.model import Cluster, EksHost, MicroK8sHost

GPU_TAINT_KEY = "nvidia.com/gpu"
SYSTEM_POOL = "system"
EKS_GPU_AMI = "AL2023_x86_64_NVIDIA"
EKS_SYSTEM_AMI = "AL2023_x86_64_STANDARD"
NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)


@dataclass
class HostClusterArgs:
    cluster: Cluster
    # Sharing profile name -> ConfigMap key, for the label of GPU node groups that pick a profile.
    profile_keys: dict[str, str]
    ssh_private_key: Optional[pulumi.Input[str]] = None
    kubeconfig: Optional[pulumi.Input[str]] = None


class HostCluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    node_groups: list[str]

    def __init__(self, name: str, args: HostClusterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gpu-tenancy:platform:HostCluster", name, None, opts)
        self.node_groups = []
        cluster = args.cluster
        context: Optional[str] = None
        if cluster.microk8s is not None:
            kubeconfig = self._microk8s(name, cluster.microk8s, args.ssh_private_key)
        elif cluster.eks is not None:
            kubeconfig = self._eks(name, cluster.eks, args.profile_keys)
        else:
            assert cluster.kubeconfig is not None and args.kubeconfig is not None
            kubeconfig = pulumi.Output.secret(args.kubeconfig)
            context = cluster.kubeconfig.context
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            context=context,
            # Server-side apply lets the platform patch objects it does not own (ClusterPolicy).
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig, "nodeGroups": self.node_groups})

    # --- MicroK8s -----------------------------------------------------------------------------

    def _microk8s(self, name: str, host: MicroK8sHost, ssh_private_key: Optional[pulumi.Input[str]]):
        sudo = "sudo " if host.use_sudo else ""
        connection = None
        if host.remote:
            connection = remote.ConnectionArgs(host=host.host, user=host.user, port=host.port,
                                               private_key=pulumi.Output.secret(ssh_private_key))

        def run(step: str, create: str, *, delete: Optional[str] = None, after=(), secret_stdout: bool = False):
            options = pulumi.ResourceOptions(parent=self, depends_on=list(after),
                                             additional_secret_outputs=["stdout"] if secret_stdout else None)
            if connection is not None:
                return remote.Command(f"{name}-{step}", connection=connection, create=create, delete=delete,
                                      logging=remote.Logging.NONE if secret_stdout else None, opts=options)
            return local.Command(f"{name}-{step}", create=create, delete=delete,
                                 logging=local.Logging.NONE if secret_stdout else None, opts=options)

        # Each step runs once, when created: re-running `pulumi up` with the same config runs nothing.
        hold = run("hold-refresh", f"{sudo}snap refresh --hold microk8s",
                   delete=f"{sudo}snap refresh --unhold microk8s")
        ready = f"{sudo}microk8s status --wait-ready --timeout 600 >/dev/null"
        # Addons are left enabled on destroy: storage and DNS may serve more than this platform.
        dns = run("enable-dns", f"{ready} && {sudo}microk8s enable dns", after=[hold])
        storage = run("enable-hostpath-storage", f"{ready} && {sudo}microk8s enable hostpath-storage", after=[dns])
        steps = [storage]
        if host.enable_nvidia_addon:
            steps.append(run("enable-nvidia",
                             f"{ready} && {sudo}microk8s enable nvidia "
                             f"--gpu-operator-version {host.nvidia_addon_operator_version}", after=[storage]))
        read = run("read-kubeconfig", f"{sudo}microk8s config", after=steps, secret_stdout=True)
        if host.api_server_url is None:
            return read.stdout
        return read.stdout.apply(lambda text: _with_server(text, host.api_server_url))

    # --- EKS ----------------------------------------------------------------------------------

    def _eks(self, name: str, host: EksHost, profile_keys: dict[str, str]):
        # An explicit AWS provider: cluster.eks.region decides, not the operator's ambient profile.
        aws_provider = aws.Provider(f"{name}-aws", region=host.region, opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, providers=[aws_provider])
        if host.creates_network:
            network = EksNetwork(f"{name}-network", EksNetworkArgs(
                cidr=host.vpc_cidr, availability_zones=host.availability_zones, cluster_name=host.name), opts=child)
            vpc_id, public_subnets, private_subnets = network.vpc_id, network.public_subnet_ids, \
                network.private_subnet_ids
        else:
            vpc_id, public_subnets, private_subnets = host.vpc_id, list(host.public_subnet_ids), \
                list(host.private_subnet_ids)

        node_role = aws.iam.Role(f"{name}-node-role", assume_role_policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                           "Action": "sts:AssumeRole"}],
        }), opts=child)
        attachments = [aws.iam.RolePolicyAttachment(f"{name}-node-role-{arn.rsplit('/', 1)[1]}", role=node_role.name,
                                                    policy_arn=arn, opts=child) for arn in NODE_POLICIES]

        cluster = eks.Cluster(
            f"{name}-eks",
            name=host.name,
            version=host.kubernetes_version,
            skip_default_node_group=True,
            authentication_mode=eks.AuthenticationMode.API,
            vpc_id=vpc_id,
            public_subnet_ids=public_subnets or None,
            private_subnet_ids=private_subnets or None,
            node_associate_public_ip_address=False,
            # Tenant NetworkPolicies are only enforced when the VPC CNI runs its policy agent.
            vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
            opts=child,
        )
        group_options = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=attachments))

        def node_group(pool: str, ami_type: str, instance_types, disk_size: int, scaling, labels: dict, taints=None):
            eks.ManagedNodeGroup(
                f"{name}-{'system' if pool == SYSTEM_POOL else f'gpu-{pool}'}",
                cluster=cluster,
                node_group_name_prefix=f"{host.name}-{pool}-",
                node_role=node_role,
                ami_type=ami_type,
                instance_types=list(instance_types),
                disk_size=disk_size,
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                    min_size=scaling.min_size, desired_size=scaling.desired_size, max_size=scaling.max_size),
                labels={POOL_LABEL: pool, **labels},
                taints=taints,
                opts=group_options,
            )
            self.node_groups.append(pool)

        system = host.system_node_group
        node_group(SYSTEM_POOL, EKS_SYSTEM_AMI, system.instance_types, system.disk_size, system.scaling, {})
        for group in host.gpu_node_groups:
            labels = dict(group.labels)
            if group.sharing_profile is not None:
                labels[sharing.NODE_PROFILE_LABEL] = profile_keys[group.sharing_profile]
            node_group(group.name, EKS_GPU_AMI, group.instance_types, group.disk_size, group.scaling, labels,
                       taints=[aws.eks.NodeGroupTaintArgs(key=GPU_TAINT_KEY, value="true", effect="NO_SCHEDULE")])
        return cluster.kubeconfig_json


def _with_server(kubeconfig: str, server: str) -> str:
    """Point every cluster entry of a kubeconfig at ``server`` (MicroK8s prints its internal IP)."""
    document = yaml.safe_load(kubeconfig)
    for entry in document.get("clusters") or []:
        entry.setdefault("cluster", {})["server"] = server
    return yaml.safe_dump(document, sort_keys=False)
