"""A team given load balancers steers only its own (config/load_balancer_keys.py, components/synced_service_rules.py).

vCluster copies a Service's annotations and spec.loadBalancerClass to the host, where the host's load-balancer
implementation reads them. Each attack is the Service a hostile tenant creates, as vCluster's API proxy creates it
on the host (tests/synced_objects_sim.py), judged by the policy the program renders: a key that would claim an
address, subnet, security group, certificate, bucket or cost tag of the account is refused, and so is a class that
hands the Service to another controller. What honest teams write passes, and so does a Service that held a key
before the rule came, while the key stays as it was.
"""

from __future__ import annotations

import copy
import re

import pytest

from config.errors import ConfigError
from config.load_balancer_keys import AWS_PLATFORM_KEYS, AWS_PREFIX, AWS_TEAM_KEYS, LOAD_BALANCER_PREFIXES
from tests.conftest import MIRRORED_TAGS, dev_config, eks_config, git, mirrored_tag
from tests.go_source import key_names, looked_up, named_keys
from tests.tenant_sim import platform_of
from tools.plan import cli as plan
from tests.test_synced_objects_admission import (  # noqa: F401 (legal, nlp: fixtures)
    Synced, allowing, created, legal, nlp, rules, service)

ANNOTATIONS, CLASS = "service-load-balancer-annotations", "service-load-balancer-class"
METALLB_KEYS = ("metallb.io/loadBalancerIPs", "metallb.io/address-pool", "metallb.io/allow-shared-ip",
                "metallb.universe.tf/loadBalancerIPs", "metallb.universe.tf/address-pool")
# Values a hostile team would write: the platform's Elastic IP, the platform's certificate, its log bucket.
HOSTILE_VALUES = {
    AWS_PREFIX + "eip-allocations": "eipalloc-0platform",
    AWS_PREFIX + "ssl-cert": "arn:aws:acm:us-east-2:111122223333:certificate/platform-wildcard",
    AWS_PREFIX + "access-log-s3-bucket-name": "platform-audit-logs",
    AWS_PREFIX + "additional-resource-tags": "team=team-support,cost-center=support",
    AWS_PREFIX + "subnets": "subnet-0public",
}


def load_balancer(annotations: dict, **spec) -> dict:
    lb = service(type="LoadBalancer", allocateLoadBalancerNodePorts=False, **spec)
    lb["metadata"]["annotations"] = annotations
    return lb


@pytest.fixture(scope="module")
def aws(legal) -> Synced:
    return allowing(legal, load_balancers=1)


@pytest.fixture(scope="module")
def metallb(nlp) -> Synced:
    return allowing(nlp, load_balancers=1)


# --- the attacks -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(AWS_PLATFORM_KEYS))
def test_each_aws_key_that_reaches_beyond_the_teams_load_balancer_is_refused(aws, key):
    value = HOSTILE_VALUES.get(key, "true")
    assert rules(aws.create(created(aws, load_balancer({key: value})))) == {ANNOTATIONS}


@pytest.mark.parametrize("key", METALLB_KEYS + (AWS_PREFIX + "eip-allocations",))
def test_microk8s_teams_may_steer_no_address_pool_or_address(metallb, key):
    """MetalLB hands out the address a Service names (controller/service.go), whoever holds it elsewhere."""
    assert rules(metallb.create(created(metallb, load_balancer({key: "10.0.0.10"})))) == {ANNOTATIONS}


# What a hostile team would write on a kubeconfig site whose load balancers kube-vip or Cilium serve: the address
# the platform's endpoint or another team's service holds, the nodes' management interface, VLAN or MAC address, an
# egress address for the team's pods, another Service's address shared, the source ranges turned into a deny list.
KUBECONFIG_SITE_ATTACKS = {
    "kube-vip.io/loadbalancerIPs": "192.168.10.5",
    "kube-vip.io/serviceInterface": "mgmt0",
    "kube-vip.io/serviceVLAN": "100",
    "kube-vip.io/hwaddr": "00:16:3e:00:00:01",
    "kube-vip.io/egress": "true",
    "lbipam.cilium.io/ips": "192.168.10.5",
    "lbipam.cilium.io/sharing-key": "platform",
    "io.cilium/lb-ipam-ips": "192.168.10.5",
    "service.cilium.io/src-ranges-policy": "deny",
}


