"""Every chart, image and version the platform deploys, pinned in one place.

Stack config may override a version (``gpuOperator.version``, ``kaiScheduler.version``,
``vcluster.version``), but the defaults below are what a new stack gets. Nothing here says
``latest``: an upgrade is a reviewed change to this file or to a stack file.
"""

GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_VERSION = "v26.7.0"
# The operator's own images (the operator, its pre-upgrade CRD hook, the validator and node status exporter) are
# tagged as the release: the chart takes their tag from its appVersion, which its repository leaves at a
# placeholder (main-latest, devel-ubi8) and its release job stamps with the release tag. The program passes the
# chart version itself as their tag (components/gpu_operator.py RELEASE_TAGGED), so the image is the release's
# whatever the packaging.

# The image repository of each GPU Operator chart value that names one (`<value>.repository`: the operator, every
# operand of its ClusterPolicy, and the node-feature-discovery subchart's image), by the first accepted release that
# set it that way (None: the value is gone). A site's mirror replaces its registry host (components/gpu_operator.py);
# tests/test_mirrors.py checks the table against the chart's values at every accepted release.
GPU_OPERATOR_IMAGE_REPOSITORIES = {
    "v24.9.0": {
        **dict.fromkeys(("operator", "operator.initContainer", "driver", "devicePlugin", "gfd", "sandboxDevicePlugin",
                         "vfioManager"), "nvcr.io/nvidia"),
        **dict.fromkeys(("toolkit", "dcgmExporter"), "nvcr.io/nvidia/k8s"),
        **dict.fromkeys(("validator", "nodeStatusExporter", "driver.manager", "vgpuManager.driverManager",
                         "vfioManager.driverManager", "vgpuDeviceManager", "gdrcopy", "gds", "kataManager", "dcgm",
                         "migManager", "ccManager"), "nvcr.io/nvidia/cloud-native"),
        "node-feature-discovery.image": "registry.k8s.io/nfd/node-feature-discovery",
    },
    "v25.10.0": {"validator": "nvcr.io/nvidia", "nodeStatusExporter": "nvcr.io/nvidia"},
    "v26.3.0": {"operator.initContainer": None, "kataManager": None,
                "kataSandboxDevicePlugin": "nvcr.io/nvidia/cloud-native", "vfioManager": "nvcr.io/nvidia/cloud-native"},
    "v26.7.0": {"draDriver": "nvcr.io/nvidia"},
}

# Version passed to `microk8s enable nvidia --gpu-operator-version` when the program enables the
# MicroK8s addon itself.
MICROK8S_ADDON_GPU_OPERATOR_VERSION = "v26.7.0"

# The chart version is the git tag, leading "v" included. Every release the program accepts (v0.16.0 and
# later, see config/load.py) is in this registry; releases up to v0.13.0 were in ghcr.io/nvidia.
KAI_CHART = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
# v0.17.0 keeps every value and the Queue CRD the platform uses (global.gpuSharing,
# global.blockNvidiaVisibleDevices, the kai-queue-validation-v2 webhook); the committed stacks stay on
# the seed's v0.16.4.
KAI_VERSION = "v0.17.0"
# Where KAI's release job publishes every image of a release (its operator, the services it deploys, the CRD
# upgrade and config hooks), tagged as the release: .github/workflows/on-release.yaml at every accepted tag writes
# this registry over the chart's placeholder (registry/local/kai-scheduler) and stamps the release as the chart's
# appVersion (its image tag). The program sets both (global.registry, global.tag) so the images are the release's.
KAI_IMAGE_REGISTRY = "ghcr.io/kai-scheduler/kai-scheduler"

