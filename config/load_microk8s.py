"""Stack config: a MicroK8s host's keys (``cluster.microk8s``, its API server's audit log), declared and read."""

from __future__ import annotations

from config import versions
from config.key_types import Boolean, Check, Integer, Quantity, Text, quantity_value
from config.keys import Block, Key
from config.load_operators import GPU_OPERATOR_FLOOR_REASON
from config.load_stated_host import KUBERNETES_VERSION_DETAILS, stated_size, stated_size_keys
from config.model_host import (
    DEFAULT_SYSTEM_MEMORY_RESERVE, MICROK8S_AUDIT_LOG_FILE, MICROK8S_AUDIT_POLICY_FILE, AuditLog, MicroK8sHost,
)
from config.reader import Section
from config.secrets import Secrets
from config.version_types import SITE_KUBERNETES, Version

# Less than kubelite and k8s-dqlite take on an idle box: most likely a unit left out, and it would protect nothing.
SMALLEST_MEMORY_RESERVE = 512 * 2 ** 20

DEFAULT_AUDIT_LOG = AuditLog()
AUDIT_LOG = Block(keys=(
    Key("enabled", Boolean(), DEFAULT_AUDIT_LOG.enabled, "Whether the box's API server keeps an audit log.",
        example="false",
        details="Who did what on the host: one JSON line per request (the user or service account, each team's "
                "vCluster syncer and the platform's own tools included, the verb, resource, namespace, name, source "
                "address and response code), at level `Metadata`: request and response bodies, which would copy "
                "tenants' Secrets and pods' environment into the log, are never written. Health probes "
                "(`/healthz`, `/livez`, `/readyz`, `/version`) and the node's and control plane's lease renewals "
                f"are left out. The program writes the policy to `{MICROK8S_AUDIT_POLICY_FILE}` and the API server "
                f"writes the log to `{MICROK8S_AUDIT_LOG_FILE}` (root only); see [running a site]"
                "(operations-running.md#the-host-api-servers-audit-log). `false` takes the flags and the policy out "
                "again (kubelite restarts); the log files stay."),
    Key("maxAgeDays", Integer(1, 3650), DEFAULT_AUDIT_LOG.max_age_days,
        "Days a rotated log file is kept (`--audit-log-maxage`).", example="90",
        details="A rotated file older than this is deleted, whatever `maxBackups` allows.",
        fix="set it to a whole number of days between 1 and 3650 (the API server reads 0 as never deleting by "
            "age)"),
    Key("maxBackups", Integer(1, 100), DEFAULT_AUDIT_LOG.max_backups,
        "Rotated log files kept (`--audit-log-maxbackup`).", example="20",
        details="With `maxSizeMegabytes` it bounds the disk the log takes on the box, whose disk the tenants' "
                "pods, images and volumes share: at most (`maxBackups` + 1) × `maxSizeMegabytes`, "
                f"{DEFAULT_AUDIT_LOG.disk_megabytes / 1000:g} GB by default.",
        fix="set it to a whole number between 1 and 100 (the API server reads 0 as keeping every rotated file, "
            "until the box's disk is full)"),
    Key("maxSizeMegabytes", Integer(1, 1024), DEFAULT_AUDIT_LOG.max_size_megabytes,
        "Size in megabytes at which the log file is rotated (`--audit-log-maxsize`).", example="200",
        fix="set it to a whole number of megabytes between 1 and 1024 (from Kubernetes 1.36 the API server reads 0 "
            "as never rotating: one file growing until the box's disk is full)"),
))


