"""What a tenant reads of the host through its vCluster: the node proxy and the node sync, as vCluster 0.35.0 to
0.36.1 behave (tests/test_host_reads_contract.py holds every fact below to vCluster's source at each accepted tag).

A request ``GET /api/v1/nodes/NAME/proxy/<path>`` to a tenant's vCluster meets, in order:

1. The API proxy's ``http.ServeMux`` (``pkg/server/server.go`` ``NewServer``, ``HandleRoute(s.handler, "/", h)``).
   Since Go 1.22 a ServeMux cleans the *escaped* path and redirects when cleaning changes it: ``/../`` is answered
   with a redirect, a percent-encoded ``/%2E%2E/`` passes, and the handlers behind it see the decoded ``/../``.
2. ``WithMetricsProxy`` (``pkg/server/filters/metrics.go``), whose ``enforceKubeletSubpathAllowlist`` looks only at
   how the decoded path ends (healthz, the metrics paths, stats/summary, pods) or whether it holds
   ``/proxy/containerLogs/``. A containerLogs path must name, in its first ``containerLogs`` segment and the two
   after it, a container of one of the tenant's virtual pods; those two segments are rewritten to the host pod's
   namespace and name, the rest of the path is kept. With node sync on, anything else is refused.
3. The host API server, called with the syncer's own credentials (``Authorization`` dropped,
   ``HostManager.GetConfig()``): it authorizes the syncer for ``get`` on ``nodes/proxy`` and joins the rest of the
   path onto the kubelet's URL with ``JoinPreservingTrailingSlash`` (k8s.io/apimachinery ``pkg/util/net/http.go``:
   ``path.Join``, which resolves dot segments).
4. The answer: ``pods``, ``stats/summary`` and metrics are filtered to the tenant's own pods; ``healthz`` and
   ``containerLogs`` answers are passed through as the kubelet wrote them.

So the filter in 2 checks one path and the kubelet serves another. Only the host's grant in 3 holds for every path:
the chart grants ``nodes/proxy`` while ``networking.advanced.proxyKubelets.byHostname`` or ``byIP`` is on.
"""

from __future__ import annotations

import copy
import posixpath
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import unquote

# pkg/server/filters/metrics.go: IsKubeletHealthz, IsKubeletStats, IsKubeletMetrics (HasSuffix on the path),
# IsKubeletPods (HasSuffix after trimming trailing slashes), IsKubeletContainerLogs (Contains).
HEALTHZ_SUFFIXES = ("/healthz",)
STATS_SUFFIXES = ("/stats/summary",)
METRICS_SUFFIXES = ("/metrics", "/metrics/cadvisor", "/metrics/probes", "/metrics/resource",
                    "/metrics/resource/v1alpha1", "/metrics/resource/v1beta1")
PODS_SUFFIXES = ("/pods", "/runningpods")
CONTAINER_LOGS_MARKER = "/proxy/containerLogs/"
# The answers WithMetricsProxy rewrites to the tenant's own pods (handleNodeRequest); the others pass as they are.
FILTERED = ("metrics", "stats", "pods")


@dataclass(frozen=True)
class HostPod:
    namespace: str
    name: str
    containers: tuple[str, ...]
    # What the kubelet would show of it: spec and env in /pods, its log lines in containerLogs.
    secret: str = ""


@dataclass
class Tenant:
    """A tenant's vCluster: its host namespace and its virtual pods, each (namespace, name) -> host pod."""
    host_namespace: str
    release: str
    pods: dict[tuple[str, str], HostPod] = field(default_factory=dict)

    def add_pod(self, namespace: str, name: str, containers: tuple[str, ...], secret: str = "") -> HostPod:
        host = HostPod(self.host_namespace, f"{name}-x-{namespace}-x-{self.release}", containers, secret)
        self.pods[(namespace, name)] = host
        return host


@dataclass(frozen=True)
class Answer:
    status: int
    # The kubelet path the host served, and what the tenant got back of it.
    kubelet_path: Optional[str] = None
    body: tuple[str, ...] = ()


def _path_clean(path: str) -> str:
    """Go's path.Clean for a rooted path (posixpath.normpath keeps a leading double slash, Go does not)."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/")


def go_clean_path(path: str) -> str:
    """net/http cleanPath: rooted, path.Clean, the trailing slash kept."""
    rooted = path if path.startswith("/") else "/" + path
    cleaned = _path_clean(rooted)
    return cleaned + "/" if rooted.endswith("/") and cleaned != "/" else cleaned


def join_preserving_trailing_slash(*elements: str) -> str:
    """k8s.io/apimachinery pkg/util/net JoinPreservingTrailingSlash: path.Join, then the last element's slash."""
    joined = _path_clean("/".join(element for element in elements if element))
    last = next((element for element in reversed(elements) if element), "")
    return joined + "/" if last.endswith("/") and not joined.endswith("/") else joined


