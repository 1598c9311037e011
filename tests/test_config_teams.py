"""Spec of the team and organization settings: names, queue resources and GPU quotas, and each team's
vCluster settings over the stack defaults (the whole-document rules are in test_config.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from config import load_platform
from config.load_teams import VCLUSTER_NAME_LENGTH
from tests.config_spec import assert_rejected, dev_config, issue, put, rejected
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, mirrored_tag
from tools.deployability import names


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["teams[0].name", "organization.name"])
@pytest.mark.parametrize("name", ["a", "team-1", "9lives", "x" * 63])
def test_dns_1123_names_are_accepted(path, name):
    # A team's vCluster name, derived from its name, must start with a letter (below): it is set apart.
    platform = load_platform(put(put(dev_config(), "teams[0].vclusterName", "nlp"), path, name))
    assert name in (platform.organization.name, platform.teams[0].name)


@pytest.mark.parametrize("path", ["teams[0].name", "organization.name"])
@pytest.mark.parametrize("name", ["Team-NLP", "team_nlp", "-team", "team-", "team.nlp", "x" * 64])
def test_names_that_are_not_dns_1123_labels_are_rejected(path, name):
    assert_rejected(put(dev_config(), path, name), path, name, fix="lowercase")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_vcluster_chart_names_its_services_after_the_release(tag):
    # What the rule below stands on: the API server refuses a Service whose name is not a DNS-1035 label.
    for template in ("service.yaml", "headless-service.yaml"):
        text = git("loft-sh/vcluster", "show", f"{mirrored_tag('loft-sh/vcluster', tag)}:chart/templates/{template}")
        service = text[text.index("kind: Service"):]
        name = service[service.index("name:") + len("name:"):].splitlines()[0].strip()
        assert name.startswith("{{ .Release.Name }}"), (template, name)
    assert "Service" in names.DNS_1035_KINDS and not names.DNS_1035_LABEL.fullmatch("0team")


def test_a_vcluster_name_starting_with_a_digit_is_refused_and_a_team_so_named_sets_one():
    # Helm and the namespace take "0team"; the chart's Services would not (found opening a trial site).
    found = assert_rejected(put(dev_config(), "teams[0].name", "0team"), "teams[0].vclusterName", "0team",
                            fix="set teams[0].vclusterName")
    assert "taken from teams[0].name" in found.problem and "start with a letter" in found.problem
    assert_rejected(put(dev_config(), "teams[1].vclusterName", "9vision"), "teams[1].vclusterName", "9vision",
                    fix="starts with a letter")
    team = load_platform(put(put(dev_config(), "teams[0].name", "0team"), "teams[0].vclusterName", "vc-0team")).teams[0]
    assert (team.name, team.vcluster_name, team.namespace) == ("0team", "vc-0team", "vcluster-vc-0team")


def test_long_team_names_alike_in_their_first_52_characters_are_told_their_vcluster_names_were_cut():
    # Neither team wrote a vclusterName: the message says where the clashing one came from (found opening a trial site).
    config = put(put(dev_config(), "teams[0].name", "a" * 55 + "-one"), "teams[1].name", "a" * 55 + "-two")
    found = assert_rejected(config, "teams[1].vclusterName", "a" * 52, fix="at most 52 characters")
    assert found.problem == "(teams[1].name cut to 52 characters) is already used by teams[0]"
    load_platform(put(config, "teams[1].vclusterName", "a-two"))
    # A vclusterName written out twice reads as before.
    config = put(put(dev_config(), "teams[0].vclusterName", "same"), "teams[1].vclusterName", "same")
    assert assert_rejected(config, "teams[1].vclusterName", "same").problem == "is already used by teams[0]"


def test_the_vcluster_name_holds_52_characters_as_its_statefulsets_pods_need():
    # The chart's StatefulSet is named after it; its controller labels each pod "<name>-<hash of up to 10>".
    assert VCLUSTER_NAME_LENGTH == names.LONGEST_NAME["StatefulSet"] == 52
    team = load_platform(put(dev_config(), "teams[0].name", "x" * 63)).teams[0]
    assert team.vcluster_name == "x" * 52 and team.namespace == "vcluster-" + "x" * 52
    load_platform(put(dev_config(), "teams[0].vclusterName", "v" * 52))
    for too_long in ("v" * 53, "v" * 54):  # 53 would still be a Helm release name
        found = assert_rejected(put(dev_config(), "teams[0].vclusterName", too_long), "teams[0].vclusterName",
                                too_long, fix="at most 52")
        assert "at most 52 characters" in found.problem


def test_team_names_must_be_unique():
    found = assert_rejected(put(dev_config(), "teams[2].name", "team-nlp"), "teams[2].name", "team-nlp")
    assert "teams[0]" in found.problem


def test_vcluster_names_must_be_unique_and_the_namespace_derived_from_one_is_not_a_second_problem():
    error = rejected(put(dev_config(), "teams[2].vclusterName", "team-nlp"))
    assert "teams[0]" in issue(error, "teams[2].vclusterName", "team-nlp").problem
    assert error.keys == ["teams[2].vclusterName"]


def test_namespaces_must_be_unique():
    config = put(dev_config(), "teams[1].namespace", "vcluster-team-nlp")
    assert_rejected(config, "teams[1].namespace", "vcluster-team-nlp", fix="namespace")
    assert load_platform(put(dev_config(), "teams[1].namespace", "vision")).teams[1].namespace == "vision"


@pytest.mark.parametrize("path", ["teams[1].name", "organization.name"])
@pytest.mark.parametrize("name", ["default-queue", "default-parent-queue"])
def test_names_of_the_queues_kai_creates_are_reserved(path, name):
    found = assert_rejected(put(dev_config(), path, name), path, name)
    assert "KAI" in found.problem


def test_a_team_cannot_be_named_like_the_organization():
    found = assert_rejected(put(dev_config(), "teams[1].name", "ml-org"), "teams[1].name", "ml-org")
    assert "organization.name" in found.fix


# --- queue resources ----------------------------------------------------------------------------

GPU = "teams[1].resources.gpu"


@pytest.mark.parametrize("entry", [
    {"quota": 0.33, "limit": -1, "overQuotaWeight": 1},
    {"quota": 0, "limit": 0, "overQuotaWeight": 0},
    {"quota": 0.33, "limit": 0.33, "overQuotaWeight": 2.5},
    {"quota": 0.2},
])
def test_valid_queue_resource_entries(entry):
    gpu = load_platform(put(dev_config(), GPU, entry)).teams[1].resources.gpu
    assert (gpu.quota, gpu.limit, gpu.over_quota_weight) == (
        entry["quota"], entry.get("limit", -1), entry.get("overQuotaWeight", 1))


@pytest.mark.parametrize("field, value, fix", [
    ("quota", -2, "-1 (unlimited) or >= 0"),
    ("limit", -0.5, "-1 (unlimited) or >= 0"),
    ("overQuotaWeight", -1, ">= 0"),
    ("limit", 0.2, "raise limit to at least the quota"),  # below quota 0.33
    ("quota", "one", "set it to a number"),
    ("quota", True, "set it to a number"),
    ("limit", [1], "set it to a number"),
])
def test_invalid_queue_resource_values(field, value, fix):
    assert_rejected(put(dev_config(), f"{GPU}.{field}", value), f"{GPU}.{field}", value, fix=fix)


def test_a_teams_omitted_cpu_and_memory_follow_its_namespace_quota():
    """KAI schedules CPU pods and the tenant's DNS too: the queue guarantees and caps what the team's workloads
    may request (16 CPU, 64Gi) plus the DNS pod's requests (50m, 64Mi)."""
    team = load_platform(dev_config()).teams[0]
    assert (team.resources.cpu.quota, team.resources.cpu.limit, team.resources.cpu.over_quota_weight) == \
        (16050, 16050, 1)
    assert (team.resources.memory.quota, team.resources.memory.limit) == (68787, 68787)
    assert (team.resources.gpu.quota, team.resources.gpu.limit) == (0.33, 1)
    smaller = load_platform(put(dev_config(), "teams[0].vcluster.resourceQuota", {"cpu": "1500m", "memory": "512Mi",
                                                                                 "pods": 4}))
    assert (smaller.teams[0].resources.cpu.quota, smaller.teams[0].resources.memory.limit) == (1550, 604)
    # Whole MB, rounded up: the queue holds all the namespace's quota and the DNS pod may request (512Mi + 64Mi).
    assert smaller.teams[0].resources.memory.quota * 1_000_000 >= (512 + 64) * 2 ** 20
    explicit = load_platform(put(dev_config(), "teams[0].resources.cpu", {"quota": 2000, "limit": -1}))
    assert (explicit.teams[0].resources.cpu.quota, explicit.teams[0].resources.cpu.limit) == (2000, -1)


