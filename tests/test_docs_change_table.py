"""docs/operations-running.md's table of changes to a running site says what the plan diff says of them: the
category it lists a change under, and what it removes."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import dev_config
from tests.test_plan_removal import _monitoring
from tests.test_plan_running_site_day2 import _exclusive_nlp, _findings, _time_slicing
from tools.plan.diff import RUNNING_SITE_HEADINGS
from tools.plan.running_site import DISRUPTS, LOST, STOPS

TABLE = Path(__file__).resolve().parent.parent / "docs" / "operations-running.md"


def row(key: str) -> str:
    """The table row of a change, by the key it opens with."""
    [found] = [line for line in TABLE.read_text().splitlines() if line.startswith(f"| `{key}` |")]
    return found.split(" | ", 1)[1]


def test_new_time_slicing_replicas_are_told_as_the_diff_lists_them():
    found, _ = _findings(dev_config(), _time_slicing(dev_config(), replicas=2))
    [finding] = [f for f in found if f.field == "nvidia.com/device-plugin.config"]
    assert finding.category == DISRUPTS and row("gpuOperator.timeSlicing.replicas").startswith(
        RUNNING_SITE_HEADINGS[DISRUPTS])
    assert "`microk8s kubectl` on MicroK8s" in row("gpuOperator.timeSlicing.replicas")


def test_a_tier_back_to_shared_is_told_to_remove_the_policy_the_diff_removes():
    found, text = _findings(_exclusive_nlp(dev_config()), dev_config())
    assert not found and "**tenant-team-nlp-isolation-policy**" in text.split("## Removed")[1].split("## ")[0]
    assert "back to `shared` has no host rules of its own, so its policy is removed" in row("teams[].isolation.tier")


def test_monitoring_turned_off_is_told_as_the_diff_stops_it_with_the_same_procedure():
    found, _ = _findings(*(_monitoring(prometheus) for prometheus in ("install", "off")), "eks")
    stopped = {f.subject.split(" ")[-1] for f in found if f.category == STOPS}
    assert stopped == {"observability-namespace", "observability-grafana-admin-password"}
    assert all("docs/operations-data.md (Monitoring data)" in f.fix for f in found if f.category == STOPS)
    assert [f.subject.split(" ")[-1] for f in found if f.category == LOST] == ["observability-release"]
    told = row("observability.prometheus")
    assert "the namespace and Grafana's admin password, both protected, as stopping `pulumi up`" in told
    assert "the release as losing state" in told and "[Monitoring data](operations-data.md#" in told
    assert "set `observability.protect: false`, run `pulumi up`, then make the change" in told


def test_the_boxs_kubelet_and_audit_settings_are_told_as_the_diff_lists_them():
    """Both rewrite the snap's arguments and restart kubelite: the diff lists them under disrupting running work, and
    its commands are the box's own (`microk8s kubectl`)."""
    audit = dev_config()
    audit["gpu-tenancy:cluster"]["microk8s"]["auditLog"] = {"maxAgeDays": 7}
    reserve = dev_config()
    reserve["gpu-tenancy:cluster"]["microk8s"]["systemReservedMemory"] = "8Gi"
    for config, key in ((audit, "cluster.microk8s.auditLog"), (reserve, "cluster.microk8s.systemReservedMemory")):
        found, _ = _findings(dev_config(), config)
        assert [f.category for f in found] == [DISRUPTS], key
        line = next(line for line in TABLE.read_text().splitlines() if line.startswith(f"| `{key}`"))
        assert line.split(" | ", 1)[1].startswith(RUNNING_SITE_HEADINGS[DISRUPTS]), key
        assert "`kubectl" not in line and "`kubectl" not in found[0].fix, key
