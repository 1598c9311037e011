"""What the config tells about the host's GPU count, for capacity warnings."""

from __future__ import annotations

from typing import Optional

from config.model import Cluster

# GPUs per EC2 instance type, for the instance families GPU node groups use most.
GPUS_PER_INSTANCE_TYPE = {
    "g4dn.xlarge": 1, "g4dn.2xlarge": 1, "g4dn.4xlarge": 1, "g4dn.8xlarge": 1, "g4dn.16xlarge": 1,
    "g4dn.12xlarge": 4, "g4dn.metal": 8,
    "g5.xlarge": 1, "g5.2xlarge": 1, "g5.4xlarge": 1, "g5.8xlarge": 1, "g5.16xlarge": 1,
    "g5.12xlarge": 4, "g5.24xlarge": 4, "g5.48xlarge": 8,
    "g6.xlarge": 1, "g6.2xlarge": 1, "g6.4xlarge": 1, "g6.8xlarge": 1, "g6.16xlarge": 1,
    "g6.12xlarge": 4, "g6.24xlarge": 4, "g6.48xlarge": 8,
    "g6e.xlarge": 1, "g6e.2xlarge": 1, "g6e.4xlarge": 1, "g6e.8xlarge": 1, "g6e.16xlarge": 1,
    "g6e.12xlarge": 4, "g6e.24xlarge": 4, "g6e.48xlarge": 8,
    "p4d.24xlarge": 8, "p4de.24xlarge": 8, "p5.48xlarge": 8, "p5e.48xlarge": 8, "p5en.48xlarge": 8,
}


def known_gpu_capacity(cluster: Cluster) -> Optional[float]:
    """The most GPUs the host can have, or None when the config does not say.

    For EKS: GPUs per instance type x the node group's max size, taking the largest instance
    type of a group (a mixed group may scale on any of them).
    """
    if cluster.microk8s is not None:
        return cluster.microk8s.gpus
    if cluster.kubeconfig is not None:
        return cluster.kubeconfig.gpus
    if cluster.eks is not None:
        total = 0
        for group in cluster.eks.gpu_node_groups:
            per_node = [GPUS_PER_INSTANCE_TYPE.get(kind) for kind in group.instance_types]
            if any(count is None for count in per_node):
                return None
            total += max(per_node) * group.scaling.max_size
        return total
    return None