VCLUSTER_REPO = "https://charts.loft.sh"
VCLUSTER_CHART = "vcluster"
VCLUSTER_VERSION = "0.36.1"
# The registry of the chart's control plane and Kubernetes images (controlPlane.statefulSet.image.registry,
# controlPlane.distro.k8s.image.registry) at every accepted release; a site's mirror of it replaces it there.
VCLUSTER_IMAGE_REGISTRY = "ghcr.io"
# The control plane's image repository at every accepted release (controlPlane.statefulSet.image.repository), tagged
# with the chart's version unless the values name a tag (chart/templates/_helper.tpl vcluster.controlPlane.image).
# The teams' snapshot jobs run its binary (components/tenant_backup.py).
VCLUSTER_CONTROL_PLANE_REPOSITORY = "loft-sh/vcluster-pro"
# The registry of the etcd a site may deploy beside a control plane (controlPlane.backingStore.etcd.deploy.statefulSet.
# image.registry) at every accepted release; a site's mirror of it replaces it there.
VCLUSTER_ETCD_IMAGE_REGISTRY = "registry.k8s.io"
# The Kubernetes each accepted vCluster release (VCLUSTER_RELEASES, below) runs inside by default (its
# controlPlane.distro.k8s.image.tag); the in-vCluster defaults need 1.36 (components/virtual_defaults.py).
VCLUSTER_VIRTUAL_KUBERNETES = {"0.36.1": "v1.36.0", "0.36.0": "v1.36.0", "0.35.3": "v1.36.0", "0.35.2": "v1.36.0",
                               "0.35.1": "v1.36.0", "0.35.0": "v1.36.0"}
# The control plane's resources every accepted vCluster chart sets itself (controlPlane.statefulSet.resources):
# Helm merges the program's under them, so a request or limit a site leaves out is the chart's.
VCLUSTER_CONTROL_PLANE_REQUESTS = {"cpu": "200m", "memory": "256Mi", "ephemeral-storage": "1Gi"}
VCLUSTER_CONTROL_PLANE_LIMITS = {"memory": "4Gi", "ephemeral-storage": "10Gi"}
# The first vCluster chart without rbac.enableVolumeSnapshotRules: earlier ones grant the syncer VolumeSnapshot
# and VolumeSnapshotContent writes unless it is false (components/tenant.py), this one refuses the value.
VCLUSTER_WITHOUT_SNAPSHOT_RULES = "0.36.0"

# Each tenant's in-vCluster DNS (config/vcluster_images.py coredns_image), picked as vCluster 0.36.1 picks its own
# (pkg/constants/coredns.go, pkg/coredns/coredns.go): by the virtual cluster's Kubernetes minor, the
# fallback for any other, under controlPlane.advanced.defaultImageRegistry or else docker.io.
COREDNS_IMAGES = {
    "1.36": "coredns/coredns:1.14.2",
    "1.35": "coredns/coredns:1.14.1",
    "1.34": "coredns/coredns:1.12.1",
    "1.33": "coredns/coredns:1.12.0",
    "1.32": "coredns/coredns:1.11.3",
    "1.31": "coredns/coredns:1.11.3",
    "1.30": "coredns/coredns:1.11.3",
}
COREDNS_FALLBACK_IMAGE = "coredns/coredns:1.14.2"
COREDNS_REGISTRY = "docker.io"
# The init container vCluster's syncer puts, with no pull policy, into a pod with a subdomain (a StatefulSet's) to
# rewrite its /etc/hosts: the chart's sync.toHost.pods.rewriteHosts.initContainer.image at every accepted release
# (config/vcluster_images.py rewrite_hosts_image).
REWRITE_HOSTS_IMAGE = {"registry": "mirror.gcr.io", "repository": "library/alpine", "tag": "3.20"}

# New EKS clusters only: EKS upgrades an existing cluster one minor version at a time.
EKS_KUBERNETES_VERSION = "1.36"
# The day each Kubernetes minor the config accepts on EKS leaves Amazon EKS's extended support (UTC), from the
# "Amazon EKS Kubernetes release calendar" of the EKS user guide (awsdocs/amazon-eks-user-guide,
# latest/ug/versioning/kubernetes-versions.adoc, commit 013856044148d6eeed4723027a45aa2180536bcb): 14 months of
# standard support, then 12 of extended. From that day EKS creates no cluster of that minor and moves a running
# control plane to the oldest minor it still supports, at a time of its choosing; managed node groups stay behind.
# Minors the calendar did not list yet are missing here (config/eks_support.py judges only those listed).
EKS_END_OF_EXTENDED_SUPPORT = {"1.30": "2026-07-23", "1.31": "2026-11-26", "1.32": "2027-03-23", "1.33": "2027-07-29",
                               "1.34": "2027-12-02"}