def test_the_organization_queue_keeps_unlimited_cpu_and_memory():
    org = load_platform(dev_config()).organization
    for resource in (org.resources.cpu, org.resources.memory):
        assert (resource.quota, resource.limit, resource.over_quota_weight) == (-1, -1, 1)


def test_the_retired_strict_switch_says_what_replaced_it():
    config = put(dev_config(), "teams[0].strict", True)
    found = assert_rejected(config, "teams[0].strict", True, fix="remove the key")
    assert "scheduled by KAI in the team's queue" in found.problem
    assert len(rejected(config).issues) == 1, "one problem, one message"


@pytest.mark.parametrize("namespace", ["kube-system", "default", "kai-scheduler", "gpu-operator-resources",
                                       "kai-resource-reservation"])
def test_a_tenant_cannot_live_in_a_platform_namespace(namespace):
    assert_rejected(put(dev_config(), "teams[0].namespace", namespace), "teams[0].namespace", namespace,
                    fix="namespace of its own")


def test_a_tenant_cannot_live_beside_kais_reservation_pods():
    """DCGM names KAI's reservation namespace for every GPU shared under fractions, and the usage rules take its
    pods for KAI's: a team living there would be charged every shared GPU and its own shares not at all."""
    found = assert_rejected(put(dev_config(), "teams[0].namespace", "kai-resource-reservation"),
                            "teams[0].namespace", "kai-resource-reservation", fix="namespace of its own")
    assert "KAI's GPU reservation pods" in found.problem


