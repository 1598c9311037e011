"""The images a tenant's vCluster runs, and where it pulls them from.

A team's ``controlPlane.advanced.defaultImageRegistry`` (vcluster.extraValues) takes the place of the registry of
every image vCluster runs, read at every accepted tag: the chart's control plane, Kubernetes and deployed etcd
images (chart/templates/_helper.tpl ``vcluster.image``: ``<registry>/<repository>:<tag>``, whatever registry the
values name), the rewrite-hosts init container (pkg/controllers/resources/pods/translate/translator.go) and CoreDNS
(pkg/coredns/coredns.go). The repository path is kept, so the registry behind it holds every image under one
prefix (``<prefix>/loft-sh/vcluster-pro``, ``<prefix>/coredns/coredns``, ``<prefix>/library/alpine``). The
program's own images in the virtual cluster (its DNS, HAMi-core) follow it too. Without it an image comes from its
own registry, under the site's mirror of that (config/mirrors.py). The host's admission rules admit exactly these
references (components/admission_images.py), and a team with it needs no mirror of the registries it replaces
(config/mirror_registries.py).
"""

from __future__ import annotations

import re
from typing import Optional

from config import versions
from config.backing_store import control_plane_shape
from config.image_registries import DEFAULT_DOMAIN, _entry_problem
from config.key_types import type_name
from config.mirrors import Mirrors, past_the_mirrors, split_image
from config.model import VClusterSettings

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$")


def virtual_kubernetes_version(settings: VClusterSettings) -> Optional[str]:
    """The Kubernetes version a vCluster runs inside (the k8s distro's version or image tag as the chart
    reads them), or None when the chart version was refused (it has its own error)."""
    k8s = dig(settings.extra_values, "controlPlane", "distro", "k8s")
    for value in (k8s.get("version"), dig(k8s, "image").get("tag")):
        if isinstance(value, str) and value:
            return value
    if not settings.version:
        return None
    # Every accepted release (versions.VCLUSTER_RELEASES) has its default listed; a refused one has its own error.
    return versions.VCLUSTER_VIRTUAL_KUBERNETES.get(settings.version)


def default_image_registry(settings: VClusterSettings) -> Optional[str]:
    """The virtual cluster's controlPlane.advanced.defaultImageRegistry, or None when it has none (the chart's
    default is empty)."""
    return dig(settings.extra_values, "controlPlane", "advanced").get("defaultImageRegistry") or None


def default_registry_findings(settings: VClusterSettings, mirrors: Mirrors, whose: str
                              ) -> list[tuple[str, object, str, str]]:
    """A defaultImageRegistry vCluster cannot put before a repository, or one on a registry the site's mirrors
    stand in for (the team's vCluster would pull from that registry itself): (key under the settings, value,
    problem, fix)."""
    registry = default_image_registry(settings)
    if registry is None:
        return []
    key = "extraValues.controlPlane.advanced.defaultImageRegistry"
    problem, fix = _entry_problem(registry) if isinstance(registry, str) else \
        (f"is {type_name(registry)}, not a registry", "write it as host[/path], e.g. harbor.corp.example/vcluster")
    if problem:
        return [(key, registry, f"vCluster writes it before every image's repository (<value>/loft-sh/vcluster-pro:"
                 f"<tag>), so it must be a registry host with an optional path, and this {problem}", fix)]
    pulls = f"{whose} vCluster would pull its control plane, Kubernetes, DNS and init-container images"
    found = past_the_mirrors(split_image(f"{registry}/")[0], mirrors, pulls, mirrors.registry(registry))
    if found:
        return [(key, registry, found[0],
                 f"{found[1]}, or remove it so that each image comes from the mirror of its own registry")]
    return []


# The vCluster chart's images a site may name through extraValues (config/vcluster_values.py), by the block that
# holds each one's registry, repository and tag, with what it is. vCluster writes defaultImageRegistry in
# place of each one's registry (chart/templates/_helper.tpl ``vcluster.image``; the syncer's pod translator for the
# rewrite-hosts init container), and with an empty registry the repository is the whole reference.
CHART_IMAGES = {
    "controlPlane.statefulSet.image": "the control plane's image",
    "controlPlane.distro.k8s.image": "the virtual Kubernetes image",
    "controlPlane.backingStore.etcd.deploy.statefulSet.image": "the deployed etcd's image",
    "sync.toHost.pods.rewriteHosts.initContainer.image": "the rewrite-hosts init container's image",
}
# Containers the chart writes into the control plane's pod as the site lists them (chart/templates/
# _init-containers.tpl, statefulset.yaml: toYaml), their images untouched by defaultImageRegistry.
CONTAINER_LISTS = {"controlPlane.statefulSet.initContainers": "init container",
                   "controlPlane.statefulSet.sidecarContainers": "sidecar"}
