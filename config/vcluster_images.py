"""The images a tenant's vCluster runs, and where it pulls them from.

vCluster's chart and syncer put ``controlPlane.advanced.defaultImageRegistry`` in place of every image's own
registry when it is set; otherwise an image comes from its registry, under the site's mirror of it
(config/mirrors.py). The program's own images in the virtual cluster (its DNS, HAMi-core) follow the same rule, and
the host's admission rules admit exactly these references (components/admission_images.py).
"""

from __future__ import annotations

import re
from typing import Optional

from config import versions
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


def _under_default_registry(settings: VClusterSettings, image: str, registry: str) -> str:
    """``image`` as the virtual cluster pulls the platform's images: under its defaultImageRegistry, if set (an
    air-gapped site's mirror), else under ``registry`` or the site's mirror of it (config/mirrors.py)."""
    default = dig(settings.extra_values, "controlPlane", "advanced").get("defaultImageRegistry")
    if default:
        return f"{str(default).rstrip('/')}/{image}"
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
    registry = dig(settings.extra_values, "controlPlane", "advanced").get("defaultImageRegistry") \
        or image.get("registry") or "docker.io"
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
    plane and Kubernetes images, both on VCLUSTER_IMAGE_REGISTRY, and the rewrite-hosts init container's."""
    if not settings.mirrors.images:
        return {}
    registry = settings.mirrors.registry(versions.VCLUSTER_IMAGE_REGISTRY)
    return {"controlPlane": {"statefulSet": {"image": {"registry": registry}},
                             "distro": {"k8s": {"image": {"registry": registry}}}},
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
