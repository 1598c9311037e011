"""A memory-capped team's pods mount HAMi-core from an image volume: the site's clusters must serve and mount it.

The config refuses a host whose Kubernetes cannot, before anything is registered; the deployability check finds
the same on a plan's objects; the contract tests read what the rule rests on at the pinned tags (vCluster's pod
translator, MicroK8s' containerd, containerd's image mounts).
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from config import ConfigError, load_platform
from config.image_volumes import IMAGE_VOLUME_ON_BY_DEFAULT, MICROK8S_CONTAINERD, image_volume_problem
from config.virtual_cluster import MUTATING_ADMISSION_POLICY_GA, virtual_kubernetes_version
from config.vocabulary import RELEASE
from config.load_vcluster import DEFAULT_VCLUSTER
from config.versions import KUBERNETES_MINIMUM_VERSION, VCLUSTER_VIRTUAL_KUBERNETES, release_numbers
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, CONTAINERD_CRI_V2_TAGS, dev_config, eks_config, git, go_function, run
from tools.deployability import image_volumes
from tools.deployability.inputs import K8sObject, program_objects, site_from_plan
from tools.plan.document import build_plan

VCLUSTER = "loft-sh/vcluster"
MICROK8S = "canonical/microk8s"
CONTAINERD = "containerd/containerd"
# The first containerd that applies an image volume's subPath (earlier 2.x mount the whole image).
CONTAINERD_IMAGE_SUBPATH = "v2.2.0"
FLOOR = "%d.%d" % IMAGE_VOLUME_ON_BY_DEFAULT


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


BELOW = f"{IMAGE_VOLUME_ON_BY_DEFAULT[0]}.{IMAGE_VOLUME_ON_BY_DEFAULT[1] - 1}"


# --- the config rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SITES)
def test_a_memory_capped_team_is_accepted_from_the_floor(kind):
    # MicroK8s 1.35 included: its containerd 2.1 mounts the whole image, where the library is named.
    platform = load(raw(memory_capped(kind, FLOOR)))
    assert platform.kai_scheduler.hamicore


@pytest.mark.parametrize("kind", SITES)
def test_a_memory_capped_team_below_the_floor_is_refused_on_the_version(kind):
    with pytest.raises(ConfigError) as refused:
        load(raw(memory_capped(kind, BELOW)))
    [issue] = refused.value.issues
    assert (issue.key, issue.value) == (f"cluster.{kind}.kubernetesVersion", BELOW)
    team = raw(SITES[kind]())["teams"][0]["name"]
    assert team in issue.problem and "image volume" in issue.problem
    assert f"{FLOOR} or later" in issue.fix and "another isolation tier" in issue.fix


@pytest.mark.parametrize("kind, version, words", [
    ("eks", "1.34", ("ImageVolume feature gate off", "EKS cannot turn a feature gate on", "[hami-core]")),
    ("kubeconfig", "1.33", ("ImageVolume feature gate off", "[hami-core]")),
    ("microk8s", "1.34", ("ImageVolume feature gate off", "v1.7.28", "[hami-core]")),
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
    plans = {kind: build_plan(run(memory_capped(kind, FLOOR)), kind) for kind in SITES}
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
    [(where, problem, fix)] = image_findings(plan, BELOW)
    team = raw(SITES[kind]())["teams"][0]["name"]
    assert where.startswith("vCluster ") and team in where and "gpu-tenancy-hami-core" in problem
    assert f"cluster.{kind}.kubernetesVersion" in fix


def test_the_committed_stacks_tenants_add_no_image_volume(capped_plans):
    # A committed stack on an old host stays clean: none of its teams is memory-capped.
    assert image_findings(capped_plans["committed eks"], "1.30") == []


def test_pulling_the_image_volumes_a_pod_has_adds_none():
    # vcluster.alwaysPullImages sets the pull policy of the image volumes a tenant's pod already has: a site on a
    # host without image volumes is not refused for it (the memory-capped team's HAMi-core still is).
    config = eks_config()
    config["gpu-tenancy:vcluster"] = {**config.get("gpu-tenancy:vcluster", {}), "alwaysPullImages": True}
    plan = build_plan(run(config, "eks"), "eks")
    manifests = [resource["inputs"]["values"]["experimental"]["deploy"]["vcluster"]["manifests"]
                 for resource in plan["resources"] if resource["type"] == RELEASE and
                 resource["inputs"].get("chart") == "vcluster"]
    assert manifests and all("gpu-tenancy-image-pull" in text and ".volumes.image{" in text for text in manifests)
    assert image_findings(plan, "1.30") == []
    capped = memory_capped("eks", FLOOR)
    capped["gpu-tenancy:vcluster"] = {**capped.get("gpu-tenancy:vcluster", {}), "alwaysPullImages": True}
    [(_, problem, _)] = image_findings(build_plan(run(capped, "eks"), "eks"), BELOW)
    assert "gpu-tenancy-hami-core" in problem


def pod(volume: dict, mount: dict) -> K8sObject:
    return K8sObject({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "apps"},
                      "spec": {"containers": [{"name": "c", "image": "x", "volumeMounts": [mount]}],
                               "volumes": [volume]}}, "test")


def test_a_pod_template_mounting_an_image_is_checked_by_the_same_floor(capped_plans):
    site = site_from_plan(capped_plans["microk8s"])
    volume = {"name": "models", "image": {"reference": "example.invalid/models:v1"}}
    mounted = pod(volume, {"name": "models", "mountPath": "/m"})
    at = lambda version: image_volumes.check_image_volumes([], [mounted], dataclasses.replace(
        site, kubernetes_version=version))
    assert len(at(BELOW)) == 1 and at(FLOOR) == []


# --- what the rule rests on, read at the pinned tags ------------------------------------------------------


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vclusters_pod_translator_carries_an_image_volume_unchanged(tag):
    translator = git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/pods/translate/translator.go")
    body = go_function(translator, "(t *translator) translateVolumes")
    # Volumes are rewritten kind by kind; an image volume is not among them (nor is its reference translated).
    assert "Volumes[i].ConfigMap" in body and ".Image" not in body
    assert "translate.HostMetadata(vPod" in translator
    copied = git(VCLUSTER, "show", f"{tag}:pkg/util/translate/translate.go")
    assert re.search(r"func CopyObjectWithName\[[^\n]*\n\s*target := obj\.DeepCopyObject\(\)", copied)


# The tracks whose containerd the rule names (older ones are mirrored for their certificates).
@pytest.mark.parametrize("tag", [f"v{track}" for track in MICROK8S_CONTAINERD])
def test_microk8s_bundles_the_containerd_the_rule_names(tag):
    script = git(MICROK8S, "show", f"{tag}:build-scripts/components/containerd/version.sh")
    assert re.search(r'echo "(v[0-9.]+)"', script).group(1) == MICROK8S_CONTAINERD[tag.removeprefix("v")]


def test_every_accepted_microk8s_track_below_the_floor_names_its_own_containerd():
    # The refusal names the host's containerd; a track missing here would have had the rule guess one.
    below = [f"1.{minor}" for minor in range(release_numbers(KUBERNETES_MINIMUM_VERSION)[1],
                                              IMAGE_VOLUME_ON_BY_DEFAULT[1])]
    assert set(below) <= set(MICROK8S_CONTAINERD)
    for track in below:
        assert f"containerd ({MICROK8S_CONTAINERD[track]})" in image_volume_problem("microk8s", track)


def test_the_microk8s_tracks_below_the_floor_are_the_ones_without_image_volume_support():
    # containerd 1.7 mounts no image volumes (its CRI plugin predates them); the floor already leaves those tracks out.
    for track, containerd in MICROK8S_CONTAINERD.items():
        assert (release_numbers(track)[:2] >= IMAGE_VOLUME_ON_BY_DEFAULT) == containerd.startswith("v2."), track


@pytest.mark.parametrize("tag", CONTAINERD_CRI_V2_TAGS)
def test_containerd_mounts_the_whole_image_on_every_track_the_rule_accepts(tag):
    mounts = git(CONTAINERD, "show", f"{tag}:internal/cri/server/container_image_mount.go")
    # Every mirrored 2.x mounts an image volume (read-only, the whole image at the container's mount path) ...
    assert "func (c *criService) mutateImageMount(" in mounts and "mount.All(mounts, target)" in mounts
    # ... and applies a mount's subPath only from v2.2.0. A fact, no longer a condition of the rule: the
    # program mounts the whole image and names the library in it (tests/test_isolation_redirect.py), so the
    # library is at the same path on both; a subPath'd mount is refused by the host's [hami-core] rule.
    assert ("GetImageSubPath()" in mounts) == (release_numbers(tag) >= release_numbers(CONTAINERD_IMAGE_SUBPATH))
    for track, containerd in MICROK8S_CONTAINERD.items():
        if containerd == tag:
            assert release_numbers(track) >= IMAGE_VOLUME_ON_BY_DEFAULT