@pytest.mark.parametrize("key", sorted(KUBECONFIG_SITE_ATTACKS))
def test_kube_vip_and_cilium_keys_are_refused_unless_the_site_lists_them(metallb, key):
    """kube-vip and Cilium read a Service's annotations on the host as MetalLB does; an existing cluster may run
    either. A site that trusts a team with one lists it."""
    annotated = load_balancer({key: KUBECONFIG_SITE_ATTACKS[key]})
    assert rules(metallb.create(created(metallb, annotated))) == {ANNOTATIONS}
    listed = allowing(metallb, load_balancer_annotations=(key,))
    assert listed.create(created(listed, annotated)) == []


def test_a_key_kube_vip_writes_on_the_host_service_stays_while_unchanged(metallb):
    """kube-vip records the endpoint it elected on the host Service (pkg/endpoints); the syncer's next update of the
    Service carries it back as it was."""
    held = created(metallb, load_balancer({"kube-vip.io/active-endpoint": "10.1.0.7"}))
    relabelled = copy.deepcopy(held)
    relabelled["metadata"].setdefault("labels", {})["app"] = "search"
    assert metallb.update(held, relabelled) == []
    moved = copy.deepcopy(held)
    moved["metadata"]["annotations"]["kube-vip.io/active-endpoint"] = "10.1.0.9"
    assert rules(metallb.update(held, moved)) == {ANNOTATIONS}


@pytest.mark.parametrize("key", ("service.beta.kubernetes.io/aws-load-balancer-scheme",
                                 "service.beta.kubernetes.io/azure-pip-name", "service.k8s.aws/resources"))
def test_a_key_of_another_implementation_under_the_prefixes_is_refused(aws, key):
    """Keys the AWS Load Balancer Controller or another cloud reads: a Service typed `external` reaches them."""
    annotated = load_balancer({AWS_PREFIX + "type": "external", key: "internet-facing"})
    assert rules(aws.create(created(aws, annotated))) == {ANNOTATIONS}


def test_a_load_balancer_class_is_refused_unless_listed(aws, metallb):
    for tenant in (aws, metallb):
        assert rules(tenant.create(created(tenant, load_balancer({}, loadBalancerClass="service.k8s.aws/nlb")))) \
            == {CLASS}
    listed = allowing(aws, load_balancer_classes=("service.k8s.aws/nlb",))
    assert listed.create(created(listed, load_balancer({}, loadBalancerClass="service.k8s.aws/nlb"))) == []
    assert rules(listed.create(created(listed, load_balancer({}, loadBalancerClass="io.cilium/bgp")))) == {CLASS}


def test_an_update_may_not_add_or_change_a_refused_key(aws):
    honest = created(aws, load_balancer({AWS_PREFIX + "type": "nlb"}))
    added = copy.deepcopy(honest)
    added["metadata"]["annotations"][AWS_PREFIX + "eip-allocations"] = "eipalloc-0platform"
    assert rules(aws.update(honest, added)) == {ANNOTATIONS}
    held = copy.deepcopy(added)
    changed = copy.deepcopy(added)
    changed["metadata"]["annotations"][AWS_PREFIX + "eip-allocations"] = "eipalloc-0other"
    assert rules(aws.update(held, changed)) == {ANNOTATIONS}


# --- what honest teams and running sites keep --------------------------------------------------------------------


def test_the_keys_that_shape_the_teams_own_load_balancer_pass_on_eks(aws):
    annotations = {key: "true" for key in AWS_TEAM_KEYS}
    annotations.update({AWS_PREFIX + "type": "nlb", AWS_PREFIX + "backend-protocol": "tcp",
                        AWS_PREFIX + "healthcheck-path": "/healthz", AWS_PREFIX + "ssl-ports": "443"})
    assert aws.create(created(aws, load_balancer(annotations, loadBalancerSourceRanges=["203.0.113.0/24"]))) == []


def test_annotations_outside_the_prefixes_pass(aws, metallb):
    for tenant in (aws, metallb):
        other = {"prometheus.io/scrape": "true", "service.kubernetes.io/topology-mode": "Auto",
                 "example.com/owner": "search"}
        assert tenant.create(created(tenant, load_balancer(other))) == []


