"""Images a site names itself, through its vCluster values, on a site with ``mirrors.images``
(config/vcluster_images.py site_images, config/mirrors.py past_the_mirrors).

``vcluster.extraValues`` (and a team's) are merged last over the program's values, so an image registry written
there replaces the mirror's address the program sets: the nodes would pull from the registry the mirror stands in
for, or from a public one nobody mirrors. Every image value of the chart a site may set is found here from the
chart's schema and values at every accepted tag, so a release that adds one fails until it is checked; a value on
such a registry is refused naming the key, the value and the mirror's address, and the values an honest site
writes (the mirror's address, its own registry, a repository or tag) are still accepted and render as checked.
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from components.tenant import vcluster_values
from config import SECRET_KEYS, load_platform, versions
from config.mirror_registries import deployed_registries
from config.keys import Block, ListOf
from config.key_collections import AnyMap
from config.load import STACK_CONFIG
from config.vcluster_images import (
    CHART_IMAGES, CONTAINER_LISTS, TRANSLATED_IMAGES, UNPULLED_IMAGES, site_images,
)
from config.vcluster_values import REFUSED
from config.vcluster_values_lookup import classified
from config.vocabulary import project_config
from tests.config_spec import assert_rejected, dev_config, eks_config, put, rejected
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, COMMITTED_STACKS, git, mirrored_tag, run
from tests.generated_sites import GENERATED_SITES, generated_sites, site_config  # noqa: F401 (fixture)
from tests.release_renders import rendered
from tests.site_corpus import VALID_SITES
from tests.test_chart_images import _release_images
from tests.test_mirrors import PREFIX, mirror_of
from tests.test_mirrors_default_registry import DEPLOYED_ETCD, _mirrored_site, one_team
from tests.test_vcluster_values_contract import VCLUSTER, chart_schema, value_paths

# A step of a value's path that names an image, a registry images are pulled from, or containers with images.
IMAGE_STEP = re.compile(r"^image$|Image$|ImageRegistry$|Containers$")
DEFAULT_REGISTRY = "controlPlane.advanced.defaultImageRegistry"
CHECKED = {*CHART_IMAGES, *CONTAINER_LISTS, TRANSLATED_IMAGES, DEFAULT_REGISTRY}
SITE_REGISTRY = "registry.site.example:5000/platform"


def chart_image_values(tag: str) -> dict[str, set[str]]:
    """Every value of the vCluster chart at ``tag`` that names an image, cut at the step that does
    (``controlPlane.statefulSet.image`` for its registry, repository and tag), with the values under it."""
    values = yaml.safe_load(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:chart/values.yaml"))
    found: dict[str, set[str]] = {}
    for path in set(chart_schema(tag)) | set(value_paths(values)):
        steps = path.split(".")
        for index, step in enumerate(steps):
            if IMAGE_STEP.search(step):
                found.setdefault(".".join(steps[:index + 1]), set()).add(path)
                break
    return found


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_every_image_value_a_site_may_set_is_checked_against_the_mirrors(tag):
    version = tag.removeprefix("v")
    found = chart_image_values(tag)
    settable = {image for image, paths in found.items()
                if any(classified(path, version)[1].kind != REFUSED for path in paths)}
    assert settable - CHECKED - set(UNPULLED_IMAGES) == set(), (
        f"vCluster {tag} has image values a site may set that config/vcluster_images.py does not hold to the mirrors: "
        "read how the chart or the syncer builds each image from them, and add them to site_images")


def test_each_checked_image_value_is_one_an_accepted_chart_has():
    every = set().union(*(chart_image_values(tag) for tag in ACCEPTED_VCLUSTER_TAGS))
    assert CHECKED | set(UNPULLED_IMAGES) <= every


def raw_values_keys(block: Block, prefix: str = ""):
    """The keys whose map the program passes to a chart unread (AnyMap), dotted, ``[]`` for a list's entries."""
    for key in block.keys:
        path = prefix + key.name
        if isinstance(key.type, AnyMap):
            yield path
        elif isinstance(key.type, Block):
            yield from raw_values_keys(key.type, path + ".")
        elif isinstance(key.type, ListOf):
            yield from raw_values_keys(key.type.block, path + "[].")


