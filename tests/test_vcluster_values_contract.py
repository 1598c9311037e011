"""Every value of the vCluster chart is classified (config/vcluster_values.py), read from the chart at every accepted
tag, and each refusal's reason holds there: the grants the chart renders when it is on, the code that reads it.

A chart release that adds a value fails here until someone reads what it does and classifies it: a site's
``vcluster.extraValues`` may set only what is classified as the site's or as an override the program allows.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from components.tenant import vcluster_values
from config import versions
from config.merge import deep_merge
from config.vcluster_values import JUDGED, REFUSED, SINCE, UNTIL
from config.vcluster_values_lookup import TABLE, classified
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, go_function, mirrored_tag
from tests.test_host_reads_contract import syncer_reads
from tests.test_synced_kinds_contract import chart, syncer_writes, teams  # noqa: F401 (fixture)
from tools.offline.mocks import MOCK_CLUSTER_DNS

VCLUSTER = "loft-sh/vcluster"


def schema_values(schema: dict, node: dict | None = None, path: tuple[str, ...] = ()) -> dict[str, bool]:
    """Every value the chart's schema lets a site write, dotted, each with whether it is a map of the site's own keys
    (an object without properties, or a map of strings) rather than one value."""
    node = schema if node is None else node
    if "$ref" in node:
        return schema_values(schema, schema["$defs"][node["$ref"].rsplit("/", 1)[1]], path)
    if node.get("properties"):
        found: dict[str, bool] = {}
        for key, child in node["properties"].items():
            found.update(schema_values(schema, child, path + (key,)))
        return found
    variants = node.get("anyOf") or node.get("oneOf") or [node]
    return {".".join(path): any(variant.get("type") == "object" or "patternProperties" in variant
                                for variant in variants)}


def chart_schema(tag: str) -> dict[str, bool]:
    return schema_values(json.loads(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:chart/values.schema.json")))


def value_paths(values: object, path: tuple[str, ...] = ()):
    if isinstance(values, dict):
        for key, value in values.items():
            yield from value_paths(value, path + (key,))
    else:
        yield ".".join(path)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_every_value_of_the_chart_is_classified(tag):
    version = tag.removeprefix("v")
    schema = chart_schema(tag)
    values = set(value_paths(yaml.safe_load(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:chart/values.yaml"))))
    # A value the chart removed (UNTIL) stays in its schema but is refused as one it does not have.
    unclassified = sorted(path for path in set(schema) | values if classified(path, version) is None
                          and not (path in UNTIL and versions.release_order(version)
                                   >= versions.release_order(UNTIL[path])))
    assert unclassified == [], (
        f"vCluster {tag} has values config/vcluster_values.py does not classify: read what the host grants and what a "
        "tenant does with each (chart templates, pkg/config, the code that reads it), then classify it")
    # A map of the site's own keys is classified as one (``path.*``), so that its keys pass.
    for path, is_map in schema.items():
        if path in UNTIL and classified(path, version) is None:
            continue
        key, _ = classified(path + ".key" if is_map else path, version)
        assert key.endswith(".*") if is_map else True, (tag, path)


def test_each_classified_value_is_one_an_accepted_chart_has():
    schemas = {tag.removeprefix("v"): chart_schema(tag) for tag in ACCEPTED_VCLUSTER_TAGS}
    for key in TABLE:
        path = key.removesuffix(".*")
        holding = {version for version, schema in schemas.items()
                   if path in schema or (key.endswith(".*") and any(p.startswith(path + ".") for p in schema))}
        assert holding, f"{key}: no accepted vCluster chart has it; remove it"
        if not key.endswith(".*"):
            assert schemas and all(not is_map for version in holding for p, is_map in schemas[version].items()
                                   if p == path), key
        expected = {version for version in schemas if classified(path if not key.endswith(".*") else path + ".x",
                                                                 version)}
        # A value the chart removed stays in its schema (old configs still parse) but fails the chart from UNTIL on.
        gone = {version for version in holding if key in UNTIL
                and versions.release_order(version) >= versions.release_order(UNTIL[key])}
        assert holding - gone == expected or key.endswith(".*"), (key, sorted(holding), sorted(expected))
    assert set(SINCE) | set(UNTIL) <= set(TABLE)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_a_value_the_chart_fails_on_as_removed_is_refused_from_that_release_on(tag):
    """At 0.36.0 and later the chart fails on any value under the volume-snapshot blocks it removed, though its schema
    still has them: the loader refuses them there, as values the chart does not have."""
    version = tag.removeprefix("v")
    template = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:chart/templates/_validate.tpl") \
        if versions.release_order(version) >= versions.release_order("0.36.0") else ""
    failing = set(re.findall(r'fail "([A-Za-z.]+) was removed in', template))
    removed = {key.rsplit(".", 1)[0] for key, until in UNTIL.items()
               if versions.release_order(version) >= versions.release_order(until)}
    # deploy.volumeSnapshotController is in no accepted chart's values or schema, so nothing classifies it.
    assert removed == failing - {"deploy.volumeSnapshotController"}, tag
    for key in UNTIL:
        assert (classified(key, version) is None) == (key.rsplit(".", 1)[0] in removed), (tag, key)


# --- each refusal's reason, read from the chart and the code at every accepted tag ----------------------------------

# Values that turn a refused setting on, with the grants the chart then adds to the syncer's Role (in the host
# namespace) or ClusterRole, over what it grants with the program's values.
GRANTS = [
    ({"integrations": {"externalSecrets": {"enabled": True, "sync": {"toHost": {"stores": {"enabled": True}},
                                                                     "fromHost": {"clusterStores": {"enabled": True}}}}}},
     {("Role", "external-secrets.io", "externalsecrets"), ("Role", "external-secrets.io", "secretstores"),
      ("ClusterRole", "external-secrets.io", "clustersecretstores")}),
    ({"integrations": {"certManager": {"enabled": True}}},
     {("Role", "cert-manager.io", "certificates"), ("Role", "cert-manager.io", "issuers"),
      ("ClusterRole", "cert-manager.io", "clusterissuers")}),
    ({"integrations": {"istio": {"enabled": True}}},
     {("Role", "networking.istio.io", kind) for kind in ("destinationrules", "gateways", "serviceentries",
                                                        "virtualservices")}),
    ({"integrations": {"kubeVirt": {"enabled": True}}},
     {("Role", "kubevirt.io", "virtualmachines"), ("Role", "kubevirt.io", "virtualmachineinstances"),
      ("Role", "cdi.kubevirt.io", "datavolumes"), ("Role", "subresources.kubevirt.io", "*")}),
    ({"integrations": {"metricsServer": {"enabled": True, "nodes": True, "pods": True}}},
     {("Role", "metrics.k8s.io", "pods"), ("ClusterRole", "metrics.k8s.io", "nodes")}),
    ({"sync": {"toHost": {"gatewayApi": {"httpRoutes": {"enabled": True}}}}},
     {("Role", "gateway.networking.k8s.io", "httproutes")}),
    ({"experimental": {"nodeMonitors": [{"name": "gpu"}]}}, {("Role", "monitoring.coreos.com", "servicemonitors")}),
    ({"networking": {"replicateServices": {"fromHost": [{"from": "kai/kai-admission", "to": "default/kai"}]}}},
     {("ClusterRole", "", "services")}),
    ({"plugins": {"steal": {"image": "ghcr.io/acme/plugin:1", "rbac": {"clusterRole": {"extraRules": [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}}}}}, {("ClusterRole", "", "secrets")}),
    ({"pro": True}, {("ClusterRole", "management.loft.sh", "virtualclusterinstances")}),
    ({"controlPlane": {"advanced": {"virtualScheduler": {"enabled": True}}}},
     {("ClusterRole", "storage.k8s.io", "storageclasses"), ("ClusterRole", "storage.k8s.io", "csinodes")}),
]


def _leaves(values: dict, path: tuple[str, ...] = ()):
    for key, value in values.items():
        yield from (_leaves(value, path + (key,)) if isinstance(value, dict) and value else
                    [(".".join(path + (key,)), value)])


def grants(chart_path, team, values: dict) -> set[tuple[str, str, str]]:
    reads = syncer_reads(chart_path, team, values)
    return {(kind, group, resource) for kind, found in reads.items() for group, resource in found} | \
        {("Role", group, resource) for group, resource in syncer_writes(chart_path, team, values)}


@pytest.mark.parametrize("extra, granted", GRANTS, ids=[next(_leaves(extra))[0] for extra, _ in GRANTS])
def test_each_refused_setting_grants_the_syncer_what_its_reason_says(chart, extra, granted):  # noqa: F811
    team = next(teams(chart.version))
    base = vcluster_values(team, MOCK_CLUSTER_DNS)
    added = grants(chart.path, team, deep_merge(base, extra)) - grants(chart.path, team, base)
    assert granted <= added, sorted(granted - added)
    # And the config refuses the values that turn it on.
    refused = [path for path, value in _leaves(extra)
               if (match := classified(path, chart.version)) and match[1].kind != JUDGED and not match[1].allows(value)]
    assert refused, extra



# What the open-source control plane treats as a vCluster Pro feature (config/config.go IsProFeatureEnabled), for the
# values classified as Pro.
PRO_FIELDS = {
    "networking.resolveDNS": "c.Networking.ResolveDNS",
    "controlPlane.coredns.embedded": "c.ControlPlane.CoreDNS.Embedded",
    "controlPlane.backingStore.database.external.enabled": "c.ControlPlane.BackingStore.Database.External.Enabled",
    "controlPlane.backingStore.etcd.embedded.enabled": "c.ControlPlane.BackingStore.Etcd.Embedded.Enabled",
    "policies.centralAdmission.validatingWebhooks": "c.Policies.CentralAdmission.ValidatingWebhooks",
    "controlPlane.hostPathMapper.central": "c.ControlPlane.HostPathMapper.Central",
    "experimental.denyProxyRequests": "c.Experimental.DenyProxyRequests",
    "sync.fromHost.customResources.x": "c.Sync.FromHost.CustomResources",
    "sync.toHost.namespaces.mappingsOnly": "c.Sync.ToHost.Namespaces.Enabled",
    "sync.toHost.pods.hybridScheduling.enabled": "c.Sync.ToHost.Pods.HybridScheduling.Enabled",
    "sync.fromHost.deviceClasses.enabled": "c.Sync.FromHost.DeviceClasses.Enabled",
    "privateNodes.enabled": "c.PrivateNodes.Enabled",
    "sleep.auto.schedule": "c.Sleep != nil",
    "snapshots.auto.schedule": "c.Snapshots != nil",
    "deletion.prevent": "c.Deletion != nil",
    "platform.project": "c.Platform != nil",
}


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_values_refused_as_pro_features_are_the_control_planes_pro_features(tag):
    source = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:config/config.go")
    pro = go_function(source, "(c *Config) IsProFeatureEnabled")
    for path, field in PRO_FIELDS.items():
        assert field in pro, (tag, field)
        assert classified(path, tag.removeprefix("v"))[1].kind == REFUSED, path
    # Translation patches: the open-source build's stubs return a feature error for any patch.
    patches = git(VCLUSTER, "show", f"{tag}:pkg/pro/patches.go")
    assert patches.count("return NewFeatureError(licenseapi.VirtualClusterProDistroTranslatePatches)") == 2, tag


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_refused_settings_do_in_the_code_what_their_reasons_say(tag):
    tag = mirrored_tag(VCLUSTER, tag)
    translator = git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/pods/translate/translator.go")
    assert re.search(r"mountPhysicalHostPaths:\s+ctx\.Config\.ControlPlane\.HostPathMapper\.Enabled", translator), tag
    register = git(VCLUSTER, "show", f"{tag}:pkg/controllers/register.go")
    # Service replication maps any host namespace to the virtual cluster, and the virtual cluster's to any host one.
    assert "parseMapping(ctx.Config.Networking.ReplicateServices.FromHost, hostNamespace, \"\")" in register, tag
    assert "parseMapping(ctx.Config.Networking.ReplicateServices.ToHost, \"\", hostNamespace)" in register, tag
    metrics = git(VCLUSTER, "show", f"{tag}:pkg/server/server.go")
    assert "ctx.Config.Integrations.MetricsServer.Enabled" in metrics, tag
    exports = git(VCLUSTER, "show", f"{tag}:pkg/setup/controllers.go")
    assert "GetAdditionalSecrets()" in exports, tag
    manifests = git(VCLUSTER, "show", f"{tag}:chart/templates/manifests.yaml")
    assert "{{ .Values.experimental.deploy.host.manifests }}" in manifests, tag


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_a_null_would_bring_back_a_charts_default_the_program_turns_off(tag):
    """Helm deletes a value set to null and keeps the chart's own, which for these is what the program turns off."""
    values = yaml.safe_load(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:chart/values.yaml"))
    assert values["experimental"]["syncSettings"]["setOwner"] is True
    assert values["networking"]["advanced"]["proxyKubelets"]["byHostname"] is True
    assert values["sync"]["fromHost"]["nodes"]["clearImageStatus"] is False