MICROK8S = Block(title="a single GPU machine running MicroK8s", intro="""\
The program runs the setup steps in order: `snap refresh --hold microk8s`, the kubelet's process limits
(`cluster.podPidsLimit`), the API server's audit log (`auditLog`), `microk8s enable dns`,
`microk8s enable hostpath-storage`, then optionally `microk8s enable nvidia`, then `microk8s config` to
read the kubeconfig and `cat` of the API server's and the front proxy's certificates to export when they end
(`hostCertificateExpiry`: MicroK8s issues them for a year and nothing renews them, see docs/operations-running.md, What
expires). The steps that change the cluster (the process limits, the audit log and each addon) first wait for
`microk8s status --wait-ready`.""", keys=(
    Key("host", Text(), None, "The GPU machine to drive over SSH.", example="192.0.2.10",
        default_note="run locally",
        details="If unset, the commands run on the machine running `pulumi up`. If set, the `sshPrivateKey` secret "
                "is required.",
        fix="set it to the GPU machine's address, or remove it to run locally"),
    Key("user", Text(), "ubuntu", "SSH user.", example="ops"),
    Key("port", Integer(1, 65535), 22, "SSH port.", example="2222"),
    Key("useSudo", Boolean(), True, "Prefix every command with `sudo`.", example="false",
        details="The commands run non-interactively, so sudo must not ask for a password."),
    Key("enableNvidiaAddon", Boolean(), False,
        "Run `microk8s enable nvidia --gpu-operator-version <nvidiaAddonOperatorVersion>` once.", example="true",
        details="Then wait up to 5 minutes for the addon's ClusterPolicy `cluster-policy` (the addon ignores Helm "
                "failures, so the step fails with an explanation if no operator appeared). Leave it `false` if the "
                "addon is already enabled (the `dev` box). Use it with `gpuOperator.mode: microk8s-addon`."),
    Key("nvidiaAddonOperatorVersion", Version("v", versions.GPU_OPERATOR_RELEASES, GPU_OPERATOR_FLOOR_REASON),
        versions.MICROK8S_ADDON_GPU_OPERATOR_VERSION,
        "Pinned GPU Operator version for the addon.", example="v26.3.3",
        details="Only used when `enableNvidiaAddon` is true."),
    Key("apiServerUrl", Text(form="`https://` URL", checks=(
        Check("https://.*", "must be an https:// URL", "set it to https://<address>:16443"),)), None,
        "Rewrites the server of every cluster entry in the kubeconfig.", example="https://gpu-box.example:16443",
        default_note="keep what `microk8s config` prints",
        details="Use it when the address MicroK8s prints (its internal IP) can't be reached from where `pulumi` "
                "runs.",
        fix="set it to https://<address>:16443"),
    Key("gpus", Integer(minimum=0), 1, "GPUs in the box.", example="2",
        details="Only used for the capacity warning."),
    *stated_size_keys("the box", "kubectl describe node", ("31850m", "250Gi")),
    Key("systemReservedMemory", Quantity(), DEFAULT_SYSTEM_MEMORY_RESERVE,
        "Memory the box keeps from all pods together for its own services (the kubelet's `systemReserved` "
        "`memory`).", example="8Gi",
        details="The snap reserves none, so the pods together may take the whole box. Memory that no process holds "
                "(a tenant's memory-backed `emptyDir`, its shared memory) is not freed by killing its writer, and "
                "the kernel's OOM killer then goes on past the pods to the snap's own services, k8s-dqlite, the "
                "platform's datastore, among them. With node allocatable enforced "
                "on pods (the kubelet's default, which the snap keeps) the kubelet caps the `kubepods` cgroup, "
                "parent of every pod, at the box's memory less this, so pods running the box out of memory are "
                "OOM-killed among themselves and those services keep at least this much; the box's Allocatable, "
                "which KAI schedules against, is that much lower. "
                f"{DEFAULT_SYSTEM_MEMORY_RESERVE} holds kubelite, k8s-dqlite, containerd with a shim per pod at 110 "
                "pods (EKS' nodeadm reserves 255Mi plus 11Mi a pod for the kubelet and the runtime alone: 1465Mi), "
                "sshd and the NVIDIA daemons; raise it on a box with many teams, whose syncers each keep watches "
                "open on the API server. `0` reserves nothing. The program writes it beside its `pid` entry in the "
                "snap's `--system-reserved` (a `memory` entry of the site's own there is replaced) and restarts "
                "kubelite; read [Changing a running site](operations-running.md#changing-a-running-site) before "
                "changing it on a running box. See [Node pressure](security-pressure.md#node-pressure).",
        fix="write it with its unit, e.g. 4Gi, or 0 to reserve nothing"),
    Key("kubernetesVersion", SITE_KUBERNETES,
        versions.KUBERNETES_MINIMUM_VERSION, "The Kubernetes minor version MicroK8s runs.", example='"1.36"',
        default_note="the oldest version the program supports",
        details=KUBERNETES_VERSION_DETAILS.format(command="microk8s version") + (
            f" Tracks below {versions.MICROK8S_CONTAINERD_CDI_VERSION} bundle containerd 1.6, which cannot inject CDI "
            f"devices, where the device plugin of a GPU Operator from {versions.GPU_OPERATOR_CDI_DEVICE_LIST} on (the "
            "default, installed or through `enableNvidiaAddon`) cannot give a container its GPU (it would see the GPUs "
            "its image's `NVIDIA_VISIBLE_DEVICES` names): such a site, or one that does not state its track, is "
            f"refused; pin the operator {versions.GPU_OPERATOR_NEWEST_ENVVAR_DEVICE_LIST} until the box runs "
            f"{versions.MICROK8S_CONTAINERD_CDI_VERSION} or later.")),
    Key("auditLog", AUDIT_LOG, {}, "The API server's audit log: whether it is kept, and how much of it."),
))


def read_microk8s(section: Section, secrets: Secrets) -> MicroK8sHost:
    host = section.read("host")
    if host is not None:
        secrets.require("sshPrivateKey", "cluster.microk8s.host is set but no SSH private key is")
    api_server_url = section.read("apiServerUrl")
    return MicroK8sHost(
        host=host,
        user=section.read("user"),
        port=section.read("port"),
        use_sudo=section.read("useSudo"),
        enable_nvidia_addon=section.read("enableNvidiaAddon"),
        nvidia_addon_operator_version=section.read("nvidiaAddonOperatorVersion"),
        api_server_url=api_server_url,
        gpus=section.read("gpus"),
        kubernetes_version=section.read("kubernetesVersion"),
        kubernetes_version_stated=section.has("kubernetesVersion"),
        cpu=stated_size(section, "cpu"),
        memory=stated_size(section, "memory"),
        audit_log=_audit_log(section.child("auditLog")),
        system_reserved_memory=_memory_reserve(section),
    )


def _memory_reserve(section: Section) -> str:
    value = section.read("systemReservedMemory")
    if value is None:  # not a quantity: the reader has said so
        return DEFAULT_SYSTEM_MEMORY_RESERVE
    amount = quantity_value(value)
    if 0 < amount < SMALLEST_MEMORY_RESERVE:
        section.fail("systemReservedMemory", section.raw("systemReservedMemory"),
                     f"is {amount:.0f} bytes, less than kubelite and k8s-dqlite take on an idle box (a number "
                     "without a unit is bytes)", "write it with its unit, e.g. 4Gi, or 0 to reserve nothing")
    return value


def _audit_log(section: Section) -> AuditLog:
    return AuditLog(enabled=section.read("enabled"), max_age_days=section.read("maxAgeDays"),
                    max_backups=section.read("maxBackups"), max_size_megabytes=section.read("maxSizeMegabytes"))