@pytest.mark.parametrize("name", ["shared-gpu-0", "nlp-shared-gpu-i1"])
def test_a_vcluster_name_cannot_pass_for_a_kai_device_list(name):
    assert_rejected(put(dev_config(), "teams[0].vclusterName", name), "teams[0].vclusterName", name,
                    fix="does not end in shared-gpu")


def test_a_privileged_tenant_is_warned_about():
    platform = load_platform(put(dev_config(), "teams[1].vcluster", {"podSecurity": "privileged"}))
    assert any("teams[1] (team-vision)" in warning and "every GPU" in warning for warning in platform.warnings)


def test_team_gpu_quotas_that_fit_the_organization_quota_pass():
    assert sum(t.resources.gpu.quota for t in load_platform(dev_config()).teams) == pytest.approx(0.99)
    config = dev_config()
    for index in range(3):
        put(config, f"teams[{index}].resources.gpu.quota", 1 / 3)
    assert load_platform(config).organization.resources.gpu.quota == 1  # 3 x 1/3 fits despite rounding


def test_team_gpu_quotas_above_the_organization_quota_fail():
    config = dev_config()
    for index in range(3):
        put(config, f"teams[{index}].resources.gpu.quota", 0.5)
    found = assert_rejected(config, "organization.resources.gpu.quota", 1, fix="at least 1.5")
    assert "1.5" in found.problem


def test_an_unlimited_organization_quota_allows_any_team_quotas():
    config = put(dev_config(), "organization.resources.gpu.quota", -1)
    for index in range(3):
        put(config, f"teams[{index}].resources.gpu", {"quota": 5, "limit": -1})
    put(config, "teams[0].resources.gpu.quota", -1)
    assert [t.resources.gpu.quota for t in load_platform(config).teams] == [-1, 5, 5]


