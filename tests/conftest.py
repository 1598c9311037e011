"""Shared fixtures: committed stack configs and offline program runs through Pulumi's mocks."""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.chart_spec import cache, demo  # noqa: F401 (fixtures of the chart specs)
from config.stack_file import PROJECT_DIR, stack_names
from config import versions
from tools.charts.cache import CACHE_ENV, chart_cache_dir, find_cached
from tools.charts.render import release_chart_key, release_records
from tools.offline.mockrun import load_stack_file, run_program
from tools.offline.recording import ProgramRun

COMMITTED_STACKS = stack_names()
UPSTREAM_DIR = Path(os.environ.get("GPU_TENANCY_UPSTREAM", PROJECT_DIR.parent / "shared" / "upstream"))

# Hypothesis profiles: "dev" (the default) keeps a local run quick, "ci" (HYPOTHESIS_PROFILE=ci, set by
# .ci/run) looks five times harder. Examples run the loader or the program, never against a clock.
settings.register_profile("dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", settings.get_profile("dev"), max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def whole_program_examples() -> settings:
    """For properties that run the whole program per example, about six times a config load's cost."""
    return settings(max_examples=max(5, settings().max_examples // 6))


def stack_config(stack: str) -> dict:
    """A fresh copy of a committed stack's ``config:`` block."""
    return copy.deepcopy(load_stack_file(stack))


def run(config: dict, stack: str = "test") -> ProgramRun:
    return run_program(config, stack=stack)


def eks_config() -> dict:
    return stack_config("eks")


def dev_config() -> dict:
    return stack_config("dev")


def kubectl_source_tag(image: str) -> str:
    """kubernetes/kubectl's tag of the release a ``registry.k8s.io/kubectl:v1.NN.P@sha256:...`` image is built
    from: Kubernetes v1.NN.P's kubectl is tagged v0.NN.P."""
    return "v0." + image.partition("@")[0].rsplit(":v1.", 1)[1]


# Upstream git repositories the contract tests read, each at these tags. They come as bare mirrors
# (``<owner>+<name>/repo``) under $GPU_TENANCY_MIRRORS; the PR workflow fetches exactly these.
MIRRORS_VARIABLE = "GPU_TENANCY_MIRRORS"
# The tag of every release the config accepts of each chart (config/versions.py *_RELEASES), by the repository it
# is read from (tests/mirror_charts.py CHART_SOURCES), oldest first. A test of "every accepted release" reads these:
# such a repository's MIRRORED_TAGS are these and its EXTRA_MIRRORED_TAGS (tests/test_mirrored_tags.py).
ACCEPTED_VCLUSTER_TAGS = tuple(f"v{release}" for release in versions.VCLUSTER_RELEASES)
ACCEPTED_TAGS = {
    "kai-scheduler/KAI-Scheduler": versions.KAI_RELEASES,
    "loft-sh/vcluster": ACCEPTED_VCLUSTER_TAGS,
    "NVIDIA/gpu-operator": versions.GPU_OPERATOR_RELEASES,
    "prometheus-community/helm-charts": tuple(f"kube-prometheus-stack-{release}"
                                             for release in versions.KUBE_PROMETHEUS_STACK_RELEASES),
}
# The tags mirrored of those repositories for another purpose, each with it.
EXTRA_MIRRORED_TAGS = {
    "loft-sh/vcluster": dict.fromkeys(
        ("v0.20.6", "v0.22.6", "v0.26.5", "v0.29.3", "v0.31.3", "v0.34.7"),
        "its vendor/ holds the k8s.io/apiserver of a host Kubernetes minor a site may run, to build the real "
        "admission plugin harness against (tests/apiserver_vap.py RELEASES)"),
    "prometheus-community/helm-charts": dict.fromkeys(
        ("kube-state-metrics-8.0.0", "kube-state-metrics-8.1.0", "kube-state-metrics-8.1.1", "kube-state-metrics-8.1.2",
         "kube-state-metrics-8.1.3", "kube-state-metrics-8.2.0", "kube-state-metrics-8.3.1", "kube-state-metrics-8.4.0",
         "prometheus-node-exporter-4.56.1", "prometheus-windows-exporter-0.12.8"),
        "a sub-chart an accepted kube-prometheus-stack depends on, vendored into it (tests/mirror_charts.py)"),
}
# k8s.io/apiserver at the Kubernetes each accepted vCluster runs inside.
VIRTUAL_APISERVER_TAGS = tuple(sorted({f"v0.{version[len('v1.'):]}"
                                       for version in versions.VCLUSTER_VIRTUAL_KUBERNETES.values()}))
# k8s.io/apiserver's first release of every Kubernetes minor from the host floor to the newest checked one.
APISERVER_MINOR_TAGS = tuple(f"v0.{minor}.0" for minor in range(
    versions.release_numbers(versions.KUBERNETES_MINIMUM_VERSION)[1],
    versions.release_numbers(versions.KUBERNETES_NEWEST_CHECKED_VERSION)[1] + 1))
# MicroK8s tags its track branches v1.NN; 1.37 (accepted: config/versions.py) has no tag yet.
MICROK8S_TRACK_TAGS = tuple(f"v1.{minor}" for minor in range(
    versions.release_numbers(versions.KUBERNETES_MINIMUM_VERSION)[1],
    versions.release_numbers(versions.KUBERNETES_NEWEST_CHECKED_VERSION)[1] + 1))
MIRRORED_TAGS = {
    "kai-scheduler/KAI-Scheduler": ACCEPTED_TAGS["kai-scheduler/KAI-Scheduler"],
    # The exporter the GPU Operator floor (v24.9.0) ships, and the one v26.3.3 ships.
    "NVIDIA/dcgm-exporter": ("3.3.8-3.6.0", "4.5.3-4.8.2"),
    # The kube-state-metrics of each accepted kube-prometheus-stack (its subchart's appVersion), newest last.
    "kubernetes/kube-state-metrics": ("v2.19.1", "v2.20.0"),
    "loft-sh/vcluster": (*EXTRA_MIRRORED_TAGS["loft-sh/vcluster"], *ACCEPTED_TAGS["loft-sh/vcluster"]),
    "NVIDIA/gpu-operator": ACCEPTED_TAGS["NVIDIA/gpu-operator"],
    # The container toolkit each accepted GPU Operator release ships (its values' toolkit.version), which reads a
    # container's env (tests/test_toolkit_env_contract.py).
    "NVIDIA/nvidia-container-toolkit": ("v1.17.0", "v1.17.3", "v1.17.4", "v1.17.5", "v1.17.8", "v1.18.0", "v1.18.1",
                                        "v1.19.0", "v1.19.1", "v1.20.0"),
    "prometheus-community/helm-charts": (*ACCEPTED_TAGS["prometheus-community/helm-charts"],
                                         *EXTRA_MIRRORED_TAGS["prometheus-community/helm-charts"]),
    # The grafana subcharts kube-prometheus-stack depends on, and the query proxy in front of Prometheus.
    "grafana-community/helm-charts": ("grafana-12.10.0", "grafana-12.10.1", "grafana-12.10.2", "grafana-12.10.3",
                                      "grafana-12.10.4", "grafana-12.11.0", "grafana-12.11.1"),
    "prometheus-community/prom-label-proxy": ("v0.14.0",),
    # The Alertmanagers and the Prometheus operators (which parse the Alertmanager configuration the program
    # writes) of the kube-prometheus-stack releases the config accepts (tests/test_observability_alerting_contract.py).
    "prometheus/alertmanager": ("v0.33.1", "v0.34.0"),
    "prometheus-operator/prometheus-operator": ("v0.93.0", "v0.93.1"),
    "pulumi/pulumi": ("v3.259.0",),
    # When the Kubernetes provider replaces an object or a Helm release (tools/plan/replacement.py); the newest tag
    # of the snapshot read (its diff.go is unchanged up to July 2026).
    "pulumi/pulumi-kubernetes": ("v4.32.0",),
    # What eks.Cluster hands the EKS cluster it creates (tests/test_eks_cluster_contract.py); the newest tag of the
    # snapshot read (the pinned 4.4.0 is not in it).
    "pulumi/pulumi-eks": ("v4.3.0",),
    # The keys the EBS CSI driver refuses among the site's tags, and how its chart hands them over
    # (tests/test_ebs_csi_tags_contract.py); the newest tag of the snapshot read: the add-on runs EKS's newest build.
    "kubernetes-sigs/aws-ebs-csi-driver": ("v1.64.0",),
    # Every MicroK8s track a site may state (cluster.microk8s.kubernetesVersion) that has a release: the containerd
    # each bundles and how it mounts an image volume (config/image_volumes.py), and the certificates it issues and
    # does not renew (config/credential_lifetimes.py).
    "canonical/microk8s": MICROK8S_TRACK_TAGS,
    # How AL2023 EKS nodes read the kubelet settings of a launch template's user data (tests/test_node_pids_contract.py).
    "awslabs/amazon-eks-ami": ("v20260724",),
    # ... and the containerd its newest release ships, and each MicroK8s track's (tests/test_cdi_device_list_contract.py).
    "containerd/containerd": ("v1.6.28", "v1.6.36", "v1.7.27", "v1.7.28", "v2.1.3", "v2.2.3", "v2.2.4"),
    # The AWS cloud provider EKS runs for LoadBalancer Services, newest patch of each minor a site may state that has
    # a release (tests/test_load_balancer_keys.py).
    "kubernetes/cloud-provider-aws": ("v1.30.10", "v1.31.9", "v1.32.8", "v1.33.4", "v1.34.3", "v1.35.2", "v1.36.1"),
    # The MetalLB each MicroK8s track's `metallb` addon deploys (canonical/microk8s-core-addons, addons/metallb on
    # branches 1.30 to 1.35 and main): which Service annotations it reads (tests/test_load_balancer_keys.py).
    "metallb/metallb": ("v0.13.3", "v0.14.9", "v0.15.2", "v0.15.3"),
    # The load-balancer implementations and network plugin an existing (kubeconfig) cluster may run in MetalLB's
    # place: which Service and pod annotations kube-vip, its cloud provider and Cilium read
    # (tests/test_load_balancer_keys.py, tests/test_network_plugin_keys.py).
    "kube-vip/kube-vip": ("v0.9.2", "v1.2.3"),
    "kube-vip/kube-vip-cloud-provider": ("v0.0.12",),
    "cilium/cilium": ("v1.18.0", "v1.19.4"),
    # ... and Antrea, Multus and Spiderpool (RDMA and underlay networks on GPU clusters): the keys they read of pods
    # and Services (tests/test_network_plugin_keys.py).
    "antrea-io/antrea": ("v2.6.3", "v2.7.0"),
    "k8snetworkplumbingwg/multus-cni": ("v4.2.4", "v4.3.0"),
    "spidernet-io/spiderpool": ("v1.1.2", "v1.2.2"),
    # ... OVN-Kubernetes (OpenShift's network plugin), kube-router, OpenELB and kube-ovn
    # (tests/test_network_plugin_keys.py).
    "ovn-org/ovn-kubernetes": ("v1.0.0", "v1.1.0-alpha"),
    "cloudnativelabs/kube-router": ("v2.10.0", "v2.11.1"),
    "openelb/openelb": ("v0.5.1", "v0.6.0"),
    "kubeovn/kube-ovn": ("v1.15.24", "v1.16.2"),
    # Flannel reads keys of nodes only (tests/test_host_networking.py).
    "flannel-io/flannel": ("v0.27.4", "v0.28.9"),
    # The device plugin each accepted GPU Operator release ships (its values' devicePlugin.version): how it names a
    # container's GPUs to the runtime (tests/test_cdi_device_list_contract.py).
    "NVIDIA/k8s-device-plugin": ("v0.17.0", "v0.17.1", "v0.17.2", "v0.17.3", "v0.17.4", "v0.18.0", "v0.18.1", "v0.19.0",
                                 "v0.19.2", "v0.19.3", "v0.20.0"),
    # How the API server reads a quantity (config/key_types.py QUANTITY), at the oldest and newest Kubernetes a
    # site may run; and how it converts an object for admission and its metadata's fields, at the newest patch of
    # every minor (tests/served_releases.json).
    "kubernetes/apimachinery": ("v0.30.0", "v0.30.14", "v0.31.14", "v0.32.13", "v0.33.13", "v0.34.10", "v0.35.7",
                                "v0.36.3"),
    # The pod spec's string fields at every Kubernetes minor a site may run, newest patch of each
    # (tests/test_pod_text_fields_contract.py), and the judged kinds' fields (tests/served_releases.json).
    "kubernetes/api": ("v0.30.14", "v0.31.14", "v0.32.13", "v0.33.13", "v0.34.10", "v0.35.7", "v0.36.3"),
    # The OIDC authenticator of each virtual cluster's API server (tests/test_tenant_access.py), and how the API
    # server validates fields of a request that names no validation (tests/test_deployability_api_server.py), at
    # the host floor too.
    # ... and how it limits a policy's CEL cost, at every minor from the host floor to the pin
    # (tests/test_celgo_cost_contract.py).
    "kubernetes/apiserver": tuple(sorted({*VIRTUAL_APISERVER_TAGS, *APISERVER_MINOR_TAGS}, key=versions.release_order)),
    # The cel-go each of those requires (its go.mod), and the one tests/celgo.py builds (tests/celgo.py CEL_GO_TAG).
    "google/cel-go": ("v0.17.8", "v0.20.1", "v0.22.0", "v0.23.2", "v0.26.0", "v0.27.0"),
    # How Helm 3 creates a chart's objects, and the kubectl validator it uses at each (its go.mod), from an older
    # release to the newest Helm 3 (tests/test_deployability_api_server.py).
    "helm/helm": ("v3.17.0", "v3.21.4"),
    # ... and the kubectl the platform runs on each Kubernetes minor (config/versions.py KUBECTL_IMAGES), with the
    # newest 1.30 kubectl, which has no `wait --for=create` (tests/test_kubectl_skew.py).
    "kubernetes/kubectl": tuple(sorted({"v0.32.0", "v0.36.2", "v0.30.14", *map(
        kubectl_source_tag, versions.KUBECTL_IMAGES.values())}, key=versions.release_order)),
    # Pod Security's checks at every Kubernetes minor from the host floor to the newest EKS one
    # (tests/test_admission_probe_host.py).
    # How the kubelet and containerd read an image reference (config/image_registries.py): v0.6.0 in containerd's
    # go.mod at both MicroK8s releases above and in kubectl's from 1.32, v0.5.0 in older components.
    "distribution/reference": ("v0.5.0", "v0.6.0"),
    # The YAML 1.1 resolver Helm reads chart manifests with (sigs.k8s.io/yaml over go-yaml v2; its go.mod at each
    # Helm tag above says which), for the names a template writes unquoted (tests/test_yaml_names_contract.py).
    "kubernetes-sigs/yaml": ("v1.4.0",),
    # ... and go-yaml v3, which the Pulumi CLI reads stack files with (its sdk/go.mod at the pulumi/pulumi tag above):
    # how it merges `<<` keys (config/stack_file.py, tests/test_stack_file_merge.py).
    "yaml/go-yaml": ("v2.4.4", "v3.0.1"),
    # The Cluster Autoscaler a site states it runs (cluster.eks.autoscaler), its newest release: how it tells a GPU node
    # and learns a managed node group's labels and taints (tests/test_autoscaler_contract.py).
    "kubernetes/autoscaler": ("cluster-autoscaler-1.36.1",),
    # The wget of the busybox in vCluster's alpine release image, which the snapshot job polls with
    # (tests/test_snapshot_contract.py); alpine's busybox release is not pinned, this is the newest mirrored tag.
    "mirror/busybox": ("1_36_1",),
    "kubernetes/pod-security-admission": tuple(
        f"v0.{minor}.0" for minor in range(versions.release_numbers(versions.KUBERNETES_MINIMUM_VERSION)[1],
                                           versions.release_numbers(versions.EKS_KUBERNETES_VERSION)[1] + 1)),
}
# The containerd releases with the CRI plugin under internal/cri (2.0 on), which the image-reference, image-volume and
# CDI-injection contracts read; the 1.x ones are mirrored for the MicroK8s tracks that bundle them.
CONTAINERD_CRI_V2_TAGS = tuple(tag for tag in MIRRORED_TAGS["containerd/containerd"] if not tag.startswith("v1."))


def mirror(repository: str) -> Path:
    """The bare git mirror of ``owner/name``, or a skip naming the variable that supplies it."""
    assert repository in MIRRORED_TAGS, f"add {repository} and its tags to MIRRORED_TAGS (the PR workflow fetches them)"
    root = os.environ.get(MIRRORS_VARIABLE)
    if not root:
        pytest.skip(f"upstream mirror of {repository} is absent: set {MIRRORS_VARIABLE} to the folder of the "
                    "mirrors (the PR workflow fetches them)")
    path = Path(root) / repository.replace("/", "+") / "repo"
    if not path.exists():
        pytest.skip(f"upstream mirror {path} is absent: fetch {repository} into ${MIRRORS_VARIABLE}")
    return path


def upstream_tags(repository: str) -> list[str]:
    """Every tag ``repository`` has upstream: the list the PR workflow saves next to its mirror (``tags``, as
    ``git ls-remote --tags --refs`` prints it, since it fetches only the MIRRORED_TAGS), else the mirror's own
    tags (a full mirror holds them all)."""
    listing = mirror(repository).parent / "tags"
    if listing.is_file():
        return [line.split("refs/tags/", 1)[1] for line in listing.read_text().splitlines() if "refs/tags/" in line]
    return git(repository, "tag", "--list").split()


def mirrored_tag(repository: str, tag: str) -> str:
    """``tag`` of ``repository``'s mirror, or a skip naming it when that mirror is a snapshot older than the tag
    (the PR workflow fetches every MIRRORED_TAGS tag from upstream)."""
    assert tag in MIRRORED_TAGS[repository], f"add {tag} to MIRRORED_TAGS[{repository!r}] and the PR workflow"
    found = subprocess.run(["git", "--git-dir", str(mirror(repository)), "rev-parse", "-q", "--verify",
                            f"refs/tags/{tag}"], capture_output=True)
    if found.returncode:
        pytest.skip(f"the mirror of {repository} lacks {tag}: fetch it into ${MIRRORS_VARIABLE}")
    return tag


def git(repository: str, *args: str) -> str:
    """``git ARGS`` in the mirror of ``repository`` (a skip when the mirror is absent)."""
    return subprocess.run(["git", "--git-dir", str(mirror(repository)), *args],
                          capture_output=True, text=True, check=True).stdout


def go_function(source: str, signature: str) -> str:
    """The Go function ``func <signature>(...)`` of ``source``, up to its closing brace."""
    start = source.index(f"\nfunc {signature}(")
    return source[start:source.index("\n}\n", start)]


def security_model_text() -> str:
    """The tenant security model: docs/security-model.md and the pages its table links (docs/security-*.md)."""
    docs = PROJECT_DIR / "docs"
    index = (docs / "security-model.md").read_text()
    pages = dict.fromkeys(re.findall(r"\]\((security-[\w-]+\.md)\)", index))
    assert pages, "docs/security-model.md links none of its pages"
    return "\n".join([index, *((docs / page).read_text() for page in pages)])


def upstream_file(*parts: str) -> Path:
    """A file of ../shared/upstream, or a skip naming what is missing."""
    path = UPSTREAM_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"upstream contract {path} is absent (set GPU_TENANCY_UPSTREAM to the shared/upstream folder)")
    return path


@pytest.fixture(scope="session")
def dev_run() -> ProgramRun:
    return run(dev_config(), stack="dev")


@pytest.fixture(scope="session")
def eks_run() -> ProgramRun:
    return run(eks_config(), stack="eks")


def mirror_chart(repository: str, tag: str, chart_dir: str, target: Path) -> Path:
    """The chart directory ``chart_dir`` of ``repository`` at ``tag``, unpacked under ``target``."""
    archive = subprocess.run(["git", "--git-dir", str(mirror(repository)), "archive", tag, chart_dir],
                             capture_output=True, check=True).stdout
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / chart_dir


def destroy_order(program) -> list[str]:
    """The order Pulumi deletes resources in: dependents, children and users of a provider before what they
    depend on, their parent and their provider."""
    edges = {r.urn: set(r.dependencies) | {u for u in (r.parent, r.provider) if u} for r in program.resources}
    order, done = [], set()

    def visit(urn):
        if urn in done or urn not in edges:
            return
        done.add(urn)
        for dependency in sorted(edges[urn]):
            visit(dependency)
        order.append(urn)

    for urn in sorted(edges):
        visit(urn)
    return [program.by_urn(urn).name for urn in reversed(order)]


def real_charts_or_skip(plan) -> Path:
    """The chart cache, when it holds every chart the plan releases; a skip naming what to add otherwise."""
    cache = chart_cache_dir()
    missing = [release_chart_key(inputs) for _, inputs in release_records(plan["resources"])
               if find_cached(release_chart_key(inputs), cache)[0] is None]
    if missing:
        names = ", ".join(sorted({key.describe() for key in missing}))
        pytest.skip(f"the chart cache {cache} (${CACHE_ENV}) lacks {names}: run `python -m tools.charts pull` (network) or "
                    "`python -m tools.charts add DIR --version V` with the chart directory at its tag")
    return cache
