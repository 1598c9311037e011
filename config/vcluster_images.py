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
from config.image_registries import _entry_problem
from config.key_types import type_name
from config.mirrors import Mirrors, split_image
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
    """A defaultImageRegistry vCluster cannot put before a repository, or one on a registry the site mirrors (the
    team's vCluster would pull from that registry itself): (key under the settings, value, problem, fix)."""
    registry = default_image_registry(settings)
    if registry is None:
        return []
    key = "extraValues.controlPlane.advanced.defaultImageRegistry"
    problem, fix = _entry_problem(registry) if isinstance(registry, str) else \
        (f"is {type_name(registry)}, not a registry", "write it as host[/path], e.g. harbor.corp.example/vcluster")
    if problem:
        return [(key, registry, f"vCluster writes it before every image's repository (<value>/loft-sh/vcluster-pro:"
                 f"<tag>), so it must be a registry host with an optional path, and this {problem}", fix)]
    host = split_image(f"{registry}/")[0]
    if host in mirrors.images:
        return [(key, registry, f"is on {host}, which mirrors.images mirrors to {mirrors.images[host]}: {whose} "
                 f"vCluster would pull its control plane, Kubernetes, DNS and init-container images from {host} "
                 "itself, past the mirror",
                 f"write the mirror's address, {mirrors.registry(registry)}, or remove it so that each image comes "
                 "from the mirror of its own registry")]
    return []


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


def minor_version(version: str) -> Optional[tuple[int, int]]:
    match = _VERSION.match(version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def dig(values: object, *path: str) -> dict:
    """The map at ``path`` under ``values``, or an empty one where there is none."""
    for key in path:
        values = values.get(key) if isinstance(values, dict) else None
    return values if isinstance(values, dict) else {}
