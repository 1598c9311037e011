"""What vCluster's syncer may write on the host, and what its virtual cluster runs, read from vCluster itself.

- The syncer's Role and ClusterRole, rendered from the vCluster chart at every accepted tag (every release
  from the floor to the pin) with the values the program renders for it and for each committed stack: every
  resource it may create, update or patch is checked by a host admission policy (components/admission.py for
  pods, components/synced_objects_admission.py for the rest) or listed below with the reason it carries
  nothing a tenant writes. A vCluster upgrade or a values change that lets the syncer write a new kind fails
  here until a policy covers it.
- How a tenant's Service CREATE reaches the host at every accepted tag: vCluster's API proxy writes it with the
  tenant's spec (tests/synced_objects_sim.py ``create_service``), not through the syncer's translate.
- The Kubernetes version each chart version runs inside (config/versions.py VCLUSTER_VIRTUAL_KUBERNETES),
  and that MutatingAdmissionPolicy is GA and on by default there.
"""

from __future__ import annotations

import dataclasses
import io
import re
import subprocess
import tarfile
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from components import admission, synced_objects_admission
from components.tenant import vcluster_values
from config import versions
from config.merge import deep_merge
from tools.offline.mocks import MOCK_CLUSTER_DNS
from ops.sites import platform_of
from tests.conftest import (
    ACCEPTED_VCLUSTER_TAGS, COMMITTED_STACKS, git, go_function, mirror, mirrored_tag, stack_config,
)
from tools.charts.render import render_release

VCLUSTER = "loft-sh/vcluster"
PINNED_TAG = f"v{versions.VCLUSTER_VERSION}"
WRITE_VERBS = {"create", "update", "patch", "*"}
# Resources the syncer may write that carry nothing a tenant writes into a stored host object.
NOT_TENANT_OBJECTS = {
    ("", "pods/attach"): "a stream into a running container of the tenant's own pod (kubectl attach)",
    ("", "pods/exec"): "a stream into a running container of the tenant's own pod (kubectl exec)",
    ("", "pods/portforward"): "a stream to a port of the tenant's own pod (kubectl port-forward)",
    ("", "events"): "events about the tenant's synced objects; nothing on the host acts on events",
    ("events.k8s.io", "events"): "the same events through the events.k8s.io API",
    ("apps", "statefulsets"): "the control plane's own StatefulSet, patched on certificate rotation",
    ("apps", "deployments"): "the control plane's own workloads, patched on certificate rotation",
    ("apps", "replicasets"): "read for owner lookups; the syncer never copies a tenant's ReplicaSet",
}


def covered(spec: dict) -> set[tuple[str, str]]:
    return {(group, resource) for rule in spec["matchConstraints"]["resourceRules"]
            for group in rule["apiGroups"] for resource in rule["resources"]
            if {"CREATE", "UPDATE"} <= set(rule["operations"])}


class Chart(NamedTuple):
    path: Path
    version: str  # the chart's version, which the program's values depend on


