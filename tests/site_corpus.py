"""A corpus of stack configs, valid and broken, for the tests that hold the loader and the schema together.

The valid sites are the committed stacks and the three a new user wrote first (issue 21): an EKS site in
another region with two GPU pools and six teams, an existing cluster with twelve lab teams at 0.25 GPU and
an external Prometheus, and a one-team lab box (also backed up to a MinIO on its LAN). Each broken site is a
valid one with a few changes.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from config.stack_file import PROJECT_DIR, read_stack_file
from config.vocabulary import PROJECT_PREFIX, project_config


def _stack(name: str) -> dict[str, Any]:
    return project_config(read_stack_file(PROJECT_DIR / f"Pulumi.{name}.yaml")["config"])


def eks_two_pools() -> dict[str, Any]:
    groups = [{"name": "a10g", "instanceTypes": ["g5.xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 2},
              {"name": "l4", "instanceTypes": ["g6.xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 4,
               "sharingProfile": "time-sliced"}]
    teams = [{"name": f"team-{n}", "resources": {"gpu": {"quota": 0.5, "limit": 2}}} for n in range(6)]
    teams[5]["vcluster"] = {"nodeLabels": {"gpu-tenancy/pool": "l4"}}
    return {"cluster": {"kind": "eks", "eks": {"name": "gpu-eu", "region": "eu-west-1", "kubernetesVersion": "1.33",
                                               "gpuNodeGroups": groups}},
            "gpuOperator": {"mode": "install", "version": "v26.3.3"},
            "kaiScheduler": {"version": "v0.16.4", "gpuSharing": True},
            "organization": {"name": "eu-org", "resources": {"gpu": {"quota": 3, "limit": -1}}},
            "teams": teams, "vcluster": {"version": "0.36.1"}}


def existing_cluster_lab() -> dict[str, Any]:
    teams = [{"name": f"lab-{n:02d}", "resources": {"gpu": {"quota": 0.25, "limit": 1}}} for n in range(12)]
    return {"cluster": {"kind": "kubeconfig", "kubeconfig": {"gpus": 4, "storageClass": "standard"}},
            "gpuOperator": {"mode": "external", "namespace": "nvidia-gpu"},
            "organization": {"name": "labs", "resources": {"gpu": {"quota": 3, "limit": -1}}},
            "teams": teams, "vcluster": {"podSecurity": "restricted"},
            "observability": {"prometheus": "external", "namespace": "monitoring",
                              "external": {"releaseLabel": "kube-prometheus-stack",
                                           "url": "http://prometheus-operated.monitoring:9090"},
                              "timeAwareFairness": {"enabled": True, "windowSize": "3d"}}}


def one_team_box() -> dict[str, Any]:
    return {"cluster": {"kind": "microk8s"}, "gpuOperator": {"mode": "microk8s-addon"},
            "organization": {"name": "box"}, "teams": [{"name": "solo"}]}


def backed_up_box() -> dict[str, Any]:
    """The one-team box, snapshotted to a MinIO on its LAN (gpu-tenancy:backup, every key set)."""
    return {**one_team_box(), "backup": {"url": "s3://lab-backups/gpu", "endpoint": "http://192.168.1.20:9000",
                                         "region": "us-east-1", "every": "6h", "keep": 4}}


VALID_SITES: dict[str, Callable[[], dict[str, Any]]] = {
    "dev": lambda: _stack("dev"), "eks": lambda: _stack("eks"), "eks-two-pools": eks_two_pools,
    "existing-cluster-lab": existing_cluster_lab, "one-team-box": one_team_box, "backed-up-box": backed_up_box,
    # An empty opt-in block, as a trial site wrote it: no backup, for the loader and the schema alike.
    "box-with-an-empty-backup-block": lambda: {**one_team_box(), "backup": {}},
}


def _set(config: dict[str, Any], path: str, value: Any) -> None:
    steps = [int(step) if step.isdigit() else step for step in path.replace("[", ".").replace("]", "").split(".")]
    node = config
    for step in steps[:-1]:
        node = node[step] if isinstance(step, int) else node.setdefault(step, {})
    if value is REMOVE:
        del node[steps[-1]]
    else:
        node[steps[-1]] = value


REMOVE = object()

# name -> (valid site, changes). Every one is refused by the loader.
BROKEN: dict[str, tuple[str, dict[str, Any]]] = {
    # single-field rules
    "kai latest": ("dev", {"kaiScheduler.version": "latest"}),
    "kai below the floor": ("dev", {"kaiScheduler.version": "v0.15.2"}),
    "kai without v": ("dev", {"kaiScheduler.version": "0.16.4"}),
    "vcluster with v": ("dev", {"vcluster.version": "v0.36.1"}),
    "gpu group named system": ("eks", {"cluster.eks.gpuNodeGroups[0].name": "system"}),
    "team named yes": ("dev", {"teams[0].name": "yes"}),
    "namespace read as a date": ("dev", {"teams[0].namespace": "2024-1-5"}),
    "eks block under microk8s": ("dev", {"cluster.eks": {"region": "us-east-2"}}),
    "microk8s block under eks": ("eks", {"cluster.microk8s": {"gpus": 1}}),
    "eks kind without its block": ("dev", {"cluster.kind": "eks", "gpuOperator.mode": "install"}),
    "external without releaseLabel": ("existing-cluster-lab", {"observability.external": {"url": "http://p:9090"}}),
    "external block with install": ("dev", {"observability": {"prometheus": "install",
                                                              "external": {"releaseLabel": "x"}}}),
    "grafana with external": ("existing-cluster-lab", {"observability.grafana": False}),
    "empty config": ("dev", {"cluster": REMOVE, "organization": REMOVE, "teams": REMOVE}),
    "no teams": ("dev", {"teams": []}),
    "no gpu groups": ("eks", {"cluster.eks.gpuNodeGroups": []}),
    "reserved team name": ("dev", {"teams[0].name": "default-queue"}),
    "reserved org name": ("dev", {"organization.name": "default-parent-queue"}),
    "vcluster name like a device list": ("dev", {"teams[0].vclusterName": "x-shared-gpu-3"}),
    "vcluster name starting with a digit": ("dev", {"teams[0].vclusterName": "9nlp"}),
    "team name not a label": ("dev", {"teams[0].name": "Team_NLP"}),
    "negative quota": ("dev", {"teams[0].resources.gpu.quota": -2}),
    "priority as text": ("dev", {"teams[0].priority": "high"}),
    "bad quantity": ("dev", {"vcluster.resourceQuota.cpu": "-4"}),
    "negative number quantity": ("dev", {"vcluster.limitRange.defaultCpu": -1}),
    "ssh port out of range": ("dev", {"cluster.microk8s.port": 70000}),
    "api server url not https": ("dev", {"cluster.microk8s.apiServerUrl": "http://box:16443"}),
    "kubernetes version unquoted": ("eks", {"cluster.eks.kubernetesVersion": 1.33}),
    "kubernetes version with patch": ("eks", {"cluster.eks.kubernetesVersion": "1.33.2"}),
    "addon version no build": ("eks", {"cluster.eks.ebsCsiAddonVersion": "v1.50.1"}),
    "cidr not a network": ("eks", {"cluster.eks.vpcCidr": "ten-dot-zero"}),
    "api endpoint allowing a bare address": ("eks", {"cluster.eks.apiEndpoint": {"publicAccessCidrs": ["ten"]}}),
    "api endpoint allowing nobody": ("eks", {"cluster.eks.apiEndpoint": {"publicAccessCidrs": []}}),
    "api endpoint as a word": ("eks", {"cluster.eks.apiEndpoint": {"privateAccess": "yes"}}),
    "system group desired zero": ("eks", {"cluster.eks.systemNodeGroup": {"minSize": 0, "desiredSize": 0}}),
    "storage class with capitals": ("existing-cluster-lab", {"cluster.kubeconfig.storageClass": "Fast_SSD"}),
    "release label with a space": ("existing-cluster-lab", {"observability.external.releaseLabel": "my prom"}),
    "url without scheme": ("existing-cluster-lab", {"observability.external.url": "prometheus:9090"}),
    "duration KAI refuses": ("existing-cluster-lab", {"observability.timeAwareFairness.windowSize": "3 days"}),
    "team cpu short of its pods": ("dev", {"teams[0].vcluster": {"resourceQuota": {"cpu": "2"}}}),
    "idle percent above 100": ("dev", {"observability.alerts": {"idleUtilisationPercent": 150}}),
    "chart version with v": ("dev", {"observability": {"prometheus": "install", "chartVersion": "v88.5.3"}}),
    "addon namespace changed": ("dev", {"gpuOperator.namespace": "gpu-operator"}),
    "unknown key": ("dev", {"teams[0].nmae": "typo"}),
    "block written empty": ("dev", {"cluster.microk8s": None}),
    "value written empty": ("dev", {"teams[0].priority": None}),
    "required value written empty": ("dev", {"teams[1].name": None}),
    "top-level key written empty": ("dev", {"vcluster": None}),
    "list item written empty": ("dev", {"teams[2]": None}),
    "misplaced key": ("dev", {"teams[0].gpu": {"quota": 0.1}}),
    "pod security none": ("dev", {"vcluster.podSecurity": "none"}),
    "empty runner list": ("dev", {"ci": {"runner": []}}),
    "backup onto the control plane's volume": ("dev", {"backup": {"url": "container:///data/snapshot.tar.gz"}}),
    "backup with a query": ("dev", {"backup": {"url": "s3://lab-backups/gpu?url=aHR0cDovL21pbmlv"}}),
    "backup without a url": ("dev", {"backup": {"keep": 3}}),
    "backup every five hours": ("dev", {"backup": {"url": "s3://lab-backups/gpu", "every": "5h"}}),
    "backup keeping none": ("dev", {"backup": {"url": "s3://lab-backups/gpu", "keep": 0}}),
    "backup endpoint without region": ("dev", {"backup": {"url": "s3://lab-backups/gpu",
                                                          "endpoint": "http://192.168.1.20:9000"}}),
    "backup endpoint without scheme": ("dev", {"backup": {"url": "s3://lab-backups/gpu", "endpoint": "minio:9000"}}),
    "alerting without installing": ("dev", {"observability.alerting": {"receiver": "slack"}}),
    "alert scope without receiver": ("dev", {"observability": {"prometheus": "install",
                                                               "alerting": {"alerts": "all"}}}),
    "alert severity without receiver": ("dev", {"observability": {"prometheus": "install",
                                                                  "alerting": {"severity": "critical"}}}),
    "slack channel for a webhook": ("dev", {"observability": {"prometheus": "install", "alerting": {
        "receiver": "webhook", "slackChannel": "#gpu"}}}),
    # cross-field rules (the schema leaves them to the loader)
    "control-plane metrics on microk8s": ("dev", {"observability": {"prometheus": "install",
                                                                    "controlPlaneMetrics": True}}),
    "quota above the org's": ("dev", {"teams[0].resources.gpu.quota": 0.9}),
    "limit below its quota": ("dev", {"teams[0].resources.gpu": {"quota": 0.3, "limit": 0.2}}),
    "unlimited team quota under a finite org": ("dev", {"teams[0].resources.gpu": {"quota": -1, "limit": -1}}),
    "limit on an unlimited quota": ("dev", {"organization.resources.gpu": {"quota": -1, "limit": 2}}),
    "duplicate team": ("dev", {"teams[1].name": "team-nlp"}),
    "team named like the org": ("dev", {"teams[0].name": "ml-org"}),
    "team in the operator's namespace": ("dev", {"teams[0].namespace": "gpu-operator-resources"}),
    "team in kube-system": ("dev", {"teams[0].namespace": "kube-system"}),
    "derived vcluster name like a device list": ("dev", {"teams[0].name": "t-shared-gpu-1"}),
    "derived vcluster name starting with a digit": ("dev", {"teams[0].name": "0-nlp"}),
    "min above max": ("eks", {"cluster.eks.gpuNodeGroups[0].minSize": 2}),
    "duplicate gpu group": ("eks-two-pools", {"cluster.eks.gpuNodeGroups[1].name": "a10g",
                                              "teams[5].vcluster": REMOVE}),
    "vpc without subnets": ("eks", {"cluster.eks.vpcId": "vpc-1"}),
    "subnets without vpc": ("eks", {"cluster.eks.privateSubnetIds": ["subnet-1"]}),
    "cidr too small": ("eks", {"cluster.eks.vpcCidr": "10.0.0.0/24"}),
    "cluster name past a node group name": ("eks", {"cluster.eks.name": "gpu-tenancy-" + "x" * 18}),
    "pool name past a node group name": ("eks-two-pools", {"cluster.eks.gpuNodeGroups[1].name": "l4-" + "x" * 27,
                                                           "teams[5].vcluster": REMOVE}),
    "cidr with host bits": ("eks", {"cluster.eks.vpcCidr": "10.0.0.1/16"}),
    "cidr outside the private ranges": ("eks", {"cluster.eks.vpcCidr": "198.18.0.0/16"}),
    "api endpoint address without prefix": ("eks", {"cluster.eks.apiEndpoint": {
        "publicAccessCidrs": ["203.0.113.7"]}}),
    "api endpoint block with host bits": ("eks", {"cluster.eks.apiEndpoint": {
        "publicAccessCidrs": ["203.0.113.7/24"]}}),
    "api endpoint ipv6 block": ("eks", {"cluster.eks.apiEndpoint": {"publicAccessCidrs": ["2001:db8::/32"]}}),
    "api endpoint address out of range": ("eks", {"cluster.eks.apiEndpoint": {
        "publicAccessCidrs": ["203.0.113.300/32"]}}),
    "load balancer range past its family": ("eks", {"vcluster.access": {
        "exposure": "loadBalancer", "domain": "gpu.example.com", "loadBalancerSourceRanges": ["10.0.0.0/40"]}}),
    "no api endpoint at all": ("eks", {"cluster.eks.apiEndpoint": {"publicAccess": False, "privateAccess": False}}),
    "addresses for no public endpoint": ("eks", {"cluster.eks.apiEndpoint": {
        "publicAccess": False, "publicAccessCidrs": ["203.0.113.0/24"]}}),
    "public-only endpoint shutting out the created vpc's nodes": ("eks", {"cluster.eks.apiEndpoint": {
        "privateAccess": False, "publicAccessCidrs": ["203.0.113.0/24"]}}),
    "load balancer range not a block": ("eks", {"vcluster.access": {
        "exposure": "loadBalancer", "domain": "gpu.example.com", "loadBalancerSourceRanges": ["office"]}}),
    "pool label by hand": ("eks", {"cluster.eks.gpuNodeGroups[0].labels": {"gpu-tenancy/pool": "x"}}),
    "addon mode on eks": ("eks", {"gpuOperator.mode": "microk8s-addon"}),
    "addon enabled with install": ("dev", {"cluster.microk8s.enableNvidiaAddon": True, "gpuOperator.mode": "install"}),
    "driver on eks": ("eks", {"gpuOperator.driverEnabled": True}),
    "fairness with prometheus off": ("dev", {"observability.timeAwareFairness": {"enabled": True}}),
    "fairness external without url": ("existing-cluster-lab", {"observability.external.url": REMOVE}),
    "monitoring in a team namespace": ("existing-cluster-lab", {"observability.namespace": "vcluster-lab-00"}),
    "selector matching no pool": ("eks-two-pools", {"vcluster.nodeLabels": {"gpu-tenancy/pool": "gpu"}}),
    "tolerations leaving no pool": ("eks", {"vcluster.enforceTolerations": []}),
    "memory-capped on eks 1.33": ("eks", {"teams[0].isolation": {"tier": "memory-capped"}}),
    "one team pulling alone": ("dev", {"teams[1].vcluster": {"alwaysPullImages": True}}),
    "field and cross-field together": ("dev", {"teams[0].resources.gpu": {"quota": 0.9, "limit": 0.5},
                                               "teams[1].priority": "high", "kaiScheduler.version": "latest"}),
}


def broken_site(name: str) -> dict[str, Any]:
    base, changes = BROKEN[name]
    config = copy.deepcopy(VALID_SITES[base]())
    for path, value in changes.items():
        _set(config, path, value)
    return config


def stack_document(config: dict[str, Any]) -> dict[str, Any]:
    """A stack file's document holding ``config`` (without secrets: offline tools stand in for them)."""
    return {"config": {PROJECT_PREFIX + key: value for key, value in config.items()}}
