"""The AWS resources of an EKS host besides the cluster and its node groups: the nodes' IAM role and launch template,
the EBS CSI driver's trust, and the log group the control plane's logs go to.

Plain functions creating resources under the options the host component passes (its children, its AWS provider),
so each resource keeps the name and parent it has always had.
"""

from __future__ import annotations

import json
from typing import Mapping, Optional

import pulumi
import pulumi_aws as aws

from components.node_pids import eks_node_user_data
from config.model_host import EksControlPlaneLogs

EKS_GPU_AMI = "AL2023_x86_64_NVIDIA"
EKS_SYSTEM_AMI = "AL2023_x86_64_STANDARD"
NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
AL2023_ROOT_DEVICE = "/dev/xvda"
EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_ACCOUNT = "ebs-csi-controller-sa"
EBS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"


def service_role(name: str, service: str, opts: pulumi.ResourceOptions) -> aws.iam.Role:
    return aws.iam.Role(name, assume_role_policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }), opts=opts)


def node_launch_template(name: str, disk_size: int, pod_pids_limit: int, tags: Mapping[str, str],
                         opts: pulumi.ResourceOptions) -> aws.ec2.LaunchTemplate:
    """Node settings EKS' default launch template does not offer.

    Instance metadata needs IMDSv2 tokens and answers one network hop only: host-network
    agents (VPC CNI, EBS CSI node) still reach it, tenant pods (one hop further, behind the
    pod network) do not, so they cannot borrow the node role's credentials. A launch template
    excludes EKS' diskSize, so the root volume is sized here. The user data sets the kubelet's
    process limits: per pod, a reserve for the system and an eviction threshold
    (components/node_pids.py); a change makes a new template version, and EKS replaces the
    group's nodes with ones started from it. The site's tags go on the instances and their volumes, which neither
    the provider's default tags nor the node group's own reach: they are most of the site's bill.
    """
    return aws.ec2.LaunchTemplate(
        name,
        user_data=eks_node_user_data(pod_pids_limit),
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
        block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name=AL2023_ROOT_DEVICE,
            ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=disk_size, volume_type="gp3", encrypted="true", delete_on_termination="true"),
        )],
        tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=dict(tags))
                            for kind in ("instance", "volume")],
        opts=opts,
    )


def ebs_csi_trust_policy(oidc_provider_arn: str, oidc_issuer: str) -> str:
    """Only the EBS CSI controller's service account may assume the driver's role."""
    issuer = (oidc_issuer or "").removeprefix("https://")
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {f"{issuer}:sub": f"system:serviceaccount:kube-system:{EBS_CSI_ACCOUNT}",
                                           f"{issuer}:aud": "sts.amazonaws.com"}},
        }],
    })


def control_plane_log_group(name: str, cluster_name: str, logs: EksControlPlaneLogs,
                            opts: pulumi.ResourceOptions) -> Optional[aws.cloudwatch.LogGroup]:
    """The log group EKS writes the cluster's control plane logs to, made before the cluster (which must wait for
    it) so that it has the site's retention: EKS would otherwise create it keeping everything forever. Left in
    place by ``pulumi destroy``, as EKS leaves its own, so the audit trail outlives the cluster. None when the site
    sends no logs."""
    if not logs.types:
        return None
    return aws.cloudwatch.LogGroup(name, name=logs.log_group(cluster_name), retention_in_days=logs.retention_days,
                                   skip_destroy=True, opts=opts)
