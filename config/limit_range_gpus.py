"""GPUs in the tenant namespace's LimitRange, which a site's ``extraValues.policies.limitRange`` could name.

The LimitRanger gives every container of the namespace that sets no limit of a resource the LimitRange's default
limit of it, and the API server defaults a default limit from a ``max`` and a default request from a ``min``
(pkg/apis/core/v1 defaults.go SetDefaults_LimitRangeItem), extended resources like any other. A GPU named there
would go to every container: the control plane's, the DNS pod's, each synced pod's, where the host's
``[device-features]`` rule then refuses each tenant pod (the in-vCluster defaults switch the toolkit's features
off only where the virtual pod holds a GPU); as a request alone (``defaultRequest``, ``min``) the API server
refuses every such pod, a request without a limit. No bound here is one a site means: GPUs are KAI's to share.
"""

from __future__ import annotations

from config.model import VClusterSettings
from config.vcluster_images import dig

# Whole GPUs, MIG slices and whatever else NVIDIA's device plugin advertises.
NVIDIA_RESOURCES = "nvidia.com/"
BOUNDS = ("default", "defaultRequest", "max", "min")


def gpu_limit_range_findings(settings: VClusterSettings, whose: str) -> list[tuple[str, object, str, str]]:
    limit_range = dig(settings.extra_values, "policies", "limitRange")
    return [(f"extraValues.policies.limitRange.{bound}.{resource}", value,
             f"the LimitRange would give every container in {whose} host namespace that sets no limit of it "
             f"{value} {resource} (a max or min becomes the default, pkg/apis/core/v1 SetDefaults_LimitRangeItem): "
             "the control plane's and the DNS pod's too, and the host refuses the tenant's pods it lands in",
             f"remove {resource} from policies.limitRange.{bound} in the stack's or the team's vcluster.extraValues: "
             "GPUs are shared through KAI's queues (the team's resources.gpu), which bound each team")
            for bound in BOUNDS for resource, value in (limit_range.get(bound) or {}).items()
            if str(resource).startswith(NVIDIA_RESOURCES)]
