"""Stack config: the host keys (``cluster``, one block per host kind, and ``ci``), declared and read.

The definitions say what each key is (config/keys.py); the readers below turn them into the model. An EKS host's
keys and their rules are config/load_eks.py's, a MicroK8s box's config/load_microk8s.py's.
"""

from __future__ import annotations

import ipaddress
from typing import Optional

from config import versions
from config.key_collections import StringList, StringMap
from config.key_types import Check, Integer, Text
from config.keys import REQUIRED, Block, Condition, Key
from config.host_networking import IMPLEMENTATION_NAME, JUDGED
from config.load_eks import EKS, read_eks
from config.load_microk8s import MICROK8S, read_microk8s
from config.load_stated_host import KUBERNETES_VERSION_DETAILS, stated_size, stated_size_keys
from config.model import CiSettings, Cluster
from config.network_types import NetworkList, is_ip_address
from config.model_host import (
    DEFAULT_POD_PIDS_LIMIT, PID_EVICTION_THRESHOLD, SYSTEM_PID_RESERVE, HostDns, KubeconfigHost,
)
from config.reader import Section
from config.secrets import Secrets
from config.version_types import SITE_KUBERNETES
from config.vocabulary import CLUSTER_KINDS

# A DNS-1123 subdomain: what `kubectl get storageclass` names may be.
STORAGE_CLASS_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"

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
    Key("serviceRanges", NetworkList(exact=True), (), "The cluster's Service address ranges.",
        example="[10.100.0.0/16]", default_note="not stated",
        details="The API server's `--service-cluster-ip-range`, the primary range first, then any other (the second "
                "address family, ServiceCIDRs added later); on EKS `aws eks describe-cluster --name NAME --query "
                "cluster.kubernetesNetworkConfig` (`serviceIpv4Cidr` or `serviceIpv6Cidr`). Required when "
                "`networking` names `aws-vpc-cni`, whose policy agent judges a pod's egress at a Service's own address "
                "before it is translated: the tenant control planes' rule for the API server's port then leaves these "
                "ranges out, of `apiServerAddresses` too, but for the `kubernetes` Service (the primary range's first "
                "address, on 443), so it does not open every other team's vCluster Service. Ranges that overlap, and "
                "API server addresses inside a range, are refused."),
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
        return Cluster(kind, microk8s=read_microk8s(section.child("microk8s"), secrets), pod_pids_limit=pids)
    if kind == "eks":
        return Cluster(kind, eks=read_eks(section.child("eks")), pod_pids_limit=pids)
    if kind == "kubeconfig":
        secrets.require("kubeconfig", "cluster.kind is kubeconfig but no kubeconfig is set")
        return Cluster(kind, kubeconfig=_kubeconfig(section.child("kubeconfig")), pod_pids_limit=pids)
    return None


def _kubeconfig(section: Section) -> KubeconfigHost:
    return KubeconfigHost(
        context=section.read("context"),
        gpus=section.read("gpus"),
        cpu=stated_size(section, "cpu"),
        memory=stated_size(section, "memory"),
        storage_class=section.read("storageClass"),
        api_server_port=section.read("apiServerPort"),
        api_server_addresses=section.read("apiServerAddresses"),
        service_ranges=section.read("serviceRanges"),
        kubernetes_version=section.read("kubernetesVersion"),
        dns=_host_dns(section.child("dns")),
        dns_stated=section.has("dns"),
        networking=section.read("networking"),
    )


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
