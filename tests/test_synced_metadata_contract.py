"""What vCluster does because of a tenant's metadata on the kinds it syncs besides pods, and which of its
``sync.fromHost`` switches let a tenant write on the host, read from vCluster's source at every accepted tag.

- Every ``vcluster.loft.sh/*`` key the syncer's non-pod controllers, its generic syncer and name mappings, its
  translate helpers and its API proxy filters read or write is classified below: refused by a host policy, or
  harmless with the upstream reason. Pod keys are held by tests/test_admission_contract.py. A vCluster release
  that gives meaning to a new key fails here until someone classifies it.
- Every switch under the chart's ``sync.fromHost`` is classified: refused by the config
  (config/virtual_cluster.py TENANT_WRITABLE_FROM_HOST), or one that only copies host objects into the virtual
  cluster, which rendering the chart with all of them on shows (no write a host policy does not check).
"""

from __future__ import annotations

import base64
import copy
import re

import pytest
import yaml

from components.synced_objects_admission import REQUEST_LABELS, SKIP_TRANSLATE_ANNOTATION
from components.tenant import vcluster_values
from config.merge import deep_merge
from config.virtual_cluster import TENANT_WRITABLE_FROM_HOST
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, mirrored_tag
from tests.synced_objects_sim import host_metadata
from tests.test_synced_objects_admission import nlp, rules  # noqa: F401 (fixture)
from tests.test_synced_kinds_contract import chart, teams, unchecked_writes  # noqa: F401 (fixture)
from tools.offline.mocks import MOCK_CLUSTER_DNS

VCLUSTER = "loft-sh/vcluster"
MODULE = "github.com/loft-sh/vcluster/"
# Where vCluster acts on a synced object's metadata, pods aside (pods/ and the pod translator are the pod contract's).
READERS = tuple(f"pkg/controllers/resources/{kind}/" for kind in (
    "services", "endpoints", "endpointslices", "configmaps", "secrets", "persistentvolumeclaims", "events")) + (
    "pkg/syncer/", "pkg/mappings/", "pkg/patcher/", "pkg/util/translate/", "pkg/server/filters/", "pkg/snapshot/")

# Each key, with what vCluster does with it and why that needs no host rule (or the rule that refuses it).
REFUSED = {
    "vcluster.loft.sh/skip-translate": "a claim keeps its volume name, selector and data source untranslated "
                                       "(persistentvolumeclaims/translate.go): [claim-skip-translate]",
    "vcluster.loft.sh/snapshot-request": "a ConfigMap in the host namespace is a snapshot request to the control "
                                         "plane (snapshot/controller.go): [snapshot-requests]",
    "vcluster.loft.sh/restore-request": "a ConfigMap in the host namespace is a restore request to the control "
                                        "plane (snapshot/restorecontroller.go): [snapshot-requests]",
}
HARMLESS = {
    # Written by the syncer over whatever the tenant sent (translate.go addHostAnnotations, labels.go HostLabelsMap),
    # or excluded from the copy; they tie a host object to its virtual one.
    "vcluster.loft.sh/object-name": "set by the syncer from the virtual object",
    "vcluster.loft.sh/object-namespace": "set by the syncer from the virtual object",
    "vcluster.loft.sh/object-uid": "set by the syncer from the virtual object",
    "vcluster.loft.sh/object-kind": "set by the syncer from the virtual object",
    "vcluster.loft.sh/object-host-name": "set by the syncer from the host name it chose",
    "vcluster.loft.sh/object-host-namespace": "set by the syncer from the host namespace it chose",
    "vcluster.loft.sh/managed-annotations": "recomputed by the syncer on every copy",
    "vcluster.loft.sh/managed-labels": "recomputed by the syncer on every copy",
    "vcluster.loft.sh/managed-by": "a tenant's label is renamed, and the syncer sets its own",
    "vcluster.loft.sh/namespace": "a tenant's label is renamed, and the syncer sets its own",
    "vcluster.loft.sh/label": "prefix of the renamed labels (translate.HostLabel)",
    "vcluster.loft.sh/ns-label": "prefix of namespace labels, multi-namespace mode only",
    "vcluster.loft.sh/object-imported": "marks host namespaces, multi-namespace mode only",
    # Switches a tenant may set on its own objects: each changes only what happens to that object in its namespace.
    "vcluster.loft.sh/controlled-by": "the object is not synced at all (syncer.go excludeVirtual); the label is "
                                      "renamed on the host",
    "vcluster.loft.sh/force-sync": "an unused ConfigMap or Secret is copied as if a pod used it "
                                   "(configmaps/secrets to_host_syncer.go); on host events, set by host components",
    "vcluster.loft.sh/skip-backsync": "the tenant's host object outlives its virtual one (syncer.go): it stays in "
                                      "the tenant's namespace and quota, and the host policies judged it when written",
    "vcluster.loft.sh/block-deletion": "a host Service whose virtual one is gone survives two more minutes "
                                       "(services/syncer.go SyncToVirtual)",
    # Read from host objects the tenant cannot write.
    "vcluster.loft.sh/node": "label of the syncer's per-node kubelet Services (proxyKubelets.byIP, off here)",
    "vcluster.loft.sh/host-pv": "on persistent volumes, which are not synced",
    "vcluster.loft.sh/lock": "on virtual persistent volumes the syncer fakes for bound claims",
    # The snapshot controllers' own bookkeeping, on requests a tenant may not make ([snapshot-requests]) and, before
    # 0.36.0, on the volume snapshots they take, which the program denies the syncer (rbac.enableVolumeSnapshotRules).
    "vcluster.loft.sh/snapshot-controller": "finalizer the snapshot controller puts on a request",
    "vcluster.loft.sh/restore-controller": "finalizer the restore controller puts on a request",
    "vcluster.loft.sh/volumesnapshots": "on a request, the volume snapshots taken for it (0.35)",
    "vcluster.loft.sh/dynamicvolumesnapshot": "on VolumeSnapshots the controller creates (0.35)",
    "vcluster.loft.sh/preprovisionedvolumesnapshot": "on VolumeSnapshots the controller creates (0.35)",
    "vcluster.loft.sh/persistentvolumeclaim": "on VolumeSnapshots the controller creates (0.35)",
    "vcluster.loft.sh/host-volumesnapshotcontent": "on virtual VolumeSnapshotContents, which are not synced",
}
CLASSIFIED = {**REFUSED, **HARMLESS}

