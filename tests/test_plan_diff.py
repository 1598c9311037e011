"""Plan diffs on real edits: what a reviewer sees for a quota change, a new team, a version bump."""

from __future__ import annotations

import json

import pytest

from tests.conftest import dev_config, run
from tools.plan import cli as plan
from tools.plan.diff import MISSING, Change, diff_plans, render_change, render_diff, value_changes


def plan_of(config: dict) -> dict:
    return json.loads(plan.render_plan_json(plan.build_plan(run(config, stack="dev"), "dev")))


@pytest.fixture(scope="module")
def base_plan():
    return plan_of(dev_config())


def changed_paths(diff) -> dict[str, dict[str, tuple]]:
    return {r.name: {c.path: (c.old, c.new) for c in r.changes} for r in diff.changed}


def test_identical_plans_have_no_changes(base_plan):
    diff = diff_plans(base_plan, plan_of(dev_config()))
    assert diff.empty
    assert "No changes." in render_diff(diff, "old", "new")


def test_a_quota_change_is_one_changed_queue_with_its_path(base_plan):
    config = dev_config()
    config["gpu-tenancy:teams"][1]["resources"]["gpu"]["quota"] = 0.2
    diff = diff_plans(base_plan, plan_of(config))
    assert not diff.added and not diff.removed
    assert changed_paths(diff) == {"queues-team-vision": {"spec.resources.gpu.quota": (0.33, 0.2)}}
    assert "`spec.resources.gpu.quota`: 0.33 -> 0.2" in render_diff(diff, "old", "new")


def test_a_new_team_adds_its_queue_tenant_and_admission_policy(base_plan):
    config = dev_config()
    config["gpu-tenancy:teams"].append({"name": "team-audio", "resources": {"gpu": {"quota": 0.01, "limit": 1}}})
    diff = diff_plans(base_plan, plan_of(config))
    added = {r["name"] for r in diff.added}
    assert {"queues-team-audio", "tenant-team-audio", "tenant-team-audio-namespace", "tenant-team-audio-vcluster",
            "tenant-team-audio-admission-policy", "tenant-team-audio-admission-binding"} <= added
    assert not diff.removed
    assert "tenants.team-audio" in {c.path for c in diff.outputs}


def test_a_version_bump_changes_the_release_in_place(base_plan):
    config = dev_config()
    config["gpu-tenancy:kaiScheduler"]["version"] = "v0.17.0"
    diff = diff_plans(base_plan, plan_of(config))
    assert not diff.added and not diff.removed
    # The release's images are tagged as the release (components/kai.py).
    assert changed_paths(diff)["kai-release"] == {"version": ("v0.16.4", "v0.17.0"),
                                                  "values.global.tag": ("v0.16.4", "v0.17.0")}


def test_removing_a_team_warns_that_protected_resources_block_the_update(base_plan):
    config = dev_config()
    del config["gpu-tenancy:teams"][2]
    diff = diff_plans(base_plan, plan_of(config))
    removed = {r["name"] for r in diff.removed}
    assert {"queues-team-recommender", "tenant-team-recommender-vcluster"} <= removed
    text = render_diff(diff, "old", "new")
    assert "Protected resources would be removed" in text and "tenant-team-recommender-vcluster" in text


def test_secrets_stay_redacted_in_a_diff():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "gpu-box.lab"
    config["gpu-tenancy:sshPrivateKey"] = {"secure": "v1:first"}
    first = plan_of(config)
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "gpu-box-2.lab"
    text = render_diff(diff_plans(first, plan_of(config)), "old", "new")
    assert "offline-plan-placeholder" not in text and "offline-plan-token" not in text
    assert "gpu-box-2.lab" not in text, "the SSH connection is secret as a whole"


def test_cli_prints_and_writes_the_diff(tmp_path, capsys, base_plan):
    old = tmp_path / "old.json"
    old.write_text(json.dumps(base_plan))
    config = dev_config()
    config["gpu-tenancy:organization"]["resources"]["gpu"]["quota"] = 2
    assert plan.main(["dev", "--out", str(tmp_path / "new"), "--diff-against", str(old)], config=config) == 0
    printed = capsys.readouterr().out
    assert "queues-ml-org" in printed and "spec.resources.gpu.quota`: 1 -> 2" in printed
    assert (tmp_path / "new" / "diff.md").read_text() in printed