# The day each leaves standard support, from the same calendar: from then on EKS bills a cluster of that minor at the
# extended-support rate, or moves its control plane on by itself if the site takes no extended support
# (cluster.eks.supportType: standard).
EKS_END_OF_STANDARD_SUPPORT = {"1.30": "2025-07-23", "1.31": "2025-11-26", "1.32": "2026-03-23", "1.33": "2026-07-29",
                               "1.34": "2026-12-02"}
# The EKS add-on for EBS volumes has no pin here: its builds differ by Kubernetes version, so the program
# looks up the newest for the cluster's version when it creates the add-on (cluster.eks.ebsCsiAddonVersion
# pins one instead).

# kubectl for each Kubernetes minor a site may state (cluster.<kind>.kubernetesVersion), chosen by it
# (config/model.py Cluster.kubectl_image): kubectl is supported within one minor of the API server, so one pin
# cannot serve 1.30 to 1.37. It runs the Jobs that wait for KAI's queue webhook (components/kai.py) and for a
# tenant's kubeconfig Secret (components/tenant.py), and the `kubectl apply --server-side --force-conflicts` of
# kube-prometheus-stack's CRD upgrade hook (components/observability_crds.py), whose own default is a kubectl
# tagged as the cluster's Kubernetes (its upgradeJob.image.kubectl). Each is the newest patch of its minor in the
# kubernetes/kubectl repository snapshot read for it (its tag v0.NN.P is Kubernetes v1.NN.P's kubectl), except:
# 1.30 runs 1.31's, because `kubectl wait --for=create` came in 1.31 (pkg/cmd/wait/wait.go, tag v0.31.0), and
# 1.37, which has no release in that snapshot, runs 1.36's. Every key is accepted and nothing else
# (KUBERNETES_MINIMUM_VERSION to KUBERNETES_NEWEST_ACCEPTED_VERSION, config/version_types.py);
# tests/test_kubectl_skew.py checks the table against that range and the skew.
# Each is pinned by its tag and the digest of its multi-platform index, so a tag pushed again cannot change what
# the Jobs run (the node pulls by the digest; the tag says which release it is). The digests are those of the
# `kubectl` image in the registry's promoter manifest (kubernetes/k8s.io
# registry.k8s.io/images/k8s-staging-kubernetes/images.yaml). No stored snapshot of kubernetes/k8s.io itself is
# recent enough; two of its forks' are, and agree on every digest they share: Skarlso/k8s.io
# 45457b5ddb27e17ba962cad2c779b155c97c798a (has v1.36.3, not v1.35.7) and jackfrancis/k8s.io
# 695971edb01347cfdbff6e9e9d1a06d83cce0ccc (has v1.35.7, not v1.36.3).
KUBECTL_IMAGES = {
    "1.30": "registry.k8s.io/kubectl:v1.31.14@sha256:74a458e9b800947f4bd1875be5213e8f31f4f2d1e6639548bf05145387ad07bb",
    "1.31": "registry.k8s.io/kubectl:v1.31.14@sha256:74a458e9b800947f4bd1875be5213e8f31f4f2d1e6639548bf05145387ad07bb",
    "1.32": "registry.k8s.io/kubectl:v1.32.13@sha256:fbfd671cd51f0be98174170f2000cbb97d2788e2270bc1697323d401558307e1",
    "1.33": "registry.k8s.io/kubectl:v1.33.13@sha256:a179e6c6f0b87263426fe2a793412c422999d55ffb06d7bc069635468aba3324",
    "1.34": "registry.k8s.io/kubectl:v1.34.10@sha256:0c26218cafeff698ededa49656bf158e96a4d4f3b3744ebd552251a23b6a3924",
    "1.35": "registry.k8s.io/kubectl:v1.35.7@sha256:d86e235fc321c52fbaea98772cb6e8525b7f157972d6a52bc29bcdd47fe74fc8",
    "1.36": "registry.k8s.io/kubectl:v1.36.3@sha256:6e4fce3c83651edb91b74bc67701c5cd263dd8aa3cd4254b1798d6425a5ab789",
    "1.37": "registry.k8s.io/kubectl:v1.36.3@sha256:6e4fce3c83651edb91b74bc67701c5cd263dd8aa3cd4254b1798d6425a5ab789",
}

