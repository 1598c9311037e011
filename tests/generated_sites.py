"""Valid sites of every host kind and of shapes users wrote, made by ``python -m ops.new_site`` from the committed
stacks: the stack-wide tests of tests/test_program.py and tests/test_tenant_quota.py hold for them as for the
committed ones."""

from __future__ import annotations

import copy
import shutil

import pytest

from config.stack_file import PROJECT_DIR
from ops import new_site
from tests.conftest import stack_config
from tools.offline.mockrun import load_stack_file

# name -> (the committed stack it is made from, its --set assignments).
GENERATED_SITES = {
    "gen-ssh-oldest-kai": ("dev", ["cluster.microk8s.host=192.0.2.10", "cluster.microk8s.enableNvidiaAddon=true",
                                   "kaiScheduler.version=v0.16.0"]),
    "gen-kubeconfig": ("dev", ["cluster.kind=kubeconfig", "cluster.kubeconfig={context: gpu-prod, gpus: 4}",
                               "gpuOperator.mode=external", "ci.runner=[self-hosted, gpu-lab]",
                               "teams[3]={name: team-audio, resources: {gpu: {quota: 1, limit: 2}}}",
                               "organization.resources.gpu.quota=4",
                               # A default ephemeral-storage limit above the control plane's own 10Gi: the control
                               # plane's init container takes it, and the quota must hold it.
                               "vcluster.limitRange.defaultEphemeralStorage=16Gi",
                               "vcluster.limitRange.maxEphemeralStorage=32Gi"]),
    "gen-eks-own-vpc": ("eks", ["cluster.eks.region=eu-west-1", "cluster.eks.vpcId=vpc-0abc",
                                "cluster.eks.privateSubnetIds=[subnet-a, subnet-b]",
                                "cluster.eks.gpuNodeGroups[1]={name: big, instanceTypes: [g5.12xlarge], maxSize: 2, "
                                "sharingProfile: exclusive}", "gpuOperator.version=v26.7.0"]),
    # The box states its track: on one below 1.33 (the default assumes 1.30) the default operator is refused.
    "gen-microk8s-from-eks": ("eks", ["cluster.kind=microk8s", 'cluster.microk8s.kubernetesVersion="1.34"',
                                      "gpuOperator.mode=install",
                                      "kaiScheduler.version=v0.17.0", "vcluster.nodeLabels={}"]),
    "gen-eks-observed": ("eks", ["observability.prometheus=install"]),
    # Teams at the edges: a 63-character team name whose vCluster name (cut to 52) would end in '-', a 63-character
    # namespace, and a team that states its queue's cpu and memory instead of having them derived.
    "gen-edge-teams": ("dev", [f"teams[0].name={'team-' + 'a' * 46 + '-' + 'b' * 11}",
                               f"teams[1].namespace={'ns-' + 'c' * 60}",
                               "teams[2].resources.cpu={quota: 4000, limit: 8000}",
                               "teams[2].resources.memory={quota: 16000, limit: 32000}"]),
    # Every isolation tier on one EKS site of five GPU pools: two MIG models split differently, a time-sliced pool, an
    # exclusive team on a pool of its own profile, a team whose name starts with a digit (its vCluster name may not),
    # OIDC for one team only, and registries with a port, a path prefix and an IPv6 host, pulled on every start.
    "gen-eks-every-tier": ("eks", [
        'cluster.eks.kubernetesVersion="1.35"', "cluster.eks.autoscaler=cluster-autoscaler",
        "cluster.eks.gpuNodeGroups[1]={name: a100, instanceTypes: [p4d.24xlarge], maxSize: 1, desiredSize: 0, "
        "migConfig: all-balanced}",
        "cluster.eks.gpuNodeGroups[2]={name: h100, instanceTypes: [p5.48xlarge], maxSize: 1, desiredSize: 0, "
        "migConfig: all-1g.10gb}",
        "cluster.eks.gpuNodeGroups[3]={name: l40s, instanceTypes: [g6e.12xlarge], maxSize: 2}",
        "cluster.eks.gpuNodeGroups[4]={name: t4-sliced, instanceTypes: [g4dn.12xlarge], maxSize: 2, "
        "sharingProfile: time-sliced}",
        "organization.resources.gpu.quota=10",
        "teams[2]={name: 0-capped, vclusterName: capped, resources: {gpu: {quota: 0.5, limit: 1}}, "
        "isolation: {tier: memory-capped, nodePool: l40s}, vcluster: {podSecurity: restricted}}",
        "teams[3]={name: mig-a100, resources: {gpu: {quota: 3, limit: 6}}, "
        "isolation: {tier: mig, migProfile: 3g.20gb, nodePool: a100}}",
        "teams[4]={name: mig-h100, resources: {gpu: {quota: 2, limit: 7}}, "
        "isolation: {tier: mig, migProfile: 1g.10gb, nodePool: h100}}",
        "teams[5]={name: whole, resources: {gpu: {quota: 2, limit: 4}}, isolation: {tier: exclusive, nodePool: l40s}, "
        "vcluster: {access: {exposure: loadBalancer, domain: vc.example.com, "
        'oidc: {issuerUrl: "https://login.example.com", clientId: kubernetes, adminGroups: [whole-admins]}}}}',
        "teams[6]={name: sliced, resources: {gpu: {quota: 1, limit: 2}}, isolation: {nodePool: t4-sliced}}",
        'vcluster.allowedRegistries=[registry.local:5000/ml, "[fd00::1]:5000", docker.io/library, nvcr.io/nvidia]',
        "vcluster.alwaysPullImages=true"]),
    # A box that states its size, with teams whose vCluster settings differ: one at the oldest accepted chart with
    # restricted Pod Security, no NetworkPolicy and its own 4 cores and 8Gi for 40 pods (as many as fit at the default
    # request), one at another chart release with extra storage classes.
    "gen-box-team-caps": ("dev", [
        "cluster.microk8s.cpu=64", "cluster.microk8s.memory=256Gi",
        "teams[0].vcluster={version: 0.35.0, podSecurity: restricted, networkPolicy: false, "
        "resourceQuota: {cpu: 4, memory: 8Gi, pods: 40}}",
        "teams[1].vcluster={version: 0.36.0, storageClasses: [microk8s-hostpath, fast]}"]),
    # An existing cluster on its oldest supported Kubernetes that states its API server's port (the control planes'
    # egress opens that one alone), with the monitoring stack, the site's alert receiver and the teams' own.
    "gen-kubeconfig-alerting": ("dev", [
        "cluster.kind=kubeconfig", "gpuOperator.mode=install",
        'cluster.kubeconfig={gpus: 2, kubernetesVersion: "1.30", apiServerPort: 6443}',
        "teams[0].alerting={receiver: slack, slackChannel: '#nlp', alerts: all}",
        "teams[1].alerting={receiver: pagerduty, severity: warning}", "teams[2].alerting={receiver: webhook}",
        "observability={prometheus: install, alerting: {receiver: slack, heartbeat: true}, controlPlaneMetrics: true}"]),
    # State kept elsewhere than the program's SQLite: a team on a deployed etcd of three replicas (8Gi each; its
    # control plane is a Deployment then), and one whose control-plane volume is 10Gi, not 5Gi.
    "gen-box-own-store": ("dev", [
        "teams[0].vcluster={extraValues: {controlPlane: {"
        "backingStore: {database: {embedded: {enabled: false}}, etcd: {deploy: {enabled: true, statefulSet: "
        "{highAvailability: {replicas: 3}, persistence: {volumeClaim: {size: 8Gi}}}}}}}}}",
        "teams[1].vcluster={extraValues: {controlPlane: {statefulSet: {persistence: {volumeClaim: {size: 10Gi}}}}}}"]),
    # Every chart at its floor release with every feature on, on a site that mirrors every image and chart: MIG and
    # memory-capped teams, OIDC and load balancers, registries, alerting to the site's and the teams' receivers,
    # Grafana sign-in and time-aware fairness.
    "gen-eks-floors-mirrored": ("eks", [
        "gpuOperator.version=v24.9.0", "kaiScheduler.version=v0.16.0", "vcluster.version=0.35.0",
        'cluster.eks.kubernetesVersion="1.35"', "cluster.eks.autoscaler=cluster-autoscaler",
        "cluster.eks.gpuNodeGroups[1]={name: a100, instanceTypes: [p4d.24xlarge], maxSize: 1, desiredSize: 0, "
        "migConfig: all-1g.5gb}",
        "organization.resources.gpu.quota=8",
        "teams[0]={name: team-legal, resources: {gpu: {quota: 0.5, limit: 1}}, isolation: {tier: memory-capped, "
        "nodePool: gpu}, alerting: {receiver: slack, slackChannel: '#legal', alerts: all}, vcluster: {podSecurity: "
        "restricted, services: {nodePorts: 1, loadBalancers: 1}, access: {exposure: loadBalancer, "
        "host: legal.vc.example.com, loadBalancerSourceRanges: [203.0.113.0/24], oidc: {issuerUrl: "
        '"https://login.example.com/realms/ml", clientId: kubernetes, adminGroups: [legal-admins]}}}}',
        "teams[1]={name: team-support, resources: {gpu: {quota: 7, limit: 7}}, isolation: {tier: mig, "
        "migProfile: 1g.5gb, nodePool: a100}, alerting: {receiver: pagerduty}, vcluster: {access: {exposure: "
        'loadBalancer, domain: vc.example.com, oidc: {issuerUrl: "https://login.example.com/realms/ml", '
        "clientId: kubernetes, viewGroups: [support-view]}}}}",
        "vcluster.allowedRegistries=[ghcr.io/acme, nvcr.io/nvidia, docker.io/library]",
        "vcluster.alwaysPullImages=true",
        "mirrors={images: {nvcr.io: harbor.corp.example/nvcr, ghcr.io: harbor.corp.example/ghcr, "
        "docker.io: harbor.corp.example/hub, registry.k8s.io: harbor.corp.example/k8s, "
        "mirror.gcr.io: harbor.corp.example/gcr, quay.io: harbor.corp.example/quay}, charts: {"
        "gpu-operator: https://harbor.corp.example/chartrepo/nvidia, "
        "kai-scheduler: oci://harbor.corp.example/ghcr/kai-scheduler/kai-scheduler, "
        "vcluster: https://harbor.corp.example/chartrepo/loft, "
        "kube-prometheus-stack: oci://harbor.corp.example/charts}}",
        "observability={prometheus: install, chartVersion: 88.0.0, retention: 30d, storage: 100Gi, "
        "grafanaUrl: 'https://grafana.example.com', grafanaLogin: {clientId: grafana, "
        "authUrl: 'https://login.example.com/realms/ml/protocol/openid-connect/auth', "
        "tokenUrl: 'https://login.example.com/realms/ml/protocol/openid-connect/token', "
        "adminGroups: [platform-admins]}, "
        "alerting: {receiver: webhook, alerts: all, severity: warning, heartbeat: true}, "
        "timeAwareFairness: {enabled: true, windowSize: 3d, windowType: tumbling, halfLifePeriod: 12h, kValue: 2}}"]),
    # Mirrored images, and every team's vCluster pulling from the site's own registry (defaultImageRegistry): nothing
    # is pulled from mirror.gcr.io, which the site does not mirror.
    "gen-eks-team-registries": ("eks", [
        "mirrors.images={nvcr.io: harbor.corp.example/nvcr, ghcr.io: harbor.corp.example/ghcr, "
        "docker.io: harbor.corp.example/hub, registry.k8s.io: harbor.corp.example/k8s}",
        "vcluster.extraValues={controlPlane: {advanced: {defaultImageRegistry: harbor.corp.example/vcluster}}}"]),
    # MIG on four pools of three models, each split its own way (two teams on one balanced pool), beside a
    # time-sliced L40S pool shared by a memory-capped and a shared team.
    "gen-eks-mig-pools": ("eks", [
        'cluster.eks.kubernetesVersion="1.36"', "vcluster.nodeLabels={gpu-tenancy/role: gpu}",
        "cluster.eks.autoscaler=cluster-autoscaler",
        "cluster.eks.gpuNodeGroups[0]={name: a100s, instanceTypes: [p4d.24xlarge], maxSize: 2, desiredSize: 0, "
        "migConfig: all-1g.5gb}",
        "cluster.eks.gpuNodeGroups[1]={name: a100l, instanceTypes: [p4de.24xlarge], maxSize: 1, desiredSize: 0, "
        "migConfig: all-3g.40gb}",
        "cluster.eks.gpuNodeGroups[2]={name: h100, instanceTypes: [p5.48xlarge], maxSize: 1, desiredSize: 0, "
        "migConfig: all-balanced}",
        "cluster.eks.gpuNodeGroups[3]={name: h200, instanceTypes: [p5e.48xlarge], maxSize: 1, desiredSize: 0, "
        "migConfig: all-2g.35gb}",
        "cluster.eks.gpuNodeGroups[4]={name: l40s, instanceTypes: [g6e.48xlarge], minSize: 1, maxSize: 1, "
        "sharingProfile: time-sliced}",
        "organization.resources.gpu.quota=200",
        "teams[0]={name: small-slices, resources: {gpu: {quota: 50, limit: 112}}, "
        "isolation: {tier: mig, migProfile: 1g.5gb, nodePool: a100s}}",
        "teams[1]={name: big-slices, resources: {gpu: {quota: 12, limit: 24}}, "
        "isolation: {tier: mig, migProfile: 3g.40gb, nodePool: a100l}}",
        "teams[2]={name: balanced-1g, resources: {gpu: {quota: 8, limit: 16}}, "
        "isolation: {tier: mig, migProfile: 1g.10gb, nodePool: h100}}",
        "teams[3]={name: balanced-3g, resources: {gpu: {quota: 12, limit: 24}}, "
        "isolation: {tier: mig, migProfile: 3g.40gb, nodePool: h100}}",
        "teams[4]={name: h200-2g, resources: {gpu: {quota: 20, limit: 48}}, "
        "isolation: {tier: mig, migProfile: 2g.35gb, nodePool: h200}}",
        "teams[5]={name: capped, resources: {gpu: {quota: 4, limit: 8}}, "
        "isolation: {tier: memory-capped, nodePool: l40s}}",
        "teams[6]={name: shared, resources: {gpu: {quota: 4, limit: 8}}, isolation: {nodePool: l40s}}"]),
    # 42 teams of mixed quotas (a zero one among them), limits, over-quota weights and priorities, some with their
    # own namespace quota.
    "gen-kubeconfig-42-teams": ("dev", [
        "cluster.kind=kubeconfig", "gpuOperator.mode=install",
        'cluster.kubeconfig={gpus: 16, kubernetesVersion: "1.34", '
        "apiServerPort: 6443}", "organization.resources.gpu={quota: 16, limit: 32, overQuotaWeight: 2}",
        "teams=[" + ", ".join(
            "{name: t%02d, priority: %d, resources: {gpu: {quota: %s, limit: %s, overQuotaWeight: %d}}%s}" % (
                n, (50, 100, 150, 200)[n % 4], ("0.25", "0.5", "0.375", "0")[n % 4], ("1", "2", "1.5", "-1")[n % 4],
                n % 3, ", vcluster: {resourceQuota: {pods: 20, cpu: 4, memory: 8Gi}}" if n % 5 == 0 else "")
            for n in range(42)) + "]"]),
    # RKE2 by kubeconfig, stating its DNS (RKE2's Service and pod labels, NodeLocal DNSCache on the link-local address
    # and the Service's), its storage class and its API server's port and three servers' addresses.
    "gen-kubeconfig-rke2-dns": ("dev", [
        "cluster.kind=kubeconfig", "gpuOperator.mode=external", "gpuOperator.namespace=gpu-operator",
        'cluster.kubeconfig={context: rke2-prod, gpus: 8, kubernetesVersion: "1.33", apiServerPort: 6443, '
        "apiServerAddresses: [10.20.0.10/32, 10.20.0.11/32, 10.20.0.12/32], "
        "storageClass: local-path, dns: {service: kube-system/rke2-coredns-rke2-coredns, "
        "podLabels: {app.kubernetes.io/instance: rke2-coredns, k8s-app: kube-dns}, "
        "nodeLocalAddresses: [169.254.20.10, 10.43.0.10]}}",
        "organization.resources.gpu.quota=8", "teams[0].resources.gpu={quota: 4, limit: 8}",
        "teams[1].resources.gpu={quota: 2, limit: 8}", "teams[2].resources.gpu={quota: 2, limit: 8}"]),
    # The EKS site cloned to another region and organisation on the newest Kubernetes a site may state, over three
    # zones of another private range.
    "gen-eks-apac-newest": ("eks", [
        "cluster.eks.region=ap-southeast-2", "aws:region=ap-southeast-2", "cluster.eks.name=gpu-apac",
        'cluster.eks.kubernetesVersion="1.37"', "cluster.eks.vpcCidr=172.20.0.0/16", "cluster.eks.availabilityZones=3",
        "organization.name=apac-ml", "organization.displayName=APAC ML",
        "cluster.eks.systemNodeGroup={instanceTypes: [m6i.xlarge], minSize: 2, desiredSize: 2, maxSize: 4, "
        "diskSize: 80}",
        "cluster.eks.ebsCsiAddonVersion=v1.50.1-eksbuild.2"]),
    # The oldest Kubernetes, with teams choosing their nodes: one by a label of its own pool, one by pool, one
    # everywhere. Its nodes run containerd without CDI, so the newest GPU Operator whose device plugin also sets
    # NVIDIA_VISIBLE_DEVICES (config/load_operators.py).
    "gen-eks-oldest-node-labels": ("eks", [
        'cluster.eks.kubernetesVersion="1.30"', "gpuOperator.version=v25.3.4", "vcluster.nodeLabels={gpu-tenancy/role: gpu}",
        "cluster.eks.autoscaler=cluster-autoscaler",
        "cluster.eks.gpuNodeGroups[0]={name: l4, instanceTypes: [g6.xlarge], maxSize: 4, minSize: 1, "
        "labels: {team: research}}",
        "cluster.eks.gpuNodeGroups[1]={name: a10g, instanceTypes: [g5.xlarge], maxSize: 2}",
        "organization.resources.gpu.quota=6",
        "teams[0].vcluster.nodeLabels={team: research}", "teams[1].vcluster.nodeLabels={gpu-tenancy/pool: a10g}",
        "teams[2]={name: everywhere, resources: {gpu: {quota: 1, limit: 2}}, vcluster: {nodeLabels: {}}}"]),
    # Control-plane and deployed-etcd claim templates of the site's own, with the monitoring stack, the teams'
    # receivers and time-aware fairness.
    "gen-box-claim-templates": ("dev", [
        "teams[0].vcluster={extraValues: {controlPlane: {statefulSet: {persistence: {volumeClaimTemplates: ["
        "{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 5Gi}}}}, "
        "{metadata: {name: scratch}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 20Gi}}}}"
        "]}}}}}",
        "teams[1].vcluster={extraValues: {controlPlane: {backingStore: {database: {embedded: {enabled: false}}, "
        "etcd: {deploy: {enabled: true, statefulSet: {persistence: {volumeClaimTemplates: [{metadata: {name: data}, "
        "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 12Gi}}}}]}}}}}}}}",
        "teams[0].alerting={receiver: slack, slackChannel: '#nlp', alerts: all, severity: warning}",
        "teams[1].alerting={receiver: pagerduty}", "teams[2].alerting={receiver: webhook, severity: critical}",
        "observability={prometheus: install, namespace: observability, grafana: false, alerting: {receiver: slack}, "
        "timeAwareFairness: {enabled: true, windowSize: 2w, windowType: tumbling, kValue: 0.5}, retention: 4w}"]),
    # Scheduled snapshots: a lab box's to a MinIO on its LAN every 6 hours, four kept, and an EKS site's to S3.
    "gen-box-backed-up": ("dev", ["backup={url: s3://lab-backups/gpu, endpoint: 'http://192.168.1.20:9000', "
                                  "region: us-east-1, every: 6h, keep: 4}"]),
    "gen-eks-backed-up": ("eks", ["backup={url: s3://rag-platform-backups/eks, region: us-east-2}"]),
}
SITES = {}


@pytest.fixture(scope="session")
def generated_sites(tmp_path_factory) -> dict:
    project = tmp_path_factory.mktemp("sites")
    for path in PROJECT_DIR.glob("Pulumi.*.yaml"):
        shutil.copy(path, project)
    for site, (source, sets) in GENERATED_SITES.items():
        argv = [site, "--from", source, "--project-dir", str(project)]
        for assignment in sets:
            argv += ["--set", assignment]
        assert new_site.main(argv) == 0, f"ops.new_site could not write {site}"
        SITES[site] = load_stack_file(site, project)
    return SITES


def site_config(stack: str) -> dict:
    return copy.deepcopy(SITES[stack]) if stack in SITES else stack_config(stack)
