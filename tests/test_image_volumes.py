"""A memory-capped team's pods mount HAMi-core from an image volume: the site's clusters must serve and mount it.

The config refuses a host whose Kubernetes (or, on MicroK8s, whose bundled containerd) cannot, before anything is
registered; the deployability check finds the same on a plan's objects; the contract tests read what the rule
rests on at the pinned tags (vCluster's pod translator, MicroK8s' containerd, containerd's image mounts).
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from config import ConfigError, load_platform
from config.image_volumes import (
    CONTAINERD_IMAGE_SUBPATH, IMAGE_VOLUME_ON_BY_DEFAULT, MICROK8S_CONTAINERD, image_volume_floor,
)
from config.virtual_cluster import MUTATING_ADMISSION_POLICY_GA, virtual_kubernetes_version
from config.load_vcluster import DEFAULT_VCLUSTER
from config.versions import VCLUSTER_VIRTUAL_KUBERNETES, release_numbers
from tests.conftest import MIRRORED_TAGS, dev_config, eks_config, git, run
from tools.deployability import image_volumes
from tools.deployability.inputs import K8sObject, program_objects, site_from_plan
from tools.plan.document import build_plan

VCLUSTER = "loft-sh/vcluster"
MICROK8S = "canonical/microk8s"
CONTAINERD = "containerd/containerd"


def kubeconfig_config() -> dict:
    config = {key: value for key, value in dev_config().items() if key != "gpu-tenancy:cluster"}
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"storageClass": "standard"}}
    config["gpu-tenancy:gpuOperator"] = {"mode": "install",
                                         "timeSlicing": {"replicas": 2, "defaultProfile": "exclusive"}}
    config["gpu-tenancy:kubeconfig"] = {"secure": "v1:encrypted"}
    return config


SITES = {"microk8s": dev_config, "eks": eks_config, "kubeconfig": kubeconfig_config}


def memory_capped(kind: str, version: str) -> dict:
    """The site of ``kind`` (a committed stack, or an existing cluster) with its first team memory-capped."""
    config = SITES[kind]()
    config["gpu-tenancy:cluster"][kind]["kubernetesVersion"] = version
    config["gpu-tenancy:teams"][0]["isolation"] = {"tier": "memory-capped"}
    return config


def raw(config: dict) -> dict:
    return {key.removeprefix("gpu-tenancy:"): value for key, value in config.items() if key != "gpu-tenancy:kubeconfig"}


def load(config: dict):
    return load_platform(config, secrets_set={"kubeconfig"})


def below(minor: tuple[int, int]) -> str:
    return f"{minor[0]}.{minor[1] - 1}"


# --- the config rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SITES)
def test_a_memory_capped_team_is_accepted_from_its_hosts_floor(kind):
    floor = "%d.%d" % image_volume_floor(kind)
    platform = load(raw(memory_capped(kind, floor)))
    assert platform.kai_scheduler.hamicore


@pytest.mark.parametrize("kind", SITES)
def test_a_memory_capped_team_below_its_hosts_floor_is_refused_on_the_version(kind):
    version = below(image_volume_floor(kind))
    with pytest.raises(ConfigError) as refused:
        load(raw(memory_capped(kind, version)))
    [issue] = refused.value.issues
    assert (issue.key, issue.value) == (f"cluster.{kind}.kubernetesVersion", version)
    team = raw(SITES[kind]())["teams"][0]["name"]
    assert team in issue.problem and "image volume" in issue.problem
    assert "%d.%d or later" % image_volume_floor(kind) in issue.fix and "another isolation tier" in issue.fix


@pytest.mark.parametrize("kind, version, words", [
    ("eks", "1.34", ("ImageVolume feature gate off", "EKS cannot turn a feature gate on", "[hami-core]")),
    ("kubeconfig", "1.33", ("ImageVolume feature gate off", "[hami-core]")),
    ("microk8s", "1.34", ("ImageVolume feature gate off", "v1.7.28")),
    # The gate is on at 1.35, but MicroK8s 1.35's containerd mounts the whole image: the cap would be lost silently.
    ("microk8s", "1.35", ("containerd v2.1.3", "subPath", "without the memory cap")),
])
def test_the_refusal_says_what_the_host_would_do(kind, version, words):
    with pytest.raises(ConfigError) as refused:
        load(raw(memory_capped(kind, version)))
    problem = refused.value.issues[0].problem
    assert all(word in problem for word in words), problem


def test_a_site_without_memory_capped_teams_keeps_any_version():
    config = raw(SITES["eks"]())
    config["cluster"]["eks"]["kubernetesVersion"] = "1.33"
    assert not load(config).kai_scheduler.hamicore


def test_the_committed_eks_stack_has_no_memory_capped_team_and_would_be_refused_with_one():
    # Pulumi.eks.yaml states EKS 1.33, where a memory-capped team cannot load HAMi-core: it plans today.
    committed = raw(eks_config())
    assert committed["cluster"]["eks"]["kubernetesVersion"] == "1.33"
    assert not load(committed).kai_scheduler.hamicore
    committed["teams"][0]["isolation"] = {"tier": "memory-capped"}
    with pytest.raises(ConfigError):
        load(committed)


def test_every_virtual_cluster_the_config_accepts_serves_image_volumes():
    # The in-vCluster policy adds the volume in the virtual API server, which drops it as the host's would.
    assert MUTATING_ADMISSION_POLICY_GA >= IMAGE_VOLUME_ON_BY_DEFAULT
    assert all(release_numbers(version)[:2] >= IMAGE_VOLUME_ON_BY_DEFAULT
               for version in VCLUSTER_VIRTUAL_KUBERNETES.values())
    assert release_numbers(virtual_kubernetes_version(DEFAULT_VCLUSTER))[:2] >= IMAGE_VOLUME_ON_BY_DEFAULT


# --- the deployability rule --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def capped_plans() -> dict:
    """Each host kind's plan with a memory-capped team at its floor, and the committed stacks' plans."""
    plans = {kind: build_plan(run(memory_capped(kind, "%d.%d" % image_volume_floor(kind))), kind) for kind in SITES}
    plans["committed dev"] = build_plan(run(dev_config(), "dev"), "dev")
    plans["committed eks"] = build_plan(run(eks_config(), "eks"), "eks")
    return plans


def image_findings(plan: dict, version: str | None = None) -> list[tuple[str, str, str]]:
    site = site_from_plan(plan)
    if version is not None:
        site = dataclasses.replace(site, kubernetes_version=version)
    return image_volumes.check_image_volumes(plan["resources"], program_objects(plan["resources"]), site)


@pytest.mark.parametrize("name", ["microk8s", "eks", "kubeconfig", "committed dev", "committed eks"])
def test_planned_sites_have_no_image_volume_finding(capped_plans, name):
    assert image_findings(capped_plans[name]) == []


@pytest.mark.parametrize("kind", SITES)
def test_the_memory_capped_tenant_on_an_older_host_is_a_finding(capped_plans, kind):
    plan = capped_plans[kind]
    [(where, problem, fix)] = image_findings(plan, below(image_volume_floor(kind)))
    team = raw(SITES[kind]())["teams"][0]["name"]
    assert where.startswith("vCluster ") and team in where and "gpu-tenancy-hami-core" in problem
    assert f"cluster.{kind}.kubernetesVersion" in fix


def test_the_committed_stacks_tenants_add_no_image_volume(capped_plans):
    # A committed stack on an old host stays clean: none of its teams is memory-capped.
    assert image_findings(capped_plans["committed eks"], "1.30") == []


def pod(volume: dict, mount: dict) -> K8sObject:
    return K8sObject({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "apps"},
                      "spec": {"containers": [{"name": "c", "image": "x", "volumeMounts": [mount]}],
                               "volumes": [volume]}}, "test")


def test_a_pod_template_mounting_an_image_is_checked_and_microk8s_135_only_fails_its_subpath(capped_plans):
    site = site_from_plan(capped_plans["microk8s"])
    volume = {"name": "models", "image": {"reference": "example.invalid/models:v1"}}
    whole, directory = pod(volume, {"name": "models", "mountPath": "/m"}), \
        pod(volume, {"name": "models", "mountPath": "/m", "subPath": "weights"})
    at = lambda version, obj: image_volumes.check_image_volumes([], [obj], dataclasses.replace(
        site, kubernetes_version=version))
    assert len(at("1.34", whole)) == 1 and len(at("1.34", directory)) == 1
    assert at("1.35", whole) == [] and len(at("1.35", directory)) == 1
    assert at("1.36", directory) == []


# --- what the rule rests on, read at the pinned tags ------------------------------------------------------


@pytest.mark.parametrize("tag", MIRRORED_TAGS[VCLUSTER])
def test_vclusters_pod_translator_carries_an_image_volume_unchanged(tag):
    translator = git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/pods/translate/translator.go")
    body = translator[translator.index("func (t *translator) translateVolumes("):]
    body = body[:body.index("\nfunc ")]
    # Volumes are rewritten kind by kind; an image volume is not among them (nor is its reference translated).
    assert "Volumes[i].ConfigMap" in body and ".Image" not in body
    assert "translate.HostMetadata(vPod" in translator
    copied = git(VCLUSTER, "show", f"{tag}:pkg/util/translate/translate.go")
    assert re.search(r"func CopyObjectWithName\[[^\n]*\n\s*target := obj\.DeepCopyObject\(\)", copied)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_microk8s_bundles_the_containerd_the_rule_names(tag):
    script = git(MICROK8S, "show", f"{tag}:build-scripts/components/containerd/version.sh")
    assert re.search(r'echo "(v[0-9.]+)"', script).group(1) == MICROK8S_CONTAINERD[tag.removeprefix("v")]


@pytest.mark.parametrize("tag", MIRRORED_TAGS[CONTAINERD])
def test_containerd_mounts_an_image_volumes_subpath_from_the_version_the_rule_names(tag):
    mounts = git(CONTAINERD, "show", f"{tag}:internal/cri/server/container_image_mount.go")
    assert ("GetImageSubPath()" in mounts) == (release_numbers(tag) >= release_numbers(CONTAINERD_IMAGE_SUBPATH))
    # The MicroK8s tracks the rule refuses run a containerd that ignores it; the ones it accepts do not.
    for track, containerd in MICROK8S_CONTAINERD.items():
        if containerd == tag:
            accepted = release_numbers(track) >= image_volume_floor("microk8s")
            assert accepted == (release_numbers(tag) >= release_numbers(CONTAINERD_IMAGE_SUBPATH))
