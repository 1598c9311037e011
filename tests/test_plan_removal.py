"""The plan diff's cause and fix of a removed resource, named by the program component it goes with
(tools/plan/removal.py)."""

from __future__ import annotations

from tests.conftest import dev_config, eks_config
from tests.release_renders import plan_of
from tools.plan.diff import diff_plans, render_diff
from tools.plan.replacement import pulumi_findings


def _findings(old_config: dict, new_config: dict, stack: str):
    old, new = plan_of(old_config, stack), plan_of(new_config, stack)
    diff = diff_plans(old, new)
    diff.running_site = pulumi_findings(diff, old, new)
    return {finding.subject.split(" ")[-1]: finding for finding in diff.running_site}, render_diff(diff, "a", "b")


def _monitoring(prometheus: str) -> dict:
    config = eks_config()
    config["gpu-tenancy:observability"] = {"prometheus": prometheus}
    return config


def test_monitoring_turned_off_names_the_key_and_the_monitoring_data_procedure():
    found, text = _findings(_monitoring("install"), _monitoring("off"), "eks")
    for name in ("observability-namespace", "observability-grafana-admin-password"):
        finding = found[name]
        assert finding.category == "stops"
        assert "observability.prometheus is no longer `install`" in finding.why and "team" not in finding.why
        assert "observability.protect: false" in finding.fix and "Monitoring data" in finding.fix
        assert "decommission" not in finding.fix
    release = found["observability-release"]
    assert release.category == "lost" and "nothing is installed again" in release.why
    assert "then install" not in release.why and "kubectl -n monitoring get pvc" in release.fix
    assert "each one's cause and fix are under [Changes a running site" in text


def test_a_removed_team_still_points_at_the_decommission_procedure():
    config = dev_config()
    del config["gpu-tenancy:teams"][2]
    found, _ = _findings(dev_config(), config, "dev")
    finding = found["tenant-team-recommender-vcluster"]
    assert finding.category == "stops" and "its team left teams[]" in finding.why
    assert "decommission procedure" in finding.fix and "teams[].protect: false" in finding.fix
