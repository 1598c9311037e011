"""Who can reach an EKS site's Kubernetes API server (``cluster.eks.apiEndpoint``), and what that asks of the site;
where a MicroK8s box's setup steps run.

`pulumi up` drives the cluster from wherever it runs: the Kubernetes provider, the tenant teardown step and the tools
in ``ops/`` all talk to the API server from there, as teams do through the host with ``access.exposure: none``. The
nodes talk to it too, from inside the VPC: through the private endpoint, or else from the NAT gateway's public
address to the public one. Plain data in, text out.
"""

from __future__ import annotations

from config.model import CiSettings, Cluster

KEY = "cluster.eks.apiEndpoint"
# Who talks to the API server from outside the cluster.
_CALLERS = ("`pulumi up` and every other `pulumi` command, the tenant teardown step of `pulumi destroy`, the tools in "
            "ops/ and teams reaching their vCluster through the host (access.exposure: none)")


def local_box_warnings(cluster: Cluster, ci: CiSettings) -> list[str]:
    """A MicroK8s box set up where `pulumi up` runs: CI's GitHub-hosted runner is not the box."""
    box = cluster.microk8s
    if box is None or box.remote or ci.runner:
        return []
    return ["cluster.microk8s.host is not set, so `pulumi up` runs the box's setup steps (snap, microk8s) on the "
            "machine it runs on, but ci.runner is not set either: CI's deploy job would run them on a GitHub-hosted "
            "runner, where they fail. Set ci.runner to the labels of a self-hosted runner on the GPU box, or "
            "cluster.microk8s.host (and the sshPrivateKey secret) to drive the box over SSH from a runner that "
            "reaches it."]


def api_endpoint_warnings(cluster: Cluster, ci: CiSettings) -> list[str]:
    """An endpoint CI's runner cannot reach; a public-only endpoint behind a list: the nodes of an existing VPC are let
    in only if the list holds its NAT gateways' addresses, which the program cannot see (a VPC it creates is refused
    that way by the reader)."""
    eks = cluster.eks
    if eks is None:
        return []
    endpoint = eks.api_endpoint
    warnings = []
    if not endpoint.public_access and not ci.runner:
        warnings.append(f"{KEY}.publicAccess is false but ci.runner is not set: CI previews and deploys this site "
                        "from GitHub-hosted runners, outside the VPC, where the API server does not answer, so "
                        "every preview and deploy fails. Set ci.runner to the labels of a self-hosted runner in "
                        "the VPC or a network routed to it.")
    if endpoint.private_access or endpoint.open_to_every_address:
        return warnings
    return warnings + [
        f"{KEY}.publicAccessCidrs lists {', '.join(endpoint.public_access_cidrs)} and privateAccess is false: "
        f"the nodes of VPC {eks.vpc_id} reach the API server from their NAT gateways' public addresses, so unless "
        "the list holds those, no node joins the cluster and the node groups fail to create. Set "
        f"{KEY}.privateAccess: true, or list the NAT gateways' Elastic IPs."]


def api_endpoint_notes(cluster: Cluster, ci: CiSettings) -> list[str]:
    """Not wrong, but the reviewer should know who reaches the API server, and from where `pulumi up` must run."""
    eks = cluster.eks
    if eks is None:
        return []
    endpoint = eks.api_endpoint
    if endpoint.open_to_every_address:
        return [f"{KEY}: the cluster's API server answers every address on the internet (EKS's default), where "
                "only credentials stand between it and the world. List the addresses `pulumi up` and the teams "
                f"come from in {KEY}.publicAccessCidrs, or set publicAccess: false to reach it from the VPC only."]
    if not endpoint.public_access:
        return [f"{KEY}.publicAccess is false: the API server answers inside the VPC only. {_CALLERS} must run "
                "in the VPC or a network routed to it."]
    return [f"{KEY}.publicAccessCidrs: the public API server answers {', '.join(endpoint.public_access_cidrs)} "
            f"only: {_CALLERS} must come from there, and so must CI's runner"
            + ("." if ci.runner else " (GitHub-hosted runners come from addresses GitHub changes: set ci.runner to a "
               "self-hosted runner there).")]
