"""The synced-objects boundary for volume claims (components/synced_objects_admission.py), tested by attack.

A hostile tenant's claim, synced as vCluster 0.36.1's syncer writes it (tests/synced_objects_sim.py) and
defaulted as the host API server does, may not pick a host volume, clone a claim outside its vCluster or of its
control plane, or leave the platform's storage class; honest claims and the syncer's own updates are admitted.
The other synced kinds, and the helpers used here: tests/test_synced_objects_admission.py.
"""

from __future__ import annotations

import copy
import re

import pytest

from tests.conftest import MIRRORED_TAGS, dev_config, git, go_function, mirrored_tag, run
from tests.served_objects import as_served
from tests.synced_objects_sim import sync_claim, synced_objects_admission_for
from tests.test_synced_objects_admission import (  # noqa: F401 (legal, nlp: fixtures)
    Synced, claim, defaulted, legal, nlp, rules, team_of,
)

API = "kubernetes/api"


def test_skip_translate_is_refused(nlp):
    attack = sync_claim(claim(annotations={"vcluster.loft.sh/skip-translate": "true"}, volumeName="pvc-other-team",
                              storageClassName="microk8s-hostpath"), nlp.team)
    assert attack["spec"]["volumeName"] == "pvc-other-team"
    assert rules(nlp.create(attack)) == {"claim-skip-translate", "claim-volume"}


@pytest.mark.parametrize("spec", [
    {"volumeName": "pvc-0d5e-of-team-vision"},
    {"selector": {"matchLabels": {"team": "vision"}}},
], ids=["volume-name", "selector"])
def test_a_claim_may_not_pick_a_host_volume(nlp, legal, spec):
    for tenant in (nlp, legal):
        assert rules(tenant.create(defaulted(tenant, sync_claim(claim(**spec), tenant.team)))) == {"claim-volume"}


def test_a_pending_claim_may_not_gain_a_volume_name_later(nlp):
    """The API server lets volumeName be set once on an unbound claim. vCluster's Sync copies only the requested size
    of a tenant's edit (tests/test_vcluster_objects_real.py): this refuses a host copy written otherwise."""
    pending = defaulted(nlp, sync_claim(claim(), nlp.team))
    named = copy.deepcopy(pending)
    named["spec"]["volumeName"] = "pvc-0d5e-of-team-vision"
    assert rules(nlp.update(pending, named)) == {"claim-volume"}


@pytest.mark.parametrize("field, source", [
    ("dataSource", {"kind": "VolumeSnapshot", "apiGroup": "snapshot.storage.k8s.io", "name": "nightly"}),
    ("dataSourceRef", {"kind": "PersistentVolumeClaim", "name": "weights", "namespace": "team-vision"}),
    ("dataSource", {"kind": "PersistentVolumeClaim", "name": "data-team-nlp-0"}),
], ids=["snapshot", "other-namespace", "control-plane-volume"])
def test_a_claim_may_only_clone_a_claim_of_its_own_vcluster(nlp, field, source):
    annotations = {"vcluster.loft.sh/skip-translate": "true"} if source["name"] == "data-team-nlp-0" else None
    host = defaulted(nlp, sync_claim(claim(annotations=annotations, **{field: source}), nlp.team))
    assert "claim-data-source" in rules(nlp.create(host))


@pytest.mark.parametrize("field", ["dataSource", "dataSourceRef"])
def test_a_clone_reaches_the_policy_with_a_null_api_group_and_is_admitted(nlp, legal, field):
    """A tenant's clone of its own claim names no apiGroup; the host API server hands the policy ``apiGroup: null``
    (test_an_unset_pointer_is_null_to_a_policy)."""
    for tenant in (nlp, legal):
        clone = defaulted(tenant, sync_claim(claim("copy", **{field: {"kind": "PersistentVolumeClaim", "name": "data"}}),
                                             tenant.team))
        assert clone["spec"][field]["apiGroup"] is None
        assert tenant.create(clone) == []
        hostile_sources = [{"kind": "VolumeSnapshot", "name": "nightly"}]
        if field == "dataSourceRef":  # dataSource's type has no namespace: the API server drops one
            hostile_sources.append({"kind": "PersistentVolumeClaim", "name": "weights", "namespace": "team-vision"})
        for hostile in hostile_sources:
            attack = defaulted(tenant, sync_claim(claim("copy", **{field: hostile}), tenant.team))
            assert attack["spec"][field]["apiGroup"] is None
            assert rules(tenant.create(attack)) == {"claim-data-source"}


