"""tools.deployability: each rule attacked with a chart made for it, then the real charts.

The ``attack`` chart (tests/charts/attack, not an upstream chart) turns on, value by value, a
claim, a vCluster-like control plane with its egress policy, a workload with a given pod spec,
a ConfigMap with an extra field, and a custom resource of its own CRD. It is rendered through
the same path as ``tools.plan --render-charts`` (cache, render, objects). The sites come from
the committed stacks' plans. tests/test_deployability_charts.py runs the check on the program's own
objects and on the real charts; the pod-security rule and the tenant DNS pods are
tests/test_deployability_pod_security.py.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest

from config import versions
from config.hosts import DEFAULT_STORAGE_CLASS_ANNOTATION, HOST_KIND_FACTS
from config.vocabulary import CLUSTER_KINDS
from tests.conftest import dev_config, run, stack_config
from tools.deployability import check as deployability
from tools.charts.cache import cache_chart
from tools.charts.render import RELEASE_TYPE, render_plan_releases
from tools.deployability.findings import ERROR, INFO
from tools.deployability.inputs import K8sObject, Site, rendered_objects, site_from_plan
from tools.deployability.schemas import check_schemas
from tools.plan.document import build_plan

ATTACK = Path(__file__).resolve().parent / "charts" / "attack"
ATTACK_REPO = "https://charts.example.invalid/attack"


@pytest.fixture(scope="module")
def attack_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("attack-cache")
    cache_chart(ATTACK, "attack", ATTACK_REPO, "0.1.0", cache_dir=cache)
    return cache


@pytest.fixture(scope="module")
def sites(dev_run, eks_run) -> dict[str, Site]:
    kubeconfig = {"gpu-tenancy:cluster": {"kind": "kubeconfig"}, **{k: v for k, v in dev_config().items()
                                                                     if k != "gpu-tenancy:cluster"}}
    kubeconfig["gpu-tenancy:kubeconfig"] = {"secure": "v1:encrypted"}
    kubeconfig["gpu-tenancy:gpuOperator"] = {"mode": "install", "timeSlicing": {"replicas": 2,
                                                                                "defaultProfile": "exclusive"}}
    return {"microk8s": site_from_plan(build_plan(dev_run, "dev")),
            "eks": site_from_plan(build_plan(eks_run, "eks")),
            "kubeconfig": site_from_plan(build_plan(run(kubeconfig), "site"))}


def namespace(name: str, level: str | None = None) -> K8sObject:
    labels = {"pod-security.kubernetes.io/enforce": level} if level else {}
    return K8sObject({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
                     "test")


def attack(cache: Path, tmp_path: Path, values: dict, *, ns: str = "apps") -> list[K8sObject]:
    """The attack chart's objects for ``values``, as the plan's render path produces them."""
    resources = [{"type": RELEASE_TYPE, "name": "attack-release",
                  "inputs": {"name": "probe", "chart": "attack", "version": "0.1.0", "namespace": ns,
                             "repositoryOpts": {"repo": ATTACK_REPO}, "values": values}}]
    out = tmp_path / "plan"
    rendered = render_plan_releases(resources, cache, out)
    return rendered_objects(rendered, out, resources)


def findings(objects, site, rule=None):
    return [f for f in deployability.check(objects, site) if rule is None or f.rule == rule]


def errors(objects, site, rule):
    return [f for f in findings(objects, site, rule) if f.severity == ERROR]


def assert_found(found: list, words: str | None) -> None:
    """No finding when ``words`` is None, else one that says them."""
    if words is None:
        assert not found
    else:
        assert found and any(words in finding.message for finding in found), found


# --- the sites --------------------------------------------------------------------------------------


def test_sites_know_what_their_host_kind_provides(sites):
    assert sites["microk8s"].facts.api_server_ports == (16443,)
    assert sites["microk8s"].facts.default_storage_class == "microk8s-hostpath"
    assert sites["eks"].facts.api_server_ports == (443,) and sites["eks"].facts.default_storage_class is None
    assert sites["eks"].kubernetes_version == stack_config("eks")["gpu-tenancy:cluster"]["eks"]["kubernetesVersion"]
    gpu = next(pool for pool in sites["eks"].node_pools if pool.labels.get("nvidia.com/gpu.present") == "true")
    assert [(t.key, t.effect) for t in gpu.taints] == [("nvidia.com/gpu", "NoSchedule")]
    assert any(not pool.taints for pool in sites["eks"].node_pools), "the system pool is untainted"
    assert sites["kubeconfig"].kind == "kubeconfig" and sites["kubeconfig"].node_pools is None


@pytest.mark.parametrize("kind", ["microk8s", "kubeconfig"])
def test_a_site_is_checked_for_the_kubernetes_version_it_states(kind):
    config = dev_config()
    if kind == "kubeconfig":
        config["gpu-tenancy:cluster"] = {"kind": "kubeconfig"}
        config["gpu-tenancy:kubeconfig"] = {"secure": "v1:encrypted"}
        config["gpu-tenancy:gpuOperator"] = {"mode": "external"}
    config["gpu-tenancy:cluster"].get(kind, {}).pop("kubernetesVersion", None)
    # Unstated, it is the oldest version the program supports.
    assert site_from_plan(build_plan(run(config), "site")).kubernetes_version == versions.KUBERNETES_MINIMUM_VERSION
    config["gpu-tenancy:cluster"].setdefault(kind, {})["kubernetesVersion"] = "1.34"
    site = site_from_plan(build_plan(run(config), "site"))
    assert site.kind == kind and site.kubernetes_version == "1.34"
    # A field the API knows from 1.32 on (pod-level resources) is refused only where the site is older.
    pod = K8sObject({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "apps"},
                     "spec": {"resources": {"limits": {"cpu": "1"}},
                              "containers": [{"name": "c", "image": "example.invalid/c:1"}]}}, "test")
    assert not check_schemas([pod], site, [])
    older = check_schemas([pod], dataclasses.replace(site, kubernetes_version="1.31"), [])
    assert [f.severity for f in older] == [ERROR] and "Kubernetes 1.31" in older[0].message


def test_each_host_kind_has_its_facts_and_sites_read_them_from_config_hosts(sites):
    assert set(HOST_KIND_FACTS) == set(CLUSTER_KINDS)
    assert all(sites[kind].facts is HOST_KIND_FACTS[kind] for kind in CLUSTER_KINDS)


# --- storage ----------------------------------------------------------------------------------------


def test_a_claim_without_class_on_a_site_without_default_class_is_found(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"claim": {"enabled": True}})
    [finding] = errors(objects, sites["eks"], "storage")
    assert "PersistentVolumeClaim apps/probe-data" in finding.object
    assert "no default class" in finding.message and "aws-ebs-csi-driver" in finding.fix
    assert not errors(objects, sites["microk8s"], "storage"), "microk8s-hostpath is the default there"
    assert [f.severity for f in findings(objects, sites["kubeconfig"], "storage")] == ["info"]


def test_a_default_class_the_program_creates_satisfies_the_claim(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"claim": {"enabled": True}})
    gp3 = K8sObject({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "ebs.csi.aws.com",
                     "metadata": {"name": "gp3", "annotations": {DEFAULT_STORAGE_CLASS_ANNOTATION: "true"}}},
                    "program: gp3")
    assert not errors(objects + [gp3], sites["eks"], "storage")
    not_default = copy.deepcopy(gp3)
    not_default.manifest["metadata"]["annotations"] = {}
    assert errors(objects + [not_default], sites["eks"], "storage")


def test_a_claim_naming_a_class_nobody_provides_is_found(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"claim": {"enabled": True, "storageClass": "fast-nvme"}})
    [finding] = errors(objects, sites["microk8s"], "storage")
    assert "fast-nvme" in finding.message
    hostpath = attack(attack_cache, tmp_path, {"claim": {"enabled": True, "storageClass": "microk8s-hostpath"}})
    assert not errors(hostpath, sites["microk8s"], "storage")
    assert errors(hostpath, sites["eks"], "storage")


def test_the_class_a_kubeconfig_site_names_is_one_its_host_provides(attack_cache, tmp_path):
    # cluster.kubeconfig.storageClass must name a class the cluster has: a claim on it is not reported as on a class
    # nobody provides, and a claim on any other class still is (the plan cannot know the cluster's classes).
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"storageClass": "fast-ssd"}}
    config["gpu-tenancy:kubeconfig"] = {"secure": "v1:encrypted"}
    config["gpu-tenancy:gpuOperator"] = {"mode": "external"}
    site = site_from_plan(build_plan(run(config), "site"))
    stated = attack(attack_cache, tmp_path, {"claim": {"enabled": True, "storageClass": "fast-ssd"}})
    assert findings(stated, site, "storage") == []
    other = attack(attack_cache, tmp_path, {"claim": {"enabled": True, "storageClass": "bulk"}})
    [finding] = findings(other, site, "storage")
    assert finding.severity == INFO and "bulk" in finding.message


def test_statefulset_claim_templates_are_checked_and_microk8s_needs_its_storage_addon(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"controlPlane": {"enabled": True}})
    [finding] = errors(objects, sites["eks"], "storage")
    assert "volumeClaimTemplate data" in finding.message and "StatefulSet apps/probe" in finding.object
    without_addon = Site(**{**sites["microk8s"].__dict__, "enables_hostpath_storage": False})
    assert errors(objects, without_addon, "storage")


@pytest.mark.parametrize("kind", ["Prometheus", "Alertmanager"])
def test_the_claims_the_prometheus_operator_makes_are_checked(kind, sites):
    claim = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}}}}
    server = K8sObject({"apiVersion": "monitoring.coreos.com/v1", "kind": kind,
                        "metadata": {"name": "k8s", "namespace": "monitoring"},
                        "spec": {"storage": {"volumeClaimTemplate": claim}}}, "chart kube-prometheus-stack")
    [finding] = errors([server], sites["eks"], "storage")
    assert f"{kind} monitoring/k8s" in finding.object and "storage.volumeClaimTemplate" in finding.message
    assert not errors([server], sites["microk8s"], "storage")
    claim["spec"]["storageClassName"] = "fast-nvme"
    [finding] = errors([server], sites["microk8s"], "storage")
    assert "fast-nvme" in finding.message
    # Without a claim template the operator keeps data in an emptyDir: nothing to provision.
    del server.manifest["spec"]["storage"]
    assert not errors([server], sites["eks"], "storage")


def test_a_secret_or_config_map_the_operator_mounts_must_be_created(sites):
    """The operator mounts them as plain volumes: one nobody creates keeps the pod from starting."""
    manager = K8sObject({"apiVersion": "monitoring.coreos.com/v1", "kind": "Alertmanager",
                         "metadata": {"name": "main", "namespace": "monitoring"},
                         "spec": {"secrets": ["receiver"], "configMaps": ["templates"]}}, "chart kube-prometheus-stack")
    found = {finding.message for finding in errors([manager], sites["microk8s"], "operator-mounts")}
    assert any("Secret monitoring/receiver" in message for message in found)
    assert any("ConfigMap monitoring/templates" in message for message in found)
    made = [K8sObject({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "monitoring"}},
                      "program") for kind, name in (("Secret", "receiver"), ("ConfigMap", "templates"))]
    assert not errors([manager, *made], sites["microk8s"], "operator-mounts")
    elsewhere = [K8sObject({**obj.manifest, "metadata": {**obj.manifest["metadata"], "namespace": "default"}},
                           "program") for obj in made]
    assert len(errors([manager, *elsewhere], sites["microk8s"], "operator-mounts")) == 2


# --- API server egress ------------------------------------------------------------------------------


def test_a_policy_that_blocks_16443_cuts_the_control_plane_off_on_microk8s(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"controlPlane": {"enabled": True}})
    [finding] = errors(objects, sites["microk8s"], "api-server-egress")
    assert "TCP 16443" in finding.message and "probe-control-plane" in finding.message
    assert "policies.networkPolicy.controlPlane.egress" in finding.fix
    assert not errors(objects, sites["eks"], "api-server-egress"), "443 is allowed"


@pytest.mark.parametrize("control_plane, reachable", [
    ({"egressPorts": [443, 16443]}, True),
    ({"egressPorts": [443], "egressTo": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}, False),
    ({"egressPorts": [16443], "egressTo": [{"podSelector": {}}]}, False),  # the API server is not a pod
    ({"egressPorts": [16443], "egressTo": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}]}, False),
    ({"egressPorts": [16443], "egressTo": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}, True),
])
def test_egress_rules_are_read_with_networkpolicy_semantics(attack_cache, tmp_path, sites, control_plane, reachable):
    objects = attack(attack_cache, tmp_path, {"controlPlane": {"enabled": True, **control_plane}})
    assert not errors(objects, sites["microk8s"], "api-server-egress") == reachable


def test_on_eks_the_control_plane_must_reach_the_kubernetes_services_address(attack_cache, tmp_path, sites):
    """The VPC CNI judges the control plane's connection at the kubernetes Service's address (config/hosts.py): a
    policy that opens 443 everywhere but the Service ranges cuts it off there, whatever it opens elsewhere."""
    ranges = ["10.100.0.0/16", "172.20.0.0/16"]
    closed = attack(attack_cache, tmp_path / "closed", {"controlPlane": {
        "enabled": True, "egressPorts": [443], "egressTo": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ranges}}]}})
    [finding] = errors(closed, sites["eks"], "api-server-egress")
    assert "10.100.0.1/32, 172.20.0.1/32, the kubernetes Service's address" in finding.message
    kubernetes = [{"ipBlock": {"cidr": f"{block[:-4]}1/32"}} for block in ranges]
    opened = attack(attack_cache, tmp_path / "opened", {"controlPlane": {
        "enabled": True, "egressPorts": [443],
        "egressTo": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ranges}}, *kubernetes]}})
    assert not errors(opened, sites["eks"], "api-server-egress")


def test_a_kubeconfig_site_that_states_its_port_is_checked_for_that_port_only(attack_cache, tmp_path):
    """With cluster.kubeconfig.apiServerPort the program opens that port alone (components/tenant_network.py): the
    check holds the control planes to it, as an error, and does not warn about the common ports left closed."""
    config = {"gpu-tenancy:cluster": {"kind": "kubeconfig", "kubeconfig": {"apiServerPort": 6443}},
              **{k: v for k, v in dev_config().items() if k != "gpu-tenancy:cluster"},
              "gpu-tenancy:kubeconfig": {"secure": "v1:encrypted"}, "gpu-tenancy:gpuOperator": {"mode": "external"}}
    plan = build_plan(run(config), "site")
    site = site_from_plan(plan)
    assert site.facts.api_server_ports == (6443,) and site.facts.api_server_ports_known
    opened = attack(attack_cache, tmp_path / "opened", {"controlPlane": {"enabled": True, "egressPorts": [6443]}})
    assert not findings(opened, site, "api-server-egress")
    blocked = attack(attack_cache, tmp_path / "blocked", {"controlPlane": {"enabled": True, "egressPorts": [443]}})
    [finding] = findings(blocked, site, "api-server-egress")
    assert finding.severity == ERROR and "TCP 6443, the kubeconfig API server port" in finding.message


def test_a_port_range_and_a_policy_in_another_namespace(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"controlPlane": {"enabled": True}})
    policy = next(o for o in objects if o.kind == "NetworkPolicy")
    policy.manifest["spec"]["egress"][0]["ports"] = [{"port": 16000, "endPort": 17000, "protocol": "TCP"}]
    assert not errors(objects, sites["microk8s"], "api-server-egress")
    policy.manifest["spec"]["egress"][0]["ports"] = [{"port": 443}]
    policy.manifest["metadata"]["namespace"] = "elsewhere"
    assert not errors(objects, sites["microk8s"], "api-server-egress"), "a policy applies in its own namespace"


@pytest.mark.parametrize("pod_selector, says", [
    ({"matchExpressions": [{"key": "release", "operator": "in", "values": ["probe"]}]},
     "spec.podSelector: matchExpressions[0].operator is 'in'"),
    ({"matchLabels": {"release": 1}}, "spec.podSelector: matchLabels.release is 1, not a string"),
])
def test_a_policy_whose_selector_the_api_server_refuses_is_found_and_isolates_nothing(attack_cache, tmp_path, sites,
                                                                                     pod_selector, says):
    objects = attack(attack_cache, tmp_path, {"controlPlane": {"enabled": True}})
    policy = next(o for o in objects if o.kind == "NetworkPolicy")
    policy.manifest["spec"]["podSelector"] = pod_selector
    # Only the refused policy is found: without it nothing blocks 16443 any more.
    [finding] = errors(objects, sites["microk8s"], "api-server-egress")
    assert finding.object.startswith("NetworkPolicy apps/probe-control-plane")
    assert says in finding.message and "the API server refuses this NetworkPolicy" in finding.message


# --- node fit ---------------------------------------------------------------------------------------


GPU_POD = {"containers": [{"name": "c", "image": "x"}], "nodeSelector": {"nvidia.com/gpu.present": "true"}}


def test_a_gpu_pod_without_the_gpu_toleration_fits_no_eks_pool(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"workload": {"enabled": True, "podSpec": GPU_POD}})
    [finding] = errors(objects, sites["eks"], "node-fit")
    assert "untolerated taint nvidia.com/gpu" in finding.message and "nodeSelector nvidia.com/gpu.present" in finding.message
    tolerated = {**GPU_POD, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    assert not errors(attack(attack_cache, tmp_path, {"workload": {"enabled": True, "podSpec": tolerated}}),
                      sites["eks"], "node-fit")
    assert not errors(objects, sites["microk8s"], "node-fit"), "the MicroK8s node is the untainted GPU box"


def test_a_selector_no_pool_has_and_required_affinity(attack_cache, tmp_path, sites):
    lost = {"containers": [{"name": "c", "image": "x"}], "nodeSelector": {"gpu-tenancy/pool": "tpu"}}
    assert errors(attack(attack_cache, tmp_path, {"workload": {"enabled": True, "podSpec": lost}}),
                  sites["eks"], "node-fit")
    affinity = {"containers": [{"name": "c", "image": "x"}], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu-tenancy/pool", "operator": "In", "values": ["system"]}]}]}}}}
    assert not errors(attack(attack_cache, tmp_path, {"workload": {"enabled": True, "podSpec": affinity}}),
                      sites["eks"], "node-fit")
    objects = attack(attack_cache, tmp_path, {"workload": {"enabled": True, "podSpec": lost}})
    assert [f.severity for f in findings(objects, sites["kubeconfig"], "node-fit")] == ["info"]
