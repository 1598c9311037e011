"""config/virtual_cluster.py and the services/storage keys: what a tenant's vCluster may sync and run inside."""

from __future__ import annotations

import pytest

from config import load_platform, versions
from config.virtual_cluster import MUTATING_ADMISSION_POLICY_GA, minor_version, virtual_kubernetes_version
from tests.config_spec import assert_rejected, default_pods_dev_config, dev_config, issue, put, rejected
from tests.mirror_charts import chart_values


def test_the_defaults_open_nothing_and_use_the_hosts_storage_class():
    for team in load_platform(dev_config()).teams:
        assert (team.vcluster.services.node_ports, team.vcluster.services.load_balancers) == (0, 0)
        assert team.vcluster.storage_classes == () and team.vcluster.storage_class == "microk8s-hostpath"
        assert virtual_kubernetes_version(team.vcluster) == "v1.36.0"


def test_a_team_may_be_given_node_ports_load_balancers_and_storage_classes():
    config = put(dev_config(), "teams[1].vcluster", {"services": {"nodePorts": 2, "loadBalancers": 1},
                                                     "storageClasses": ["fast", "bulk"]})
    put(config, "vcluster.services", {"nodePorts": 1})
    nlp, vision, _ = load_platform(config).teams
    assert (nlp.vcluster.services.node_ports, nlp.vcluster.services.load_balancers) == (1, 0)
    assert (vision.vcluster.services.node_ports, vision.vcluster.services.load_balancers) == (2, 1)
    assert vision.vcluster.storage_classes == ("fast", "bulk")


@pytest.mark.parametrize("path, value", [("vcluster.services.nodePorts", -1),
                                         ("vcluster.services.loadBalancers", "yes"),
                                         ("vcluster.storageClasses", "gp3")])
def test_bad_service_and_storage_values_are_refused(path, value):
    assert_rejected(put(dev_config(), path, value), path, value)


@pytest.mark.parametrize("sync, kind", [
    ({"ingresses": {"enabled": True}}, "ingresses"),
    ({"networkPolicies": {"enabled": True}}, "networkPolicies"),
    ({"serviceAccounts": {"enabled": True}}, "serviceAccounts"),
    ({"customResources": {"widgets.example.com": {"enabled": True}}}, "customResources.widgets.example.com"),
])
def test_a_sync_to_the_host_no_policy_covers_is_refused(sync, kind):
    config = put(dev_config(), "teams[2].vcluster.extraValues", {"sync": {"toHost": sync}})
    assert_rejected(config, f"teams[2].vcluster.extraValues.sync.toHost.{kind}.enabled", True,
                    fix="remove it")