# sync.fromHost switches of the chart's values, each a (kind, switch) pair; the refused ones are the config's.
COPIES_INTO_THE_VIRTUAL_CLUSTER = {
    ("events", "enabled"), ("configMaps", "enabled"), ("secrets", "enabled"), ("csiDrivers", "enabled"),
    ("csiNodes", "enabled"), ("csiStorageCapacities", "enabled"), ("storageClasses", "enabled"),
    ("ingressClasses", "enabled"), ("gatewayClasses", "enabled"), ("gateways", "enabled"),
    ("runtimeClasses", "enabled"), ("nodes", "enabled"), ("nodes", "clearImageStatus"),
    ("volumeSnapshotClasses", "enabled"), ("deviceClasses", "enabled"),
}
# Sub-settings of a kind above that choose what is copied or shown, not whether a tenant writes on the host
# (gateways.allowedRoutes picks the virtual routes an imported Gateway admits; route sync to the host is refused).
SUB_SETTINGS = {"selector", "status", "metadata", "sanitize", "mappings", "patches", "allowedRoutes"}


def go_sources(tag: str) -> dict[str, str]:
    paths = [path for path in git(VCLUSTER, "ls-tree", "-r", "--name-only", tag, "pkg").split()
             if path.endswith(".go") and not path.endswith("_test.go") and "/testing/" not in path]
    return {path: git(VCLUSTER, "show", f"{tag}:{path}") for path in paths}


def _imports(source: str) -> dict[str, str]:
    """alias -> package folder, for the module's own packages a Go file imports."""
    block = re.search(r"^import \((.*?)^\)", source, re.S | re.M)
    lines = block.group(1).splitlines() if block else re.findall(r"^import (.*)$", source, re.M)
    found = {}
    for line in lines:
        match = re.match(r'\s*(\w+\s+)?"' + re.escape(MODULE) + r'([\w/.-]+)"', line)
        if match:
            found[(match.group(1) or match.group(2).rsplit("/", 1)[-1]).strip()] = match.group(2)
    return found


