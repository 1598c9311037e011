"""Stack config: the sub-blocks of a ``vcluster`` block that say what a team's workloads may use in its host namespace
(``resourceQuota``, ``limitRange``, ``services``) and their defaults."""

from __future__ import annotations

from config.key_collections import StringList
from config.key_types import Integer, Quantity
from config.keys import Block, Derived, Key
from config.load_balancer_keys import LOAD_BALANCER_CLASS, LOAD_BALANCER_KEY, LOAD_BALANCER_PREFIXES
from config.model import TenantLimitRange, TenantResourceQuota, TenantServices
from config.synced_data import SYNCED_OBJECT_KEYS, SYNCED_POD_TEXT_ITEMS
from config.tenant_budget import KAI_SHARING_CONFIG_MAPS, OBJECTS_PER_POD, SLICES_PER_SERVICE

DEFAULT_QUOTA = TenantResourceQuota(cpu="16", memory="64Gi", pods=100, services=20, persistent_volume_claims=20,
                                    storage="100Gi")
DEFAULT_LIMITS = TenantLimitRange(default_cpu="1", default_memory="1Gi", default_request_cpu="100m",
                                  default_request_memory="128Mi")

QUOTA_DETAILS = """\
What the team's own workloads get. The namespace's ResourceQuota adds what the tenant's vCluster
control plane and its DNS take from the same namespace (one pod each, the control plane's requests
and data volume, its Services), so the team keeps every pod and every core it is promised. The quota
bounds requests, not limits: `limits.cpu` and `limits.memory` are not in it, and the `limitRange`
defaults give containers that set none their limits. Ephemeral storage is the exception: the quota
pools its limits (`ephemeralStorage`), since a limit is what the kubelet enforces on a shared node's
disk. The Secrets, ConfigMaps and EndpointSlices vCluster copies to the host for the team are counted
(`configMaps`, `secrets`, `endpointSlices`) on top of the platform's own in the namespace (Helm's release
history, vCluster's certificates and kubeconfig, the root CA and DNS ConfigMaps, the host's slices of every
Service), and `count/endpoints` is the namespace's Service count: one Endpoints per Service."""

HUGE_PAGES_DETAILS = (
    "Huge pages are memory a node sets aside at boot (none of the nodes the program builds does); a pod's request "
    "takes them from that node's pool, which every team's pods share, and no KAI queue charges them. So a team gets "
    "none unless its site grants them here, on a site whose nodes have them: the namespace's quota then refuses a "
    "pod past the grant. See [Node pressure](security-pressure.md#node-pressure).")

