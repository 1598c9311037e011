"""The tenant's DNS: never preempted, resolving through the host's DNS, on the image vCluster would pick;
its YAML written once for all teams, yet each team's text is what dumping its own objects gives."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from components.tenant_dns import (
    NON_PREEMPTIBLE, PREEMPTIBILITY_LABEL, PRIORITY_CLASS, PRIORITY_LABEL, coredns_manifests, coredns_objects,
    dns_pod_labels,
)
from config import versions
from config.key_types import DNS_LABEL
from config.vcluster_images import coredns_image
from config.model_host import HostDns
from config.vocabulary import NETWORK_POLICY
from ops.sites import platform_of
from policy.label_selectors import selector_matches
from tests.conftest import ACCEPTED_TAGS, dev_config, git, mirror_chart, run
from tools.charts.render import render_release
from tools.deployability.inputs import Release, vcluster_dns_pods
from tools.offline.mocks import MOCK_CLUSTER_DNS

KAI = "kai-scheduler/KAI-Scheduler"
VCLUSTER = "loft-sh/vcluster"


def dns_documents(program, team: str) -> list[dict]:
    values = program.named(f"tenant-{team}-vcluster").inputs["values"]
    return [d for d in yaml.safe_load_all(values["controlPlane"]["coredns"]["overwriteManifests"]) if d]


def test_the_dns_pod_asks_kai_for_a_non_preemptible_class(dev_run):
    deployment = next(d for d in dns_documents(dev_run, "team-nlp") if d["kind"] == "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels[PRIORITY_LABEL] == PRIORITY_CLASS and labels[PREEMPTIBILITY_LABEL] == NON_PREEMPTIBLE
    # Exactly the labels the program grants the DNS pod, nothing else (the host admission allowlist).
    team = platform_of(dev_config(), stack="dev").teams[0]
    assert labels == dns_pod_labels(team) == {
        "k8s-app": "vcluster-kube-dns", "kai.scheduler/queue": "team-nlp", "priorityClassName": "inference",
        "kai.scheduler/preemptibility": "non-preemptible"}


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_reads_those_labels_and_holds_the_class_non_preemptible(tag):
    constants = git(KAI, "show", f"{tag}:pkg/podgrouper/podgrouper/plugins/constants/constants.go")
    assert re.search(rf'PriorityLabelKey\s*=\s*"{PRIORITY_LABEL}"', constants)
    assert re.search(rf'PreemptibilityLabelKey\s*=\s*"{PREEMPTIBILITY_LABEL}"', constants)
    types = git(KAI, "show", f"{tag}:pkg/apis/scheduling/v2alpha2/podgroup_types.go")
    assert re.search(rf'NonPreemptible\s+Preemptibility\s*=\s*"{NON_PREEMPTIBLE}"', types)
    threshold = git(KAI, "grep", "-h", "nonPreemptiblePriorityThreshold *=", tag, "--", "pkg/common/podgroup")
    [value] = re.findall(r"=\s*(\d+)", threshold)
    priority_class = yaml.safe_load(git(KAI, "show", f"{tag}:deployments/kai-scheduler/templates/priorityclasses/"
                                                     f"{PRIORITY_CLASS}.yaml").split("\n", 1)[1].rsplit("{{", 1)[0])
    assert priority_class["metadata"]["name"] == PRIORITY_CLASS and priority_class["value"] >= int(value)


def test_the_dns_forwards_to_the_host_cluster_dns_service(dev_run):
    config = next(d for d in dns_documents(dev_run, "team-nlp") if d["kind"] == "ConfigMap")
    forwards = [line.split() for line in config["data"]["Corefile"].splitlines() if line.strip().startswith("forward")]
    assert forwards == [["forward", ".", MOCK_CLUSTER_DNS]], "no node resolver, no public fallback"
    read = dev_run.named("host-cluster-dns")
    assert read.read and read.inputs["id"] == HostDns().service


def _egress_reaches(policies: list[dict], namespace: str, labels: dict, peer_namespace: dict, peer: dict,
                    port: int, protocol: str) -> bool:
    """Whether an egress rule of a policy isolating the pod lets it reach a pod (labels ``peer``) in another
    namespace (labels ``peer_namespace``) on that port."""
    isolating = [p for p in policies if p["metadata"]["namespace"] == namespace
                 and "Egress" in (p["spec"].get("policyTypes") or [])
                 and selector_matches(p["spec"].get("podSelector") or {}, labels)]
    assert isolating, "the pod is isolated for egress"

    def peer_matches(entry: dict) -> bool:
        if "ipBlock" in entry:
            return False
        return selector_matches(entry.get("namespaceSelector") or {}, peer_namespace) \
            if "namespaceSelector" in entry and selector_matches(entry.get("podSelector") or {}, peer) else False

    def port_matches(entry: dict) -> bool:
        return entry.get("protocol", "TCP") == protocol and entry.get("port") in (None, port)

    return any((not rule.get("to") or any(peer_matches(e) for e in rule["to"]))
               and (not rule.get("ports") or any(port_matches(e) for e in rule["ports"]))
               for policy in isolating for rule in policy["spec"].get("egress") or [])


@pytest.mark.parametrize("stack, team", [("dev", "team-nlp"), ("eks", "team-legal")])
def test_the_namespaces_policies_let_only_the_dns_reach_the_host_dns(stack, team, tmp_path, dev_run, eks_run):
    program = {"dev": dev_run, "eks": eks_run}[stack]
    release_inputs = program.named(f"tenant-{team}-vcluster").inputs
    chart = mirror_chart(VCLUSTER, f"v{release_inputs['version']}", "chart", tmp_path)
    rendered = render_release(chart, release_inputs["name"], release_inputs["namespace"], release_inputs["values"])
    policies = [d for text in rendered.values() for d in yaml.safe_load_all(text)
                if d and d.get("kind") == "NetworkPolicy"]
    for policy in policies:
        policy["metadata"].setdefault("namespace", release_inputs["namespace"])
    # vCluster's own are off; the program renders them (components/tenant_network.py).
    policies += [{"metadata": p.inputs["metadata"], "spec": p.inputs["spec"]} for p in program.of_type(NETWORK_POLICY)]
    release = Release(release_inputs["name"], release_inputs["namespace"], "vcluster", release_inputs["version"],
                      release_inputs["values"])
    [dns] = vcluster_dns_pods(release)
    host_dns = ({"kubernetes.io/metadata.name": "kube-system"}, {"k8s-app": "kube-dns"})
    for protocol in ("UDP", "TCP"):
        assert _egress_reaches(policies, release.namespace, dns.manifest["metadata"]["labels"], *host_dns, 53, protocol)
    workload = {"app": "web", "vcluster.loft.sh/managed-by": release.name, "vcluster.loft.sh/namespace": "default"}
    assert not _egress_reaches(policies, release.namespace, workload, *host_dns, 53, "UDP")


def test_the_coredns_table_is_vclusters_own():
    source = git(VCLUSTER, "show", "v0.36.1:pkg/constants/coredns.go")
    table = dict(re.findall(r'"(\d+\.\d+)":\s*"([^"]+)"', source.split("CoreDNSVersionMap", 1)[1].split("}", 1)[0]))
    assert table == versions.COREDNS_IMAGES
    chooser = git(VCLUSTER, "show", "v0.36.1:pkg/coredns/coredns.go")
    assert re.search(rf'DefaultImage\s*=\s*"{re.escape(versions.COREDNS_FALLBACK_IMAGE)}"', chooser)
    assert re.search(rf'DefaultImageRegistry\s*=\s*"{re.escape(versions.COREDNS_REGISTRY)}"', chooser)
    assert not any(image.endswith(":latest") for image in versions.COREDNS_IMAGES.values())


@pytest.mark.parametrize("extra, image", [
    ({}, "docker.io/coredns/coredns:1.14.2"),
    ({"controlPlane": {"distro": {"k8s": {"version": "v1.37.0"}}}}, "docker.io/coredns/coredns:1.14.2"),
    ({"controlPlane": {"advanced": {"defaultImageRegistry": "registry.corp.example/mirror"}}},
     "registry.corp.example/mirror/coredns/coredns:1.14.2"),
])
def test_the_dns_image_follows_the_virtual_kubernetes_and_the_registry(extra, image):
    config = dev_config()
    config["gpu-tenancy:vcluster"]["extraValues"] = extra
    program = run(config, stack="dev")
    deployment = next(d for d in dns_documents(program, "team-nlp") if d["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
    team = platform_of(config, stack="dev").teams[0]
    assert coredns_image(team.vcluster) == image


def test_an_older_virtual_kubernetes_picks_its_own_coredns_as_vcluster_does():
    # The config refuses a virtual Kubernetes before 1.36 (no GA MutatingAdmissionPolicy); the table still
    # follows vCluster's own, so a settings object below it picks that minor's image.
    settings = platform_of(dev_config(), stack="dev").teams[0].vcluster
    older = dataclasses.replace(settings, extra_values={"controlPlane": {"distro": {"k8s": {"image": {"tag": "v1.33.4"}}}}})
    assert coredns_image(older) == "docker.io/coredns/coredns:1.12.0"


def dumped(team, host_dns: str) -> str:
    return "---\n".join(yaml.safe_dump(document, sort_keys=False) for document in coredns_objects(team, host_dns))


@pytest.mark.parametrize("name", ["team-nlp", "yes", "on", "null", "123", "1e3", "0x1f", "2020-01-01", "t" * 63])
@pytest.mark.parametrize("registry", [None, "registry.corp.example/mirror"])
def test_each_teams_dns_manifests_are_its_objects_dumped(name, registry):
    team = platform_of(dev_config(), stack="dev").teams[0]
    extra = {"controlPlane": {"advanced": {"defaultImageRegistry": registry}}} if registry else {}
    named = dataclasses.replace(team, name=name, vcluster=dataclasses.replace(team.vcluster, extra_values=extra))
    text = coredns_manifests(named, MOCK_CLUSTER_DNS)
    assert text == dumped(named, MOCK_CLUSTER_DNS)
    deployment = next(d for d in yaml.safe_load_all(text) if d["kind"] == "Deployment")
    assert deployment["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"] == name


@given(st.from_regex(DNS_LABEL, fullmatch=True).filter(lambda name: len(name) <= 63))
def test_any_team_name_gives_the_dumped_text(name):
    team = dataclasses.replace(platform_of(dev_config(), stack="dev").teams[1], name=name)
    assert coredns_manifests(team, "10.96.0.10") == dumped(team, "10.96.0.10")
