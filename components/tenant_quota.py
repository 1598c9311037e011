"""The tenant namespace's ResourceQuota and LimitRange, as vCluster values that leave nothing to the chart.

Helm coalesces the chart's defaults under the values it is given: every key of vCluster's
``policies.resourceQuota.quota`` and ``policies.limitRange`` defaults that the program does not set
would still reach the namespace (ephemeral storage, a LoadBalancer, CPU limits, and Secret, ConfigMap and
Endpoints counts too tight for the platform's own objects). So the program sets each key it means and nulls each one it does not: Helm deletes a key
whose value is null, and pulumi-kubernetes passes nulls through to Helm from 4.30 on
(pulumi/pulumi-kubernetes#2997). tests/test_tenant_quota.py keeps :data:`REMOVED_QUOTA_KEYS` within what the chart
adds at the accepted versions, and checks that the LimitRange sets every resource the chart's defaults name.
"""

from __future__ import annotations

from config.merge import deep_merge
from config.model import VClusterSettings
from config.tenant_budget import (bytes_quantity, control_plane_load_balancers, control_plane_node_ports,
                                  cpu_quantity, namespace_budget)

# Quota keys of the chart's defaults that the program leaves unbounded:
# - limits: the quota bounds requests, which is what KAI's queue and the scheduler reserve; with
#   limits.cpu in the quota every container's default 1-CPU limit would count ten times its request;
# - requests.ephemeral-storage: a request only reserves node disk, what a pod may write is its limit, which
#   limits.ephemeral-storage pools.
REMOVED_QUOTA_KEYS = ("limits.cpu", "limits.memory", "requests.ephemeral-storage")
EPHEMERAL_STORAGE = "ephemeral-storage"


def resource_quota_hard(settings: VClusterSettings) -> dict:
    """``policies.resourceQuota.quota``: the team's allowance plus its control plane and DNS; None removes a key."""
    budget = namespace_budget(settings)
    hard: dict = {
        "requests.cpu": cpu_quantity(budget.millicores),
        "requests.memory": bytes_quantity(budget.memory),
        "requests.storage": bytes_quantity(budget.storage),
        "count/pods": budget.pods,
        "count/services": budget.services,
        "count/persistentvolumeclaims": budget.claims,
        # What the team's pods may write to their nodes' disks in all: every container has a limit (the LimitRange
        # below), the kubelet evicts a pod past its own, and no number of containers adds up past this.
        "limits.ephemeral-storage": bytes_quantity(budget.ephemeral_storage),
        # Huge pages come out of a pool each node sets aside, which no queue charges: none unless the site grants them.
        "requests.hugepages-2Mi": settings.resource_quota.hugepages2mi,
        "requests.hugepages-1Gi": settings.resource_quota.hugepages1gi,
        # Service types: the team's config decides, never the chart's default (one LoadBalancer in vCluster 0.36.1),
        # plus what the control plane's own Service holds where the team's endpoint is a load balancer or a node port.
        "services.loadbalancers": settings.services.load_balancers + control_plane_load_balancers(settings.access),
        "services.nodeports": settings.services.node_ports + control_plane_node_ports(settings.access),
        # What vCluster copies to the host for the team (every ConfigMap and Secret a pod names or that is marked
        # vcluster.loft.sh/force-sync, every EndpointSlice of a Service without a selector) lands in the host's etcd
        # and every node's kube-proxy: the team's allowance plus the platform's own (config/tenant_budget.py).
        "count/configmaps": budget.config_maps,
        "count/secrets": budget.secrets,
        "count/endpointslices.discovery.k8s.io": budget.endpoint_slices,
        # One Endpoints per Service: the host's controller writes it for a Service with a selector, and vCluster
        # copies a tenant's only while a selector-less virtual Service of its name exists (pkg/controllers/
        # resources/endpoints/syncer.go ReconcileStart), so the Services' count bounds it; stated, not left to
        # the chart's 40.
        "count/endpoints": budget.services,
    }
    hard.update({key: None for key in REMOVED_QUOTA_KEYS})
    return hard


def limit_range_values(settings: VClusterSettings) -> dict:
    """``policies.limitRange``: the configured container defaults, nothing inherited. Every container gets an
    ephemeral-storage limit, which the kubelet enforces per pod before the shared node's disk runs short, and no
    container may raise its own past the maximum. The default request is explicit: left out, the API server would
    default it to the limit and reserve that much node disk for every container."""
    limits = settings.limit_range
    return {"enabled": True,
            "default": {"cpu": limits.default_cpu, "memory": limits.default_memory,
                        EPHEMERAL_STORAGE: limits.default_ephemeral_storage},
            "defaultRequest": {"cpu": limits.default_request_cpu, "memory": limits.default_request_memory,
                               EPHEMERAL_STORAGE: limits.default_request_ephemeral_storage},
            "max": {EPHEMERAL_STORAGE: limits.max_ephemeral_storage}}


def host_limit_range(settings: VClusterSettings) -> dict:
    """The namespace's LimitRange item as the host API server stores it, {} where none is rendered: the program's
    ``policies`` with the site's ``extraValues.policies`` over them, as components/tenant.py passes them to Helm
    (the chart's defaults name no resource the program leaves out: tests/test_tenant_quota.py), then the API
    server's defaulting (pkg/apis/core/v1 defaults.go SetDefaults_LimitRangeItem): a resource with a max and no
    default limit gets the max as its default limit, one with no default request gets its default limit, else its
    min. Whatever the in-vCluster defaults assume of the host's defaults must come from here, not from config."""
    policies = deep_merge(policy_values(settings), settings.extra_values.get("policies") or {})
    limits, quota = policies["limitRange"], policies["resourceQuota"]
    # chart/templates/limitrange.yaml: on when enabled, or with the quota unless switched off ("auto").
    switch = str(limits.get("enabled")).lower()
    if switch != "true" and (switch == "false" or str(quota.get("enabled")).lower() != "true"):
        return {}
    maximum, minimum = limits.get("max") or {}, limits.get("min") or {}
    default = _filled(limits.get("default") or {}, maximum)
    return {"default": default, "defaultRequest": _filled(limits.get("defaultRequest") or {}, default, minimum),
            "max": maximum, "min": minimum}


def _filled(values: dict, *fallbacks: dict) -> dict:
    """``values`` with each key it lacks from the first fallback that has it, after its own keys: the policies'
    mutations follow this order, so the plan keeps its text."""
    filled = dict(values)
    for fallback in fallbacks:
        filled.update({key: value for key, value in fallback.items() if key not in filled})
    return filled


def policy_values(settings: VClusterSettings) -> dict:
    return {"resourceQuota": {"enabled": True, "quota": resource_quota_hard(settings)},
            "limitRange": limit_range_values(settings)}