def keys_read(files: dict[str, str]) -> set[str]:
    """Every vcluster.loft.sh key named in READERS: as a string, or as a constant of its own or an imported package."""
    constants: dict[tuple[str, str], str] = {}
    for path, source in files.items():
        for name, key in re.findall(r'\b(\w+)\s*=\s*"(vcluster\.loft\.sh/[\w.-]*)"', source):
            constants[(path.rsplit("/", 1)[0], name)] = key
    found = set()
    for path, source in files.items():
        if not path.startswith(READERS):
            continue
        found |= set(re.findall(r'"(vcluster\.loft\.sh/[\w.-]*)"', source))
        imports = _imports(source)
        for alias, name in re.findall(r"\b(?:(\w+)\.)?([A-Z]\w*)\b", source):
            folder = imports.get(alias) if alias else path.rsplit("/", 1)[0]
            if (folder, name) in constants:
                found.add(constants[(folder, name)])
    return found


@pytest.fixture(scope="module")
def sources() -> dict[str, dict[str, str]]:
    return {}


def sources_at(cache: dict, tag: str) -> dict[str, str]:
    if tag not in cache:
        cache[tag] = go_sources(mirrored_tag(VCLUSTER, tag))
    return cache[tag]


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_every_key_vcluster_reads_on_a_synced_object_is_classified(sources, tag):
    keys = keys_read(sources_at(sources, tag))
    assert set(REFUSED) <= keys and {"vcluster.loft.sh/force-sync", "vcluster.loft.sh/skip-backsync"} <= keys
    assert sorted(keys - set(CLASSIFIED)) == [], (
        f"vCluster {tag} acts on keys of synced objects this file does not classify: read what it does with each, "
        "then refuse it in components/synced_objects_admission.py or list it as harmless with the upstream reason")


def test_a_key_a_vcluster_release_starts_reading_fails_the_contract(sources):
    files = dict(sources_at(sources, ACCEPTED_VCLUSTER_TAGS[-1]))
    assert keys_read(files) <= set(CLASSIFIED)
    files["pkg/constants/more.go"] = 'package constants\n\nconst AdoptAnnotation = "vcluster.loft.sh/adopt"\n'
    files["pkg/controllers/resources/secrets/adopt.go"] = (
        'package secrets\n\nimport (\n\t"github.com/loft-sh/vcluster/pkg/constants"\n)\n\n'
        'func adopt(s *corev1.Secret) bool {\n\treturn s.Annotations[constants.AdoptAnnotation] == "true"\n}\n')
    files["pkg/server/filters/reroute.go"] = 'package filters\n\nvar reroute = "vcluster.loft.sh/reroute"\n'
    assert sorted(keys_read(files) - set(CLASSIFIED)) == ["vcluster.loft.sh/adopt", "vcluster.loft.sh/reroute"]


def snapshot_request(kind: str, label: str, team) -> dict:
    """A tenant's ConfigMap or Secret wearing a request label, as the syncer writes it into the host namespace (its
    labels copied: only release, managed-by, namespace and controlled-by are renamed)."""
    request = "{}" if kind == "ConfigMap" else base64.b64encode(b"{}").decode()  # a Secret's data is base64
    virtual = {"apiVersion": "v1", "kind": kind, "data": {"request": request},
               "metadata": {"name": "backup", "namespace": "default", "labels": {label: ""},
                            "annotations": {"vcluster.loft.sh/force-sync": "true"}}}
    return host_metadata(virtual, team)


@pytest.mark.parametrize("label", REQUEST_LABELS)
@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_a_tenants_object_may_not_be_a_snapshot_or_restore_request(nlp, kind, label):
    host = snapshot_request(kind, label, nlp.team)
    assert host["metadata"]["labels"][label] == "" and host["metadata"]["namespace"] == nlp.team.namespace
    assert rules(nlp.create(host)) == {"snapshot-requests"}
    plain = copy.deepcopy(host)
    del plain["metadata"]["labels"][label]
    assert nlp.create(plain) == [] and rules(nlp.update(plain, host)) == {"snapshot-requests"}


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_control_plane_takes_requests_from_its_host_namespace_whoever_wrote_them(sources, tag):
    files = sources_at(sources, tag)
    assert re.search(r"err = registerSnapshotController\(registerContext\)\n\tif err != nil",
                     files["pkg/controllers/register.go"]), tag
    assert "return c.vConfig.HostNamespace" in go_function(files["pkg/snapshot/controllerbase.go"],
                                                           "(c *reconcilerBase) getRequestNamespace"), tag
    for path, label in (("pkg/snapshot/controller.go", "SnapshotRequestLabel"),
                        ("pkg/snapshot/restorecontroller.go", "RestoreRequestLabel")):
        predicate = files[path][files[path].index("func (c *"):]
        predicate = predicate[predicate.index(") Register() error {"):]
        predicate = predicate[:predicate.index("\n}\n")]
        assert f"objLabels[constants.{label}]" in predicate and "MarkerLabel" not in predicate, (tag, path)


