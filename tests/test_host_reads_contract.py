"""What a hostile tenant (cluster-admin inside its vCluster) can read of the host and of other teams through its
vCluster, read from vCluster's source at every accepted tag and from its chart rendered with the program's values.

Two reads are closed by the program's values (components/tenant.py; config/virtual_cluster.py
TENANT_READABLE_VALUES refuses a site that turns them back):

- **The node proxy.** vCluster's API proxy forwards ``nodes/NAME/proxy/...`` to the host API server with the
  syncer's credentials after a check on how the path ends (tests/kubelet_proxy_sim.py walks it). A percent-encoded
  ``..`` after one of the tenant's own containerLogs paths reaches any kubelet path of any node: every pod's spec
  on the node, every team's logs. A path ending in ``/healthz`` (another team's container named ``healthz``) is
  forwarded and answered unfiltered. The program turns both kubelet proxies off, so the chart grants the syncer no
  ``nodes/proxy``: the host refuses every such request, whatever path vCluster lets through.
- **Node images.** The node syncer copies the host node's status whole, ``status.images`` included: every image on
  the node with its digest, other teams' private ones among them. The program sets ``clearImageStatus``.

Every other host read the syncer's roles grant is classified below with what it shows a tenant; a vCluster release
or a values change that adds one fails here, and so does a release that changes what the node proxy forwards or
what the node sync copies.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from components.tenant import vcluster_values
from config.merge import deep_merge
from config.vcluster_values import JUDGED, REFUSED, SITE
from config.vcluster_values_lookup import TABLE, classified
from config.virtual_cluster import COVERED_TO_HOST_SYNCS, TENANT_READABLE_VALUES
from tests.conftest import (
    ACCEPTED_VCLUSTER_TAGS, COMMITTED_STACKS, MIRRORED_TAGS, git, go_function, mirror, mirrored_tag,
)
from tests.kubelet_proxy_sim import (
    CONTAINER_LOGS_MARKER, HEALTHZ_SUFFIXES, METRICS_SUFFIXES, PODS_SUFFIXES, STATS_SUFFIXES, Tenant, node_proxy,
    virtual_node_status,
)
from tests.test_synced_kinds_contract import chart, teams  # noqa: F401 (fixture)
from tools.charts.render import render_release
from tools.offline.mocks import MOCK_CLUSTER_DNS

VCLUSTER = "loft-sh/vcluster"
APIMACHINERY = "kubernetes/apimachinery"
READ_VERBS = {"get", "list", "watch", "*"}
# Node subresources through which the host API server reaches a kubelet for whoever holds them.
KUBELET_SUBRESOURCES = {"nodes/proxy", "nodes/stats", "nodes/metrics", "nodes/log", "nodes/spec", "nodes/configz",
                        "nodes/healthz", "nodes/pods", "nodes/checkpoint"}
# Everything the syncer may read cluster-wide with the program's values, with what a tenant sees of it.
CLUSTER_READS = {
    ("", "nodes"): "the nodes the team's selector syncs, copied into the virtual cluster (kubectl get nodes), with "
                   "their status images cleared (clearImageStatus); labels, conditions, capacity and addresses are "
                   "the node's, not another team's",
    ("", "nodes/status"): "the same nodes' status",
    ("", "pods"): "listed only with a virtual scheduler (off here: controlPlane.distro.k8s.scheduler and "
                  "advanced.virtualScheduler stay off), to subtract other pods' requests from a virtual node's "
                  "allocatable: sums, never another pod's object",
    ("node.k8s.io", "runtimeclasses"): "the host's RuntimeClasses (nvidia, ...), the same for every team",
    # Reads a site's sync.fromHost switch adds (config/vcluster_values.py: the site's): cluster-wide classes and
    # driver records, the same for every team, copied into the virtual cluster.
    ("storage.k8s.io", "storageclasses"): "the host's StorageClasses (provisioner, parameters), the same for every "
                                          "team",
    ("storage.k8s.io", "csidrivers"): "the installed CSI drivers' specs (attach and mount capabilities)",
    ("storage.k8s.io", "csinodes"): "each synced node's CSI driver registrations (driver node IDs, topology keys, "
                                    "volume limits): the node's, not another team's",
    ("storage.k8s.io", "csistoragecapacities"): "free capacity per storage class and topology segment, as the CSI "
                                                "drivers publish it: the storage's, not another team's objects",
    ("snapshot.storage.k8s.io", "volumesnapshotclasses"): "the host's VolumeSnapshotClasses (0.35.x), the same for "
                                                         "every team",
    ("networking.k8s.io", "ingressclasses"): "the host's IngressClasses, the same for every team",
    ("gateway.networking.k8s.io", "gatewayclasses"): "the host's GatewayClasses, the same for every team",
    ("gateway.networking.k8s.io", "gateways"): "only the host Gateways the site maps into the team's vCluster "
                                              "(gateways.mappings.byName, the site's choice, not the tenant's; "
                                              "test_a_tenant_sees_only_the_host_gateways_the_site_maps)",
    ("apiextensions.k8s.io", "customresourcedefinitions"): "nothing: the open-source syncer copies no host "
                                                          "definition into a virtual cluster (test_the_syncer_"
                                                          "copies_no_host_definition_into_a_tenant)",
}
# NodeStatus fields (vendored k8s.io/api core/v1), each with what its copy in a virtual node shows a tenant.
NODE_STATUS = {
    "Images": "cleared: every image on the node, other teams' private names and digests included",
    "Capacity": "the node's totals, shared by every team on it",
    "Allocatable": "the node's totals (no virtual scheduler, so not reduced by other teams' pods)",
    "Phase": "unused by current nodes",
    "Conditions": "node health (Ready, memory or disk pressure)",
    "Addresses": "the node's own addresses, which a team's pods already reach as their hostIP",
    "DaemonEndpoints": "the kubelet's port",
    "NodeInfo": "kernel, OS, container runtime and kubelet versions of the shared node",
    "VolumesInUse": "volume handles mounted on the node (PV names such as pvc-<uid>, cloud volume IDs): names "
                    "generated by the host, none of a volume's content, useless without the cloud's credentials",
    "VolumesAttached": "the same handles with their device paths",
    "Config": "the kubelet's dynamic configuration status",
    "RuntimeHandlers": "the runtime handlers (nvidia, runc) the node offers every team",
    "Features": "node features such as supplemental groups policy",
    "DeclaredFeatures": "feature names the kubelet declares",
}


def syncer_reads(chart_path, team, values: dict) -> dict[str, set[tuple[str, str]]]:
    """Read grants of the syncer's Role and ClusterRole, by kind."""
    rendered = render_release(chart_path, team.vcluster_name, team.namespace, values, kube_version="1.36.0")
    found: dict[str, set[tuple[str, str]]] = {"Role": set(), "ClusterRole": set()}
    for text in rendered.values():
        for doc in yaml.safe_load_all(text):
            if doc and doc["kind"] in found:
                found[doc["kind"]] |= {(group, resource) for rule in doc["rules"] if READ_VERBS & set(rule["verbs"])
                                       for group in rule.get("apiGroups", []) for resource in rule.get("resources", [])}
    return found


