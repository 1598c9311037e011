"""One team's scheduled snapshots: a CronJob in its host namespace that asks its control plane for one.

vCluster's open-source control plane takes a snapshot when a request appears in its host namespace (a Secret holding
the snapshot options, a ConfigMap), uploads it itself and marks the request done (pkg/snapshot/ controller.go);
scheduling them (``snapshots.auto``) is a Pro feature. The request is written by the control plane's own binary,
``/vcluster snapshot create`` (cmd/vcluster/cmd/snapshot/create.go), from the options in ``VCLUSTER_STORAGE_OPTIONS``
(base64 of their JSON) and the control plane's config file (the ``vc-config-<name>`` Secret, where the control plane
reads it); that is what ``vcluster restore`` and the CLI's snapshot pod run too, in the same image
(pkg/snapshot/pod/pod.go).

Each run writes to the next of ``keep`` slots, ``<prefix>/<slot>.tar.gz``, chosen from its scheduled time (``slot =
scheduled / interval mod keep``), so the newest ``keep`` snapshots are kept without listing or deleting anything in
the store. The CronJob names each Job ``<cronjob>-<scheduled minute since the epoch>`` and the Job labels its pods
with that name, so a retry writes the same slot, and its request cancels the first try's if that one is still under
way (vCluster cancels an older unfinished request for the same URL: loft-sh/api pkg/snapshot/request.go
``ShouldCancel``); a Job named otherwise (by hand) takes the clock's minute. Every slot's options (the bucket's key
and the access key) are rendered here as JSON into one Secret; the pod reads its slot's file, so the shell only
does arithmetic. The pod wears ``app: vcluster-snapshot``: vCluster's snapshot NetworkPolicy
(components/tenant_network.py) selects it, which opens the host API server to it and nothing else, and a tenant's
pod may not wear it (``reserved-values``).

A run succeeds only once its snapshot is in the store. The control plane records the outcome in the request's
ConfigMap, named after the request (``<vclusterName>-snapshot-request-<random>``, which ``snapshot create`` prints
in its JSON): key ``snapshotRequest``, whose JSON ``status`` begins with the ``phase`` and ends with the ``error``
(``Completed``; ``Failed``, ``PartiallyFailed`` or ``Canceled`` with the error's ``message``; loft-sh/api
pkg/snapshot/request.go, vCluster pkg/snapshot/controller.go). The job reads it until then or until its deadline,
through a sidecar ``kubectl proxy`` (the site's kubectl) on the pod's loopback that passes GETs of the namespace's
ConfigMaps only; the shell reaches it with busybox ``wget`` and waits with ``sleep`` (vCluster's release image is
alpine's, Dockerfile.release), so no token or TLS is handled in the shell. The request's name is random: the Role
may read the namespace's ConfigMaps, not only that one.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.kubectl_job import HOME_VOLUME, POD_SECURITY_CONTEXT, job_identity, kubectl_container
from components.kubernetes_resources import CRON_JOB, SECRET, KubernetesObject
from components.tenant_network import SNAPSHOT_APP
from config.model import Team
from config.snapshots import (GENERATED_SUFFIX_ALPHABET, GENERATED_SUFFIX_LENGTH, INTERVALS, JOB_LIMITS, JOB_REQUESTS,
                              PROXY_LIMITS, PROXY_REQUESTS, SCHEDULED_MINUTE_DIGITS, Backup, backup_name)
from config.vcluster_images import control_plane_image
from config.vocabulary import MANAGED_BY, TEAM_LABEL

OPTIONS_MOUNT = "/snapshot-options"
# Where the control plane's binary reads its config (pkg/constants DefaultVClusterConfigLocation's folder), and
# the variable that makes it read that file rather than look for a standalone install (pkg/config/load.go).
CONFIG_MOUNT = "/var/lib/vcluster"
STANDALONE_ENV = "VCLUSTER_STANDALONE"
OPTIONS_ENV = "VCLUSTER_STORAGE_OPTIONS"
# A run's timing, derived together. A run that has not started within STARTING_DEADLINE_SECONDS after its time
# waits for the next one. Its Job may take RUN_SECONDS (activeDeadlineSeconds counts across retries), so that it
# ends before the next run's time at the shortest interval and concurrencyPolicy Forbid never has to skip one; it
# is tried ATTEMPTS times, each try waiting WAIT_SECONDS for the control plane's verdict besides TRY_OVERHEAD_SECONDS
# (the pod's scheduling, image pull and sidecar, the request written, the last poll, the Job controller's back-off
# before a retry), so the retry waits as long as the first try, and the shell, not the deadline, says why it failed.
STARTING_DEADLINE_SECONDS = 600
ATTEMPTS = 2
TRY_OVERHEAD_SECONDS = 120
RUN_SECONDS = min(INTERVALS.values()) * 3600 - STARTING_DEADLINE_SECONDS
WAIT_SECONDS = RUN_SECONDS // ATTEMPTS - TRY_OVERHEAD_SECONDS
POLL_SECONDS = 10
# How long one poll may wait for the proxy: unless told, busybox's wget waits 900 s for a silent server
# (networking/wget.c), longer than a try's overhead, so a proxy that stopped answering would keep the shell past its
# own deadline until the Job's ended the try without saying why.
WGET_TIMEOUT_SECONDS = POLL_SECONDS
# The label the Job controller puts on its pods, naming their Job (Kubernetes 1.27 and later).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
PROXY_PORT = 8001
# In the ConfigMap's JSON the request is a string, its quotes escaped: its status's first field is the phase, its
# last the error.
PHASE_MARK = r'\"status\":{\"phase\":\"'
MESSAGE_MARK = r'\"error\":{\"message\":\"'
QUOTE_MARK = r'\"'
FAILED_PHASES = ("Failed", "PartiallyFailed", "Canceled")
# What CreateSnapshotRequestResources creates, and the ConfigMap read back by the name it got.
ROLE_RULES = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
              {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"]}]
SCRIPT = f"""set -eu
started=$(date +%s)
scheduled=${{JOB_NAME##*-}}
case "$scheduled" in ''|*[!0-9]*) scheduled=$(( started / 60 )) ;; esac
slot=$(( scheduled * 60 / PERIOD_SECONDS % KEEP ))
request=$({OPTIONS_ENV}="$(cat {OPTIONS_MOUNT}/slot-$slot)" /vcluster snapshot create)
name=${{request#*'"name":"'}}
name=${{name%%'"'*}}
case "$name" in
  ''|*[!a-z0-9.-]*) echo "slot $slot: vcluster snapshot create printed no request name" >&2; exit 1 ;;
esac
echo "slot $slot: snapshot request $name written; waiting for the control plane to upload it"
url="http://127.0.0.1:{PROXY_PORT}/api/v1/namespaces/$NAMESPACE/configmaps/$name"
phase=unread
while :; do
  if body=$(wget -q -T {WGET_TIMEOUT_SECONDS} -O - "$url"); then
    phase=NotStarted
    case "$body" in *'{PHASE_MARK}'*) phase=${{body#*'{PHASE_MARK}'}}; phase=${{phase%%'{QUOTE_MARK}'*}} ;; esac
    case "$phase" in
      Completed) echo "slot $slot: snapshot uploaded (request $name Completed)"; exit 0 ;;
      {"|".join(FAILED_PHASES)})
        reason="no reason recorded"
        case "$body" in
          *'{MESSAGE_MARK}'*) reason=${{body##*'{MESSAGE_MARK}'}}; reason=${{reason%%'{QUOTE_MARK}'*}} ;;
        esac
        printf 'slot %s: snapshot request %s %s: %.400s\\n' "$slot" "$name" "$phase" "$reason" >&2; exit 1 ;;
    esac
  fi
  if [ $(( $(date +%s) - started )) -ge {WAIT_SECONDS} ]; then
    echo "slot $slot: snapshot request $name still $phase after {WAIT_SECONDS}s: not done in time" >&2
    exit 1
  fi
  sleep {POLL_SECONDS}
done
"""


def job_name_pattern(cronjob: str) -> str:
    """The names of the CronJob's Jobs (and of one made by hand as the runbook says), as a regex matched whole (a
    CronJob's name, a DNS label, holds no regex syntax)."""
    return f"{cronjob}-[0-9]{{{SCHEDULED_MINUTE_DIGITS}}}"


def pod_name_pattern(cronjob: str) -> str:
    """The names of those Jobs' pods: the Job's name, a dash and the random suffix, never cut (BACKUP_NAME_MAX)."""
    return f"{job_name_pattern(cronjob)}-[{GENERATED_SUFFIX_ALPHABET}]{{{GENERATED_SUFFIX_LENGTH}}}"


def schedule(backup: Backup, team: Team) -> str:
    """Every ``every_hours`` hours from midnight UTC, at a minute of the hour fixed per team, so that the teams'
    runs (their pods on the system nodes, their uploads) spread over the hour; a run's slot is that of its hour."""
    hours = "0" if backup.every_hours == 24 else f"*/{backup.every_hours}"
    return f"{run_minute(team)} {hours} * * *"


def run_minute(team: Team) -> int:
    return zlib.crc32(team.namespace.encode()) % 60


def slot_options(backup: Backup, team: Team, slot: int, access_key_id: str, secret_access_key: str) -> dict:
    """The snapshot options of one slot, as loft-sh/api's snapshot Options marshal to JSON (pkg/snapshot/options.go:
    the type, then the S3 block's json tags)."""
    s3 = {"bucket": backup.bucket, "key": backup.slot_key(team.namespace, team.vcluster_name, slot),
          "access-key-id": access_key_id, "secret-access-key": secret_access_key}
    if backup.region:
        s3["region"] = backup.region
    if backup.endpoint:
        s3.update({"url": backup.endpoint, "force-path-style": True})
    return {"type": "s3", "s3": s3}


def options_data(backup: Backup, team: Team, access_key_id: str, secret_access_key: str) -> dict[str, str]:
    """Every slot's ``VCLUSTER_STORAGE_OPTIONS`` value, by file name."""
    return {f"slot-{slot}": base64.b64encode(json.dumps(
        slot_options(backup, team, slot, access_key_id, secret_access_key), separators=(",", ":")).encode()).decode()
        for slot in range(backup.keep)}


def proxy_sidecar(team: Team, kubectl_image: str) -> dict:
    """``kubectl proxy`` on the pod's loopback for the job's shell, for as long as it runs (a sidecar: an init
    container that keeps running, ended once the job's container is): GETs of the namespace's ConfigMaps only."""
    container = kubectl_container("api-proxy", kubectl_image, [
        "proxy", "--address=127.0.0.1", f"--port={PROXY_PORT}",
        f"--accept-paths=^/api/v1/namespaces/{team.namespace}/configmaps/[a-z0-9.-]+$",
        "--reject-methods=^(POST|PUT|PATCH|DELETE)$"])
    return {**container, "restartPolicy": "Always",
            "resources": {"requests": dict(PROXY_REQUESTS), "limits": dict(PROXY_LIMITS)}}


def backup_pod_spec(team: Team, backup: Backup, kubectl_image: str) -> dict:
    name = backup_name(team)
    return {
        "restartPolicy": "Never",
        "serviceAccountName": name,
        "securityContext": POD_SECURITY_CONTEXT,
        "initContainers": [proxy_sidecar(team, kubectl_image)],
        "containers": [{
            "name": "snapshot",
            "image": control_plane_image(team.vcluster),
            "command": ["sh", "-c", SCRIPT],
            "env": [{"name": "VCLUSTER_NAME", "value": team.vcluster_name},
                    {"name": "JOB_NAME",
                     "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_NAME_LABEL}']"}}},
                    {"name": STANDALONE_ENV, "value": "false"},
                    {"name": "NAMESPACE", "value": team.namespace},
                    {"name": "PERIOD_SECONDS", "value": str(backup.every_hours * 3600)},
                    {"name": "KEEP", "value": str(backup.keep)}],
            "resources": {"requests": dict(JOB_REQUESTS), "limits": dict(JOB_LIMITS)},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "volumeMounts": [{"name": "options", "mountPath": OPTIONS_MOUNT, "readOnly": True},
                             {"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True},
                             {"name": "tmp", "mountPath": "/tmp"}],
        }],
        "volumes": [{"name": "options", "secret": {"secretName": f"{name}-options"}},
                    {"name": "config", "secret": {"secretName": f"vc-config-{team.vcluster_name}"}},
                    {"name": "tmp", "emptyDir": {}}, HOME_VOLUME],
    }


def backup_resources(name: str, team: Team, credentials: Sequence[pulumi.Input[str]], kubectl_image: str,
                     provider: k8s.Provider, parent: pulumi.Resource,
                     release: pulumi.Resource) -> list[pulumi.Resource]:
    """The team's snapshot options Secret, the job's identity (create the request, a Secret and a ConfigMap, and read
    the ConfigMap back) and the CronJob; none without ``backup``."""
    backup = team.vcluster.backup
    if backup is None:
        return []
    job = backup_name(team)
    labels = {**MANAGED_BY, TEAM_LABEL: team.name, "app.kubernetes.io/name": "snapshot"}
    metadata = {"name": job, "namespace": team.namespace, "labels": labels}
    # The chart writes vc-config-<name>, which the pod mounts; the control plane serves the request.
    after_release = pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[release])
    options = KubernetesObject(
        f"{name}-backup-options", SECRET, metadata={**metadata, "name": f"{job}-options"},
        string_data=pulumi.Output.secret(pulumi.Output.all(*credentials).apply(
            lambda keys: options_data(backup, team, keys[0] or "", keys[1] or ""))),
        opts=after_release)
    identity = job_identity(f"{name}-backup", metadata, ROLE_RULES, cluster_wide=False, opts=after_release)
    cron_job = KubernetesObject(
        f"{name}-backup", CRON_JOB, metadata=metadata,
        spec={"schedule": schedule(backup, team), "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid",
              "startingDeadlineSeconds": STARTING_DEADLINE_SECONDS,
              "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1,
              "jobTemplate": {"metadata": {"labels": labels}, "spec": {
                  "backoffLimit": ATTEMPTS - 1, "activeDeadlineSeconds": RUN_SECONDS,
                  "template": {"metadata": {"labels": {**labels, **SNAPSHOT_APP}},
                               "spec": backup_pod_spec(team, backup, kubectl_image)}}}},
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[release, options, *identity]))
    return [options, *identity, cron_job]
