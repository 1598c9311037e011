"""Whether a site's clusters can run the image volume a memory-capped team's pods load HAMi-core from.

A memory-capped team's fractional container mounts the whole HAMi-core image (``volumes[].image``, no
``subPath``) at ``/usr/local/vgpu`` (components/virtual_defaults.py). Read upstream:

- Kubernetes ``ImageVolume`` feature gate (kubernetes/kubernetes pkg/features/kube_features.go): alpha and
  off in 1.31-1.32, beta and off in 1.33-1.34, beta and on in 1.35, GA and locked on in 1.36 (PR #136711).
  With the gate off, the API server drops every image volume and the mounts naming it before it validates
  the pod (pkg/api/pod/util.go ``dropImageVolumes``, run by the strategy's PrepareForCreate, which the
  generic registry calls before validating admission): the pod is not refused for it, it arrives without
  the library, and the host's ``[hami-core]`` rule refuses it. EKS offers no way to turn a gate on.
- The virtual cluster: the program refuses a virtual Kubernetes below 1.36 (config/virtual_cluster.py), where
  the gate is on; vCluster's pod translator (pkg/controllers/resources/pods/translate/translator.go at
  v0.35.0 and v0.36.1) deep-copies the virtual pod and rewrites no image volume, so the host pod gets it as is.
- The container runtime mounts image volumes from containerd 2.1 (internal/cri/server/container_image_mount.go);
  it applies a mount's ``subPath`` only from v2.2.0 (v2.1.x mounts the whole image, containerd issue #11580),
  which is why the program mounts the whole image and names the library in it (components/isolation_admission.py):
  the library is then at the same path on 2.1 and 2.2. containerd 1.7 mounts no image volumes; it is what
  MicroK8s runs below 1.35, already below the feature gate's floor. MicroK8s bundles containerd by track
  (canonical/microk8s build-scripts/components/containerd/version.sh): v1.7.27 in 1.33, v1.7.28 in 1.34,
  v2.1.3 in 1.35 (v2.1.6 on the 1.35 branch), v2.2.3 in 1.36.
  EKS's AL2023 AMIs install containerd ``2.*`` from the distribution (awslabs/amazon-eks-ami
  templates/al2023/variables-default.json): the minor of a given AMI release is not known here.
"""

from __future__ import annotations

from typing import Optional, Sequence

from config.model import MEMORY_CAPPED, Cluster, Team
from config.reader import Reader
from config.versions import release_numbers

# The oldest Kubernetes minor on which a memory-capped team's pods load HAMi-core, for every kind of host: the
# feature gate's (MicroK8s 1.35 ships containerd 2.1, which mounts the whole image the pods ask for).
IMAGE_VOLUME_ON_BY_DEFAULT = (1, 35)
IMAGE_VOLUME_FLOOR = "%d.%d" % IMAGE_VOLUME_ON_BY_DEFAULT
MICROK8S_CONTAINERD = {"1.30": "v1.6.28", "1.31": "v1.6.28", "1.32": "v1.6.36", "1.33": "v1.7.27", "1.34": "v1.7.28",
                       "1.35": "v2.1.3", "1.36": "v2.2.3"}


def image_volume_problem(kind: str, version: str) -> Optional[str]:
    """What a host of ``kind`` running Kubernetes ``version`` does wrong with a pod that mounts an image volume,
    or None when it does it right (as far as the version tells)."""
    if release_numbers(version)[:2] >= IMAGE_VOLUME_ON_BY_DEFAULT:
        return None
    gate = ("its API server has the ImageVolume feature gate off by default (on from 1.35) and drops image "
            "volumes and their mounts from the pods it admits")
    if kind == "eks":
        return gate + "; EKS cannot turn a feature gate on"
    if kind == "microk8s":
        return gate + f"; nor has its containerd ({MICROK8S_CONTAINERD['%d.%d' % release_numbers(version)[:2]]}) image-volume support"
    return gate


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
    upgrade = "upgrade the cluster to" if cluster.kind == "eks" else "run (and state)"
    reader.fail(key, cluster.kubernetes_version,
                f"memory-capped team(s) {', '.join(capped)} load HAMi-core from an image volume, and {problem}, "
                "so the host's [hami-core] rule refuses every fractional pod of those teams",
                f"{upgrade} Kubernetes {IMAGE_VOLUME_FLOOR} or later, or give those teams another isolation tier "
                "(shared, mig or exclusive)")