PV_WRITE = [{"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["create", "patch"]}]


@pytest.mark.parametrize("path, value", [
    ("rbac.clusterRole.extraRules", PV_WRITE),
    ("rbac.role.extraRules", [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]),
    ("rbac.role.overwriteRules", PV_WRITE),
    ("rbac.clusterRole.overwriteRules", PV_WRITE),
    ("rbac.enableVolumeSnapshotRules", {"enabled": True}),
])
def test_values_that_change_the_syncers_host_permissions_are_refused(path, value):
    extra: dict = {}
    node = extra
    for key in path.split(".")[:-1]:
        node = node.setdefault(key, {})
    node[path.split(".")[-1]] = value
    config = put(dev_config(), "teams[1].vcluster.extraValues", extra)
    found = assert_rejected(config, f"teams[1].vcluster.extraValues.{path}", value, fix="remove it")
    assert "host permissions of team team-vision's syncer" in found.problem


def test_empty_rule_lists_change_nothing_and_pass():
    config = put(dev_config(), "vcluster.extraValues", {"rbac": {"role": {"extraRules": []},
                                                                 "clusterRole": {"overwriteRules": []}}})
    assert load_platform(config).teams


def test_covered_and_disabled_syncs_pass():
    config = put(dev_config(), "vcluster.extraValues", {"sync": {"toHost": {
        "configMaps": {"all": True}, "secrets": {"all": True}, "ingresses": {"enabled": False},
        "pods": {"enforceTolerations": []}}}})
    assert load_platform(config).teams


@pytest.mark.parametrize("version, k8s", [
    ("0.36.1", "v1.35.4"), ("0.36.1", "1.33"), (versions.VCLUSTER_MINIMUM_VERSION, "v1.34.0"),
])
def test_a_virtual_cluster_overridden_to_kubernetes_without_ga_mutating_admission_policy_is_refused(version, k8s):
    config = put(dev_config(), "vcluster.version", version)
    put(config, "vcluster.extraValues.controlPlane.distro.k8s.version", k8s)
    error = rejected(config)
    found = [issue for issue in error.issues if issue.key.endswith("vcluster.version")]
    assert [(issue.key, issue.value) for issue in found] == [("vcluster.version", version)]  # the stack's, once
    assert "1.36" in str(found[0]) and versions.VCLUSTER_VERSION in found[0].fix


# vCluster releases below the floor with the Kubernetes their chart runs by default (0.35.0-next.1, a
# pre-release of the floor, still ran 1.35).
@pytest.mark.parametrize("version", ["0.27.0", "0.31.0", "0.34.7", "0.35.0-next.1"])
def test_a_chart_below_the_floor_is_refused_whatever_kubernetes_the_values_name(version):
    config = put(dev_config(), "vcluster.version", version)
    put(config, "vcluster.extraValues.controlPlane.distro.k8s.image.tag", "v1.36.0")
    found = assert_rejected(config, "vcluster.version", version, fix=f"pin {versions.VCLUSTER_MINIMUM_VERSION} or later")
    assert "MutatingAdmissionPolicy" in found.problem


def test_the_floor_is_one_statement_a_chart_the_program_knows_running_kubernetes_1_36():
    floor = versions.VCLUSTER_VIRTUAL_KUBERNETES[versions.VCLUSTER_MINIMUM_VERSION]
    assert minor_version(floor) >= MUTATING_ADMISSION_POLICY_GA
    assert sorted(versions.VCLUSTER_VIRTUAL_KUBERNETES, key=versions.release_order) == list(versions.VCLUSTER_RELEASES)


@pytest.mark.parametrize("version, k8s, expected", [
    (versions.VCLUSTER_MINIMUM_VERSION, None, "v1.36.0"),
    ("0.35.2", None, "v1.36.0"),
    ("0.35.3", "v1.36.2", "v1.36.2"),
    ("0.36.0", None, "v1.36.0"),
    ("0.36.1", "v1.37.1", "v1.37.1"),
])
def test_a_virtual_cluster_on_kubernetes_1_36_or_later_passes(version, k8s, expected):
    config = put(dev_config(), "vcluster.version", version)
    if k8s:
        put(config, "vcluster.extraValues.controlPlane.distro.k8s.image.tag", k8s)
    assert {virtual_kubernetes_version(team.vcluster) for team in load_platform(config).teams} == {expected}


# A request above its limit: the API server refuses the control plane's StatefulSet (pod template validation) or
# the tenant's LimitRange, and the team's vCluster release fails on `pulumi up`.
@pytest.mark.parametrize("path, value, key, words", [
    ("vcluster.controlPlaneResources.requests.memory", "4Gi", "vcluster.controlPlaneResources.requests.memory",
     "controlPlaneResources.limits.memory = 2Gi: the API server refuses the control plane"),
    ("teams[1].vcluster.controlPlaneResources.limits", {"cpu": "100m"},
     "teams[1].vcluster.controlPlaneResources.requests.cpu", "controlPlaneResources.limits.cpu = 100m"),
    ("vcluster.limitRange.defaultRequestCpu", "1500m", "vcluster.limitRange.defaultRequestCpu",
     "limitRange.defaultCpu = 1: the API server refuses the LimitRange"),
    ("teams[2].vcluster.limitRange", {"defaultMemory": "100Mi"}, "teams[2].vcluster.limitRange.defaultRequestMemory",
     "limitRange.defaultMemory = 100Mi"),
    ("vcluster.limitRange.defaultRequestEphemeralStorage", "16Gi", "vcluster.limitRange.defaultRequestEphemeralStorage",
     "limitRange.defaultEphemeralStorage = 8Gi: the API server refuses the LimitRange"),
])
def test_a_request_above_its_limit_is_refused_before_the_api_server_refuses_it(path, value, key, words):
    error = rejected(put(dev_config(), path, value))
    [found] = [issue for issue in error.issues if issue.key == key]
    assert words in found.problem and "at most" in found.fix


@pytest.mark.parametrize("path, value, key, words, fix", [
    ("vcluster.controlPlaneResources.requests.ephemeral-storage", "20Gi",
     "vcluster.controlPlaneResources.requests.ephemeral-storage",
     "above the vCluster chart's own limit controlPlaneResources.limits.ephemeral-storage = 10Gi", "at most 10Gi"),
    ("teams[1].vcluster.controlPlaneResources.limits.ephemeral-storage", "500Mi",
     "teams[1].vcluster.controlPlaneResources.limits.ephemeral-storage",
     "below the vCluster chart's own request controlPlaneResources.requests.ephemeral-storage = 1Gi",
     "raise controlPlaneResources.limits.ephemeral-storage to at least 1Gi"),
])
def test_what_the_chart_requests_and_limits_itself_counts(path, value, key, words, fix):
    found = assert_rejected(put(dev_config(), path, value), key, value, fix=fix)
    assert words in found.problem


def test_a_site_that_sets_both_sides_may_go_past_the_charts_own():
    config = put(dev_config(), "vcluster.controlPlaneResources", {"requests": {"ephemeral-storage": "20Gi"},
                                                                  "limits": {"ephemeral-storage": "30Gi"}})
    # The namespace's LimitRange caps the control plane's container like any other.
    put(config, "vcluster.limitRange.maxEphemeralStorage", "30Gi")
    assert load_platform(config).teams[0].vcluster.control_plane_resources.limits["ephemeral-storage"] == "30Gi"


# The ephemeral-storage maximum and total: the API server would refuse the LimitRange or the control plane's pod, or
# the quota would refuse pods the team is promised, so each is an error at its key before anything is registered.
@pytest.mark.parametrize("path, value, key, words, fix", [
    ("vcluster.limitRange.maxEphemeralStorage", "4Gi", "vcluster.limitRange.maxEphemeralStorage",
     "below limitRange.defaultEphemeralStorage = 8Gi: the API server refuses the LimitRange",
     "raise limitRange.maxEphemeralStorage to at least 8Gi"),
    ("teams[1].vcluster.limitRange.maxEphemeralStorage", "9Gi", "teams[1].vcluster.limitRange.maxEphemeralStorage",
     "below controlPlaneResources.limits.ephemeral-storage = 10Gi: the API server refuses the control plane's pod",
     "raise limitRange.maxEphemeralStorage to at least 10Gi"),
    ("teams[0].vcluster.resourceQuota.ephemeralStorage", "100Gi", "teams[0].vcluster.resourceQuota.ephemeralStorage",
     "100 pods (resourceQuota.pods) at the default limit limitRange.defaultEphemeralStorage = 8Gi need 800Gi",
     "raise resourceQuota.ephemeralStorage to at least 800Gi"),
    ("vcluster.limitRange.maxEphemeralStorage", "lots", "vcluster.limitRange.maxEphemeralStorage", "", ""),
])
def test_an_ephemeral_storage_bound_the_cluster_would_refuse_is_a_config_error(path, value, key, words, fix):
    found = assert_rejected(put(default_pods_dev_config(), path, value), key, value, fix=fix)
    assert words in found.problem


def test_a_team_total_that_holds_its_pods_at_the_default_passes():
    config = put(dev_config(), "teams[0].vcluster.resourceQuota", {"pods": 10, "ephemeralStorage": "80Gi"})
    assert load_platform(config).teams[0].vcluster.resource_quota.ephemeral_storage == "80Gi"


# The cpu and memory totals the same way: the deployability check's tenant-quota rule refuses a namespace whose
# quota cannot hold the team's pods at the LimitRange's default request (a team's 4 cores under the default 100 pods
# at 100m passed the loader and failed that check: found opening a trial site).
@pytest.mark.parametrize("path, value, key, total, words, fix", [
    ("teams[0].vcluster.resourceQuota.cpu", "4", "teams[0].vcluster.resourceQuota.cpu", "4",
     "100 pods (resourceQuota.pods) at the default request limitRange.defaultRequestCpu = 100m need 10",
     "raise resourceQuota.cpu to at least 10, or lower resourceQuota.pods to at most 40"),
    ("vcluster.resourceQuota.memory", "8Gi", "vcluster.resourceQuota.memory", "8Gi",
     "100 pods (resourceQuota.pods) at the default request limitRange.defaultRequestMemory = 128Mi need 12.5Gi",
     "raise resourceQuota.memory to at least 12.5Gi, or lower resourceQuota.pods to at most 64"),
    ("teams[2].vcluster.limitRange.defaultRequestCpu", "200m", "teams[2].vcluster.resourceQuota.cpu", "16",
     "defaultRequestCpu = 200m need 20", "raise resourceQuota.cpu to at least 20"),
])
def test_a_cpu_or_memory_total_that_cannot_hold_the_teams_pods_at_the_default_request_is_a_config_error(
        path, value, key, total, words, fix):
    found = assert_rejected(put(default_pods_dev_config(), path, value), key, total, fix=fix)
    assert words in found.problem


def test_a_team_whose_cpu_and_memory_hold_its_pods_at_the_default_request_passes():
    config = put(dev_config(), "teams[0].vcluster.resourceQuota", {"cpu": "4", "memory": "8Gi", "pods": 40})
    assert load_platform(config).teams[0].vcluster.resource_quota.cpu == "4"


@pytest.mark.parametrize("version", versions.VCLUSTER_RELEASES)
def test_the_charts_own_control_plane_resources_are_the_ones_the_config_counts(version):
    resources = chart_values(versions.VCLUSTER_CHART, version)["controlPlane"]["statefulSet"]["resources"]
    assert resources == {"requests": versions.VCLUSTER_CONTROL_PLANE_REQUESTS,
                         "limits": versions.VCLUSTER_CONTROL_PLANE_LIMITS}


def test_the_stacks_request_above_its_limit_is_named_once_where_it_is_written_and_a_teams_own_where_it_is():
    config = put(dev_config(), "vcluster.controlPlaneResources", {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}})
    put(config, "teams[1].vcluster.controlPlaneResources.limits.cpu", "3")
    put(config, "teams[2].vcluster.controlPlaneResources.limits.cpu", "4")
    error = rejected(config)
    assert [(issue.key, issue.value) for issue in error.issues] == [
        ("vcluster.controlPlaneResources.requests.cpu", "4"),
        ("teams[1].vcluster.controlPlaneResources.requests.cpu", "4")]
    assert "the stack's request" in error.issues[0].problem and "team team-vision's" in error.issues[1].problem


def test_requests_at_their_limits_pass():
    config = put(dev_config(), "vcluster.controlPlaneResources", {"requests": {"memory": "2Gi", "cpu": 1},
                                                                  "limits": {"cpu": "1000m"}})
    put(config, "vcluster.limitRange", {"defaultRequestCpu": "1", "defaultRequestMemory": "1024Mi"})
    put(config, "vcluster.resourceQuota.pods", 16)  # as many as 16 cores hold at the default request of 1
    team = load_platform(config).teams[0]
    assert team.vcluster.control_plane_resources.requests == {"cpu": "1", "memory": "2Gi"}


@pytest.mark.parametrize("path, value, words", [
    ("vcluster.controlPlaneResources.requests.hugepages-2Mi", "1Gi", "is not a resource it can set"),
    ("vcluster.controlPlaneResources.limits.memory", "2GB", "is not a Kubernetes quantity"),
    ("teams[0].vcluster.controlPlaneResources.requests.cpu", "lots", "is not a Kubernetes quantity"),
])
def test_control_plane_resources_are_quantities_of_what_a_container_can_request(path, value, words):
    found = assert_rejected(put(dev_config(), path, value), path, value)
    assert words in found.problem


@pytest.mark.parametrize("path, value", [("nodes.syncBackChanges", True), ("priorityClasses.enabled", True)])
def test_a_sync_from_the_host_that_lets_a_tenant_write_on_the_host_is_refused(path, value):
    extra: dict = {"sync": {"fromHost": {}}}
    kind, switch = path.split(".")
    extra["sync"]["fromHost"][kind] = {switch: value}
    config = put(dev_config(), "teams[0].vcluster.extraValues", extra)
    found = assert_rejected(config, f"teams[0].vcluster.extraValues.sync.fromHost.{path}", value, fix="remove it")
    assert "write on the host" in found.problem


@pytest.mark.parametrize("path, value", [("sync.fromHost.nodes.clearImageStatus", False),
                                         ("networking.advanced.proxyKubelets.byHostname", True),
                                         ("networking.advanced.proxyKubelets.byIP", True)])
def test_values_that_let_a_tenant_read_other_teams_are_refused(path, value):
    """Node images (other teams' private image names) and the kubelet proxies (tests/test_host_reads_contract.py)."""
    extra: dict = {}
    *parents, last = path.split(".")
    node = extra
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    config = put(dev_config(), "teams[0].vcluster.extraValues", extra)
    found = assert_rejected(config, f"teams[0].vcluster.extraValues.{path}", value, fix="remove it")
    assert "read what is not its own" in found.problem


@pytest.mark.parametrize("kind", ["secrets", "configMaps"])
def test_a_sync_from_the_host_of_another_namespaces_objects_is_refused(kind):
    """A mapping from another host namespace copies another team's (or the platform's) Secrets into the tenant's."""
    extra = {"sync": {"fromHost": {kind: {"enabled": True, "mappings": {"byName": {
        "team-vision/*": "stolen/*", "/registry-credentials": "default/registry-credentials"}}}}}}
    config = put(dev_config(), "teams[0].vcluster.extraValues", extra)
    found = assert_rejected(config, f"teams[0].vcluster.extraValues.sync.fromHost.{kind}.mappings.byName",
                            "team-vision/*", fix="own host namespace")
    assert "host namespace team-vision" in found.problem


def test_a_sync_from_the_host_of_the_vclusters_own_namespace_passes():
    config = put(dev_config(), "vcluster.extraValues", {"sync": {"fromHost": {"secrets": {
        "enabled": True, "mappings": {"byName": {"/registry-credentials": "default/registry-credentials"}}}}}})
    assert load_platform(config).teams


def test_the_values_the_program_sets_for_reads_pass_when_a_site_repeats_them():
    config = put(dev_config(), "vcluster.extraValues", {
        "sync": {"fromHost": {"nodes": {"clearImageStatus": True}}},
        "networking": {"advanced": {"proxyKubelets": {"byHostname": False, "byIP": False}}}})
    assert load_platform(config).teams


def test_syncs_from_the_host_that_only_copy_into_the_virtual_cluster_pass():
    config = put(dev_config(), "vcluster.extraValues", {"sync": {"fromHost": {
        "nodes": {"syncBackChanges": False, "clearImageStatus": True}, "priorityClasses": {"enabled": False},
        "storageClasses": {"enabled": True}, "ingressClasses": {"enabled": True}}}})
    assert load_platform(config).teams


def test_always_pull_images_is_off_by_default_and_set_once_for_every_team():
    assert not any(team.vcluster.always_pull_images for team in load_platform(dev_config()).teams)
    teams = load_platform(put(dev_config(), "vcluster.alwaysPullImages", True)).teams
    assert len(teams) > 1 and all(team.vcluster.always_pull_images for team in teams)


@pytest.mark.parametrize("stack, team", [(None, True), (True, False), (True, True), (False, True)])
def test_a_team_may_not_set_always_pull_images_itself(stack, team):
    """It protects a team only if every other team pulls too: neither an exemption nor a lone opt-in."""
    config = dev_config() if stack is None else put(dev_config(), "vcluster.alwaysPullImages", stack)
    put(config, "teams[1].vcluster.alwaysPullImages", team)
    error = rejected(config)
    found = issue(error, "teams[1].vcluster.alwaysPullImages", team)
    assert error.keys == ["teams[1].vcluster.alwaysPullImages"]
    assert "every other team" in found.problem and "vcluster.alwaysPullImages" in found.fix


def test_always_pull_images_is_a_boolean():
    assert_rejected(put(dev_config(), "vcluster.alwaysPullImages", "yes"), "vcluster.alwaysPullImages", "yes")


REGISTRIES = ["ghcr.io/acme", "nvcr.io/nvidia", "docker.io/library", "docker.io", "localhost:32000",
              "123456789012.dkr.ecr.eu-west-1.amazonaws.com", "10.0.0.5:5000/mirror/team-a", "[fd00::5]:5000/team",
              "registry.local"]


def test_allowed_registries_is_unset_by_default_and_set_once_for_every_team():
    assert all(team.vcluster.allowed_registries is None for team in load_platform(dev_config()).teams)
    teams = load_platform(put(dev_config(), "vcluster.allowedRegistries", REGISTRIES)).teams
    assert len(teams) > 1 and all(team.vcluster.allowed_registries == tuple(REGISTRIES) for team in teams)


@pytest.mark.parametrize("stack", [None, ["ghcr.io/acme"]])
def test_a_team_may_not_list_registries_itself(stack):
    """The list guards the nodes every team shares: a team's own registry goes in the stack's list."""
    config = dev_config() if stack is None else put(dev_config(), "vcluster.allowedRegistries", stack)
    put(config, "teams[1].vcluster.allowedRegistries", ["registry.team-vision.example"])
    error = rejected(config)
    found = issue(error, "teams[1].vcluster.allowedRegistries", ["registry.team-vision.example"])
    assert error.keys == ["teams[1].vcluster.allowedRegistries"] and "vcluster.allowedRegistries" in found.fix


@pytest.mark.parametrize("entry, problem, fix", [
    ("https://ghcr.io/acme", "scheme", "ghcr.io/acme"),
    ("ghcr.io/acme:v1", "tag", "ghcr.io/acme"),
    ("ghcr.io/acme@sha256:" + "a" * 64, "digest", "ghcr.io/acme"),
    ("", "blank", "ghcr.io/acme"),
    (" ghcr.io", "spaces", ""),
    ("ghcr.io/Acme", "upper-case", "ghcr.io/acme"),
    ("GHCR.IO/acme", "upper-case", "ghcr.io/acme"),
    ("index.docker.io/library", "legacy", "docker.io/library"),
    ("index.docker.io", "legacy", "docker.io"),
    ("acme/models", "Docker Hub repository", "docker.io/acme/models"),
    ("nginx", "Docker Hub repository", "docker.io/nginx"),
    ("ghcr.io/acme/", "empty path component", "ghcr.io/acme"),
    ("ghcr.io//acme", "empty path component", "ghcr.io/acme"),
    ("ghcr.io/a..b", "not a repository name", ""),
    ("-ghcr.io/x", "registry host", ""),
    ("[fd00::zz]:5000", "registry host", ""),
])
def test_a_registry_entry_the_node_would_read_otherwise_is_refused_with_the_fix(entry, problem, fix):
    found = assert_rejected(put(dev_config(), "vcluster.allowedRegistries", ["nvcr.io/nvidia", entry]),
                            "vcluster.allowedRegistries[1]", entry, fix=fix)
    assert problem in found.problem


@pytest.mark.parametrize("value", [[], "ghcr.io/acme", [3], {"ghcr.io": True}])
def test_allowed_registries_is_a_non_empty_list_of_strings(value):
    key = "vcluster.allowedRegistries" + ("[0]" if value == [3] else "")
    assert_rejected(put(dev_config(), "vcluster.allowedRegistries", value), key, 3 if value == [3] else value)


def test_a_site_without_a_registry_list_is_told_what_that_leaves_open():
    """Unset is the default (committed plans stay as they were), so the reviewer is told what it leaves open."""
    (note,) = [note for note in load_platform(dev_config()).notes if "vcluster.allowedRegistries" in note]
    assert "any host and port" in note and "outside every NetworkPolicy" in note
    assert not [note for note in load_platform(put(dev_config(), "vcluster.allowedRegistries", REGISTRIES)).notes
                if "vcluster.allowedRegistries" in note]


@pytest.mark.parametrize("bound, resource", [("default", "nvidia.com/gpu"), ("max", "nvidia.com/gpu"),
                                             ("defaultRequest", "nvidia.com/mig-1g.10gb")])
def test_a_gpu_in_the_limit_range_that_every_container_would_get_is_refused(bound, resource):
    config = put(dev_config(), "teams[0].vcluster.extraValues", {"policies": {"limitRange": {bound: {resource: "1"}}}})
    found = assert_rejected(config, f"teams[0].vcluster.extraValues.policies.limitRange.{bound}.{resource}", "1",
                            fix=f"remove {resource} from policies.limitRange.{bound}")
    assert "every container in team team-nlp's host namespace" in found.problem