def test_the_vcluster_chart_is_the_only_one_a_site_passes_its_own_values_to():
    """So the KAI, GPU Operator and kube-prometheus-stack images are the program's alone (tests/test_mirrors.py)."""
    assert set(raw_values_keys(STACK_CONFIG)) == {"vcluster.extraValues", "teams[].vcluster.extraValues"}


def test_the_coredns_image_value_is_not_read_beside_the_programs_dns_manifests():
    """UNPULLED_IMAGES: with overwriteManifests set, vCluster's DNS manifests are that value and nothing else, and
    the program always sets it (a site may not: config/vcluster_values.py)."""
    for tag in ACCEPTED_VCLUSTER_TAGS:
        template = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/coredns/template.go")
        assert ("const corednsManifests = `{{- if .Values.controlPlane.coredns.overwriteManifests }}\n"
                "{{ .Values.controlPlane.coredns.overwriteManifests }}\n{{- else") in template
    assert classified("controlPlane.coredns.overwriteManifests", versions.VCLUSTER_VERSION)[1].kind != "site may set"
    platform = run(eks_config(), stack="eks").program_globals["platform"]
    assert vcluster_values(platform.teams[0], "10.0.0.10")["controlPlane"]["coredns"]["overwriteManifests"]


def test_a_translated_image_is_the_host_pods_image():
    """TRANSLATED_IMAGES: the syncer looks a tenant's image up in the map and runs what it finds on the host."""
    for tag in ACCEPTED_VCLUSTER_TAGS:
        source = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/controllers/resources/pods/translate/"
                                       "image_translator.go")
        assert "out, ok := i.translateImages[image]" in source


def mirrored_dev() -> dict:
    return _mirrored_site(dev_config(), "dev")


# extraValues, the key under them that is refused, its value, and words of the fix.
PAST_THE_MIRROR = {
    "control plane registry": ({"controlPlane": {"statefulSet": {"image": {"registry": "ghcr.io"}}}},
                               "controlPlane.statefulSet.image.registry", "ghcr.io", mirror_of("ghcr.io")),
    "virtual Kubernetes registry with a path": (
        {"controlPlane": {"distro": {"k8s": {"image": {"registry": "ghcr.io/loft-sh", "tag": "v1.36.0"}}}}},
        "controlPlane.distro.k8s.image.registry", "ghcr.io/loft-sh", f"{mirror_of('ghcr.io')}/loft-sh"),
    "deployed etcd registry": (
        {"controlPlane": {"backingStore": {**DEPLOYED_ETCD, "etcd": {"deploy": {
            "enabled": True, "statefulSet": {"image": {"registry": "registry.k8s.io"}}}}}}},
        "controlPlane.backingStore.etcd.deploy.statefulSet.image.registry", "registry.k8s.io",
        mirror_of("registry.k8s.io")),
    "rewrite-hosts registry": (
        {"sync": {"toHost": {"pods": {"rewriteHosts": {"initContainer": {"image": {"registry": "mirror.gcr.io"}}}}}}},
        "sync.toHost.pods.rewriteHosts.initContainer.image.registry", "mirror.gcr.io", mirror_of("mirror.gcr.io")),
    "an empty registry and a repository naming its host": (
        {"controlPlane": {"statefulSet": {"image": {"registry": "", "repository": "ghcr.io/loft-sh/vcluster-oss"}}}},
        "controlPlane.statefulSet.image.repository", "ghcr.io/loft-sh/vcluster-oss",
        f"{mirror_of('ghcr.io')}/loft-sh/vcluster-oss"),
    "an empty registry, Docker Hub's": (
        {"controlPlane": {"distro": {"k8s": {"image": {"registry": ""}}}}},
        "controlPlane.distro.k8s.image.registry", "", mirror_of("docker.io")),
    "an init container": (
        {"controlPlane": {"statefulSet": {"initContainers": [{"name": "warm", "image": "busybox:1.37"}]}}},
        "controlPlane.statefulSet.initContainers[0].image", "busybox:1.37",
        f"{mirror_of('docker.io')}/library/busybox:1.37"),
    "a sidecar under Docker Hub's legacy name": (
        {"controlPlane": {"statefulSet": {"sidecarContainers": [
            {"name": "logs", "image": "index.docker.io/fluent/fluent-bit:3.2"}]}}},
        "controlPlane.statefulSet.sidecarContainers[0].image", "index.docker.io/fluent/fluent-bit:3.2",
        f"{mirror_of('docker.io')}/fluent/fluent-bit:3.2"),
    "a translated tenant image": (
        {"sync": {"toHost": {"pods": {"translateImage": {"pytorch": "docker.io/pytorch/pytorch:2.5.1"}}}}},
        "sync.toHost.pods.translateImage.pytorch", "docker.io/pytorch/pytorch:2.5.1",
        f"{mirror_of('docker.io')}/pytorch/pytorch:2.5.1"),
}
# The same, on a public registry the site has no mirror of.
UNMIRRORED_PUBLIC = {
    "control plane registry": ({"controlPlane": {"statefulSet": {"image": {"registry": "quay.io/loft"}}}},
                               "controlPlane.statefulSet.image.registry", "quay.io/loft", "add a mirror of quay.io"),
    "a sidecar": ({"controlPlane": {"statefulSet": {"sidecarContainers": [
        {"name": "exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3"}]}}},
        "controlPlane.statefulSet.sidecarContainers[0].image", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3",
        "add a mirror of nvcr.io"),
}


