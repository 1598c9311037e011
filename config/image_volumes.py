"""Whether a site's clusters can run the image volume a memory-capped team's pods load HAMi-core from.

A memory-capped team's fractional container mounts the HAMi-core image (``volumes[].image``) at
``/usr/local/vgpu`` with ``subPath: artifacts`` (components/virtual_defaults.py). Read upstream:

- Kubernetes ``ImageVolume`` feature gate (kubernetes/kubernetes pkg/features/kube_features.go): alpha and
  off in 1.31-1.32, beta and off in 1.33-1.34, beta and on in 1.35, GA and locked on in 1.36 (PR #136711).
  With the gate off, the API server drops every image volume and the mounts naming it before it validates
  the pod (pkg/api/pod/util.go ``dropImageVolumes``, run by the strategy's PrepareForCreate, which the
  generic registry calls before validating admission): the pod is not refused for it, it arrives without
  the library, and the host's ``[hami-core]`` rule refuses it. EKS offers no way to turn a gate on.
- The virtual cluster: the program refuses a virtual Kubernetes below 1.36 (config/virtual_cluster.py), where
  the gate is on; vCluster's pod translator (pkg/controllers/resources/pods/translate/translator.go at
  v0.35.0 and v0.36.1) deep-copies the virtual pod and rewrites no image volume, so the host pod gets it as is.
- The container runtime applies ``subPath`` of an image volume: containerd from v2.2.0
  (internal/cri/server/container_image_mount.go reads the CRI ``image_sub_path`` there, not in v2.1.x, which
  mounts the whole image, containerd issue #11580), so with containerd 2.1 the library is not where
  ``LD_PRELOAD`` names it and the container runs without the cap; containerd 1.7 mounts no image volumes.
  MicroK8s bundles containerd by track (canonical/microk8s build-scripts/components/containerd/version.sh):
  v1.7.27 in 1.33, v1.7.28 in 1.34, v2.1.3 in 1.35 (v2.1.6 on the 1.35 branch), v2.2.3 in 1.36.
  EKS's AL2023 AMIs install containerd ``2.*`` from the distribution (awslabs/amazon-eks-ami
  templates/al2023/variables-default.json): the minor of a given AMI release is not known here.
"""

from __future__ import annotations

from typing import Optional, Sequence

from config.model import MEMORY_CAPPED, Cluster, Team
from config.reader import Reader
from config.versions import release_numbers

IMAGE_VOLUME_ON_BY_DEFAULT = (1, 35)
# The first MicroK8s track whose containerd (v2.2.3) mounts an image volume's subPath.
MICROK8S_IMAGE_SUBPATH = (1, 36)
CONTAINERD_IMAGE_SUBPATH = "v2.2.0"
MICROK8S_CONTAINERD = {"1.33": "v1.7.27", "1.34": "v1.7.28", "1.35": "v2.1.3", "1.36": "v2.2.3"}


def image_volume_floor(kind: str) -> tuple[int, int]:
    """The oldest Kubernetes minor of a host of ``kind`` on which a memory-capped team's pods load HAMi-core."""
    return MICROK8S_IMAGE_SUBPATH if kind == "microk8s" else IMAGE_VOLUME_ON_BY_DEFAULT


def only_subpaths_fail(version: str) -> bool:
    """Whether a host below its floor at ``version`` mounts image volumes and only fails their subPath."""
    return release_numbers(version)[:2] >= IMAGE_VOLUME_ON_BY_DEFAULT


def image_volume_problem(kind: str, version: str) -> Optional[str]:
    """What a host of ``kind`` running Kubernetes ``version`` does wrong with a pod that mounts a directory of an
    image volume, or None when it does it right (as far as the version tells)."""
    minor = release_numbers(version)[:2]
    if minor >= image_volume_floor(kind):
        return None
    if minor < IMAGE_VOLUME_ON_BY_DEFAULT:
        gate = ("its API server has the ImageVolume feature gate off by default (on from 1.35) and drops image "
                "volumes and their mounts from the pods it admits")
        if kind == "eks":
            return gate + "; EKS cannot turn a feature gate on"
        if kind == "microk8s":
            return gate + f"; nor has its containerd ({MICROK8S_CONTAINERD.get(version, 'v1.7')}) image-volume support"
        return gate
    return (f"MicroK8s {version} runs containerd {MICROK8S_CONTAINERD.get(version, 'older than v2.2')}, which mounts "
            f"the whole image and ignores a volume mount's subPath (honoured from containerd {CONTAINERD_IMAGE_SUBPATH})")


def _hami_core_consequence(version: str) -> str:
    if not only_subpaths_fail(version):
        return "so the host's [hami-core] rule refuses every fractional pod of those teams"
    return "so HAMi-core is not where LD_PRELOAD names it and their containers run without the memory cap"


def check_image_volumes(reader: Reader, cluster: Optional[Cluster], teams: Sequence[Team]) -> None:
    """One issue on the host's kubernetesVersion when memory-capped teams cannot load HAMi-core there."""
    capped = [team.name for team in teams if team.isolation.tier == MEMORY_CAPPED]
    if cluster is None or not capped:
        return
    key = f"cluster.{cluster.kind}.kubernetesVersion"
    if any(issue.key == key for issue in reader.issues):
        return  # a version with a problem of its own is reported once
    problem = image_volume_problem(cluster.kind, cluster.kubernetes_version)
    if problem is None:
        return
    floor = "%d.%d" % image_volume_floor(cluster.kind)
    upgrade = "upgrade the cluster to" if cluster.kind == "eks" else "run (and state)"
    reader.fail(key, cluster.kubernetes_version,
                f"memory-capped team(s) {', '.join(capped)} load HAMi-core from an image volume, and {problem}, "
                f"{_hami_core_consequence(cluster.kubernetes_version)}",
                f"{upgrade} Kubernetes {floor} or later, or give those teams another isolation tier "
                "(shared, mig or exclusive)")
