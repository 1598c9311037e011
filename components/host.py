"""The host cluster: a MicroK8s GPU machine, an EKS cluster, or an existing cluster.

Whatever the kind, the component ends with a secret kubeconfig and ONE explicit Kubernetes
provider built from it; every Kubernetes resource of the platform uses that provider, never the
ambient kubeconfig of whoever runs ``pulumi up``. What the host kind lacks is added here (see
config/hosts.py): on EKS the EBS CSI driver and a default StorageClass. The provider waits for
the nodes and the storage driver, so no release, hook or Job starts on a cluster without nodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Optional

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s
import yaml
from pulumi_command import local, remote

from components.apiserver_audit import remove_audit_log_command, set_audit_log_command
from components.eks_network import EksNetwork, EksNetworkArgs
from components.eks_teardown import tenant_teardown
from components.gpu_operator import ADDON_CLUSTER_POLICY
from components.eks_resources import (
    EBS_CSI_ADDON, EBS_CSI_POLICY, EBS_CSI_PROVISIONER, EKS_GPU_AMI, EKS_SYSTEM_AMI, NODE_POLICIES,
    control_plane_log_group, ebs_csi_trust_policy, node_launch_template, service_role,
)
from components.node_pids import remove_kubelet_settings_command, set_kubelet_settings_command
from components.kubernetes_resources import STORAGE_CLASS, KubernetesObject
from config.certificates import bundle_expiry
from config.credential_lifetimes import MICROK8S_CERTIFICATES_DIR, MICROK8S_SERVING_CERTIFICATES
from config.hosts import (
    AUTOSCALER_NODE_RESOURCE_TAG, DEFAULT_STORAGE_CLASS_ANNOTATION, EKS_TAINT_EFFECTS, SYSTEM_POOL, host_profile,
    node_group_name_prefix,
)
from config.vocabulary import MICROK8S_ADDON_NAMESPACE
from config.model import Cluster
from config.model_host import (
    PID_EVICTION_THRESHOLD, STACK_TAG, SYSTEM_PID_RESERVE, EksHost, HostProfile, MicroK8sHost,
)
from config.system_pool_capacity import system_nodes_output
from config.vocabulary import (
    AUDIT_LOG_STEP, HOST_COMPONENT, KUBELET_ARGS_STEP, MANAGED_BY, NODE_PROFILE_LABEL, NVIDIA_ADDON_STEP,
)

# `microk8s enable nvidia` returns before its Helm release has necessarily created the ClusterPolicy.
ADDON_CHECK_ATTEMPTS = 30
ADDON_CHECK_INTERVAL_SECONDS = 10


@dataclass
class HostClusterArgs:
    cluster: Cluster
    # Sharing profile name -> ConfigMap key, for the label of GPU node groups that pick a profile.
    profile_keys: dict[str, str]
    ssh_private_key: Optional[pulumi.Input[str]] = None
    kubeconfig: Optional[pulumi.Input[str]] = None
    # What the host kind provides (config/hosts.py); derived from ``cluster`` when left out.
    host: Optional[HostProfile] = None
    # Per GPU node group the site's Cluster Autoscaler sizes, the GPU resources a node advertises that its instance
    # type does not say (config/capacity.py autoscaler_node_resources).
    autoscaler_node_resources: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


class HostCluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    node_groups: list[str]
    profile: HostProfile
    # Tenants' vCluster releases wait for these: the storage their volume claims need.
    tenant_prerequisites: list[pulumi.Resource]
    # The IP of the host cluster's DNS Service, which tenants' DNS forwards to.
    cluster_dns: pulumi.Output[str]
    # MicroK8s only: when its one-year certificates end (file name -> ISO 8601), which no kubeconfig shows.
    certificate_expiry: Optional[pulumi.Output[dict]]

    def __init__(self, name: str, args: HostClusterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(HOST_COMPONENT, name, None, opts)
        self.node_groups = []
        self.tenant_prerequisites = []
        self.certificate_expiry = None
        cluster = args.cluster
        self.profile = args.host or host_profile(cluster)
        context: Optional[str] = None
        # What the cluster must have before any Kubernetes object is created through the provider.
        host_ready: list[pulumi.Resource] = []
        if cluster.microk8s is not None:
            kubeconfig = self._microk8s(name, cluster.microk8s, cluster.pod_pids_limit, args.ssh_private_key)
        elif cluster.eks is not None:
            kubeconfig, host_ready = self._eks(name, cluster.eks, self.profile, args.profile_keys,
                                               cluster.pod_pids_limit, args.autoscaler_node_resources)
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
            opts=pulumi.ResourceOptions(parent=self, depends_on=host_ready),
        )
        if self.profile.creates_storage_class:
            self.tenant_prerequisites.append(self._default_storage_class(name, self.profile))
        dns = k8s.core.v1.Service.get(f"{name}-cluster-dns", self.profile.host_dns.service,
                                      opts=pulumi.ResourceOptions(parent=self, provider=self.provider))
        self.cluster_dns = dns.spec.apply(lambda spec: spec.cluster_ip)
        self.register_outputs({"kind": cluster.kind, "kubeconfig": self.kubeconfig, "nodeGroups": self.node_groups,
                               "storageClass": self.profile.storage_class,
                               "apiServerPort": self.profile.api_server_port,
                               "apiServerAddresses": list(self.profile.api_server_addresses),
                               "untranslatedServiceRanges": list(self.profile.untranslated_service_ranges),
                               "kubernetesVersion": cluster.kubernetes_version,
                               "podPidsLimit": cluster.pod_pids_limit, "systemPidReserve": SYSTEM_PID_RESERVE,
                               "systemMemoryReserve": (cluster.microk8s.system_reserved_memory
                                                       if cluster.microk8s is not None else None),
                               "pidEvictionThreshold": PID_EVICTION_THRESHOLD,
                               "systemNodes": system_nodes_output(cluster)})

    # --- MicroK8s -----------------------------------------------------------------------------

    def _microk8s(self, name: str, host: MicroK8sHost, pod_pids_limit: int,
                  ssh_private_key: Optional[pulumi.Input[str]]):
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
        # Before any addon, so the pods they start get the limit too; with it the PID and memory reserves and the
        # eviction thresholds (components/node_pids.py). A changed limit or reserve changes `create`, which
        # pulumi-command runs again as an update (no delete in between); destroy takes the flags out again.
        reserve = host.system_reserved_memory
        pids = run(KUBELET_ARGS_STEP, set_kubelet_settings_command(sudo, pod_pids_limit, reserve, ready),
                   delete=remove_kubelet_settings_command(sudo, reserve, ready), after=[hold])
        audit = []
        if host.audit_log.enabled:
            # Before any addon and anything of the platform, so the log holds every request that built the site; after
            # the process limits, so the two kubelite restarts do not overlap (components/apiserver_audit.py).
            audit.append(run(AUDIT_LOG_STEP, set_audit_log_command(sudo, host.audit_log, ready),
                             delete=remove_audit_log_command(sudo, ready), after=[pids]))
        # Addons are left enabled on destroy: storage and DNS may serve more than this platform.
        dns = run("enable-dns", f"{ready} && {sudo}microk8s enable dns", after=[pids, *audit])
        storage = run("enable-hostpath-storage", f"{ready} && {sudo}microk8s enable hostpath-storage", after=[dns])
        steps = [storage]
        if host.enable_nvidia_addon:
            steps.append(run(NVIDIA_ADDON_STEP,
                             f"{ready} && {sudo}microk8s enable nvidia "
                             f"--gpu-operator-version {host.nvidia_addon_operator_version} && "
                             f"{addon_operator_check(sudo)}", after=[storage]))
        read = run("read-kubeconfig", f"{sudo}microk8s config", after=steps, secret_stdout=True)
        # The API server's serving certificate lapses after a year and nothing on the host renews it
        # (config/credential_lifetimes.py); the kubeconfig holds only the CA, so its end is read here, in the clear
        # (every TLS client is shown it), for ops/expiry.py. A host where it cannot be read still deploys: the end is
        # then exported as unknown, which ops/expiry.py reports as due.
        certificates = " ".join(f"{MICROK8S_CERTIFICATES_DIR}/{file}" for file in MICROK8S_SERVING_CERTIFICATES)
        serving = run("read-serving-certificates", f"{sudo}cat {certificates} || true", after=steps)
        self.certificate_expiry = serving.stdout.apply(
            lambda text: bundle_expiry(text, MICROK8S_SERVING_CERTIFICATES))
        if host.api_server_url is None:
            return read.stdout
        return read.stdout.apply(lambda text: kubeconfig_with_server(text, host.api_server_url))

    # --- EKS ----------------------------------------------------------------------------------

    def _eks(self, name: str, host: EksHost, profile: HostProfile, profile_keys: dict[str, str],
             pod_pids_limit: int, node_resources: Mapping[str, Mapping[str, int]]):
        # An explicit AWS provider: cluster.eks.region decides, not the operator's ambient profile.
        tags = {**host.tags, STACK_TAG: pulumi.get_stack()}
        aws_provider = aws.Provider(f"{name}-aws", region=host.region,
                                    default_tags=aws.ProviderDefaultTagsArgs(tags=tags),
                                    opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, providers=[aws_provider])
        if host.creates_network:
            network = EksNetwork(f"{name}-network", EksNetworkArgs(
                cidr=host.vpc_cidr, availability_zones=host.availability_zones, cluster_name=host.name), opts=child)
            vpc_id, public_subnets, private_subnets = network.vpc_id, network.public_subnet_ids, \
                network.private_subnet_ids
        else:
            vpc_id, public_subnets, private_subnets = host.vpc_id, list(host.public_subnet_ids), \
                list(host.private_subnet_ids)

        node_role = service_role(f"{name}-node-role", "ec2.amazonaws.com", child)
        attachments = [aws.iam.RolePolicyAttachment(f"{name}-node-role-{arn.rsplit('/', 1)[1]}", role=node_role.name,
                                                    policy_arn=arn, opts=child) for arn in NODE_POLICIES]

        endpoint = host.api_endpoint
        logs = host.control_plane_logs
        log_group = control_plane_log_group(f"{name}-control-plane-logs", host.name, logs, child)
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
            endpoint_public_access=endpoint.public_access,
            public_access_cidrs=list(endpoint.public_access_cidrs) if endpoint.public_access else None,
            endpoint_private_access=endpoint.private_access,
            # Tenant NetworkPolicies are only enforced when the VPC CNI runs its policy agent.
            vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
            # IAM roles for service accounts: the EBS CSI controller's credentials.
            create_oidc_provider=True,
            # Both always stated, none as an empty list: a setting left out could keep whatever the cluster has.
            enabled_cluster_log_types=list(logs.types),
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=host.support_type.upper()),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[log_group] if log_group is not None else None)),
        )
        group_options = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=attachments))
        sizes = {SYSTEM_POOL: (host.system_node_group.instance_types, host.system_node_group.disk_size,
                               host.system_node_group.scaling)}
        sizes.update({group.name: (group.instance_types, group.disk_size, group.scaling)
                      for group in host.gpu_node_groups})
        sharing_profiles = {group.name: group.sharing_profile for group in host.gpu_node_groups}

        node_groups = []
        for pool in profile.node_pools or ():
            instance_types, disk_size, scaling = sizes[pool.name]
            resource = f"{name}-{'system' if pool.name == SYSTEM_POOL else f'gpu-{pool.name}'}"
            labels = dict(pool.labels)
            if sharing_profiles.get(pool.name) is not None:
                labels[NODE_PROFILE_LABEL] = profile_keys[sharing_profiles[pool.name]]
            template = node_launch_template(f"{resource}-template", disk_size, pod_pids_limit, tags, child)
            node_groups.append(eks.ManagedNodeGroup(
                resource,
                cluster=cluster,
                node_group_name_prefix=node_group_name_prefix(host.name, pool.name),
                node_role=node_role,
                ami_type=EKS_GPU_AMI if pool.gpu else EKS_SYSTEM_AMI,
                # pulumi-eks leaves a group with a launch template on the minor it was created with, and EKS
                # refuses the next cluster upgrade until every managed group runs the cluster's minor.
                version=host.kubernetes_version,
                instance_types=list(instance_types),
                # pulumi-eks would otherwise give the nodes every subnet of the cluster, public ones too.
                subnet_ids=private_subnets,
                launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                    id=template.id, version=template.latest_version.apply(str)),
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                    min_size=scaling.min_size, desired_size=scaling.desired_size, max_size=scaling.max_size),
                # The site's autoscaler owns the size once the group exists: `pulumi up` setting desiredSize again
                # would take away nodes running work.
                ignore_scaling_changes=scaling.autoscaled or None,
                # An empty group has no node for the autoscaler to look at: it reads these from EKS instead.
                tags={f"{AUTOSCALER_NODE_RESOURCE_TAG}{resource}": str(count)
                      for resource, count in node_resources.get(pool.name, {}).items()} or None,
                labels=labels,
                taints=[aws.eks.NodeGroupTaintArgs(key=taint.key, value=taint.value,
                                                   effect=EKS_TAINT_EFFECTS[taint.effect])
                        for taint in pool.taints] or None,
                opts=group_options,
            ))
            self.node_groups.append(pool.name)

        storage_driver = self._ebs_csi_driver(name, host, tags, cluster, node_groups, child, aws_provider)
        # On destroy, runs after every Kubernetes object is gone and before the nodes, the CSI driver,
        # the cluster and the VPC (components/eks_teardown.py).
        teardown = tenant_teardown(f"{name}-tenant-teardown", cluster.kubeconfig_json,
                                   [cluster, *node_groups, storage_driver], parent=self)
        return cluster.kubeconfig_json, [*node_groups, storage_driver, teardown]

    def _ebs_csi_driver(self, name: str, host: EksHost, tags: Mapping[str, str], cluster: eks.Cluster,
                        node_groups: list, child, aws_provider: aws.Provider):
        """The EBS CSI driver (the only way to provision EBS volumes), with its IAM role through IRSA.

        The volumes and snapshots it creates for the teams' claims are the driver's, not the program's: no default
        tag reaches them, so the site's ``tags`` are handed to the driver (beside the claim's namespace, which it
        tags each volume with).

        The addon's controller runs on the nodes, so it waits for them: an addon whose pods
        cannot start stays DEGRADED until its create times out. Its build is the site's pin
        (``cluster.eks.ebsCsiAddonVersion``), else the newest EKS offers for the cluster's Kubernetes
        version, looked up when the add-on is created; later lookups do not move it (a pin does).
        """
        version: pulumi.Input[str]
        if host.ebs_csi_addon_version is not None:
            version, ignore = host.ebs_csi_addon_version, []
        else:
            version = aws.eks.get_addon_version_output(
                addon_name=EBS_CSI_ADDON, kubernetes_version=host.kubernetes_version, most_recent=True,
                opts=pulumi.InvokeOptions(provider=aws_provider)).version
            ignore = ["addonVersion"]
        trust = pulumi.Output.all(cluster.oidc_provider_arn, cluster.oidc_issuer).apply(
            lambda args: ebs_csi_trust_policy(*args))
        role = aws.iam.Role(f"{name}-ebs-csi-role", assume_role_policy=trust, opts=child)
        attachment = aws.iam.RolePolicyAttachment(f"{name}-ebs-csi-role-policy", role=role.name,
                                                  policy_arn=EBS_CSI_POLICY, opts=child)
        return aws.eks.Addon(
            f"{name}-ebs-csi-driver",
            cluster_name=host.name,
            addon_name=EBS_CSI_ADDON,
            addon_version=version,
            service_account_role_arn=role.arn,
            configuration_values=json.dumps({"controller": {"extraVolumeTags": dict(sorted(tags.items()))}}),
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[cluster, attachment, *node_groups], ignore_changes=ignore,
                custom_timeouts=pulumi.CustomTimeouts(create="30m", update="30m"))),
        )

    def _default_storage_class(self, name: str, profile: HostProfile) -> KubernetesObject:
        return KubernetesObject(
            f"{name}-storage-class", STORAGE_CLASS,
            metadata={"name": profile.storage_class,
                      "labels": dict(MANAGED_BY),
                      "annotations": {DEFAULT_STORAGE_CLASS_ANNOTATION: "true"}},
            provisioner=EBS_CSI_PROVISIONER,
            parameters={"type": "gp3", "encrypted": "true"},
            # A volume is created in the zone its pod was scheduled to, not in a random one.
            volume_binding_mode="WaitForFirstConsumer",
            allow_volume_expansion=True,
            reclaim_policy="Delete",
            opts=pulumi.ResourceOptions(parent=self, provider=self.provider),
        )


def addon_operator_check(sudo: str) -> str:
    """Shell that fails, saying why, unless the nvidia addon's operator release really exists.

    The addon's enable script ignores Helm's exit code; without this check the failure shows
    up much later, as a ClusterPolicy patch that finds nothing to patch.
    """
    message = (f"microk8s enable nvidia finished, but no GPU Operator ClusterPolicy {ADDON_CLUSTER_POLICY} "
               f"appeared within {ADDON_CHECK_ATTEMPTS * ADDON_CHECK_INTERVAL_SECONDS}s: its Helm install failed. "
               f"Check '{sudo}microk8s helm list -n {MICROK8S_ADDON_NAMESPACE}', run "
               f"'{sudo}microk8s disable nvidia', fix the cause and run pulumi up again.")
    probe = f"{sudo}microk8s kubectl get clusterpolicies.nvidia.com {ADDON_CLUSTER_POLICY} >/dev/null 2>&1"
    return (f"attempt=0; until {probe}; do attempt=$((attempt+1)); "
            f"if [ $attempt -ge {ADDON_CHECK_ATTEMPTS} ]; then echo \"{message}\" >&2; exit 1; fi; "
            f"sleep {ADDON_CHECK_INTERVAL_SECONDS}; done")


def kubeconfig_with_server(kubeconfig: str, server: str) -> str:
    """Point every cluster entry of a kubeconfig at ``server`` (MicroK8s prints its internal IP)."""
    document = yaml.safe_load(kubeconfig)
    for entry in document.get("clusters") or []:
        entry.setdefault("cluster", {})["server"] = server
    return yaml.safe_dump(document, sort_keys=False)