@pytest.mark.parametrize("case", PAST_THE_MIRROR)
def test_a_teams_image_on_a_registry_the_site_mirrors_is_refused_with_the_mirrors_address(case):
    extra, key, value, fix = PAST_THE_MIRROR[case]
    config = put(mirrored_dev(), "teams[0].vcluster.extraValues", copy.deepcopy(extra))
    found = assert_rejected(config, f"teams[0].vcluster.extraValues.{key}", value, fix=fix)
    assert "past the mirror" in found.problem and "team team-nlp's vCluster would pull" in found.problem
    # Without mirrors the site pulls from where it says.
    assert load_platform(put(dev_config(), "teams[0].vcluster.extraValues", copy.deepcopy(extra)))


@pytest.mark.parametrize("case", UNMIRRORED_PUBLIC)
def test_a_teams_image_on_a_public_registry_nobody_mirrors_is_refused(case):
    extra, key, value, fix = UNMIRRORED_PUBLIC[case]
    config = put(mirrored_dev(), "teams[0].vcluster.extraValues", copy.deepcopy(extra))
    assert "quay.io" not in config["mirrors"]["images"] and "nvcr.io" not in config["mirrors"]["images"]
    found = assert_rejected(config, f"teams[0].vcluster.extraValues.{key}", value, fix=fix)
    assert "public registry" in found.problem and "past the site's mirrors" in found.problem


def test_the_stacks_own_value_is_named_once_at_the_stacks_key():
    extra, key, value, fix = PAST_THE_MIRROR["control plane registry"]
    config = put(mirrored_dev(), "vcluster.extraValues", copy.deepcopy(extra))
    issues = rejected(config).issues
    assert [issue.key for issue in issues] == [f"vcluster.extraValues.{key}"]
    assert "the stack's vCluster" in issues[0].problem and fix in issues[0].fix


HONEST = {
    "the mirror's address": {"controlPlane": {"statefulSet": {"image": {"registry": mirror_of("ghcr.io"),
                                                                        "repository": "loft-sh/vcluster-oss"}}}},
    "a repository and tag under the program's mirror": {"controlPlane": {"distro": {"k8s": {"image": {
        "repository": "loft-sh/kubernetes", "tag": "v1.36.0"}}}}},
    "the site's own registry": {"controlPlane": {"statefulSet": {
        "image": {"registry": SITE_REGISTRY},
        "initContainers": [{"name": "warm", "image": f"{SITE_REGISTRY}/busybox:1.37"}],
        "sidecarContainers": [{"name": "logs", "image": f"{mirror_of('docker.io')}/fluent/fluent-bit:3.2"}]}},
        "sync": {"toHost": {"pods": {"translateImage": {"pytorch": f"{SITE_REGISTRY}/pytorch:2.5.1"}}}}},
    # Values vCluster does not pull from with these settings.
    "a registry the default registry replaces": {"controlPlane": {
        "advanced": {"defaultImageRegistry": SITE_REGISTRY}, "statefulSet": {"image": {"registry": "ghcr.io"}}}},
    "an etcd registry without a deployed etcd": {"controlPlane": {"backingStore": {"etcd": {"deploy": {
        "statefulSet": {"image": {"registry": "registry.k8s.io"}}}}}}},
    "a rewrite-hosts registry with rewriting off": {"sync": {"toHost": {"pods": {"rewriteHosts": {
        "enabled": False, "initContainer": {"image": {"registry": "mirror.gcr.io"}}}}}}},
    "the DNS image beside the program's DNS manifests": {"controlPlane": {"coredns": {"deployment": {
        "image": "docker.io/coredns/coredns:1.12.0"}}}},
}


