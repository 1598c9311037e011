"""Stack config: the host keys (``cluster``, one block per host kind, and ``ci``), declared and read.

The definitions say what each key is (config/keys.py); the readers below turn them into the model. An EKS host's
keys and their rules are config/load_eks.py's.
"""

from __future__ import annotations

import ipaddress
from typing import Optional

from config import versions
from config.key_collections import StringList, StringMap
from config.key_types import Boolean, Check, Integer, Quantity, Text, quantity_value
from config.keys import REQUIRED, Block, Condition, Key
from config.host_networking import IMPLEMENTATION_NAME, JUDGED
from config.load_operators import GPU_OPERATOR_FLOOR_REASON
from config.load_eks import EKS, read_eks
from config.model import CiSettings, Cluster
from config.network_types import NetworkList, is_ip_address
from config.model_host import (
    DEFAULT_POD_PIDS_LIMIT, MICROK8S_AUDIT_LOG_FILE, MICROK8S_AUDIT_POLICY_FILE, PID_EVICTION_THRESHOLD,
    SYSTEM_PID_RESERVE, AuditLog, HostDns, KubeconfigHost, MicroK8sHost,
)
from config.reader import Section
from config.secrets import Secrets
from config.version_types import SITE_KUBERNETES, Version
from config.vocabulary import CLUSTER_KINDS

# A DNS-1123 subdomain: what `kubectl get storageclass` names may be.
STORAGE_CLASS_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
KUBERNETES_VERSION_DETAILS = (
    "The program cannot ask the cluster before it runs, so the site states it: the platform's kubectl Jobs and "
    "kube-prometheus-stack's CRD upgrade hook run the kubectl pinned for it (`config/versions.py` "
    "`KUBECTL_IMAGES`, supported within one minor version of the API server), `--render-charts` renders the "
    "charts for it and the deployability check validates every object against it. Left out, all three assume the "
    "oldest version the program supports: the kubectl may then be out of skew with a newer cluster, and the check "
    "may report a field it accepts. Read it with `{command}` and quote it in YAML (`\"1.36\"`).")

# One GiB: a box or cluster stating less memory has most likely left out the unit (a plain number is bytes).
SMALLEST_STATED_MEMORY = 2 ** 30


def stated_size_keys(whose: str, command: str, examples: tuple[str, str]) -> tuple[Key, Key]:
    """The stated allocatable cpu and memory of a host whose nodes the program cannot size itself."""
    details = ("Only used to check the teams' guarantees: KAI guarantees each team its queue's {resource} quota "
               "(`vcluster.resourceQuota.{resource}` plus its DNS pod unless `teams[].resources.{resource}` sets it; "
               "{default} by default) and does not itself check that the nodes hold them all, so a plan warns when "
               "they add up past this. Read it from the Allocatable of `{command}`{less}.")
    less = (", not the box's total: the kubelet keeps some back; the program then takes out what the vCluster control "
            "planes and the GPU Operator's feature-discovery worker request there" if whose == "the box" else
            ", less what the platform's own pods on those nodes request")
    unstated = "not stated: a review note gives the teams' totals"
    return (Key("cpu", Quantity(), None, f"Allocatable CPU of {whose}.", example=examples[0], default_note=unstated,
                details=details.format(resource="cpu", default="16 cores", command=command, less=less)),
            Key("memory", Quantity(), None, f"Allocatable memory of {whose}.", example=examples[1],
                default_note=unstated,
                details=details.format(resource="memory", default="64Gi", command=command, less=less)))


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