@pytest.mark.parametrize("tag", MIRRORED_TAGS["kubernetes/apimachinery"])
def test_an_unset_pointer_is_null_to_a_policy(tag):
    """A policy reads the object the API server converts with runtime.DefaultUnstructuredConverter, which leaves out
    only omitempty (and omitzero) fields and writes a nil pointer as nil: a claim's data source references hold
    apiGroup, a gRPC probe its service, in a pointer without omitempty (the policies take null there:
    components/synced_objects_admission.py, components/admission_pod_size.py NULL_WHEN_UNSET)."""
    converter = git("kubernetes/apimachinery", "show", f"{mirrored_tag('kubernetes/apimachinery', tag)}:"
                    "pkg/runtime/converter.go")
    skipped = re.findall(r"if fieldInfo\.(\w+)\b[^{]*\{\n\s*// \w+ fields should be ignored",
                         go_function(converter, "structToUnstructured"))
    assert set(skipped) <= {"omitempty", "omitzero"} and "omitempty" in skipped, tag
    # A nil pointer stores nothing into the new nil value, which the field's key then gets.
    assert re.search(r"if sv\.IsNil\(\) \{\n\s*// We're done - we don't need to store anything\.\n\s*return nil",
                     go_function(converter, "pointerToUnstructured")), tag
    assert re.search(r"subv := reflect\.New\(dt\.Elem\(\)\)\.Elem\(\)\n\s*if err := toUnstructured\(fv, subv\); "
                     r"err != nil \{\n\s*return err\n\s*\}\n\s*dv\.SetMapIndex\(fieldInfo\.nameValue, subv\)",
                     go_function(converter, "structToUnstructured")), tag
    api_tag = mirrored_tag("kubernetes/api", MIRRORED_TAGS["kubernetes/api"][-1])
    types = git("kubernetes/api", "show", f"{api_tag}:core/v1/types.go")
    # A gRPC probe's service; a claim's references' apiGroup is held at every tag by
    # test_a_data_source_written_without_an_api_group_reaches_admission_with_a_null_one.
    body = types[types.index("type GRPCAction struct {"):]
    assert re.search("Service \\*string `json:\"service\" ", body[:body.index("\n}")])
    apiserver_tag = mirrored_tag("kubernetes/apiserver", MIRRORED_TAGS["kubernetes/apiserver"][-1])
    condition = git("kubernetes/apiserver", "show", f"{apiserver_tag}:pkg/admission/plugin/cel/condition.go")
    assert "runtime.DefaultUnstructuredConverter.ToUnstructured(obj)" in go_function(
        condition, "convertObjectToUnstructured")
    assert "convertObjectToUnstructured(r)" in go_function(condition, "objectToResolveVal")


