"""What an EKS site keeps of its control plane's logs (``cluster.eks.controlPlaneLogs``), for the plan's reviewer.

Every team's vCluster syncer acts on the host under its own service account, so the API server's audit log is the
record of what each team did there. Plain data in, text out.
"""

from __future__ import annotations

from config.model import Cluster

KEY = "cluster.eks.controlPlaneLogs"


def control_plane_logs_notes(cluster: Cluster) -> list[str]:
    """A site that keeps no audit log, or keeps its logs forever."""
    eks = cluster.eks
    if eks is None:
        return []
    logs = eks.control_plane_logs
    notes = []
    if "audit" not in logs.types:
        notes.append(f"{KEY}.types leaves out audit: nothing records which team's syncer, tool or person created, "
                     "changed or deleted what on the host, so an incident leaves no trail. Add audit to the list.")
    if logs.types and logs.retention_days == 0:
        notes.append(f"{KEY}.retentionDays is 0: CloudWatch keeps {logs.log_group(eks.name)} forever, and charges "
                     "for every month of it. Choose a period, e.g. 365.")
    return notes