@pytest.mark.parametrize("case", HONEST)
def test_what_an_honest_mirrored_site_writes_is_accepted(case):
    config = put(mirrored_dev(), "teams[0].vcluster.extraValues", copy.deepcopy(HONEST[case]))
    assert load_platform(config).teams[0].vcluster.extra_values


@pytest.mark.parametrize("release", sorted({versions.VCLUSTER_RELEASES[0], versions.VCLUSTER_VERSION}))
def test_each_image_the_values_name_is_what_the_chart_renders(release, tmp_path):
    """site_images reads the values as the chart builds its images: the mirror's addresses a site writes are the
    images its release runs, and every image of the release is under the mirrors."""
    extra = {"controlPlane": {
        "statefulSet": {"image": {"registry": mirror_of("ghcr.io"), "repository": "loft-sh/vcluster-oss"},
                        "initContainers": [{"name": "warm", "image": f"{mirror_of('docker.io')}/library/busybox:1.37"}],
                        "sidecarContainers": [{"name": "logs",
                                               "image": f"{mirror_of('docker.io')}/fluent/fluent-bit:3.2"}]},
        "distro": {"k8s": {"image": {"registry": f"{mirror_of('ghcr.io')}/loft-sh", "repository": "kubernetes"}}},
        "backingStore": {**DEPLOYED_ETCD, "etcd": {"deploy": {"enabled": True, "statefulSet": {"image": {
            "registry": "", "repository": f"{mirror_of('registry.k8s.io')}/etcd", "tag": "3.6.8-0"}}}}}}}
    config = put(one_team(eks_config()), "vcluster.version", release)
    mirrored = put(_mirrored_site(config, "eks"), "teams[0].vcluster.extraValues", extra)
    team = run(mirrored, stack="eks").program_globals["platform"].teams[0]
    images = {image for path, image in _release_images(rendered(mirrored, tmp_path, "eks"))
              if path.startswith(f"{team.vcluster_name}/")}
    named = site_images(team.vcluster)
    assert len(named) == 5
    for key, value, _, is_registry in named:
        assert any(image.startswith(f"{value}/") if is_registry else image == value or image.startswith(f"{value}:")
                   for image in images), (key, value, images)
    assert all(image.startswith(PREFIX + "/") for image in images), images


def _every_site() -> dict[str, dict]:
    """Every committed, corpus and generated site, as raw config without the project prefix."""
    sites = {name: make() for name, make in VALID_SITES.items()}
    sites.update({name: project_config(site_config(name)) for name in (*COMMITTED_STACKS, *sorted(GENERATED_SITES))})
    return sites


def test_every_site_stays_valid_and_so_does_its_mirrored_twin(generated_sites):  # noqa: F811 (fixture)
    """The new rules on every site we have: each is accepted as it is, and with a mirror for each registry it
    deploys from (beside its own mirrors, if any), as a site that goes air-gapped would write it."""
    for name, config in _every_site().items():
        platform = load_platform(config, placeholders=SECRET_KEYS)
        mirrored = copy.deepcopy(config)
        own = (mirrored.get("mirrors") or {}).get("images") or {}
        images = {host: mirror_of(host) for host in deployed_registries(
            platform.cluster, platform.gpu_operator.mode, platform.observability.prometheus, platform.teams)}
        mirrored["mirrors"] = {**(mirrored.get("mirrors") or {}), "images": {**images, **own}}
        assert load_platform(mirrored, placeholders=SECRET_KEYS).teams, name