def _ends_with(path: str, suffixes: tuple[str, ...]) -> bool:
    return any(path.endswith(suffix) for suffix in suffixes)


def allowlist_kind(path: str) -> str:
    """Which branch of enforceKubeletSubpathAllowlist a decoded path takes, in the function's order."""
    if _ends_with(path, HEALTHZ_SUFFIXES):
        return "healthz"
    if _ends_with(path, METRICS_SUFFIXES):
        return "metrics"
    if _ends_with(path, STATS_SUFFIXES):
        return "stats"
    if _ends_with(path.rstrip("/"), PODS_SUFFIXES):
        return "pods"
    if CONTAINER_LOGS_MARKER in path:
        return "containerLogs"
    return "other"


def kubelet_answer(path: str, node_pods: list[HostPod]) -> tuple[int, tuple[str, ...]]:
    """What the kubelet serves (to the host API server, which it lets read everything)."""
    parts = path.strip("/").split("/")
    if parts[0] == "pods" and len(parts) == 1:
        return 200, tuple(f"{pod.namespace}/{pod.name}:{pod.secret}" for pod in node_pods)
    if parts[0] == "containerLogs" and len(parts) == 4:
        for pod in node_pods:
            if (pod.namespace, pod.name) == (parts[1], parts[2]) and parts[3] in pod.containers:
                return 200, (f"log of {pod.namespace}/{pod.name}/{parts[3]}:{pod.secret}",)
        return 404, ()
    if path == "/healthz":
        return 200, ("ok",)
    return 404, ()


def node_proxy(tenant: Tenant, raw_subpath: str, node_pods: list[HostPod], syncer_may_proxy: bool) -> Answer:
    """The tenant's ``GET /api/v1/nodes/NODE/proxy/<raw_subpath>`` (as the tenant spelled it on the wire)."""
    escaped = f"/api/v1/nodes/gpu-node/proxy/{raw_subpath}"
    path_only = escaped.split("?", 1)[0]
    if go_clean_path(path_only) != path_only:
        return Answer(301)  # the ServeMux redirects to the cleaned path; nothing is forwarded
    path = unquote(path_only)
    kind = allowlist_kind(path)
    if kind == "other":
        return Answer(403)  # node sync on: unknown subpaths refused
    if kind == "containerLogs":
        parts = path.split("/")
        index = parts.index("containerLogs")
        if index + 3 >= len(parts):
            return Answer(403)
        namespace, name, container = parts[index + 1:index + 4]
        host = tenant.pods.get((namespace, name))
        if host is None or container not in host.containers:
            return Answer(403)
        parts[index + 1], parts[index + 2] = host.namespace, host.name
        path = "/".join(parts)
    if not syncer_may_proxy:
        return Answer(403)  # the host API server: the syncer has no get on nodes/proxy
    subpath = path.split("/proxy/", 1)[1]
    kubelet_path = join_preserving_trailing_slash("/", subpath)
    status, body = kubelet_answer(kubelet_path, node_pods)
    if status == 200 and kind in FILTERED:
        own = {(pod.namespace, pod.name) for pod in tenant.pods.values()}
        body = tuple(line for line in body if tuple(line.split(":", 1)[0].split("/", 1)) in own)
    return Answer(status, kubelet_path, body)


# --- node sync -------------------------------------------------------------------------------------------------

def virtual_node_status(host_status: dict, clear_images: bool, fake_kubelets: bool) -> dict:
    """pkg/controllers/resources/nodes/translate.go translateUpdateStatus, without the virtual scheduler (off here):
    the host node's status copied whole; with a kubelet proxy on, the kubelet endpoint and the internal addresses
    replaced by vCluster's; images emptied only with clearImageStatus."""
    status = copy.deepcopy(host_status)
    if fake_kubelets:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
        status["addresses"] = [{"type": "Hostname", "address": "gpu-node.nodes.vcluster.com"}] + [
            address for address in status.get("addresses", [])
            if address["type"] not in ("InternalIP", "InternalDNS", "Hostname")]
    if clear_images:
        status["images"] = []
    return status