RESOURCE_QUOTA = Block(keys=(
    Key("cpu", Quantity(), DEFAULT_QUOTA.cpu, "CPU the team's pods may request (`requests.cpu`, plus the control "
        "plane's and the DNS's requests).", example="32",
        details="It must hold `pods` pods at `limitRange.defaultRequestCpu` (100 at 100m: 10), the pods the team is "
                "promised: lower `pods` with it."),
    Key("memory", Quantity(), DEFAULT_QUOTA.memory, "Memory the team's pods may request (`requests.memory`, plus the "
        "control plane's and the DNS's).", example="128Gi",
        details="It must hold `pods` pods at `limitRange.defaultRequestMemory` (100 at 128Mi: 12.5Gi)."),
    Key("pods", Integer(minimum=1), DEFAULT_QUOTA.pods, "Pods of the team (`count/pods`, plus the control plane and "
        "the DNS).", example="50"),
    Key("services", Integer(minimum=0), DEFAULT_QUOTA.services, "Services of the team (`count/services`, plus the "
        "control plane's and the synced DNS Service).", example="10"),
    Key("persistentVolumeClaims", Integer(minimum=0), DEFAULT_QUOTA.persistent_volume_claims,
        "Volume claims of the team (`count/persistentvolumeclaims`, plus the control plane's).", example="5"),
    Key("storage", Quantity(), DEFAULT_QUOTA.storage, "Storage the team's claims may request (`requests.storage`, plus "
        "the control plane's volume).", example="500Gi"),
    Key("ephemeralStorage", Quantity(), DEFAULT_QUOTA.ephemeral_storage, "The total of the team's containers' "
        "ephemeral-storage limits (`limits.ephemeral-storage`, plus the control plane's and the DNS's): what its "
        "pods may write to their nodes' disks at most.", example="200Gi",
        default_note="`pods` times `limitRange.defaultEphemeralStorage`",
        details="Every container has a limit (`limitRange`), so no count of containers adds up past this. It must "
                "hold the team's `pods` at the default limit, or default-sized pods are refused. Size it, with "
                "`pods` and the default limit, to what the GPU nodes' disks can spare for the team. See [Node "
                "pressure](security-pressure.md#node-pressure)."),
    Key("hugepages2Mi", Quantity(), DEFAULT_QUOTA.hugepages2mi, "Huge pages of 2 MiB the team's pods may request "
        "in all (`requests.hugepages-2Mi`).", example="1Gi", details=HUGE_PAGES_DETAILS),
    Key("hugepages1Gi", Quantity(), DEFAULT_QUOTA.hugepages1gi, "Huge pages of 1 GiB the team's pods may request "
        "in all (`requests.hugepages-1Gi`).", example="4Gi", details=HUGE_PAGES_DETAILS),
    Key("configMaps", Integer(minimum=0), DEFAULT_QUOTA.config_maps, "ConfigMaps vCluster may copy to the host for the "
        "team (`count/configmaps`, plus the platform's own in the namespace).", example="500",
        default_note=f"{OBJECTS_PER_POD} per pod of `pods`, {OBJECTS_PER_POD + KAI_SHARING_CONFIG_MAPS} where "
                     "`kaiScheduler.gpuSharing` is on",
        details="vCluster copies a ConfigMap to the host when a pod names it (a volume, `envFrom`, an env value) or "
                "it is marked `vcluster.loft.sh/force-sync`, once however many pods share it, so a Deployment's "
                "replicas cost one. With GPU sharing on, KAI also writes two ConfigMaps for each fractional pod "
                "(its device list and environment), which count here: a stated value below 2 per pod of `pods` is "
                "refused. The default lets every pod the team is promised name a ConfigMap of its own and one "
                "more, and be fractional. Every pod with a service-account token also names its namespace's "
                "`kube-root-ca.crt`, copied once per virtual namespace: the platform pays for `default`'s and the "
                "tenant DNS's, and each other namespace the team runs pods in takes one ConfigMap of this. A "
                "ConfigMap past it stays in the vCluster and its pod does not start on the host. "
                "See [Host objects](security-synced-objects.md#host-objects)."),
    Key("secrets", Integer(minimum=0), DEFAULT_QUOTA.secrets, "Secrets vCluster may copy to the host for the team "
        "(`count/secrets`, plus the platform's own in the namespace).", example="500",
        default_note=f"{OBJECTS_PER_POD} per pod of `pods`",
        details="Copied like ConfigMaps: a Secret a pod names (a volume, an env value, `imagePullSecrets`) or one "
                "marked `vcluster.loft.sh/force-sync`; Secrets no pod names (a tenant's own Helm history, "
                "service-account tokens) stay in the vCluster. The default lets every promised pod name a "
                "credential and a pull secret of its own. The platform's own Secrets (Helm's history of the "
                "vCluster release, vCluster's certificates and kubeconfig) are added to the namespace's quota."),
    Key("endpointSlices", Integer(minimum=0), DEFAULT_QUOTA.endpoint_slices, "EndpointSlices of the team beyond the "
        "host's own for each Service (`count/endpointslices.discovery.k8s.io`, plus one per Service and IP "
        "family).", example="100",
        default_note=f"{SLICES_PER_SERVICE} per Service of `services`",
        details="The host makes a slice per IP family for each Service of the namespace, the team's and the "
                "platform's, and the quota holds those on top. This allowance pays for what vCluster copies: "
                "every EndpointSlice of a Service without a selector (up to 1,000 addresses each, every one a "
                "rule in every node's kube-proxy), and the host's extra slices of a Service past 100 endpoints. "
                "A selector-less Service whose Endpoints the team writes costs one copied slice per IP family (the "
                "vCluster mirrors them), so the default covers every Service of `services` being one."),
    Key("syncedObjectBytes", Quantity(), DEFAULT_QUOTA.synced_object_bytes, "The most data one ConfigMap or Secret "
        "vCluster copies to the host may hold: its keys and values with its labels and annotations, in bytes as "
        "stored.",
        example="256Ki",
        details="The host's synced-objects policy refuses a larger copy (rule `object-size`, on create and update), "
                f"and one with more than {SYNCED_OBJECT_KEYS} keys; the pod that names it does not start on the host. "
                "`kubectl apply` stores the object again in an annotation, so it counts twice; kubectl create and "
                "server-side apply do not. "
                "The API server alone takes 1Mi of values and keys beyond them, so without it the team could write "
                "`configMaps` plus `secrets` times that into the host's etcd, which makes the whole host read-only "
                "when full. The plan's summary shows each team's worst case and the site's total. Between 64Ki and "
                "1Mi. See [Host objects](security-synced-objects.md#host-objects)."),
    Key("syncedPodTextBytes", Quantity(), DEFAULT_QUOTA.synced_pod_text_bytes, "The most free text one pod vCluster "
        "copies to the host may carry, in bytes: every string of its spec the API server does not bound in length. "
        "Its containers' (init and ephemeral included) env variables' names and values, commands and args, images, "
        "working directories, termination message paths, env prefixes, mount and device paths, probes' and hooks' "
        "commands, paths and headers, gRPC services and confinement profiles; its volumes' item keys and paths and "
        "image references; preferred node affinity values, DNS options, sysctl values and hostnameOverride.",
        example="512Ki",
        details="The host's pod policy refuses a larger pod (rule `pod-size`, on create, when an ephemeral "
                f"container is added and when an image changes), and one with more than {SYNCED_POD_TEXT_ITEMS} "
                "entries in the lists holding that text (variables, strings, mounts, volumes' items, ...). The API "
                "server bounds that text only by the request's size (etcd takes 1.5Mi), so without it the team could "
                "write `pods` times that into the host's etcd; the rest of a pod's strings are names, keys and label "
                "values the API server bounds. The default holds twice the largest variable the "
                "Linux kernel starts a process with (128 KiB); keep large configs in a ConfigMap or the image. "
                "The variables vCluster adds count: eight in every container and, unless the pod sets "
                "`enableServiceLinks: false`, about eight for each port of each Service of its namespace. "
                "Between 64Ki and 1Mi. See [Sizes](security-object-sizes.md#sizes)."),
))