def test_a_key_the_site_lists_for_a_team_passes(aws):
    trusted = allowing(aws, load_balancer_annotations=(*AWS_TEAM_KEYS, AWS_PREFIX + "ssl-cert"))
    cert = {AWS_PREFIX + "ssl-cert": HOSTILE_VALUES[AWS_PREFIX + "ssl-cert"]}
    assert trusted.create(created(trusted, load_balancer(cert))) == []
    assert rules(aws.create(created(aws, load_balancer(cert)))) == {ANNOTATIONS}


def test_a_key_held_before_the_rule_stays_while_unchanged(aws):
    """The syncer writes the whole Service again on every update: a key the Service held before the rule, or one
    the implementation wrote (MetalLB's ip-allocated-from-pool), comes back unchanged and passes."""
    held = created(aws, load_balancer({AWS_PREFIX + "eip-allocations": "eipalloc-0held",
                                       "metallb.io/ip-allocated-from-pool": "default"}))
    relabelled = copy.deepcopy(held)
    relabelled["metadata"].setdefault("labels", {})["app"] = "search"
    assert aws.update(held, relabelled) == []


def test_teams_without_load_balancers_carry_the_annotation_rule_and_not_the_class_rule(nlp, legal):
    """The API server takes spec.loadBalancerClass on a LoadBalancer Service only; Cilium reads its Service keys on
    every type."""
    for tenant in (nlp, legal):
        names = {v["message"][1:v["message"].index("]")] for v in tenant.admission.spec["validations"]}
        assert tenant.team.vcluster.services.load_balancers == 0
        assert ANNOTATIONS in names and CLASS not in names


# What Cilium reads on a Service of any type (pkg/annotation/k8s.go): in a ClusterMesh, a global Service's endpoints
# join those of the Service of the same namespace and name in every other cluster of the mesh (another site of the
# company, cloned with the same team names, among them), and its clients' traffic reaches them.
CLUSTER_MESH_ATTACKS = {
    "service.cilium.io/global": "true",
    "service.cilium.io/shared": "true",
    "service.cilium.io/global-sync-endpoint-slices": "true",
    "service.cilium.io/affinity": "remote",
    "io.cilium/global-service": "true",
    "io.cilium/shared-service": "true",
}


@pytest.mark.parametrize("key", sorted(CLUSTER_MESH_ATTACKS))
def test_a_team_without_load_balancers_may_not_join_a_cluster_mesh_service(nlp, legal, key):
    for tenant in (nlp, legal):
        annotated = service()
        annotated["metadata"]["annotations"] = {key: CLUSTER_MESH_ATTACKS[key]}
        assert rules(tenant.create(created(tenant, annotated))) == {ANNOTATIONS}
        listed = allowing(tenant, load_balancer_annotations=(key,))
        assert listed.create(created(listed, annotated)) == []


def test_a_cluster_ip_service_keeps_a_key_it_held_and_passes_without_one(nlp):
    held = service()
    held["metadata"]["annotations"] = {"service.cilium.io/global": "true", "prometheus.io/scrape": "true"}
    held = created(nlp, held)
    relabelled = copy.deepcopy(held)
    relabelled["metadata"].setdefault("labels", {})["app"] = "search"
    assert nlp.update(held, relabelled) == []
    plain = service()
    plain["metadata"]["annotations"] = {"prometheus.io/scrape": "true", "service.kubernetes.io/topology-mode": "Auto"}
    assert nlp.create(created(nlp, plain)) == []