def may_proxy(reads: dict[str, set[tuple[str, str]]]) -> bool:
    return ("", "nodes/proxy") in reads["ClusterRole"]


def metrics_go(tag: str) -> str:
    return git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/server/filters/metrics.go")


# --- the syncer's host reads, rendered ----------------------------------------------------------------------------

@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_every_cluster_wide_read_of_the_syncer_is_classified_and_none_reaches_a_kubelet(chart, stack):  # noqa: F811
    for team in teams(chart.version, [stack]):
        values = vcluster_values(team, MOCK_CLUSTER_DNS)
        reads = syncer_reads(chart.path, team, values)
        assert not {resource for _, resource in reads["ClusterRole"] | reads["Role"]} & KUBELET_SUBRESOURCES, team.name
        assert sorted(reads["ClusterRole"] - set(CLUSTER_READS)) == [], (
            f"vCluster {chart.version} lets {team.name}'s syncer read new cluster-wide kinds: find what a tenant "
            "sees of them through its vCluster, then list them in CLUSTER_READS or turn them off")
        for path, (safe, _) in TENANT_READABLE_VALUES.items():
            node = values
            for key in path:
                node = node[key]
            assert node == safe, (team.name, path)


def test_the_charts_default_kubelet_proxy_grants_the_syncer_every_kubelet(chart):  # noqa: F811
    """What the contract above guards against: with the chart's own byHostname the syncer holds nodes/proxy."""
    team = next(teams(chart.version))
    values = deep_merge(vcluster_values(team, MOCK_CLUSTER_DNS),
                        {"networking": {"advanced": {"proxyKubelets": {"byHostname": True}}}})
    reads = syncer_reads(chart.path, team, values)
    assert {("", "nodes/proxy"), ("", "nodes/stats"), ("", "nodes/metrics")} <= reads["ClusterRole"]
    defaults = yaml.safe_load((chart.path / "values.yaml").read_text())
    assert defaults["networking"]["advanced"]["proxyKubelets"]["byHostname"] is True
    assert defaults["sync"]["fromHost"]["nodes"]["clearImageStatus"] is False