def extract_chart(tag: str, target: Path) -> Path:
    archive = subprocess.run(["git", "--git-dir", str(mirror(VCLUSTER)), "archive", "--prefix=vcluster/",
                              f"{tag}:chart"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target / "vcluster"


@pytest.fixture(scope="module", params=ACCEPTED_VCLUSTER_TAGS)
def chart(request, tmp_path_factory) -> Chart:
    return Chart(extract_chart(request.param, tmp_path_factory.mktemp("vcluster-chart")),
                 request.param.removeprefix("v"))


def syncer_writes(chart: Path, team, values: dict) -> set[tuple[str, str]]:
    rendered = render_release(chart, team.vcluster_name, team.namespace, values, kube_version="1.36.0")
    roles = [doc for text in rendered.values() for doc in yaml.safe_load_all(text)
             if doc and doc["kind"] in ("Role", "ClusterRole")]
    assert any(role["kind"] == "Role" and role["metadata"]["name"] == f"vc-{team.vcluster_name}" for role in roles)
    return {(group, resource) for role in roles for rule in role["rules"] if WRITE_VERBS & set(rule["verbs"])
            for group in rule.get("apiGroups", []) for resource in rule.get("resources", [])}


def unchecked_writes(chart: Path, team, values: dict) -> set[tuple[str, str]]:
    """What the syncer may write that no host policy checks and no exemption below explains."""
    checked = covered(admission.policy_spec(team)) | \
        covered(synced_objects_admission.policy_spec(team, MOCK_CLUSTER_DNS, ()))
    return syncer_writes(chart, team, values) - checked - set(NOT_TENANT_OBJECTS)


def teams(version: str = versions.VCLUSTER_VERSION, stacks=COMMITTED_STACKS):
    """The teams of the stacks (every committed one by default), each on vCluster ``version``."""
    for stack in stacks:
        # As the program validates a site: its secrets are not in the stack file.
        for team in platform_of(stack_config(stack), stack).teams:
            yield dataclasses.replace(team, vcluster=dataclasses.replace(team.vcluster, version=version))


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_every_kind_the_syncer_may_write_is_checked_by_a_host_policy(chart, stack):
    # With each site's own values (its extraValues included), at every accepted chart.
    for team in teams(chart.version, [stack]):
        values = vcluster_values(team, MOCK_CLUSTER_DNS)
        assert unchecked_writes(chart.path, team, values) == set(), team.name
        # Each exemption is still granted: a reason nobody needs any more is removed, not kept.
        writes = syncer_writes(chart.path, team, values)
        assert set(NOT_TENANT_OBJECTS) <= writes, set(NOT_TENANT_OBJECTS) - writes


def test_a_sync_the_policies_do_not_cover_shows_up_as_an_unchecked_write(chart):
    """Rendering with ingress sync on (config/virtual_cluster.py refuses it) gives the syncer a kind no policy checks."""
    team = next(teams(chart.version))
    values = vcluster_values(team, MOCK_CLUSTER_DNS)
    values["sync"]["toHost"]["ingresses"] = {"enabled": True}
    assert unchecked_writes(chart.path, team, values) == {("networking.k8s.io", "ingresses")}


def test_extra_rules_in_the_values_would_give_the_syncer_an_unchecked_write(chart):
    """What the config refuses in vcluster.extraValues (config/virtual_cluster.py SYNCER_RULE_VALUES) reaches the
    syncer's roles: an extra cluster rule is a write no host policy checks."""
    team = next(teams(chart.version))
    values = deep_merge(vcluster_values(team, MOCK_CLUSTER_DNS), {"rbac": {"clusterRole": {"extraRules": [
        {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["create"]}]}}})
    assert unchecked_writes(chart.path, team, values) == {("", "persistentvolumes")}


def test_the_floor_grants_snapshot_writes_unless_the_program_turns_them_off(tmp_path):
    """vCluster 0.35.x's chart grants the syncer VolumeSnapshot and cluster-wide VolumeSnapshotContent writes by
    default (rbac.enableVolumeSnapshotRules: auto); the program's values turn them off."""
    floor = extract_chart(f"v{versions.VCLUSTER_MINIMUM_VERSION}", tmp_path)
    team = next(teams(versions.VCLUSTER_MINIMUM_VERSION))
    values = vcluster_values(team, MOCK_CLUSTER_DNS)
    snapshots = {("snapshot.storage.k8s.io", "volumesnapshots"), ("snapshot.storage.k8s.io", "volumesnapshotcontents")}
    assert not snapshots & syncer_writes(floor, team, values)
    del values["rbac"]
    assert snapshots <= syncer_writes(floor, team, values)
    # The pinned chart has no such setting, and the program gives it none.
    assert "rbac" not in vcluster_values(next(teams()), MOCK_CLUSTER_DNS)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_a_service_create_reaches_the_host_with_the_tenants_spec(tag):
    """The API proxy answers a Service CREATE itself and creates the host Service from a copy of the tenant's
    (HostMetadata copies the whole object), rewriting only the selector in its spec: cluster IPs and node ports
    reach the host as chosen. Only the syncer's translate, which re-creates a missing host Service, clears them."""
    tag = mirrored_tag(VCLUSTER, tag)
    assert "filters.WithServiceCreateRedirect(" in go_function(
        git(VCLUSTER, "show", f"{tag}:pkg/server/server.go"), "NewServer")
    create = go_function(git(VCLUSTER, "show", f"{tag}:pkg/server/filters/service.go"), "createService")
    to_host = create[create.index("translate.HostMetadata(vService"):create.index("HostClient.Create(")]
    assert set(re.findall(r"newService\.Spec\.(\w+)\s*=", to_host)) == {"Selector"}
    assert "services.ServiceBlockDeletion" in to_host
    assert "StripNodePorts" not in create and ".translate(" not in create
    metadata = git(VCLUSTER, "show", f"{tag}:pkg/util/translate/translate.go")
    assert "CopyObjectWithName(vObj" in go_function(metadata, "HostMetadata[T client.Object]")
    assert "DeepCopyObject()" in go_function(metadata, "CopyObjectWithName[T client.Object]")
    translate = go_function(git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/services/translate.go"),
                            "(s *serviceSyncer) translate")
    assert "ClusterIPs = nil" in translate and "StripNodePorts(newService)" in translate


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_virtual_kubernetes_version_of_each_chart_is_the_charts_default(tag):
    values = yaml.safe_load(git(VCLUSTER, "show", f"{tag}:chart/values.yaml"))
    assert values["controlPlane"]["distro"]["k8s"]["image"]["tag"] == \
        versions.VCLUSTER_VIRTUAL_KUBERNETES[tag.removeprefix("v")]
    assert "manifests" in values["experimental"]["deploy"]["vcluster"]


def test_mutating_admission_policy_is_ga_and_on_in_the_pinned_virtual_kubernetes():
    features = git(VCLUSTER, "show", f"{PINNED_TAG}:vendor/k8s.io/apiserver/pkg/features/kube_features.go")
    block = features[features.index("\tMutatingAdmissionPolicy: {"):]
    block = block[:block.index("},\n\n")]
    assert 'version.MustParse("1.36"), Default: true, PreRelease: featuregate.GA' in block
    types = git(VCLUSTER, "show", f"{PINNED_TAG}:vendor/k8s.io/api/admissionregistration/v1/types.go")
    assert "type MutatingAdmissionPolicy struct" in types
    # vCluster starts its API server without feature gates or runtime-config that could turn it off.
    distro = git(VCLUSTER, "show", f"{PINNED_TAG}:pkg/k8s/k8s.go")
    assert "--feature-gates" not in distro and "--runtime-config" not in distro


def namespace_writes(writes: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return {(group, resource) for group, resource in writes if group in ("", "*") and resource in ("namespaces", "*")}


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_the_syncer_cannot_write_a_namespace(chart, stack):
    """The site's pod-size policy reads each team's cap from the team's host namespace
    (components/pod_size_admission.py): no syncer may write a namespace, its own included."""
    for team in teams(chart.version, [stack]):
        assert namespace_writes(syncer_writes(chart.path, team, vcluster_values(team, MOCK_CLUSTER_DNS))) == set()


def test_a_namespace_rule_in_the_values_would_be_seen(chart):
    """The negative control: an extra rule (which the config refuses) letting the syncer patch namespaces is found."""
    team = next(teams(chart.version))
    values = deep_merge(vcluster_values(team, MOCK_CLUSTER_DNS), {"rbac": {"clusterRole": {"extraRules": [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]}]}}})
    assert namespace_writes(syncer_writes(chart.path, team, values)) == {("", "namespaces")}