def test_an_unlimited_team_quota_does_not_fit_a_finite_organization_quota():
    config = put(dev_config(), "teams[1].resources.gpu", {"quota": -1, "limit": -1})
    assert_rejected(config, "teams[1].resources.gpu.quota", -1, fix="-1")


def test_team_cpu_or_memory_quotas_above_a_finite_organization_quota_are_warned():
    # KAI accepts the over-commit; the teams' quotas are derived from their ResourceQuota, so nothing the user wrote
    # said so (found opening a trial site with an organization cpu quota).
    config = put(dev_config(), "organization.resources.cpu", {"quota": 20000, "limit": 40000})
    warnings = [w for w in load_platform(config).warnings if w.startswith("the teams' cpu quotas add up to")]
    assert warnings == [warnings[0]] and "48150 millicores" in warnings[0] and "at least 48150" in warnings[0]
    for fits in (put(copy.deepcopy(config), "organization.resources.cpu", {"quota": 48150, "limit": -1}),
                 put(copy.deepcopy(config), "teams[0].resources.cpu", {"quota": -1, "limit": -1}),
                 dev_config()):
        assert not [w for w in load_platform(fits).warnings if "quotas add up to" in w]
    config = put(dev_config(), "organization.resources.memory", {"quota": 100000})
    assert any(w.startswith("the teams' memory quotas add up to 206361 MB") for w in load_platform(config).warnings)


@pytest.mark.parametrize("resource, floor, cores_or_gigabytes", [("cpu", 50, 4), ("memory", 67.108864, 16)])
def test_a_team_quota_below_its_dns_pod_is_refused_naming_the_unit(resource, floor, cores_or_gigabytes):
    # The tenant DNS pod is scheduled by KAI in the team's queue as non-preemptible, and KAI runs a non-preemptible
    # pod only within the quota of its queue and of every ancestor (KAI v0.16.4 pkg/scheduler/plugins/proportion/
    # capacity_policy/quota_check.go): below 50m and 64Mi it never starts, and no name resolves in the vCluster.
    # A quota written in cores or gigabytes instead of KAI's millicores and MB is the likely slip.
    path = f"teams[0].resources.{resource}"
    found = assert_rejected(put(dev_config(), path, {"quota": cores_or_gigabytes, "limit": -1}), f"{path}.quota",
                            cores_or_gigabytes)
    assert "DNS" in found.problem and ("millicores" if resource == "cpu" else "MB") in found.fix
    for fits in ({"quota": floor, "limit": floor}, {"quota": -1, "limit": -1}):
        assert load_platform(put(dev_config(), path, fits)).teams[0].resources


def test_a_finite_organization_quota_must_hold_every_teams_dns_pod():
    # The organization's quota bounds its children's non-preemptible pods too: three teams' DNS pods need 150m.
    config = put(dev_config(), "organization.resources.cpu", {"quota": 149, "limit": -1})
    found = assert_rejected(config, "organization.resources.cpu.quota", 149, fix="150")
    assert "3 teams" in found.problem
    config = put(dev_config(), "organization.resources.cpu", {"quota": 150, "limit": -1})
    for index in range(3):
        put(config, f"teams[{index}].resources.cpu", {"quota": 50, "limit": 50})
    assert load_platform(config).organization.resources.cpu.quota == 150


def test_a_huge_integer_quota_is_a_config_error_not_a_crash():
    assert_rejected(put(dev_config(), f"{GPU}.limit", 10 ** 400), f"{GPU}.limit", 10 ** 400)


# --- vcluster settings and defaults -------------------------------------------------------------