SERVICES = Block(keys=(
    Key("nodePorts", Integer(minimum=0), TenantServices().node_ports,
        "How many node ports the tenant's Services may hold (ResourceQuota `services.nodeports`); 0 refuses "
        "NodePort Services and tenant-chosen node ports.", example="2",
        details="A node port opens the same port on every host node, from one cluster-wide range that all "
                "teams share. See [Services](security-synced-objects.md#services)."),
    Key("loadBalancers", Integer(minimum=0), TenantServices().load_balancers,
        "How many LoadBalancer Services the tenant may hold (ResourceQuota `services.loadbalancers`); 0 refuses "
        "them.", example="1",
        details="With `nodePorts: 0` a LoadBalancer Service must set `allocateLoadBalancerNodePorts: false` and "
                "`externalTrafficPolicy: Cluster`. Which of the load-balancer implementation's Service annotations "
                "it may use: `loadBalancerAnnotations`."),
    Key("loadBalancerAnnotations", StringList(form="annotation keys", checks=(LOAD_BALANCER_KEY,)),
        Derived("on EKS, the AWS cloud provider's keys that shape only the team's own load balancer; none "
                "elsewhere"),
        "The load-balancer annotation keys a team's Services may carry, on a Service of any type; every other key "
        "under " + ", ".join(f"`{prefix}`" for prefix in LOAD_BALANCER_PREFIXES) + " is refused.",
        example="[service.beta.kubernetes.io/aws-load-balancer-type, "
                "service.beta.kubernetes.io/aws-load-balancer-ssl-cert]",
        details="Stating the list replaces the default. The keys left out of EKS's default name something of the "
                "account or the network: Elastic IPs, private addresses, subnets, security groups, certificates, "
                "log buckets and cost tags (`config/load_balancer_keys.py` says what each would hand the team). "
                "Cilium reads some on a ClusterIP Service too: in a ClusterMesh, `service.cilium.io/global` has the "
                "Service's endpoints join those of the Service of the same namespace and name in every other "
                "cluster, so the list holds for teams without load balancers as well. List one for a team you trust "
                "with it. See [Services](security-synced-objects.md#services)."),
    Key("loadBalancerClasses", StringList(form="class names", checks=(LOAD_BALANCER_CLASS,)),
        TenantServices().load_balancer_classes,
        "The `spec.loadBalancerClass` values a team's Services may name; none by default, so the host's "
        "default implementation makes every team's load balancers.", example="[service.k8s.aws/nlb]",
        details="A class hands the Service to another controller, which may read annotations this platform does "
                "not judge: list one only when its keys are under the prefixes above."),
))

LIMIT_RANGE = Block(keys=(
    Key("defaultCpu", Quantity(), DEFAULT_LIMITS.default_cpu, "Default CPU limit for containers that set none.",
        example="2"),
    Key("defaultMemory", Quantity(), DEFAULT_LIMITS.default_memory, "Default memory limit.", example="4Gi"),
    Key("defaultRequestCpu", Quantity(), DEFAULT_LIMITS.default_request_cpu, "Default CPU request.", example="250m"),
    Key("defaultRequestMemory", Quantity(), DEFAULT_LIMITS.default_request_memory, "Default memory request.",
        example="512Mi"),
    Key("defaultEphemeralStorage", Quantity(), DEFAULT_LIMITS.default_ephemeral_storage,
        "Default ephemeral-storage limit (writable layer, logs, disk-backed `emptyDir`) for containers that set "
        "none.", example="16Gi",
        details="The kubelet evicts a pod whose ephemeral storage passes its own limit, whatever the node's free "
                "space, so no tenant pod fills a shared node's disk. 8Gi is the vCluster chart's own default. A "
                "workload that keeps more on its node (a model cache in the writable layer) sets its own limit, up "
                "to `maxEphemeralStorage`. See [Node pressure](security-pressure.md#node-pressure)."),
    Key("defaultRequestEphemeralStorage", Quantity(), DEFAULT_LIMITS.default_request_ephemeral_storage,
        "Default ephemeral-storage request.", example="1Gi",
        details="0 leaves scheduling as it was without the limit: a request reserves node disk, and without "
                "this key the API server would make the request equal to the default limit."),
    Key("maxEphemeralStorage", Quantity(), DEFAULT_LIMITS.max_ephemeral_storage,
        "The largest ephemeral-storage limit one container may set (LimitRange `max`); the host refuses a pod "
        "above it.", example="50Gi",
        details="Without a maximum a tenant would set a limit no node holds. It also bounds the vCluster control "
                "plane's own limit (`controlPlaneResources.limits.ephemeral-storage`, the chart's 10Gi)."),
))