def test_the_review_summary_says_which_keys_and_classes_each_team_may_use(tmp_path):
    """A pull request that lists a key hands a team something of the account or network: the summary says which."""
    config = eks_config()
    config["gpu-tenancy:vcluster"]["services"] = {"loadBalancers": 1}
    config["gpu-tenancy:teams"][1]["vcluster"] = {"services": {
        "loadBalancerAnnotations": [AWS_PREFIX + "ssl-cert"], "loadBalancerClasses": ["service.k8s.aws/nlb"]}}
    assert plan.main(["site", "--out", str(tmp_path)], config=config) == 0
    summary = (tmp_path / "summary.md").read_text()
    legal, support = (next(line for line in summary.splitlines() if line.startswith(f"- `{team}`: `gpu-tenancy-"
                                                                                     f"{team}-synced-objects`"))
                      for team in ("team-legal", "team-support"))
    assert "service-load-balancer-annotations (allowed: `" + AWS_PREFIX + "backend-protocol`" in legal
    assert "service-load-balancer-class (none allowed)" in legal
    assert f"service-load-balancer-annotations (allowed: `{AWS_PREFIX}ssl-cert`)" in support
    assert "service-load-balancer-class (allowed: `service.k8s.aws/nlb`)" in support


def test_the_review_summary_says_which_keys_a_team_without_load_balancers_may_use(tmp_path):
    config = dev_config()
    config["gpu-tenancy:teams"][0]["vcluster"] = {"services": {"loadBalancerAnnotations": ["service.cilium.io/global"]}}
    assert plan.main(["site", "--out", str(tmp_path)], config=config) == 0
    team_lines = {team["name"]: next(line for line in (tmp_path / "summary.md").read_text().splitlines()
                                     if line.startswith(f"- `{team['name']}`: `gpu-tenancy-{team['name']}-synced-"))
                  for team in config["gpu-tenancy:teams"]}
    first, *others = (team_lines[team["name"]] for team in config["gpu-tenancy:teams"])
    assert "service-load-balancer-annotations (allowed: `service.cilium.io/global`)" in first
    assert others and all("service-load-balancer-annotations (none allowed)" in line for line in others)
    assert not any("service-load-balancer-class" in line for line in team_lines.values())
    without = eks_config()
    assert plan.main(["site", "--out", str(tmp_path / "without")], config=without) == 0
    lines = [line for line in (tmp_path / "without" / "summary.md").read_text().splitlines()
             if line.startswith("- `team-") and "-synced-objects`" in line]
    assert len(lines) == 2 and all("service-load-balancer-annotations (allowed: `" + AWS_PREFIX + "backend-protocol`"
                                   in line and "service-load-balancer-class" not in line for line in lines)


# --- the config --------------------------------------------------------------------------------------------------


def test_each_host_kind_starts_from_its_implementations_team_keys():
    assert platform_of(eks_config()).teams[0].vcluster.services.load_balancer_annotations == AWS_TEAM_KEYS
    assert platform_of(dev_config()).teams[0].vcluster.services.load_balancer_annotations == ()


def test_a_team_list_replaces_the_stack_list():
    config = eks_config()
    config["gpu-tenancy:vcluster"]["services"] = {"loadBalancers": 1}
    config["gpu-tenancy:teams"][0]["vcluster"] = {"services": {"loadBalancerAnnotations": [AWS_PREFIX + "ssl-cert"],
                                                  "loadBalancerClasses": ["service.k8s.aws/nlb"]}}
    first, second = platform_of(config).teams[:2]
    assert first.vcluster.services.load_balancer_annotations == (AWS_PREFIX + "ssl-cert",)
    assert first.vcluster.services.load_balancer_classes == ("service.k8s.aws/nlb",)
    assert second.vcluster.services.load_balancer_annotations == AWS_TEAM_KEYS


@pytest.mark.parametrize("key, value, words", [
    ("loadBalancerAnnotations", ["aws-load-balancer-ssl-cert"], "is not a load-balancer annotation key"),
    ("loadBalancerAnnotations", ["prometheus.io/scrape"], "is not a load-balancer annotation key"),
    ("loadBalancerClasses", ["nlb"], "is not a load-balancer class"),
])
def test_a_malformed_entry_is_refused_naming_key_value_and_fix(key, value, words):
    config = eks_config()
    config["gpu-tenancy:vcluster"]["services"] = {"loadBalancers": 1, key: value}
    with pytest.raises(ConfigError) as refused:
        platform_of(config)
    message = str(refused.value)
    assert f"vcluster.services.{key}" in message and repr(value[0]) in message and words in message
    assert "Fix:" in message


# --- the keys are the implementations' own -------------------------------------------------------------------------

