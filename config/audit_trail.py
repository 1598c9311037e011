"""What a site keeps of its host API server's audit log, for the plan's reviewer: on EKS the control plane's logs in
CloudWatch (``cluster.eks.controlPlaneLogs``), on MicroK8s a log file on the box (``cluster.microk8s.auditLog``).

Every team's vCluster syncer acts on the host under its own service account, so the audit log is the record of what
each team did there. An existing (kubeconfig) cluster keeps what its own API server is set to keep. Plain data in,
text and plain data out.
"""

from __future__ import annotations

from typing import Optional

from config.model import Cluster
from config.model_host import MICROK8S_AUDIT_LOG_FILE, MICROK8S_AUDIT_POLICY_FILE

EKS_KEY = "cluster.eks.controlPlaneLogs"
MICROK8S_KEY = "cluster.microk8s.auditLog"
_NO_TRAIL = ("nothing records which team's syncer, tool or person created, changed or deleted what on the host, so an "
             "incident leaves no trail")


def audit_trail_notes(cluster: Cluster) -> list[str]:
    """A site that keeps no audit log, or keeps its EKS logs forever."""
    if cluster.microk8s is not None and not cluster.microk8s.audit_log.enabled:
        return [f"{MICROK8S_KEY}.enabled is false: {_NO_TRAIL}. Remove it to keep the log."]
    eks = cluster.eks
    if eks is None:
        return []
    logs = eks.control_plane_logs
    notes = []
    if "audit" not in logs.types:
        notes.append(f"{EKS_KEY}.types leaves out audit: {_NO_TRAIL}. Add audit to the list.")
    if logs.types and logs.retention_days == 0:
        notes.append(f"{EKS_KEY}.retentionDays is 0: CloudWatch keeps {logs.log_group(eks.name)} forever, and "
                     "charges for every month of it. Choose a period, e.g. 365.")
    return notes


def audit_trail(cluster: Cluster) -> Optional[dict]:
    """Where the host's audit log is kept (the stack output ``hostAuditLog``), so whoever answers an incident finds
    it without reading the program: None where the program keeps none (an existing cluster keeps its own, a MicroK8s
    box with it off, an EKS site that leaves out ``audit``)."""
    box = cluster.microk8s
    if box is not None:
        log = box.audit_log
        if not log.enabled:
            return None
        # The box by its key, not its address: the program keeps the SSH connection secret as a whole.
        machine = "the box at cluster.microk8s.host" if box.host else "the machine that ran pulumi up"
        return {"machine": machine, "file": MICROK8S_AUDIT_LOG_FILE,
                "rotatedFiles": f"{MICROK8S_AUDIT_LOG_FILE.removesuffix('.log')}-<time>.log",
                "policyFile": MICROK8S_AUDIT_POLICY_FILE, "maxAgeDays": log.max_age_days,
                "maxBackups": log.max_backups, "maxSizeMegabytes": log.max_size_megabytes,
                "diskMegabytes": log.disk_megabytes}
    eks = cluster.eks
    if eks is None or "audit" not in eks.control_plane_logs.types:
        return None
    logs = eks.control_plane_logs
    return {"region": eks.region, "cloudWatchLogGroup": logs.log_group(eks.name),
            "retentionDays": logs.retention_days or "forever"}