# The smoke test's workloads (ops/smoke.py): the seeds' fractional GPU pod runs nvidia-smi in this image; the
# unmodified Deployment runs the pause container.
SMOKE_CUDA_IMAGE = "nvidia/cuda:12.4.0-base-ubuntu22.04"
SMOKE_PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def release_numbers(version: str) -> tuple[int, ...]:
    """``v0.16.4`` or ``0.16.4-rc1`` -> ``(0, 16, 4)``; a Kubernetes minor ``1.33`` -> ``(1, 33)``."""
    return tuple(int(part) for part in version.lstrip("v").split("-")[0].split("+")[0].split("."))


def release_order(version: str) -> tuple[int, ...]:
    """A key ordering versions as releases are ordered: build metadata (``+...``) ignored, and a pre-release
    (``0.35.0-rc.1``, ``0.35.0-next.1``) before its release, which it may not match (0.35.0-next.1 runs another
    Kubernetes than 0.35.0)."""
    return (*release_numbers(version), 0 if "-" in version.split("+", 1)[0] else 1)


# Metrics, rules and dashboards (components/observability.py) when observability.prometheus is install.
# 88.5.3 is the newest kube-prometheus-stack tag (2026-08-21) in the prometheus-community/helm-charts
# repository snapshot read for it; tests/test_observability_contract.py checks the values it is given.
KUBE_PROMETHEUS_STACK_REPO = "https://prometheus-community.github.io/helm-charts"
KUBE_PROMETHEUS_STACK_CHART = "kube-prometheus-stack"
KUBE_PROMETHEUS_STACK_VERSION = "88.5.3"
# The registry of each kube-prometheus-stack chart value that names an image (`<value>.registry`, its subcharts'
# under their names), the same at every accepted release: a site's mirror replaces it (components/observability.py).
# The CRD upgrade hook's images are the program's own (components/observability_crds.py). tests/test_mirrors.py
# checks the table against the chart's values at every accepted release.
KUBE_PROMETHEUS_STACK_IMAGE_REGISTRIES = {
    **dict.fromkeys((
        "alertmanager.alertmanagerSpec.image", "prometheus.prometheusSpec.image", "prometheusOperator.image",
        "prometheusOperator.prometheusConfigReloader.image", "prometheusOperator.thanosImage",
        "prometheusOperator.admissionWebhooks.deployment.image", "thanosRuler.thanosRulerSpec.image",
        "grafana.sidecar.image", "kube-state-metrics.kubeRBACProxy.image", "prometheus-node-exporter.image",
        "prometheus-node-exporter.kubeRBACProxy.image", "prometheus-node-exporter.permissionInitContainer.image"),
        "quay.io"),
    **dict.fromkeys(("grafana.image", "grafana.downloadDashboardsImage", "grafana.imageRenderer.image",
                     "grafana.initChownData.image", "grafana.testFramework.image"), "docker.io"),
    **dict.fromkeys(("prometheusOperator.admissionWebhooks.patch.image", "prometheus-windows-exporter.image"),
                    "ghcr.io"),
    "kube-state-metrics.image": "registry.k8s.io",
}
# Unpacks the chart's compressed CRDs for its CRD upgrade hook (crds.upgradeJob, components/observability_crds.py),
# whose own default is busybox:latest. This is the busybox the chart's Grafana pins for its initChownData
# container at every accepted release (Grafana chart 12.10.0-12.11.1), so a site that installs the stack pulls it
# already; tests/test_chart_images.py checks it against every accepted release.
CRD_UPGRADE_UNPACK_IMAGE = "docker.io/library/busybox:1.38.0"

# One query proxy per team in front of the installed Prometheus (components/observability_views.py): it adds
# team="<team>" to every selector of every query. v0.14.0 (2026-06-23) is the newest tag of
# prometheus-community/prom-label-proxy in the snapshot read for its flags (-label, -label-value, -error-on-replace,
# -enable-label-apis) and its rewrite (tests/test_team_views.py).
PROM_LABEL_PROXY_IMAGE = "quay.io/prometheuscommunity/prom-label-proxy:v0.14.0"