HOST_DNS = Block(title="the host's DNS path (an existing cluster)", intro="""\
With `vcluster.networkPolicy` on, a tenant's control plane, DNS and snapshot pods may reach the host's DNS and
nothing else of it: the control plane resolves through the kubelet's `clusterDNS` (webhook, issuer and
ExternalName hosts) and the tenant DNS forwards every name it does not serve itself to the Service named here.
Left out, the program assumes the kube-dns layout of EKS, MicroK8s, kubeadm and k3s: the Service
`kube-system/kube-dns`, answered by pods `k8s-app: kube-dns` in `kube-system` listening on 53. State the layout
when the host differs, and above all when it runs NodeLocal DNSCache (`kubectl -n kube-system get ds
node-local-dns`): the node-local cache answers on the node itself (169.254.20.10, and in kube-proxy's iptables
mode the kube-dns Service's own address), where no pod selector matches, so without `nodeLocalAddresses` the
tenant's external names stop resolving. Nothing beyond the stated path is opened, and only on DNS.""", keys=(
    Key("service", Text(form="namespace/name", checks=(Check(
            r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
            "is not a Service as namespace/name",
            "name the cluster DNS Service as namespace/name, e.g. kube-system/kube-dns"),)),
        "kube-system/kube-dns", "The cluster DNS Service whose address the tenant DNS forwards to.",
        example="kube-system/rke2-coredns-rke2-coredns",
        details="`kubectl get svc -A | grep dns`; RKE2 names it `kube-system/rke2-coredns-rke2-coredns`."),
    Key("namespace", Text(dns_label=True), "kube-system", "The namespace of the DNS Service's pods.",
        example="kube-system"),
    Key("podLabels", StringMap(), {"k8s-app": "kube-dns"}, "Labels every DNS pod carries (a pod selector).",
        example="{k8s-app: kube-dns}",
        details="`kubectl -n <namespace> get pods --show-labels`; they must select the DNS pods and nothing else of "
                "the namespace."),
    Key("port", Integer(1, 65535), 53, "The port the DNS pods' containers listen on (the Service's target port).",
        example="5353", details="A policy matches a pod's port after the Service's translation."),
    Key("nodeLocalAddresses", StringList(form="IP addresses"), [],
        "Addresses a DNS process on the node answers at (NodeLocal DNSCache), reached on 53.",
        example="[169.254.20.10, 10.43.0.10]", default_note="none",
        details="Each is opened as a single-address `ipBlock` on 53/UDP and 53/TCP (the node-local cache skips "
                "the Service's translation, so queries arrive on the port they were sent to). List the cache's "
                "link-local address (the `-localip` argument of the `node-local-dns` DaemonSet, 169.254.20.10 by "
                "default) and, when kube-proxy runs in iptables mode, the DNS Service's address, which the cache "
                "binds too."),
))

KUBECONFIG = Block(title="an existing cluster", intro="The `kubeconfig` secret is required.", keys=(
    Key("context", Text(), None, "Context to use.", example="gpu-prod",
        default_note="the kubeconfig's current context"),
    Key("gpus", Integer(minimum=0), None, "GPUs in the cluster, only used for the capacity warning.", example="8",
        default_note="no capacity warning"),
    *stated_size_keys("the nodes tenant pods run on, added up", "kubectl describe nodes -l <vcluster.nodeLabels>",
                      ("190", "1400Gi")),
    Key("storageClass", Text(form="StorageClass name", checks=tuple(Check(
            pattern, "is not a valid StorageClass name",
            "use the name `kubectl get storageclass` shows (lowercase letters, digits, '-' and '.')")
            for pattern in (r"[\s\S]{1,253}", STORAGE_CLASS_NAME))), None,
        "Class of each tenant control plane's 5Gi volume claim.", example="standard",
        default_note="the cluster's default class",
        details="It must exist: `kubectl get storageclass`. Leave it out only if one class there is marked "
                "`(default)`; otherwise every tenant release waits 15 minutes and rolls back.",
        fix="set it to the name of a StorageClass of the cluster, e.g. standard"),
    Key("kubernetesVersion", SITE_KUBERNETES,
        versions.KUBERNETES_MINIMUM_VERSION, "The Kubernetes minor version of the cluster's API server.",
        example='"1.33"', default_note="the oldest version the program supports",
        details=KUBERNETES_VERSION_DETAILS.format(command="kubectl version")),
    Key("apiServerPort", Integer(1, 65535), None, "Port the API server's endpoints listen on.", example="16443",
        default_note="443, 6443 or 8443",
        details="See `kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes`. Set it when it "
                "is not 443, 6443 or 8443, e.g. a MicroK8s cluster reached by kubeconfig: with "
                "`vcluster.networkPolicy` on, tenant control planes may reach this port only (unset: 443, 6443 and "
                "8443)."),
    Key("apiServerAddresses", NetworkList(exact=True), (), "Addresses the API server's endpoints listen on.",
        example="[192.168.49.2/32]", default_note="any address",
        details="See the same EndpointSlice. With `vcluster.networkPolicy` on, tenant control planes reach the API "
                "server's port at these addresses only. Set it when that port is 8443, or is not stated: every "
                "vCluster control plane serves on 8443, so a rule opening 8443 to every address lets one team's "
                "tenant call another team's virtual API server (the plan warns)."),
    Key("dns", HOST_DNS, {}, "Where the host's DNS answers: Service, pods, port, node-local addresses.",
        default_note="kube-system/kube-dns, pods k8s-app: kube-dns on 53"),
    Key("networking", StringList(non_empty=True, form="implementation names", checks=(IMPLEMENTATION_NAME,)), None,
        "The cluster's network plugins and load-balancer implementations.", example="[cilium, kube-vip]",
        default_note="none stated: the plan warns",
        details="vCluster copies a tenant's pod and Service labels and annotations to the host, where these read "
                "some of them (an address, an address pool, a gateway, an announcement to the routers). The host "
                "policies judge the keys of " + ", ".join(f"`{name}`" for name in JUDGED) + "; the plan warns of "
                "any other name listed, whose keys reach it unjudged, and of a site that lists none. See [the key "
                "allowlist](security-admission.md#the-key-allowlist). With `servicelb` (k3s' ServiceLB, which serves "
                "each LoadBalancer Service on every node's own ports) no team may hold load balancers: a team's "
                "Service on port 6443 or 10250 would take the connections other hosts make to a node's API server "
                "or kubelet; run MetalLB instead (`--disable servicelb`) and name `metallb`."),
))