CLOUD_PROVIDER_AWS, METALLB = "kubernetes/cloud-provider-aws", "metallb/metallb"
KUBE_VIP, KUBE_VIP_CLOUD_PROVIDER = "kube-vip/kube-vip", "kube-vip/kube-vip-cloud-provider"
KUBE_VIP_KEY = re.compile(r"([a-z0-9-]+\.)*kube-vip\.io/[A-Za-z0-9_.-]+")
# kube-vip keeps its Go code outside pkg/ and cmd/ too.
WHOLE_PROJECT = (".",)


def _literals(repository: str, tag: str, pattern: str, path: str) -> set[str]:
    found = git(repository, "grep", "-h", "-o", "-E", pattern, tag, "--", f"{path}/*.go", ":!*_test.go", ":!e2etest")
    return {line.strip('"') for line in found.split()}


@pytest.mark.parametrize("tag", MIRRORED_TAGS[CLOUD_PROVIDER_AWS])
def test_every_key_the_aws_cloud_provider_reads_is_placed(tag):
    """The provider EKS runs at each Kubernetes minor a site may state (newest patch of each): a key added upstream
    is neither allowed nor refused until this module places it, so the suite goes red instead of the key passing
    unjudged (it would be refused, being under the prefix, but without saying what it does)."""
    keys = _literals(CLOUD_PROVIDER_AWS, mirrored_tag(CLOUD_PROVIDER_AWS, tag),
                     r'"service\.beta\.kubernetes\.io/[^"]+"', "pkg")
    assert keys and keys <= set(AWS_TEAM_KEYS) | set(AWS_PLATFORM_KEYS)
    assert not set(AWS_TEAM_KEYS) & set(AWS_PLATFORM_KEYS)


def test_every_placed_key_is_one_the_provider_reads():
    read = set().union(*(_literals(CLOUD_PROVIDER_AWS, mirrored_tag(CLOUD_PROVIDER_AWS, tag),
                                   r'"service\.beta\.kubernetes\.io/[^"]+"', "pkg")
                         for tag in MIRRORED_TAGS[CLOUD_PROVIDER_AWS]))
    assert set(AWS_TEAM_KEYS) | set(AWS_PLATFORM_KEYS) == read


@pytest.mark.parametrize("tag", MIRRORED_TAGS[METALLB])
def test_every_metallb_service_key_is_under_the_prefixes(tag):
    """The MetalLB of each MicroK8s track's `metallb` addon: its keys, written whole (v0.13) or as a prefix joined
    to a name (v0.14 on), all lie under a judged prefix."""
    tag = mirrored_tag(METALLB, tag)
    whole = _literals(METALLB, tag, r'"metallb\.(io|universe\.tf)/[A-Za-z-]+"', ".")
    service_go = git(METALLB, "show", f"{tag}:controller/service.go")
    prefixes = set(re.findall(r'AnnotationPrefix\s*=\s*"([^"]+)"', service_go))
    assert whole or prefixes
    assert all(key.startswith(LOAD_BALANCER_PREFIXES) for key in whole)
    assert {f"{prefix}/" for prefix in prefixes} <= set(LOAD_BALANCER_PREFIXES)


@pytest.mark.parametrize("repository, tag", [(repository, tag) for repository in (KUBE_VIP, KUBE_VIP_CLOUD_PROVIDER)
                                             for tag in MIRRORED_TAGS[repository]])
def test_every_service_key_kube_vip_reads_is_under_the_prefixes(repository, tag):
    """kube-vip (the node agent) and its cloud provider (the addresses): every key of theirs their code names (its
    development.kube-vip.io switch included) is under a judged prefix, and each reads a Service's annotations only by
    those names."""
    tag = mirrored_tag(repository, tag)
    keys = {key for key in named_keys(repository, tag, WHOLE_PROJECT) if KUBE_VIP_KEY.fullmatch(key)}
    assert keys and all(key.startswith(LOAD_BALANCER_PREFIXES) for key in keys), sorted(keys)
    names = key_names(repository, tag, KUBE_VIP_KEY.pattern, WHOLE_PROJECT)
    read = looked_up(repository, tag, WHOLE_PROJECT, metadata="Annotations")
    assert read
    for name in read:
        assert (name.strip('"') in keys) if name.startswith('"') else name in names, name