def with_scratch_template(config: dict) -> dict:
    """team-nlp's control plane with a claim template of the site's own beside data."""
    templates = [{"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                        "resources": {"requests": {"storage": "5Gi"}}}}
                 for name in ("data", "scratch")]
    config["gpu-tenancy:teams"][0]["vcluster"] = {"extraValues": {"controlPlane": {"statefulSet": {
        "persistence": {"volumeClaimTemplates": templates}}}}}
    return config


def test_a_claim_may_clone_no_volume_of_its_control_plane():
    """A site's own claim template (persistence.volumeClaimTemplates) gives the control plane a claim
    scratch-<name>-0 beside data-<name>-0: neither may be cloned (the rule named data-<name>- only)."""
    config = with_scratch_template(dev_config())
    tenant = Synced(synced_objects_admission_for(run(config, stack="dev"), "team-nlp"), team_of(config, "team-nlp"))
    for name in ("data-team-nlp-0", "scratch-team-nlp-0"):
        source = {"kind": "PersistentVolumeClaim", "name": name}
        host = defaulted(tenant, sync_claim(claim(annotations={"vcluster.loft.sh/skip-translate": "true"},
                                                  dataSource=source), tenant.team))
        assert "claim-data-source" in rules(tenant.create(host)), name
    honest = defaulted(tenant, sync_claim(claim(dataSource={"kind": "PersistentVolumeClaim", "name": "scratch"}),
                                          tenant.team))
    assert rules(tenant.create(honest)) == set()


@pytest.mark.parametrize("spec, annotations", [
    ({"storageClassName": ""}, None),
    ({"storageClassName": "premium-io2"}, None),
    ({}, {"volume.beta.kubernetes.io/storage-class": "premium-io2"}),
], ids=["no-class-binds-any-volume", "another-class", "deprecated-annotation"])
def test_claims_use_the_platforms_storage_class(nlp, legal, spec, annotations):
    for tenant in (nlp, legal):
        host = defaulted(tenant, sync_claim(claim(annotations=annotations, **spec), tenant.team))
        assert rules(tenant.create(host)) == {"claim-storage-class"}


def test_a_claim_may_not_name_a_volume_attributes_class(nlp, legal):
    for tenant in (nlp, legal):
        attack = defaulted(tenant, sync_claim(claim(volumeAttributesClassName="io2-64k-iops"), tenant.team))
        assert attack["spec"]["volumeAttributesClassName"] == "io2-64k-iops"
        assert rules(tenant.create(attack)) == {"claim-volume-attributes-class"}
        honest = defaulted(tenant, sync_claim(claim(), tenant.team))
        assert tenant.create(honest) == []
        # Set or changed on a live claim (Kubernetes modifies the bound volume to the new class).
        for old_class in (None, "gp3-baseline"):
            before = copy.deepcopy(honest)
            if old_class:
                before["spec"]["volumeAttributesClassName"] = old_class
            after = copy.deepcopy(before)
            after["spec"]["volumeAttributesClassName"] = "io2-64k-iops"
            assert rules(tenant.update(before, after)) == {"claim-volume-attributes-class"}
            # The syncer's own updates (a larger size) leave the class as it was.
            grown = copy.deepcopy(before)
            grown["spec"]["resources"]["requests"]["storage"] = "2Gi"
            assert tenant.update(before, grown) == []


def _struct(source: str, name: str) -> str:
    return re.search(rf"^type {name} struct {{\n(.*?)^}}", source, re.M | re.S).group(1)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_a_data_source_written_without_an_api_group_reaches_admission_with_a_null_one(tag):
    """``as_served``: a claim's data sources are pointers to references whose ``apiGroup`` is a pointer without
    omitempty, so the API server's typed object encodes an absent group as null (found by running the real plugin,
    tests/test_admission_real_plugin.py: the honest clone was refused until the policy took null as the core group)."""
    core = git(API, "show", f"{tag}:core/v1/types.go")
    claim_spec = _struct(core, "PersistentVolumeClaimSpec")
    assert re.search(r"^\s*DataSource \*TypedLocalObjectReference `json:\"dataSource,omitempty\"", claim_spec, re.M)
    assert re.search(r"^\s*DataSourceRef \*TypedObjectReference `json:\"dataSourceRef,omitempty\"", claim_spec, re.M)
    for reference in ("TypedLocalObjectReference", "TypedObjectReference"):
        assert re.search(r"^\s*APIGroup \*string `json:\"apiGroup\" ", _struct(core, reference), re.M), (tag, reference)
    served = as_served("PersistentVolumeClaim", {
        "spec": {"dataSource": {"kind": "PersistentVolumeClaim", "name": "scratch"},
                 "dataSourceRef": {"kind": "PersistentVolumeClaim", "name": "scratch", "apiGroup": ""}}})
    assert served["spec"]["dataSource"]["apiGroup"] is None and served["spec"]["dataSourceRef"]["apiGroup"] == ""