# Fewer processes and threads than this and honest pods fail: one PyTorch rank with NCCL already starts hundreds of
# threads, and the platform's own pods (DNS, vCluster control planes, the GPU Operator's agents) share the limit.
POD_PIDS_FLOOR = 1024
# The kernel's largest pid_max on 64-bit machines (PID_MAX_LIMIT, 2^22): a per-pod limit above it limits nothing.
KERNEL_PID_MAX_LIMIT = 4194304

CLUSTER = Block(title="the host", conditions=(
    *(Condition("kind", (kind,), "is settings for kind {name}, but cluster.kind is {value}",
                "remove cluster.{name} or set cluster.kind to {name}",
                forbidden=tuple(other for other in CLUSTER_KINDS if other != kind)) for kind in CLUSTER_KINDS),
    Condition("kind", ("eks",), "cluster.kind is eks, but the EKS settings are missing",
              "add cluster.eks with at least region and gpuNodeGroups (entries with name and instanceTypes)",
              required=("eks",)),
), keys=(
    Key("kind", Text(choices=CLUSTER_KINDS), REQUIRED, "Which host to use.", example="microk8s",
        details="Only the settings block for this kind may be present: `cluster.eks` under kind `microk8s` is an "
                "error.",
        fix="set cluster.kind to microk8s, eks or kubeconfig"),
    Key("microk8s", MICROK8S, {}, "Settings of a `microk8s` host."),
    Key("eks", EKS, {}, "Settings of an `eks` host: `region` and `gpuNodeGroups` are required."),
    Key("kubeconfig", KUBECONFIG, {}, "Settings of a `kubeconfig` host."),
    Key("podPidsLimit", Integer(POD_PIDS_FLOOR, KERNEL_PID_MAX_LIMIT), DEFAULT_POD_PIDS_LIMIT,
        "Most processes and threads one pod may run at once on a node (the kubelet's `podPidsLimit`).",
        example="32768",
        details="Every pod of a node takes its processes and threads from one kernel table (`pid_max`, "
                "`threads-max`), and the kubelet limits a pod only when this is set (its default is no limit): "
                "without it, a fork bomb or a thread leak in one team's pod leaves every other team's pods on that "
                "node, and the kubelet, containerd and the NVIDIA stack, unable to start a process or thread. Beside "
                f"it, on `microk8s` and `eks`, the program keeps {SYSTEM_PID_RESERVE} of each node's table from all "
                f"pods together (`systemReserved` `pid`) and has the kubelet evict pods, most processes first, when "
                f"less than {PID_EVICTION_THRESHOLD} of it is free (`evictionHard` `pid.available`), so several pods "
                f"of one team cannot take it either. {DEFAULT_POD_PIDS_LIMIT} leaves room for an 8-GPU training "
                "pod whose ranks each run a PyTorch DataLoader with a dozen workers plus NCCL and OpenMP thread pools "
                "sized to the node's cores; a pod that reaches the limit gets `fork`/`pthread_create` errors (EAGAIN) "
                "and no other pod notices. On `microk8s` the program writes `--pod-max-pids` into the snap's kubelet "
                "arguments and restarts kubelite; on `eks` every node group's launch template carries it as a nodeadm "
                "`NodeConfig`, so changing it rolls every node group's nodes. Either way, pods keep the limit their "
                "node had when they started. On `kubeconfig` the program does not own the nodes: the plan's notes "
                "ask you to set it on their kubelets. See [Node pressure](security-pressure.md#node-pressure).",
        fix=f"set it to a whole number between {POD_PIDS_FLOOR} (fewer and honest training pods, and the "
            f"platform's own, fail to start threads) and {KERNEL_PID_MAX_LIMIT} (the kernel's largest pid_max: a "
            "higher limit limits nothing)"),
))