def test_cli_refuses_an_unreadable_old_plan(tmp_path, capsys):
    assert plan.main(["dev", "--out", str(tmp_path), "--diff-against", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the plan" in capsys.readouterr().err


# --- lists and long texts: what a reviewer reads when a team leaves or a policy's text changes ---------------------

def with_prometheus(config: dict) -> dict:
    config["gpu-tenancy:observability"] = {"prometheus": "install", "grafana": True}
    return config


def test_a_team_leaving_an_observed_site_removes_only_its_own_rules_and_board():
    config = with_prometheus(dev_config())
    gone = config["gpu-tenancy:teams"][1]["name"]
    before = plan_of(config)
    del config["gpu-tenancy:teams"][1]
    diff = diff_plans(before, plan_of(config))
    rules = next(resource for resource in diff.changed if resource.type.endswith(":PrometheusRule"))
    assert rules.changes, "the team's recording rules leave the shared rule group"
    # Compared by position, every later rule would read as renamed to the next team's.
    assert all(change.new == MISSING and gone in json.dumps(change.old) for change in rules.changes)
    boards = [change for change in diff.outputs if change.path.startswith("observability.dashboards")]
    assert boards and all(change.new == MISSING and gone in change.old for change in boards)


def test_named_elements_are_compared_by_name():
    old = [{"name": "syncer", "image": "a:1"}, {"name": "dns", "image": "b:1"}]
    assert value_changes(old, old[1:], "spec.containers") == [
        Change("spec.containers[name=syncer]", old[0], MISSING)]
    assert value_changes(old, [old[0], {"name": "dns", "image": "b:2"}], "spec.containers") == [
        Change("spec.containers[name=dns].image", "b:1", "b:2")]


def test_the_same_named_elements_in_another_order_are_one_change_of_order():
    first, second = {"name": "wait", "image": "a:1"}, {"name": "copy", "image": "b:1"}
    assert value_changes([first, second], [second, first], "spec.initContainers") == [
        Change("spec.initContainers[*].name", ["wait", "copy"], ["copy", "wait"])]


def test_an_element_inserted_into_an_unnamed_list_is_one_addition():
    old = [{"expr": "a"}, {"expr": "b"}, {"expr": "c"}]
    assert value_changes(old, [old[0], {"expr": "new"}, *old[1:]], "rules") == [
        Change("rules[1]", MISSING, {"expr": "new"})]
    assert value_changes(old, old[:1] + old[2:], "rules") == [Change("rules[1]", {"expr": "b"}, MISSING)]


def test_a_changed_registry_list_shows_the_changed_lines_of_each_tenants_policy_text(base_plan):
    config = dev_config()
    config["gpu-tenancy:vcluster"] = {**config.get("gpu-tenancy:vcluster", {}),
                                      "allowedRegistries": ["ghcr.io/acme", "nvcr.io/nvidia"]}
    first = plan_of(config)
    config["gpu-tenancy:vcluster"]["allowedRegistries"] = ["ghcr.io/acme", "registry.example.com/ml"]
    text = render_diff(diff_plans(first, plan_of(config)), "old", "new")
    assert "`values.experimental.deploy.vcluster.manifests`: text changed" in text
    changed_lines = [line.strip() for line in text.splitlines() if line.strip().startswith(("+", "-"))]
    assert any("registry.example.com/ml" in line for line in changed_lines if line.startswith("+"))
    assert any("nvcr.io/nvidia" in line for line in changed_lines if line.startswith("-"))
    # Cut at 120 characters, both sides of a 30 kB text would show the same opening.
    assert not any(line.endswith('..." -> "apiVersion') for line in text.splitlines())


def test_a_long_one_line_change_shows_where_it_differs():
    expression = "object.spec.containers.all(c, " + " && ".join(f"c.name != 'n{i}'" for i in range(20)) + ")"
    lines = render_change(Change("spec.validations[0].expression", expression,
                                 expression.replace("'n13'", "'n99'")), "    - ")
    assert lines[0] == "    - `spec.validations[0].expression`: text changed"
    removed, added = (line.strip() for line in lines[3:5])
    assert "'n13'" in removed and "'n99'" in added and "'n13'" not in added
    assert removed.startswith("- ...") and len(added) < len(expression)


def test_a_plan_of_another_stack_is_diffed_with_a_warning_naming_both_stacks(tmp_path, capsys):
    assert plan.main(["dev", "--out", str(tmp_path / "old")], config=dev_config()) == 0
    capsys.readouterr()
    assert plan.main(["dev-b", "--out", str(tmp_path / "new"), "--diff-against", str(tmp_path / "old" / "plan.json")],
                     config=dev_config()) == 0
    text = (tmp_path / "new" / "diff.md").read_text()
    head = text.split("\n")[2]
    assert head.startswith("**Warning: the two plans are of different stacks: the old one of stack `dev`, this one "
                           "of stack `dev-b`.")
    assert "plan the old commit under the same stack name (`python -m tools.plan dev-b --out DIR`" in head
    assert "warning: the two plans are of different stacks" in capsys.readouterr().err
    # The teams' protected tenants show as removed, but no site loses them: no banner, section or fix says so.
    assert "**tenant-team-nlp-namespace** (protected)" in text.split("## Removed")[1]
    assert "Protected resources would be removed" not in text and "## Changes a running site" not in text
    assert "put the team back in teams[]" not in text and "Fix:" not in text


def test_a_plan_of_the_same_stack_has_no_stack_warning(tmp_path, capsys):
    assert plan.main(["dev", "--out", str(tmp_path / "old")], config=dev_config()) == 0
    assert plan.main(["dev", "--out", str(tmp_path / "new"), "--diff-against", str(tmp_path / "old" / "plan.json")],
                     config=dev_config()) == 0
    assert "different stacks" not in (tmp_path / "new" / "diff.md").read_text() + capsys.readouterr().err
