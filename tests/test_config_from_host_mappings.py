"""What a site may copy from a team's host namespace into its vCluster (vcluster.extraValues.sync.fromHost
configMaps and secrets mappings; config/virtual_cluster.py).

vCluster's syncer copies the host objects a mapping names into the virtual cluster, where the tenant (its
cluster-admin) reads them. The vCluster's own host namespace also holds what vCluster, Helm and the platform keep
there: the vCluster's kubeconfig and certificates, Helm's release records, the snapshot requests and the options
Secret that holds the site's backup store key, which opens every team's snapshots. A mapping may name only what the
site put there, object by object.
"""

from __future__ import annotations

import copy

import pytest

from config import load_platform
from config.vocabulary import project_config
from tests.config_spec import assert_rejected, dev_config, put
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, mirrored_tag, run, stack_config
from tests.test_tenant_backup import MINIO, site

BACKUP_SECRETS = ("backupAccessKeyId", "backupSecretAccessKey")
TRANSLATOR = "pkg/syncer/translator/from_config_translator.go"


def mapping(kind: str, source: str, target: str = "default/copied") -> dict:
    return {"sync": {"fromHost": {kind: {"enabled": True, "mappings": {"byName": {source: target}}}}}}


def with_backup(config: dict) -> dict:
    config["backup"] = MINIO
    return config


@pytest.mark.parametrize("kind", ["secrets", "configMaps"])
def test_the_whole_own_namespace_is_refused(kind):
    """The key "" maps every object of the vCluster's host namespace (matchesHostObject's last branch)."""
    config = with_backup(put(dev_config(), "teams[0].vcluster.extraValues", mapping(kind, "", "default")))
    found = assert_rejected(config, f"teams[0].vcluster.extraValues.sync.fromHost.{kind}.mappings.byName", "",
                            fix='"/name"', secrets=BACKUP_SECRETS)
    assert "backup store key" in found.problem


def test_the_stacks_whole_namespace_mapping_is_refused_once_at_the_stacks_key():
    config = with_backup(put(dev_config(), "vcluster.extraValues", mapping("secrets", "", "default")))
    assert_rejected(config, "vcluster.extraValues.sync.fromHost.secrets.mappings.byName", "", fix='"/name"',
                    secrets=BACKUP_SECRETS)


def test_a_star_in_the_own_namespace_is_refused_as_copying_nothing():
    config = put(dev_config(), "teams[0].vcluster.extraValues", mapping("secrets", "/*", "default/*"))
    found = assert_rejected(config, "teams[0].vcluster.extraValues.sync.fromHost.secrets.mappings.byName", "/*",
                            fix='"/name"')
    assert "copies nothing" in found.problem


def _written_by_the_platform(stack: str) -> dict[str, set[str]]:
    """The Secrets and ConfigMaps a program run with backups on writes in each team's namespace, by vCluster name."""
    program = run(site(stack, MINIO), stack)
    releases = {r.inputs["namespace"]: r.inputs["name"] for r in program.of_type("kubernetes:helm.sh/v3:Release")}
    written: dict[str, set[str]] = {}
    for kind in ("kubernetes:core/v1:Secret", "kubernetes:core/v1:ConfigMap"):
        for resource in program.of_type(kind):
            metadata = resource.inputs.get("metadata") or {}
            if metadata.get("namespace") in releases:
                written.setdefault(releases[metadata["namespace"]], set()).add(metadata["name"])
    return written


@pytest.mark.parametrize("stack", ["dev", "eks"])
def test_what_vcluster_helm_and_the_platform_write_in_the_namespace_is_refused_by_name(stack):
    written = _written_by_the_platform(stack)
    config = with_backup(project_config(stack_config(stack)))
    for index, team in enumerate(load_platform(config, secrets_set=set(BACKUP_SECRETS)).teams):
        vcluster = team.vcluster_name
        names = {*written.get(vcluster, ()), f"vc-{vcluster}", f"vc-config-{vcluster}", f"{vcluster}-certs",
                 f"sh.helm.release.v1.{vcluster}.v3", f"{vcluster}-snapshot-request-x7k2p"}
        assert any(name.endswith("-backup-options") for name in names), names
        for name in sorted(names):
            attacked = put(copy.deepcopy(config), f"teams[{index}].vcluster.extraValues",
                           mapping("secrets", f"/{name}"))
            found = assert_rejected(attacked, f"teams[{index}].vcluster.extraValues.sync.fromHost.secrets.mappings"
                                    ".byName", f"/{name}", fix='"/name"', secrets=BACKUP_SECRETS)
            assert "backup store key" in found.problem


def test_a_stack_mapping_of_a_teams_own_objects_is_refused_for_that_team():
    config = with_backup(put(dev_config(), "vcluster.extraValues", mapping("secrets", "/vc-team-vision")))
    assert_rejected(config, "teams[2].vcluster.extraValues.sync.fromHost.secrets.mappings.byName", "/vc-team-vision",
                    secrets=BACKUP_SECRETS)


def test_an_object_the_site_put_in_the_namespace_may_be_mapped_by_name():
    config = with_backup(put(dev_config(), "vcluster.extraValues", mapping("secrets", "/registry-credentials")))
    for team in load_platform(config, secrets_set=set(BACKUP_SECRETS)).teams:
        assert team.vcluster.extra_values["sync"]["fromHost"]["secrets"]["mappings"]["byName"] == {
            "/registry-credentials": "default/copied"}


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_reads_the_own_namespace_keys_as_the_config_assumes(tag):
    """At every accepted release: "" maps every object of the vCluster's namespace, "/name" one object of it, and
    "<namespace>/*" needs a namespace, so "/*" matches nothing."""
    tag = mirrored_tag("loft-sh/vcluster", tag)
    source = git("loft-sh/vcluster", "show", f"{tag}:{TRANSLATOR}")
    matcher = source[source.index("func matchesHostObject("):]
    matcher = matcher[:matcher.index("\n}\n")]
    assert 'hostNamespace + "/*"' in matcher and 'resourceMappings["/"+hostName]' in matcher
    assert "resourceMappings[constants.VClusterNamespaceInHostMappingSpecialCharacter]" in matcher
    constants = git("loft-sh/vcluster", "grep", "-h", "VClusterNamespaceInHostMappingSpecialCharacter *=", tag, "--",
                    "pkg/constants")
    assert constants.split("=", 1)[1].strip() == '""'
