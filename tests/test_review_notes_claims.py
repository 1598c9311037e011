"""The plan tells a MicroK8s site which teams' claims, and which teams' control planes, can fill the node's disk
(config/review_notes.py): the hostpath class records a claim's size without enforcing it, the kubelet counts no
persistent volume as a pod's disk use, and a tenant writes objects into its own virtual cluster's store without limit
(docs/security-pressure.md, "Volume claims on MicroK8s")."""

from __future__ import annotations

from config.hosts import MICROK8S_STORAGE_CLASS
from config.review_notes import review_notes
from tests.config_spec import put
from tests.conftest import dev_config, eks_config
from tests.tenant_sim import platform_of


def claims_notes(config: dict) -> list[str]:
    return [note for note in review_notes(platform_of(config)) if MICROK8S_STORAGE_CLASS in note
            and "no size limit" in note]


def test_every_microk8s_team_whose_claims_may_use_the_hostpath_class_is_named():
    [note] = claims_notes(dev_config())
    assert all(team.name in note for team in platform_of(dev_config()).teams)
    assert "vcluster.storageClasses" in note


def test_a_team_without_claims_or_with_a_class_of_its_own_is_not_named():
    config = put(dev_config(), "gpu-tenancy:teams[0].vcluster.resourceQuota.persistentVolumeClaims", 0)
    config = put(config, "gpu-tenancy:teams[1].vcluster.storageClasses", ["openebs-lvm"])
    teams = platform_of(config).teams
    [note] = claims_notes(config)
    assert teams[0].name not in note and teams[1].name not in note and teams[2].name in note


def test_no_note_where_claims_are_disks_of_their_own():
    assert claims_notes(eks_config()) == []
    config = put(dev_config(), "gpu-tenancy:vcluster.storageClasses", ["openebs-lvm"])
    assert claims_notes(config) == []


CONTROL_PLANE_CLASS = "gpu-tenancy:teams[{index}].vcluster.extraValues"


def control_plane_notes(config: dict) -> list[str]:
    return [note for note in review_notes(platform_of(config)) if "control planes keep their store" in note]


def test_every_microk8s_control_plane_on_the_hostpath_class_is_named():
    [note] = control_plane_notes(dev_config())
    assert all(team.name in note for team in platform_of(dev_config()).teams)
    assert "persistence.volumeClaim.storageClass" in note


def test_a_control_plane_on_a_sized_class_or_without_a_volume_is_not_named():
    config = put(dev_config(), CONTROL_PLANE_CLASS.format(index=0), {"controlPlane": {"statefulSet": {
        "persistence": {"volumeClaim": {"storageClass": "openebs-lvm"}}}}})
    config = put(config, CONTROL_PLANE_CLASS.format(index=1), {"controlPlane": {"statefulSet": {
        "persistence": {"volumeClaim": {"enabled": False}}}}})
    teams = platform_of(config).teams
    [note] = control_plane_notes(config)
    assert teams[0].name not in note and teams[1].name not in note and teams[2].name in note


def test_no_control_plane_note_on_eks():
    assert control_plane_notes(eks_config()) == []