# --- the oldest version of each component the config accepts -----------------------------------
# Each is enforced by its config key (config/version_types.py Version); the chart floors are the
# oldest releases whose chart renders with the program's values and passes its own values schema, checked
# by tests/test_version_floors.py with the real charts at these tags (tests/conftest.py MIRRORED_TAGS).

# 0.35.0 is the first chart whose virtual cluster runs Kubernetes 1.36 by default (VCLUSTER_VIRTUAL_KUBERNETES),
# where MutatingAdmissionPolicy is GA: the in-vCluster defaults need it (config/virtual_cluster.py).
# Older charts fail for other reasons too: 0.27-0.30 name the network policy values differently
# (outgoingConnections/extra*Rules) and their values schema refuses the program's.
VCLUSTER_MINIMUM_VERSION = "0.35.0"
# The first KAI release whose pod webhook can blank NVIDIA_VISIBLE_DEVICES (global.blockNvidiaVisibleDevices).
KAI_MINIMUM_VERSION = "v0.16.0"
# The first GPU Operator release whose device plugin, with the cdi.enabled the program sets, names a container's GPUs
# to CDI only (DEVICE_LIST_STRATEGY cdi-annotations,cdi-cri): it sets no NVIDIA_VISIBLE_DEVICES, so the container
# runtime must inject the CDI devices itself. Earlier releases also write the list into that variable (envvar).
GPU_OPERATOR_CDI_DEVICE_LIST = "v25.10.0"
# The first GPU Operator release whose chart binds the operator's ClusterRole to the operator's service account alone:
# v24.9.0 to v24.9.2 bind node-feature-discovery's too (tests/test_host_rbac_powers.py reads every release's binding).
GPU_OPERATOR_OWN_CLUSTER_ROLE = "v25.3.0"
# The first EKS Kubernetes minor whose AL2023 nodes run containerd with CDI on: nodeadm writes enable_cdi = false
# below it. There, with a CDI-only device plugin, a whole-GPU container gets no device from containerd, and the
# NVIDIA runtime takes the image's NVIDIA_VISIBLE_DEVICES (all, in NVIDIA's CUDA images) instead: every GPU of the
# node, or none (config/load_operators.py refuses such a site; tests/test_cdi_device_list_contract.py).
EKS_CONTAINERD_CDI_VERSION = "1.32"
# The first MicroK8s track whose bundled containerd can inject CDI devices at all (1.7, its enable_cdi, which the GPU
# Operator's toolkit turns on): tracks 1.30 to 1.32 bundle containerd 1.6, which has no CDI, so a CDI-only device plugin
# leaves the same gap as on EKS below EKS_CONTAINERD_CDI_VERSION (config/load_operators.py refuses it).
MICROK8S_CONTAINERD_CDI_VERSION = "1.33"
# The chart has no values schema: the oldest release checked whose chart renders with the program's values,
# holds every value the program sets, and ships the DCGM exporter assets components/observability.py reads.
GPU_OPERATOR_MINIMUM_VERSION = "v24.9.0"
# The first release of the pinned major version: the chart keeps breaking changes to major releases
# (its UPGRADE.md), so every 88.x takes the program's values and serves the CRDs it creates objects of.
KUBE_PROMETHEUS_STACK_MINIMUM_VERSION = "88.0.0"
# ValidatingAdmissionPolicy v1, which guards every tenant namespace, is GA (served by default) from 1.30.
KUBERNETES_MINIMUM_VERSION = "1.30"
# The newest Kubernetes whose API server code the host policies and the tenant boundary are checked against (the
# newest k8s.io/apiserver and apimachinery tags in tests/conftest.py MIRRORED_TAGS): a site may state a newer one
# (up to KUBERNETES_NEWEST_ACCEPTED_VERSION), and its plan says it is unchecked.
KUBERNETES_NEWEST_CHECKED_VERSION = "1.36"
# The newest Kubernetes a site may state: the newest a kubectl of KUBECTL_IMAGES is supported against (one minor
# past the newest kubectl released). A later one is refused until a kubectl for it is pinned there.
KUBERNETES_NEWEST_ACCEPTED_VERSION = "1.37"