CI = Block(title="where CI reaches the site", keys=(
    Key("runner", StringList(non_empty=True, form="runner labels"), None,
        "`runs-on` labels of the runner that previews and deploys this site.", example="[self-hosted, gpu-lab]",
        default_note="a GitHub-hosted `ubuntu-latest` runner",
        details="Set it for a site only reachable on-prem (a MicroK8s box, a private cluster) to a self-hosted "
                "runner that can reach it. Read by `python -m ops.sites matrix` (see [CI follows the stack files]"
                "(ci-and-sites.md#ci-follows-the-stack-files)); the program itself ignores it."),
))


def read_cluster(section: Section, secrets: Secrets) -> Optional[Cluster]:
    kind = section.read("kind")
    pids = section.read("podPidsLimit")
    if kind == "microk8s":
        return Cluster(kind, microk8s=_microk8s(section.child("microk8s"), secrets), pod_pids_limit=pids)
    if kind == "eks":
        return Cluster(kind, eks=read_eks(section.child("eks")), pod_pids_limit=pids)
    if kind == "kubeconfig":
        secrets.require("kubeconfig", "cluster.kind is kubeconfig but no kubeconfig is set")
        return Cluster(kind, kubeconfig=_kubeconfig(section.child("kubeconfig")), pod_pids_limit=pids)
    return None


def _microk8s(section: Section, secrets: Secrets) -> MicroK8sHost:
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
        cpu=_stated_size(section, "cpu"),
        memory=_stated_size(section, "memory"),
        audit_log=_audit_log(section.child("auditLog")),
    )


def _audit_log(section: Section) -> AuditLog:
    return AuditLog(enabled=section.read("enabled"), max_age_days=section.read("maxAgeDays"),
                    max_backups=section.read("maxBackups"), max_size_megabytes=section.read("maxSizeMegabytes"))


def _kubeconfig(section: Section) -> KubeconfigHost:
    return KubeconfigHost(
        context=section.read("context"),
        gpus=section.read("gpus"),
        cpu=_stated_size(section, "cpu"),
        memory=_stated_size(section, "memory"),
        storage_class=section.read("storageClass"),
        api_server_port=section.read("apiServerPort"),
        api_server_addresses=section.read("apiServerAddresses"),
        kubernetes_version=section.read("kubernetesVersion"),
        dns=_host_dns(section.child("dns")),
        dns_stated=section.has("dns"),
        networking=section.read("networking"),
    )


def _stated_size(section: Section, name: str) -> Optional[str]:
    """A stated allocatable that cannot be one: no CPU at all, or memory written without its unit."""
    value = section.read(name)
    if value is None:
        return None
    amount = quantity_value(value)
    if name == "cpu" and amount <= 0:
        section.fail(name, value, "states no CPU at all", "state the Allocatable cpu of `kubectl describe node`, "
                     "e.g. 31850m, or leave the key out")
    elif name == "memory" and amount < SMALLEST_STATED_MEMORY:
        section.fail(name, value, f"is {amount:g} bytes, less than 1Gi (a number without a unit is bytes)",
                     "write it with its unit, e.g. 250Gi, as the Allocatable of `kubectl describe node` shows it")
    return value


def _host_dns(section: Section) -> HostDns:
    default = HostDns()
    labels = section.read("podLabels")
    if labels == {}:
        section.fail("podLabels", labels, "selects every pod of the namespace",
                     "name the labels of the DNS pods, e.g. {k8s-app: kube-dns}")
    addresses = section.read("nodeLocalAddresses") or ()
    for address in addresses:
        if not is_ip_address(address):
            section.fail("nodeLocalAddresses", address, "is not an IP address",
                         "list single addresses such as 169.254.20.10 (no prefix length)")
    return HostDns(service=section.read("service") or default.service,
                   namespace=section.read("namespace") or default.namespace,
                   pod_labels=labels or default.pod_labels, port=section.read("port") or default.port,
                   node_local_addresses=tuple(str(ipaddress.ip_address(address)) for address in addresses
                                              if is_ip_address(address)))


def read_ci(section: Section) -> CiSettings:
    """Where this site's CI jobs run: a site only reachable on-prem names its self-hosted runner."""
    return CiSettings(runner=section.read("runner") or ())
