"""What a site may set in ``vcluster.extraValues`` (config/vcluster_values.py): the vCluster values a hostile tenant
would profit from are refused at the stack's and at a team's level, naming the key, the value and the fix, before
any resource is registered; the values committed stacks, docs and tests use still load."""

from __future__ import annotations

import pytest

from components.tenant import vcluster_values
from config import load_platform
from config.vcluster_values import REFUSED
from config.vcluster_values_lookup import classified, leaves
from tests.config_spec import assert_rejected, dev_config, put, rejected
from tools.offline.mocks import MOCK_CLUSTER_DNS

PLUGIN = {"image": "ghcr.io/acme/plugin:1", "rbac": {"clusterRole": {"extraRules": [
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}}}

# Each a value a tenant's vCluster would be given, with words of why it is refused.
ATTACKS = [
    ("integrations.externalSecrets.enabled", True, "secret stores"),
    ("integrations.externalSecrets.sync.fromHost.clusterStores.enabled", True, "ClusterSecretStores"),
    ("integrations.certManager.enabled", True, "for any name"),
    ("integrations.istio.enabled", True, "shared gateways"),
    ("integrations.kubeVirt.enabled", True, "VM runs on the GPU nodes"),
    ("integrations.metricsServer.enabled", True, "other teams' workloads"),
    ("integrations.argoCD.enabled", True, "Pro"),
    ("plugins.steal", PLUGIN["image"], "plugin's own rules"),
    ("plugin.steal.image", PLUGIN["image"], "plugin's own rules"),
    ("networking.replicateServices.fromHost", [{"from": "kai/kai-admission", "to": "default/kai"}],
     "any host namespace"),
    ("networking.replicateServices.toHost", [{"from": "default/api", "to": "team-vision/api"}], "other host namespaces"),
    ("exportKubeConfig.additionalSecrets", [{"name": "admin", "namespace": "kube-system"}], "any host namespace"),
    ("exportKubeConfig.secret.namespace", "team-vision", "any host namespace"),
    ("controlPlane.hostPathMapper.enabled", True, "other teams' logs"),
    ("controlPlane.advanced.virtualScheduler.enabled", True, "skip KAI"),
    ("controlPlane.distro.k8s.scheduler.enabled", True, "skip KAI"),
    ("sync.toHost.gatewayApi.httpRoutes.enabled", True, "shared gateways"),
    ("sync.toHost.pods.hybridScheduling.enabled", True, "Pro"),
    ("sync.toHost.pods.patches", [{"path": "metadata.labels", "expression": "{}"}], "Pro"),
    ("sync.fromHost.customResources.secretstores\\.example\\.com.enabled", True, "Pro"),
    ("experimental.nodeMonitors", [{"name": "gpu"}], "ServiceMonitors"),
    ("experimental.deploy.host.manifests", "kind: ClusterRoleBinding", "any host namespace"),
    ("experimental.proxy.customResources.widgets\\.example\\.com.enabled", True, "credentials"),
    ("experimental.syncSettings.setOwner", True, "leave its queue"),
    ("controlPlane.distro.k8s.apiServer.extraArgs", ["--anonymous-auth=true"], "who signs in"),
    ("experimental.deploy.vcluster.manifests", "kind: ConfigMap", "in-vCluster defaults"),
    ("sync.fromHost.nodes.enabled", False, "fakes"),
    ("rbac.role.enabled", False, "nobody checked"),
    ("rbac.clusterRole.enabled", True, "what it decides"),
    ("privateNodes.enabled", True, "private nodes"),
    ("deploy.metallb.enabled", True, "host-network"),
    ("pro", True, "Platform"),
    ("platform.apiKey.namespace", "kube-system", "any host namespace"),
    ("sleep.auto.afterInactivity", "1h", "Pro"),
    ("controlPlane.backingStore.database.external.enabled", True, "Pro"),
]


def nested(path: str, value: object) -> dict:
    """``{"a": {"b": value}}`` for ``a.b``; an escaped dot (``\\.``) stays in its key."""
    keys = [key.replace("\0", ".") for key in path.replace("\\.", "\0").split(".")]
    for key in reversed(keys):
        value = {key: value}
    return value


def dotted(path: str) -> str:
    return path.replace("\\.", ".")


@pytest.mark.parametrize("level, whose", [("vcluster", "the stack's"), ("teams[1].vcluster", "team team-vision's")])
@pytest.mark.parametrize("path, value, why", ATTACKS, ids=[attack[0] for attack in ATTACKS])
def test_a_value_a_tenant_would_profit_from_is_refused_with_key_value_and_fix(level, whose, path, value, why):
    config = put(dev_config(), f"{level}.extraValues", nested(path, value))
    found = assert_rejected(config, f"{level}.extraValues.{dotted(path)}", value, fix="remove it")
    assert why in found.problem and whose in found.problem, found.problem


def test_a_team_is_refused_only_what_it_adds_and_names_each_value():
    config = put(dev_config(), "teams[2].vcluster.extraValues", {"integrations": {
        "certManager": {"enabled": True, "sync": {"toHost": {"issuers": {"enabled": True}}}}}})
    error = rejected(config)
    assert error.keys == ["teams[2].vcluster.extraValues.integrations.certManager.enabled",
                          "teams[2].vcluster.extraValues.integrations.certManager.sync.toHost.issuers.enabled"]


def test_a_refused_setting_may_be_written_off():
    config = put(dev_config(), "vcluster.extraValues", {
        "integrations": {name: {"enabled": False} for name in ("externalSecrets", "certManager", "istio", "kubeVirt",
                                                                "metricsServer")},
        "plugins": {}, "exportKubeConfig": {"additionalSecrets": [], "secret": {"namespace": ""}},
        "controlPlane": {"hostPathMapper": {"enabled": False}}, "rbac": {"clusterRole": {"enabled": "auto"}},
        "experimental": {"syncSettings": {"setOwner": False}}})
    assert load_platform(config).teams


def test_the_program_owns_a_value_that_only_its_own_setting_may_turn():
    found = assert_rejected(put(dev_config(), "vcluster.extraValues.experimental.syncSettings.setOwner", True),
                            "vcluster.extraValues.experimental.syncSettings.setOwner", True, fix="set it to false")
    assert "the program's own value" in found.problem


@pytest.mark.parametrize("path", ["networking.advanced.proxyKubelets.byHostname", "experimental.syncSettings.setOwner",
                                  "sync.fromHost.nodes.clearImageStatus"])
def test_a_null_that_would_bring_back_the_charts_default_is_refused(path):
    # Helm deletes a key set to null, so the chart's own default (a kubelet proxy, owner references) comes back.
    found = assert_rejected(put(dev_config(), f"vcluster.extraValues.{path}", None), f"vcluster.extraValues.{path}",
                            None, fix="set the value itself")
    assert "chart's default" in found.problem


@pytest.mark.parametrize("path, value, words", [
    ("sync.toHost.pods.schedulerName", "kai-scheduler", "has no such value"),
    ("controlPlane.statefulSet.resource.limits.memory", "4Gi", "has no such value"),
    ("token", "abc", "has no such value"),
    ("sync.toHost", "off", "a block of values"),
    ("networking.advanced", [], "a block of values"),
])
def test_a_value_the_chart_does_not_have_is_refused(path, value, words):
    config = put(dev_config(), "teams[0].vcluster.extraValues", nested(path, value))
    found = assert_rejected(config, f"teams[0].vcluster.extraValues.{path}", value)
    assert words in found.problem and "0.36.1" in found.problem


def test_a_value_only_a_later_chart_has_is_refused_at_an_earlier_one():
    config = put(dev_config(), "vcluster.extraValues.controlPlane.standalone.advertiseAddress", "10.0.0.1")
    assert "private nodes" in assert_rejected(config, "vcluster.extraValues.controlPlane.standalone.advertiseAddress",
                                              "10.0.0.1").problem
    put(config, "vcluster.version", "0.35.3")
    assert "0.35.3's chart has no such value" in assert_rejected(
        config, "vcluster.extraValues.controlPlane.standalone.advertiseAddress", "10.0.0.1").problem


# The extraValues committed stacks, docs (operations-running.md, operations-versions.md,
# security-synced-objects.md) and tests use, each still a site's to set.
HONEST = [
    {"controlPlane": {"proxy": {"extraSANs": ["vc.example"]}}},
    {"controlPlane": {"advanced": {"defaultImageRegistry": "registry.example:5000"}}},
    {"controlPlane": {"statefulSet": {"scheduling": {"priorityClassName": "tenant-cp"}}}},
    {"controlPlane": {"service": {"spec": {"type": "LoadBalancer"}}, "tlsRoute": {"apiVersion": "v1alpha2"}}},
    {"controlPlane": {"statefulSet": {"resources": {"limits": {"memory": "4Gi"}},
                                      "persistence": {"volumeClaim": {"size": "10Gi", "storageClass": "fast"}}}}},
    {"controlPlane": {"distro": {"k8s": {"image": {"tag": "v1.36.2"}, "version": "v1.36.2"}}}},
    {"policies": {"resourceQuota": {"quota": {"requests.cpu": "100m"}}, "limitRange": {"defaultRequest": {
        "memory": "1Gi"}}}},
    {"sync": {"toHost": {"pods": {"rewriteHosts": {"initContainer": {"image": {"registry": "mirror.example"}}},
                                  "priorityClassName": "tenant"}, "configMaps": {"all": True}}}},
    {"sync": {"fromHost": {"storageClasses": {"enabled": True}, "secrets": {
        "enabled": True, "mappings": {"byName": {"/registry-credentials": "default/registry-credentials"}}}}}},
    {"controlPlane": {"statefulSet": {"labels": {"example.com/team": "nlp"}}}, "exportKubeConfig": {
        "server": "https://vc.example:443", "context": "nlp"}},
]


@pytest.mark.parametrize("extra", HONEST)
def test_the_values_sites_use_still_load(extra):
    assert load_platform(put(dev_config(), "teams[1].vcluster.extraValues", extra)).teams
    assert load_platform(put(dev_config(), "vcluster.extraValues", extra)).teams


@pytest.mark.parametrize("version", ["0.35.0", "0.36.1"])
def test_every_value_the_program_renders_is_one_the_chart_has_and_none_is_refused(version):
    """What the program renders (a site repeating it changes nothing) is classified at the chart version, and none of
    it is a value the classification would refuse."""
    for team in load_platform(put(dev_config(), "vcluster.version", version)).teams:
        for path, value in leaves(vcluster_values(team, MOCK_CLUSTER_DNS)):
            match = classified(path, version)
            assert match is not None, path
            assert match[1].kind != REFUSED or match[1].allows(value), (path, value)


@pytest.mark.parametrize("version, refused", [("0.35.3", False), ("0.36.0", True), ("0.36.1", True)])
def test_a_volume_snapshot_class_sync_is_refused_where_the_chart_removed_it(version, refused):
    """vCluster 0.36.0 removed sync.fromHost.volumeSnapshotClasses: its chart fails on any value there ("was removed
    in 0.36.0"), though its schema still has it. Before, the loader took it and the release failed to render."""
    config = put(dev_config(), "teams[0].vcluster", {
        "version": version, "extraValues": {"sync": {"fromHost": {"volumeSnapshotClasses": {"enabled": True}}}}})
    if refused:
        assert "teams[0].vcluster.extraValues.sync.fromHost.volumeSnapshotClasses.enabled" in rejected(config).keys
    else:
        load_platform(config)
