"""Plan diffs on real edits: what a reviewer sees for a quota change, a new team, a version bump."""

from __future__ import annotations

import json

import pytest

from tests.conftest import dev_config, run
from tools.plan import cli as plan
from tools.plan.diff import diff_plans, render_diff


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