def test_honest_logs_exec_and_nodes_keep_their_grants(chart):  # noqa: F811
    """kubectl logs, exec, attach and port-forward go through the team's own host namespace (WithRedirect, below),
    kubectl get nodes through the node sync: none of them needs a kubelet proxy."""
    team = next(teams(chart.version))
    reads = syncer_reads(chart.path, team, vcluster_values(team, MOCK_CLUSTER_DNS))
    assert {("", "pods/log"), ("", "pods/exec"), ("", "pods/attach"), ("", "pods/portforward")} <= reads["Role"]
    assert {("", "nodes"), ("", "nodes/status")} <= reads["ClusterRole"]


# --- the node proxy, from vCluster's source -----------------------------------------------------------------------

def _literals(source: str, function: str, call: str) -> tuple[str, ...]:
    return tuple(re.findall(rf'strings\.{call}\(\w+, "([^"]+)"\)', go_function(source, function)))


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_node_proxy_forwards_what_the_simulation_forwards(tag):
    """The paths vCluster lets through are the simulation's: a release that forwards another path fails here."""
    source = metrics_go(tag)
    assert _literals(source, "IsKubeletHealthz", "HasSuffix") == HEALTHZ_SUFFIXES
    assert _literals(source, "IsKubeletStats", "HasSuffix") == STATS_SUFFIXES
    assert _literals(source, "IsKubeletMetrics", "HasSuffix") == METRICS_SUFFIXES
    assert _literals(source, "IsKubeletPods", "HasSuffix") == PODS_SUFFIXES
    assert 'strings.TrimRight(path, "/")' in go_function(source, "IsKubeletPods")
    assert _literals(source, "IsKubeletContainerLogs", "Contains") == (CONTAINER_LOGS_MARKER,)
    allowlist = go_function(source, "enforceKubeletSubpathAllowlist")
    # The branches in their order, and nothing that cleans or re-checks the path after the rewrite.
    assert re.findall(r"\n\t(?:case ([^:]+)|(default)):", allowlist) == [
        ("IsKubeletHealthz(reqPath)", ""),
        ("IsKubeletMetrics(reqPath), IsKubeletStats(reqPath), IsKubeletPods(reqPath)", ""),
        ("IsKubeletContainerLogs(reqPath)", ""), ("", "default")]
    assert "parts[i+1] = nsm.Namespace" in allowlist and "parts[i+2] = nsm.Name" in allowlist
    assert 'req.URL.Path = strings.Join(parts, "/")' in allowlist
    assert "Clean(" not in allowlist and '".."' not in allowlist
    assert "if sharedNodes {" in allowlist[allowlist.index("\tdefault:"):]
    assert "registerCtx.Config.Sync.FromHost.Nodes.Enabled" in go_function(source, "WithMetricsProxy")
    # The host is called with the syncer's credentials: the tenant's are dropped.
    for function in ("handleNodeRequest", "streamNodeRequest"):
        body = go_function(source, function)
        assert 'req.Header.Del("Authorization")' in body and "HostManager.GetConfig()" in body, function
    # Only pods, stats and metrics answers are rewritten to the tenant's pods.
    handle = go_function(source, "handleNodeRequest")
    assert re.findall(r"if (IsKubelet\w+)\(req\.URL\.Path\) \{\n\t\tnewData, err = (\w+)\(", handle) == [
        ("IsKubeletMetrics", "rewritePrometheusMetrics"), ("IsKubeletStats", "rewriteStats"),
        ("IsKubeletPods", "rewritePods")]


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_node_proxy_runs_whatever_the_kubelet_proxies_say(tag):
    """Turning the kubelet proxies off leaves the filter in place: only the host's grant stops a request. The API
    proxy's handler is a net/http ServeMux, built with a Go whose ServeMux cleans the escaped path only."""
    server = go_function(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/server/server.go"), "NewServer")
    block = server[:server.index("filters.WithMetricsProxy(")].rsplit("\n\tif ", 1)[1]
    assert block.startswith("!ctx.Config.PrivateNodes.Enabled {") and "ProxyKubelets" not in block, tag
    assert "http.NewServeMux()" in git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/server/server.go")
    assert 'serverhelper.HandleRoute(s.handler, "/", h)' in server
    go_version = re.search(r"^go (\d+)\.(\d+)", git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:go.mod"), re.M)
    assert (int(go_version.group(1)), int(go_version.group(2))) >= (1, 22)
    # kubectl logs, exec, attach and port-forward are redirected to the host pod the tenant's own pod maps to.
    for subresource in ("log", "exec", "attach", "portforward"):
        assert f'SubResource:          "{subresource}"' in server, subresource
    redirect = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/server/filters/redirect.go")
    assert "mappings.VirtualToHost(" in go_function(redirect, "WithRedirect")


@pytest.mark.parametrize("tag", MIRRORED_TAGS[APIMACHINERY])
def test_the_host_resolves_dot_segments_of_a_node_proxy_path(tag):
    """The node proxy's location is joined with JoinPreservingTrailingSlash, which is path.Join."""
    source = git(APIMACHINERY, "show", f"{mirrored_tag(APIMACHINERY, tag)}:pkg/util/net/http.go")
    assert "result := path.Join(elem...)" in go_function(source, "JoinPreservingTrailingSlash")


# --- attacks through the node proxy, with the grants the chart really gives -----------------------------------------

def _teams_on_one_node():
    nlp, vision = Tenant("team-nlp", "team-nlp"), Tenant("team-vision", "team-vision")
    own = nlp.add_pod("default", "train", ("main",), "nlp-token")
    victim = vision.add_pod("default", "web-0", ("healthz", "app"), "vision-token")
    return nlp, own, victim, [own, victim]


ATTACKS = {
    # every pod of the node, with its env, through a percent-encoded ../ after the tenant's own log path
    "traversal-to-pods": "containerLogs/default/train/main/%2E%2E/%2E%2E/%2E%2E/%2E%2E/pods/%2E",
    # another team's logs the same way
    "traversal-to-logs": "containerLogs/default/train/main/%2E%2E/%2E%2E/%2E%2E/%2E%2E/containerLogs/team-vision/"
                         "web-0-x-default-x-team-vision/app/%2E",
    # another team's container named healthz: the path ends like the health check
    "healthz-suffix": "containerLogs/team-vision/web-0-x-default-x-team-vision/healthz",
}


def _leaked(answer) -> bool:
    return any("vision-token" in line for line in answer.body)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_node_proxy_attack_reads_another_team_only_while_the_syncer_may_proxy(chart, attack):  # noqa: F811
    team = next(teams(chart.version))
    program = syncer_reads(chart.path, team, vcluster_values(team, MOCK_CLUSTER_DNS))
    chart_default = syncer_reads(chart.path, team, deep_merge(
        vcluster_values(team, MOCK_CLUSTER_DNS), {"networking": {"advanced": {"proxyKubelets": {"byHostname": True}}}}))
    nlp, _, _, node = _teams_on_one_node()
    assert _leaked(node_proxy(nlp, ATTACKS[attack], node, may_proxy(chart_default)))
    refused = node_proxy(nlp, ATTACKS[attack], node, may_proxy(program))
    assert refused.status == 403 and refused.kubelet_path is None


def test_the_simulated_filter_refuses_what_vcluster_refuses():
    nlp, _, victim, node = _teams_on_one_node()
    # A plain ../ is redirected by the ServeMux; another team's container is refused by the ownership check;
    # kubelet paths outside the allowlist are refused.
    assert node_proxy(nlp, "containerLogs/default/train/main/../../../../pods/.", node, True).status == 301
    assert node_proxy(nlp, f"containerLogs/{victim.namespace}/{victim.name}/app", node, True).status == 403
    assert node_proxy(nlp, "configz", node, True).status == 403
    # The tenant's own answers are filtered to its pods.
    assert node_proxy(nlp, "pods", node, True).body == ("team-nlp/train-x-default-x-team-nlp:nlp-token",)


# --- node sync -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_node_sync_copies_the_whole_status_and_clears_images_only_when_told(tag):
    tag = mirrored_tag(VCLUSTER, tag)
    translate = go_function(git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/nodes/translate.go"),
                            "(s *nodeSyncer) translateUpdateStatus")
    assert "translatedStatus := pNode.Status.DeepCopy()" in translate
    assert "vNode.Status = *translatedStatus" in translate
    assert re.search(r"if s\.clearImages \{\s*translatedStatus\.Images = make\(\[\]corev1\.ContainerImage, 0\)",
                     translate)
    assert set(re.findall(r"translatedStatus\.(\w+)(?:\[[^\]]+\])? = ", translate)) <= {
        "DaemonEndpoints", "Addresses", "Allocatable", "Capacity", "Images"}
    syncer = git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/nodes/syncer.go")
    assert "clearImages:          ctx.Config.Sync.FromHost.Nodes.ClearImageStatus," in syncer
    types = git(VCLUSTER, "show", f"{tag}:vendor/k8s.io/api/core/v1/types.go")
    block = types[types.index("\ntype NodeStatus struct {"):]
    fields = re.findall(r"^\t([A-Z]\w*) ", block[:block.index("\n}\n")], re.M)
    assert sorted(set(fields) - set(NODE_STATUS)) == [], (
        f"vCluster {tag} vendors NodeStatus fields nobody classified: find what a virtual node's copy shows a tenant")


def test_a_tenant_sees_no_image_of_another_team_on_its_virtual_node():
    team = next(teams())
    nodes = vcluster_values(team, MOCK_CLUSTER_DNS)["sync"]["fromHost"]["nodes"]
    proxies = vcluster_values(team, MOCK_CLUSTER_DNS)["networking"]["advanced"]["proxyKubelets"]
    host = {"images": [{"names": ["registry.example.com/team-vision/secret-model@sha256:ab", "...:v3"]}],
            "conditions": [{"type": "Ready", "status": "True"}], "capacity": {"nvidia.com/gpu": "1"},
            "addresses": [{"type": "InternalIP", "address": "10.0.1.5"}], "nodeInfo": {"kubeletVersion": "v1.33"}}
    virtual = virtual_node_status(host, nodes["clearImageStatus"], proxies["byIP"] or proxies["byHostname"])
    assert virtual["images"] == []
    # kubectl get nodes / describe node still show the node as it is.
    assert {key: virtual[key] for key in ("conditions", "capacity", "addresses", "nodeInfo")} == {
        key: host[key] for key in ("conditions", "capacity", "addresses", "nodeInfo")}
    # With the chart's default the images are there.
    assert virtual_node_status(host, False, True)["images"] == host["images"]


def test_a_mapping_names_the_host_namespaces_the_syncer_copies_secrets_from(chart):  # noqa: F811
    """What config/virtual_cluster.py FROM_HOST_MAPPED_KINDS refuses. Any enabled mapping grants the syncer list and
    watch of Secrets cluster-wide (chart/templates/_rbac.tpl); which namespaces it copies from is what the mappings
    name, and the chart grants exactly those: another team's for a mapping that names it, the vCluster's own for a
    mapping without a namespace."""
    team = next(teams(chart.version))

    def source_namespaces(source: str) -> set[str]:
        values = deep_merge(vcluster_values(team, MOCK_CLUSTER_DNS), {"sync": {"fromHost": {"secrets": {
            "enabled": True, "mappings": {"byName": {source: "default/copied"}}}}}})
        rendered = render_release(chart.path, team.vcluster_name, team.namespace, values, kube_version="1.36.0")
        return {name for text in rendered.values() for doc in yaml.safe_load_all(text)
                if doc and doc["kind"] == "ClusterRole" for rule in doc["rules"]
                if rule.get("resources") == ["namespaces"] for name in rule.get("resourceNames", [])}

    assert source_namespaces("team-vision/db-password") == {"team-vision"}
    assert source_namespaces("/db-password") == {team.namespace}


def test_every_read_a_site_may_turn_on_is_classified(chart):  # noqa: F811
    """Each sync.fromHost switch config/vcluster_values.py lets a site set, turned on: the syncer's new cluster-wide
    reads are listed above, so the contract holds for any valid site, not only the committed ones."""
    team = next(teams(chart.version))
    base = vcluster_values(team, MOCK_CLUSTER_DNS)
    switches = [key for key, values in TABLE.items() if values.kind == SITE and key.startswith("sync.fromHost.")
                and key.endswith(".enabled") and classified(key, chart.version) is not None]
    assert switches
    for key in switches:
        kind = key.split(".")[2]
        values = deep_merge(base, {"sync": {"fromHost": {kind: {"enabled": True}}}})
        reads = syncer_reads(chart.path, team, values)
        assert sorted(reads["ClusterRole"] - set(CLUSTER_READS)) == [], (chart.version, key)


def _grep(repository: str, tag: str, pattern: str) -> list[str]:
    """``file:line:text`` of each line of the program code (not tests, not vendored modules) matching ``pattern``."""
    found = subprocess.run(["git", "--git-dir", str(mirror(repository)), "grep", "-n", "-E", pattern, tag, "--",
                            "pkg", "cmd", ":!*_test.go", ":!vendor"], capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr
    return [line.split(":", 1)[1] for line in found.stdout.splitlines()]


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_a_tenant_sees_only_the_host_gateways_the_site_maps(tag):
    """The syncer may list every host namespace's Gateways once a site turns sync.fromHost.gateways on; it imports
    into the virtual cluster only a Gateway the site's mappings name (by name, or a namespace's with the site's
    selector), or one of the vCluster's own when a tenant Gateway sync to the host is on, which the program refuses."""
    ref = mirrored_tag(VCLUSTER, tag)
    mapper = git(VCLUSTER, "show", f"{ref}:pkg/mappings/resources/gateways.go")
    managed = go_function(mapper, "(m *importedGatewayMapper) IsManaged")
    assert re.findall(r"\n\tif (.+) \{", managed) == [
        "ctx == nil || ctx.Config == nil || obj == nil", "GatewayHostExactMapped(ctx, host)",
        "GatewayHostWildcardMapped(ctx, host.Namespace)", "gatewayapiutil.GatewaysEnabled(ctx.Config)"], tag
    assert managed.rstrip().endswith("return false, nil"), tag
    for function in ("GatewayHostExactMapped", "GatewayHostWildcardMapped"):
        reads = set(re.findall(r"ctx\.Config\.([\w.]+)", go_function(mapper, function)))
        assert reads == {"Sync.FromHost.Gateways.Mappings.ByName"}, (tag, function, reads)
    enabled = go_function(git(VCLUSTER, "show", f"{ref}:pkg/util/gatewayapi/enabled.go"), "GatewaysEnabled")
    switches = set(re.findall(r"config\.Sync\.ToHost\.GatewayAPI\.([\w.]+)", enabled))
    assert switches == {"Gateways.Enabled", "Enabled"} and enabled.count("config.Sync.") == 2, (tag, enabled)
    version = tag.removeprefix("v")
    found = classified("sync.toHost.gatewayApi.gateways.enabled", version)
    assert found is not None and found[1].kind == REFUSED, tag
    # The umbrella switch is judged with every sync to the host: refused unless its kind is one the host policies cover.
    assert classified("sync.toHost.gatewayApi.enabled", version)[1].kind == JUDGED, tag
    assert "gatewayApi" not in COVERED_TO_HOST_SYNCS


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_syncer_copies_no_host_definition_into_a_tenant(tag):
    """The syncer's host CRD read shows a tenant nothing: the one function that reads a host definition to create it
    in a virtual cluster (EnsureCRDFromPhysicalCluster, for vCluster Pro's custom-resource syncs, which the program
    refuses) has no caller in the open-source syncer, and the Gateway API's definitions a tenant gets are vCluster's
    own files, installed in the virtual cluster."""
    ref = mirrored_tag(VCLUSTER, tag)
    assert [line.split(":", 1)[0] for line in _grep(VCLUSTER, ref, r"EnsureCRDFromPhysicalCluster")] == [
        "pkg/util/translate/translate.go"], tag
    definition = go_function(git(VCLUSTER, "show", f"{ref}:pkg/util/translate/translate.go"),
                             "EnsureCRDFromPhysicalCluster")
    host_reads = [line for line in _grep(VCLUSTER, ref, r"CustomResourceDefinitions\(\)\.(Get|List|Watch)\(")
                  if "vClient." not in line]
    # The CLI's destroy command lists a virtual cluster's definitions from the user's machine, not the syncer's.
    assert [line.split(":", 1)[0] for line in host_reads] == ["pkg/cli/destroy/destroy.go",
                                                              "pkg/util/translate/translate.go"], tag
    assert host_reads[1].split(":", 2)[2].strip() in definition, tag
    mapper = git(VCLUSTER, "show", f"{ref}:pkg/mappings/resources/gateways.go")
    assert "ctx.VirtualManager.GetConfig(), []byte(gatewaysCRD)" in go_function(mapper, "EnsureGatewayCRD"), tag
    classes = git(VCLUSTER, "show", f"{ref}:pkg/mappings/resources/gatewayclasses.go")
    assert "ctx.VirtualManager.GetConfig(), []byte(gatewayClassesCRD)" in go_function(classes,
                                                                                       "EnsureGatewayClassCRD"), tag
    found = classified("sync.fromHost.customResources.example.enabled", tag.removeprefix("v"))
    assert found is not None and found[1].kind == REFUSED, tag