def test_team_vcluster_overrides_merge_over_the_stack_defaults():
    config = dev_config()
    config["vcluster"] = {"version": "0.35.2", "nodeLabels": {"pool": "shared"},
                          "resourceQuota": {"cpu": "8", "pods": 80}, "extraValues": {"controlPlane": {"statefulSet": {"labels": {"x": "1"}}}}}
    put(config, "teams[1].vcluster", {"nodeLabels": {"pool": "vision"}, "resourceQuota": {"pods": 10},
                                      "extraValues": {"controlPlane": {"statefulSet": {"labels": {"y": "2"}}}}})
    nlp, vision, _ = load_platform(config).teams
    assert nlp.vcluster.node_labels == {"pool": "shared"} and nlp.vcluster.version == "0.35.2"
    assert vision.vcluster.version == "0.35.2"
    assert vision.vcluster.node_labels == {"pool": "vision"}
    assert (vision.vcluster.resource_quota.cpu, vision.vcluster.resource_quota.pods) == ("8", 10)
    assert vision.vcluster.extra_values == {"controlPlane": {"statefulSet": {"labels": {"x": "1", "y": "2"}}}}
    assert vision.vcluster.sync_runtime_classes is True  # built-in default survives both layers


@pytest.mark.parametrize("key, value", [
    ("version", "latest"),
    ("resourceQuota.pods", 0),
    ("limitRange.defaultMemory", "lots"),
    ("networkPolicy", "on"),
])
def test_a_bad_team_vcluster_override_is_reported_at_the_team_key(key, value):
    path = f"teams[2].vcluster.{key}"
    assert_rejected(put(dev_config(), path, value), path, value)


def test_team_defaults():
    team = load_platform(dev_config()).teams[0]
    assert team.vcluster_name == "team-nlp" and team.namespace == "vcluster-team-nlp"
    assert team.display_name == "team-nlp" and team.queue_name == "team-nlp"
    assert team.protect is True
    renamed = load_platform(put(dev_config(), "teams[0].vclusterName", "nlp")).teams[0]
    assert (renamed.vcluster_name, renamed.namespace) == ("nlp", "vcluster-nlp")


def test_the_docs_name_the_dns_floor_and_the_default_queue_the_loader_applies():
    # The figures the config reference gives are the ones the loader refuses below and fills in: a changed DNS
    # request or default quota changes them, and `python -m tools.docs.config_reference --check` then fails until
    # the reference is written again.
    reference = " ".join(" ".join(page.read_text() for page in sorted(
        (Path(__file__).resolve().parent.parent / "docs").glob("config-*.md"))).split())
    floors = {}
    for resource, below in {"cpu": 49, "memory": 67.1}.items():
        path = f"teams[0].resources.{resource}"
        found = assert_rejected(put(dev_config(), path, {"quota": below, "limit": -1}), f"{path}.quota", below)
        floors[resource] = float(found.fix.split("at least ", 1)[1].split(",", 1)[0])
    assert f"({floors['cpu']:g} millicores, {floors['memory']:.1f} MB" in reference
    team = load_platform(dev_config()).teams[0]
    assert (f"become `cpu: {team.resources.cpu.quota:g}` and `memory: {team.resources.memory.quota:g}`"
            in reference)


# --- the teams' policies at an API server's start ---------------------------------------------------------------


def _with_teams(count: int) -> dict:
    config = put(dev_config(), "organization.resources.gpu.quota", -1)
    template = config["teams"][0]
    return put(config, "teams", [{**copy.deepcopy(template), "name": f"team-{index:02d}"} for index in range(count)])


def test_a_site_whose_teams_policies_take_the_api_server_past_its_wait_is_told_so():
    # 0.27 s a team: 37 teams compile within the 10 s an API server makes a request wait, 38 do not.
    assert not [note for note in load_platform(_with_teams(37)).notes if "compiles the admission policies" in note]
    [_] = [note for note in load_platform(_with_teams(38)).notes if "compiles the admission policies" in note]
    [note] = [note for note in load_platform(_with_teams(100)).notes if "compiles the admission policies" in note]
    assert note.startswith("teams: ") and "all 100 teams" in note and "about 27 s of CPU" in note
    assert "holding each up to 10 s first" in note and "Compiled once for the site" in note