def test_the_refused_keys_are_the_ones_the_rules_name():
    # tests/test_synced_objects_admission.py and test_synced_claims_admission.py (skip-translate) attack each with
    # an object synced as vCluster does.
    assert set(REFUSED) == {SKIP_TRANSLATE_ANNOTATION, *REQUEST_LABELS}


# --- sync.fromHost switches ------------------------------------------------------------------------------------


def from_host_switches(values: dict) -> set[tuple[str, str]]:
    return {(kind, switch) for kind, settings in values["sync"]["fromHost"].items() if isinstance(settings, dict)
            for switch in settings if switch not in SUB_SETTINGS}


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_every_switch_of_a_sync_from_the_host_is_classified(tag):
    values = yaml.safe_load(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:chart/values.yaml"))
    switches = from_host_switches(values)
    assert sorted(switches - COPIES_INTO_THE_VIRTUAL_CLUSTER - set(TENANT_WRITABLE_FROM_HOST)) == [], (
        f"vCluster {tag} has sync.fromHost switches nobody classified: find what each lets the syncer or the API "
        "proxy write on the host, then refuse it (config/virtual_cluster.py TENANT_WRITABLE_FROM_HOST) or list it here")
    assert set(TENANT_WRITABLE_FROM_HOST) <= switches


def _all_on(switches) -> dict:
    on: dict = {}
    for kind, switch in switches:
        on.setdefault(kind, {})[switch] = True
    return {"sync": {"fromHost": on}}


def test_switches_that_copy_into_the_virtual_cluster_give_the_syncer_no_unchecked_write(chart):  # noqa: F811
    team = next(teams(chart.version))
    values = yaml.safe_load((chart.path / "values.yaml").read_text())
    switches = from_host_switches(values) & COPIES_INTO_THE_VIRTUAL_CLUSTER
    assert unchecked_writes(chart.path, team, deep_merge(vcluster_values(team, MOCK_CLUSTER_DNS),
                                                         _all_on(switches))) == set()


def test_the_refused_switches_give_the_syncer_host_writes_no_policy_checks(chart):  # noqa: F811
    team = next(teams(chart.version))
    base = vcluster_values(team, MOCK_CLUSTER_DNS)
    assert unchecked_writes(chart.path, team, deep_merge(base, _all_on([("nodes", "syncBackChanges")]))) == {
        ("", "nodes"), ("", "nodes/status")}
    assert unchecked_writes(chart.path, team, deep_merge(base, _all_on([("priorityClasses", "enabled")]))) == {
        ("scheduling.k8s.io", "priorityclasses")}


def go_function(source: str, name: str) -> str:
    start = source.index(f"\nfunc {name}(")
    return source[start:source.index("\n}\n", start)]


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_node_sync_back_copies_a_tenants_node_edits_onto_the_host_node(sources, tag):
    files = sources_at(sources, tag)
    server = go_function(files["pkg/server/server.go"], "NewServer")
    guard = server[:server.index("filters.WithNodeChanges(")].rsplit("if ", 1)[1]
    assert "Nodes.SyncBackChanges" in guard, tag
    update = go_function(files["pkg/server/filters/nodechanges.go"], "updateNode")
    assert {"Labels", "Spec.Taints", "Spec.Unschedulable", "Status.Capacity"} <= set(
        re.findall(r"newNode\.([\w.]+) = vNode\.", update)), tag
    assert "localClient.Patch(" in update, tag


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_priority_class_sync_from_the_host_keeps_a_pods_priority_class(sources, tag):
    translator = sources_at(sources, tag)["pkg/controllers/resources/pods/translate/translator.go"]
    # The host pod starts as a copy of the virtual one; its priority class is cleared only when neither
    # direction of priority-class sync is on.
    assert re.search(r"allPriorityClassesSyncingDisabled := !t\.priorityClassesSyncEnabled && "
                     r"!t\.hostPriorityClassesSyncEnabled", translator), tag
    assert re.search(r"else if allPriorityClassesSyncingDisabled \{[^}]*PriorityClassName = \"\"", translator), tag
    assert "hostPriorityClassesSyncEnabled: ctx.Config.Sync.FromHost.PriorityClasses.Enabled" in translator, tag