# Tenant image -> the image the syncer puts in its place on the host pod (pods/translate/image_translator.go).
TRANSLATED_IMAGES = "sync.toHost.pods.translateImage"
# Image values of the chart that nothing pulls with the program's settings, and why.
UNPULLED_IMAGES = {
    "controlPlane.coredns.deployment.image": "the program writes the tenant DNS's manifests itself "
                                             "(controlPlane.coredns.overwriteManifests, components/tenant_dns.py), and "
                                             "vCluster reads this value only in the manifests it writes otherwise "
                                             "(pkg/coredns/template.go)",
}


def site_images(settings: VClusterSettings) -> list[tuple[str, str, str, bool]]:
    """Every image the host pulls as the settings' extraValues name it: (key under the settings, the value, what
    image it is, whether the value is a registry rather than a whole image). A chart image's registry counts only
    where vCluster uses it (no defaultImageRegistry, which is judged on its own; a deployed etcd; rewrite-hosts on);
    an empty one makes the repository the reference."""
    extra, found = settings.extra_values, []
    for path, what in CHART_IMAGES.items():
        if default_image_registry(settings) or not _pulled(settings, path):
            continue
        image = dig(extra, *path.split("."))
        registry, repository = image.get("registry"), image.get("repository")
        if isinstance(registry, str) and registry:
            found.append((f"extraValues.{path}.registry", registry, what, True))
        elif registry == "" and isinstance(repository, str) and repository:
            found.append((f"extraValues.{path}.repository", repository, what, False))
        elif registry == "":
            found.append((f"extraValues.{path}.registry", "", f"{what} (an empty registry is Docker Hub's)", True))
    for path, kind in CONTAINER_LISTS.items():
        containers = dig(extra, *path.split(".")[:-1]).get(path.split(".")[-1])
        for index, container in enumerate(containers if isinstance(containers, list) else []):
            image = container.get("image") if isinstance(container, dict) else None
            if isinstance(image, str) and image:
                found.append((f"extraValues.{path}[{index}].image", image,
                              f"the control plane's {kind} {container.get('name')}'s image", False))
    for tenants, image in dig(extra, *TRANSLATED_IMAGES.split(".")).items():
        if isinstance(image, str) and image:
            found.append((f"extraValues.{TRANSLATED_IMAGES}.{tenants}", image,
                          f"the image of every tenant pod that names {tenants}", False))
    return found


def _pulled(settings: VClusterSettings, path: str) -> bool:
    if path.startswith("controlPlane.backingStore.etcd."):
        return control_plane_shape(settings).deployed_etcd
    if path.startswith("sync.toHost.pods.rewriteHosts."):
        return dig(settings.extra_values, "sync", "toHost", "pods", "rewriteHosts").get("enabled") is not False
    return True


def site_image_findings(settings: VClusterSettings, mirrors: Mirrors, whose: str
                        ) -> list[tuple[str, object, str, str]]:
    """An image the extraValues name on a registry the site's mirrors stand in for (config/mirrors.py
    past_the_mirrors): (key under the settings, value, problem, fix)."""
    found = []
    for key, value, what, is_registry in site_images(settings):
        registry = value or DEFAULT_DOMAIN
        host, mirrored = (split_image(f"{registry}/")[0], mirrors.registry(registry)) if is_registry else \
            (split_image(value)[0], mirrors.image(value))
        found_problem = past_the_mirrors(host, mirrors, f"{whose} vCluster would pull {what}", mirrored)
        if found_problem:
            problem, fix = found_problem
            if key.endswith(".registry"):
                fix += ", or remove it: the program sets the mirror's address there itself"
            found.append((key, value, problem, fix))
    return found


def _under_default_registry(settings: VClusterSettings, image: str, registry: str) -> str:
    """``image`` as the virtual cluster pulls the platform's images: under its defaultImageRegistry, if set (an
    air-gapped site's mirror), else under ``registry`` or the site's mirror of it (config/mirrors.py)."""
    default = default_image_registry(settings)
    if default:
        return f"{default}/{image}"
    return settings.mirrors.image(f"{registry}/{image}")