# --- every version of each chart the config accepts ------------------------------------------------
# Each chart version key accepts exactly these (config/version_types.py Version): every release of the chart from
# its floor to its pin, and nothing else. Each is a release the tests render with the program's values and whose
# source the tenant boundary is listed from (tests/conftest.py MIRRORED_TAGS holds them), and
# tests/test_version_floors.py checks that each list is every release tag of the chart's repository in that
# range. Left out: pre-releases (vCluster tags dozens of -alpha, -rc and -next builds between its releases, none
# read by the suite), numbers no release carries, and anything above the pin. A higher number is not a later
# release of the same code: KAI's v0.20.1 tag (November 2025) predates v0.16.0 and has no
# blockNvidiaVisibleDevices. A newer release is taken up by raising the pin here and adding it to its list, which
# runs every contract test against it.
KAI_RELEASES = (KAI_MINIMUM_VERSION, "v0.16.1", "v0.16.2", "v0.16.3", "v0.16.4", "v0.16.5", "v0.16.6", "v0.16.7",
                "v0.16.8", KAI_VERSION)
VCLUSTER_RELEASES = (VCLUSTER_MINIMUM_VERSION, "0.35.1", "0.35.2", "0.35.3", "0.36.0", VCLUSTER_VERSION)
GPU_OPERATOR_RELEASES = (GPU_OPERATOR_MINIMUM_VERSION, "v24.9.1", "v24.9.2", "v25.3.0", "v25.3.1", "v25.3.2",
                         "v25.3.3", "v25.3.4", "v25.10.0", "v25.10.1", "v26.3.0", "v26.3.1", "v26.3.2", "v26.3.3",
                         GPU_OPERATOR_VERSION)
# The newest of them whose device plugin also writes a container's GPUs into NVIDIA_VISIBLE_DEVICES: the one an EKS
# site whose nodes run containerd without CDI may run (config/load_operators.py).
GPU_OPERATOR_NEWEST_ENVVAR_DEVICE_LIST = max(
    (release for release in GPU_OPERATOR_RELEASES
     if release_numbers(release) < release_numbers(GPU_OPERATOR_CDI_DEVICE_LIST)), key=release_order)
KUBE_PROMETHEUS_STACK_RELEASES = (
    KUBE_PROMETHEUS_STACK_MINIMUM_VERSION, "88.0.1", "88.1.0", "88.1.1", "88.1.2", "88.1.3", "88.1.4", "88.1.5",
    "88.1.6", "88.2.0", "88.3.0", "88.4.0", "88.5.0", "88.5.1", "88.5.2", KUBE_PROMETHEUS_STACK_VERSION)

# HAMi-core (libvgpu.so), the in-container library that enforces a memory-capped team's
# CUDA_DEVICE_MEMORY_LIMIT (written by KAI's hamicore plugins). KAI's own guide at v0.16.4 and v0.17.0
# (docs/gpu-sharing/hami/README.md) names Project-HAMi/KAI-resource-isolator as the library's carrier: its
# release workflow publishes docker.io/projecthami/kai-resource-isolator:<git tag>, and its docker/Dockerfile
# builds HAMi-core and copies it to /artifacts/libvgpu.so. The isolator copies it onto every node through a
# hostPath, which Pod Security baseline refuses in a tenant pod; here the tenant's pod mounts the whole image
# read-only as an image volume instead (components/isolation_admission.py), and CUDA_REDIRECT tells HAMi-core
# where in it the library is. v1.0.0 is the release KAI's guide installs (chart 1.0.0). Like the tenant DNS it is
# pulled under the team's controlPlane.advanced.defaultImageRegistry, else docker.io (config/vcluster_images.py).
HAMI_CORE_IMAGE = "projecthami/kai-resource-isolator:v1.0.0"
HAMI_CORE_REGISTRY = "docker.io"
# Where the library is inside that image (relative to its root).
HAMI_CORE_IMAGE_LIBRARY = "artifacts/libvgpu.so"
