"""`pulumi destroy` on EKS: tenants' load balancers and volumes are gone before the cluster and the VPC.

A tenant's LoadBalancer Services (synced by vCluster into its host namespace) hold an AWS load balancer
with network interfaces and security groups in the VPC, and its volume claims hold EBS volumes that the
EBS CSI controller deletes only after the claim is gone. Pulumi deletes the tenant namespaces first (they
use the Kubernetes provider), but nothing makes it wait for AWS: the node groups, the CSI add-on, the
cluster and the VPC would go next, leaving volumes orphaned and the VPC's deletion stuck on
``DependencyViolation``.

The step here sits between the two: a command with nothing to do on ``up`` whose *delete* runs when
everything on the Kubernetes provider is gone and before the node groups, the CSI add-on and the cluster
(the provider depends on it, it depends on them). It deletes any LoadBalancer Service vCluster synced that
is still there, then waits until none is left (the cloud controller removes a Service only after its load
balancer) and until no EBS volume of a deleted claim is left (the CSI controller deletes them, and a volume
may still show bound for a few seconds after its claim goes). It stops the destroy with what is left when
that takes too long, before the cluster goes, so a rerun can finish. Protected tenants stop the destroy
before it runs, as before. It needs ``kubectl`` and the AWS CLI (the kubeconfig's token command) where
``pulumi destroy`` runs.
"""

from __future__ import annotations

from typing import Sequence

import pulumi
from pulumi_command import local

from config.vocabulary import TEAM_LABEL, VCLUSTER_MANAGED_BY_LABEL

TEARDOWN_TIMEOUT_SECONDS = 1500
POLL_SECONDS = 10
EBS_CSI_DRIVER = "ebs.csi.aws.com"
KUBECONFIG_VARIABLE = "GPU_TENANCY_KUBECONFIG"

# Tenant namespaces whose deletion has started (nothing else: the command may also be deleted when
# Pulumi replaces it during an `up`, and must then leave running tenants alone).
_LEAVING_TENANTS = (f"kubectl get namespaces -l {TEAM_LABEL} -o jsonpath="
                    "'{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{\"\\n\"}{end}'")
_LOAD_BALANCERS = (f"for namespace in $({_LEAVING_TENANTS}); do kubectl get services -n \"$namespace\" "
                   f"-l {VCLUSTER_MANAGED_BY_LABEL} -o jsonpath="
                   "'{range .items[?(@.spec.type==\"LoadBalancer\")]}{.metadata.namespace}{\" \"}{.metadata.name}"
                   "{\"\\n\"}{end}'; done")
# EBS volumes the CSI controller has still to delete: released or failed ones, and those still shown bound
# (or pending) to a claim that is gone, since the PV controller marks a volume released only seconds after
# its claim goes. Claims (one field a line) come before volumes (three or more), so a claim deleted between
# the two lists costs a poll, not an orphaned volume.
_LEAVING_VOLUMES = ("{ kubectl get persistentvolumeclaims --all-namespaces -o jsonpath="
                    "'{range .items[*]}{.metadata.namespace}{\"/\"}{.metadata.name}{\"\\n\"}{end}'"
                    " && kubectl get persistentvolumes -o jsonpath="
                    "'{range .items[?(@.spec.persistentVolumeReclaimPolicy==\"Delete\")]}{.metadata.name}{\" \"}"
                    "{.status.phase}{\" \"}{.spec.csi.driver}{\" \"}{.spec.claimRef.namespace}{\"/\"}"
                    "{.spec.claimRef.name}{\"\\n\"}{end}'; }"
                    " | awk 'NF == 1 {claims[$1]; next} "
                    f"$3 == \"{EBS_CSI_DRIVER}\" && ($2 == \"Released\" || $2 == \"Failed\" || "
                    "(($2 == \"Bound\" || $2 == \"Pending\") && $4 != \"/\" && !($4 in claims))) {print $1}'")


def teardown_script(timeout_seconds: int = TEARDOWN_TIMEOUT_SECONDS, poll_seconds: int = POLL_SECONDS) -> str:
    """The delete command (bash): load balancers of leaving tenants deleted, then a wait for those tenants'
    namespaces and for EBS volumes of deleted claims."""
    return "\n".join([
        "set -euo pipefail",
        'kubeconfig=$(mktemp); trap \'rm -f "$kubeconfig"\' EXIT',
        f'printf \'%s\' "${KUBECONFIG_VARIABLE}" > "$kubeconfig"; export KUBECONFIG="$kubeconfig"',
        f"{_LOAD_BALANCERS} | while read -r namespace service; do",
        '  if [ -n "$service" ]; then kubectl delete service -n "$namespace" "$service" --wait=false; fi',
        "done",
        f"deadline=$((SECONDS + {timeout_seconds}))",
        "while :; do",
        f'  left="$({_LEAVING_TENANTS}; {_LEAVING_VOLUMES})"',
        '  [ -z "$left" ] && exit 0',
        '  if [ "$SECONDS" -ge "$deadline" ]; then',
        '    echo "tenant load balancers or EBS volumes are still being deleted; the cluster is kept so that '
        'pulumi destroy can be run again once they are gone:" >&2',
        '    echo "$left" >&2',
        "    exit 1",
        "  fi",
        f"  sleep {poll_seconds}",
        "done",
    ])


def tenant_teardown(name: str, kubeconfig: pulumi.Input[str], after: Sequence[pulumi.Resource],
                    parent: pulumi.Resource) -> local.Command:
    """The destroy-time step; the Kubernetes provider must depend on it and it on ``after``."""
    return local.Command(
        name,
        delete=teardown_script(),
        interpreter=["/bin/bash", "-c"],
        environment={KUBECONFIG_VARIABLE: pulumi.Output.secret(kubeconfig)},
        logging=local.Logging.STDERR,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(after)),
    )