def coredns_image(settings: VClusterSettings) -> str:
    """The CoreDNS image vCluster 0.36.1 would run for this virtual cluster, under its default registry."""
    version = virtual_kubernetes_version(settings)
    minor = minor_version(version) if version else None
    image = versions.COREDNS_IMAGES.get("%d.%d" % minor if minor else "", versions.COREDNS_FALLBACK_IMAGE)
    return _under_default_registry(settings, image, versions.COREDNS_REGISTRY)


def hami_core_image(settings: VClusterSettings) -> str:
    """The HAMi-core image a memory-capped team's pods mount, under the virtual cluster's default registry: the
    in-vCluster policy adds exactly this reference and the host's [hami-core] rule accepts no other."""
    return _under_default_registry(settings, versions.HAMI_CORE_IMAGE, versions.HAMI_CORE_REGISTRY)


def rewrite_hosts_image(settings: VClusterSettings) -> str:
    """The image of the init container vCluster's syncer adds to a pod with a subdomain, as its pod translator
    names it (pkg/controllers/resources/pods/translate/translator.go, config/config.go ``Image.String``): the
    chart's image, under controlPlane.advanced.defaultImageRegistry if set, else its own registry, else
    docker.io; ``library/`` before a repository without a slash."""
    image = {**rewrite_hosts_values(settings),
             **dig(settings.extra_values, "sync", "toHost", "pods", "rewriteHosts", "initContainer", "image")}
    registry = default_image_registry(settings) or image.get("registry") or "docker.io"
    repository, tag = str(image.get("repository") or ""), str(image.get("tag") or "")
    library = "library/" if repository and "/" not in repository else ""
    return f"{registry}/{library}{repository}" + (f":{tag}" if tag else "")


def rewrite_hosts_values(settings: VClusterSettings) -> dict:
    """The chart's rewrite-hosts image as the program sets it: the pinned one, from the site's mirror of its
    registry."""
    return {**versions.REWRITE_HOSTS_IMAGE,
            "registry": settings.mirrors.registry(versions.REWRITE_HOSTS_IMAGE["registry"])}


def image_values(settings: VClusterSettings) -> dict:
    """The chart's image registries under the site's mirrors (nothing without a mirror for them): its control
    plane and Kubernetes images, both on VCLUSTER_IMAGE_REGISTRY, a deployed etcd's and the rewrite-hosts init
    container's."""
    if not settings.mirrors.images:
        return {}
    registry = settings.mirrors.registry(versions.VCLUSTER_IMAGE_REGISTRY)
    etcd = {"deploy": {"statefulSet": {"image": {"registry": settings.mirrors.registry(
        versions.VCLUSTER_ETCD_IMAGE_REGISTRY)}}}}
    return {"controlPlane": {"statefulSet": {"image": {"registry": registry}},
                             "distro": {"k8s": {"image": {"registry": registry}}},
                             "backingStore": {"etcd": etcd}},
            "sync": {"toHost": {"pods": {"rewriteHosts": {"initContainer": {
                "image": {"registry": rewrite_hosts_values(settings)["registry"]}}}}}}}


def control_plane_image(settings: VClusterSettings) -> str:
    """The control plane's image as the chart writes it from the program's values (chart/templates/_helper.tpl
    ``vcluster.controlPlane.image``): defaultImageRegistry, else the values' registry (the site's mirror of
    VCLUSTER_IMAGE_REGISTRY, or extraValues'), the repository, and the values' tag or the chart's version."""
    image = dig(settings.extra_values, "controlPlane", "statefulSet", "image")
    registry = default_image_registry(settings) or image.get("registry", settings.mirrors.registry(
        versions.VCLUSTER_IMAGE_REGISTRY))
    repository = image.get("repository") or versions.VCLUSTER_CONTROL_PLANE_REPOSITORY
    reference = f"{repository}:{image.get('tag') or settings.version}"
    return f"{registry}/{reference}" if registry else reference


def minor_version(version: str) -> Optional[tuple[int, int]]:
    match = _VERSION.match(version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def dig(values: object, *path: str) -> dict:
    """The map at ``path`` under ``values``, or an empty one where there is none."""
    for key in path:
        values = values.get(key) if isinstance(values, dict) else None
    return values if isinstance(values, dict) else {}
