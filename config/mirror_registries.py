"""Which registries a site's deployment pulls from, and the rule that a site with ``mirrors.images`` mirrors
every one of them (config/mirrors.py maps the references)."""

from __future__ import annotations

from typing import Optional, Sequence

from config import versions
from config.backing_store import control_plane_shape
from config.mirrors import Mirrors, split_image
from config.model import MEMORY_CAPPED, Cluster, GpuOperator, Team
from config.observability import Observability
from config.reader import Reader
from config.vcluster_images import default_image_registry


def deployed_registries(cluster: Optional[Cluster], gpu_operator_mode: Optional[str], prometheus: Optional[str],
                        teams: Sequence[Team]) -> dict[str, list[str]]:
    """Registry host -> what the site pulls from it, from what the program knows it deploys (the charts' images
    at the pinned versions are checked against their renders by tests/test_mirrors.py). It takes the settings as
    read, before the cross-field rules pass: a value with a problem of its own (None) adds nothing."""
    found: dict[str, list[str]] = {}

    def add(reference: str, what: str) -> None:
        found.setdefault(split_image(reference)[0], []).append(what)

    kubectl = versions.KUBECTL_IMAGES.get(cluster.kubernetes_version) if cluster is not None else None
    if kubectl:
        add(kubectl, "kubectl (the program's Jobs and CRD hook)")
    add(versions.KAI_IMAGE_REGISTRY + "/operator", "KAI Scheduler")
    # A team's defaultImageRegistry replaces the registry of every image its vCluster runs, the program's DNS and
    # HAMi-core included (config/vcluster_images.py): it is where the site keeps them, so it needs no mirror.
    for team in (team for team in teams if default_image_registry(team.vcluster) is None):
        add(versions.VCLUSTER_IMAGE_REGISTRY + "/", f"the vCluster of team {team.name}")
        add(versions.COREDNS_REGISTRY + "/" + versions.COREDNS_FALLBACK_IMAGE, f"team {team.name}'s DNS")
        add(versions.REWRITE_HOSTS_IMAGE["registry"] + "/" + versions.REWRITE_HOSTS_IMAGE["repository"],
            "vCluster's rewrite-hosts init container")
        if control_plane_shape(team.vcluster).deployed_etcd:
            add(versions.VCLUSTER_ETCD_IMAGE_REGISTRY + "/", f"team {team.name}'s deployed etcd")
        if team.isolation.tier == MEMORY_CAPPED:
            add(f"{versions.HAMI_CORE_REGISTRY}/{versions.HAMI_CORE_IMAGE}", "HAMi-core")
    if teams:
        # Workloads in the virtual clusters: a defaultImageRegistry does not move them.
        add(versions.SMOKE_CUDA_IMAGE, "the smoke test's GPU pod (ops/smoke.py)")
        add(versions.SMOKE_PAUSE_IMAGE, "the smoke test's Deployment (ops/smoke.py)")
    if gpu_operator_mode == "install":
        for host in GPU_OPERATOR_REGISTRIES:
            add(host + "/", "the GPU Operator and its operands")
    if prometheus == "install":
        for host in KUBE_PROMETHEUS_STACK_REGISTRIES:
            add(host + "/", "kube-prometheus-stack")
        add(versions.CRD_UPGRADE_UNPACK_IMAGE, "kube-prometheus-stack's CRD hook")
        add(versions.PROM_LABEL_PROXY_IMAGE, "the teams' query proxies")
    return found


# The registries of every image of the pinned charts' renders (tests/test_mirrors.py checks them).
GPU_OPERATOR_REGISTRIES = ("nvcr.io", "registry.k8s.io")
KUBE_PROMETHEUS_STACK_REGISTRIES = ("quay.io", "registry.k8s.io", "docker.io", "ghcr.io")


def check_mirrors(reader: Reader, mirrors: Mirrors, cluster: Optional[Cluster], gpu_operator: GpuOperator,
                  observability: Observability, teams: Sequence[Team]) -> None:
    """With a mirror map, every registry the site deploys from has a mirror: one error lists the missing ones. It
    runs with the other cross-field rules, so that a site hears of every problem at once."""
    if not mirrors.images:
        return
    deployed = deployed_registries(cluster, gpu_operator.mode, observability.prometheus, teams)
    missing = {host: whats for host, whats in deployed.items() if host not in mirrors.images}
    if missing:
        reader.fail("mirrors.images", mirrors.images,
                    "has no mirror for " + "; ".join(f"{host} ({', '.join(sorted(set(whats)))})"
                                                     for host, whats in sorted(missing.items())),
                    "add a mirror for " + ", ".join(sorted(missing)))
