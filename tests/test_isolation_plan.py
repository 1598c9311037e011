"""The isolation site as reviewers and a real cluster see it: summary, chart values, deployability."""

from __future__ import annotations

import pytest

from config.mig import MIG_CONFIG_LABEL
from config.vocabulary import EKS_NODE_GROUP, RELEASE
from tests.config_spec import put
from tests.conftest import real_charts_or_skip, run
from tests.isolation_spec import isolation_config, prefixed
from tools.charts.render import render_plan_releases
from tools.deployability import check as deployability
from tools.deployability.findings import ERROR
from tools.deployability.inputs import program_objects, site_from_plan
from tools.plan.document import build_plan
from tools.plan.summary import render_summary


@pytest.fixture(scope="module")
def plan():
    return build_plan(run(prefixed(isolation_config()), stack="isolation"), "isolation")


def _release(plan, chart):
    return next(r for r in plan["resources"] if r["type"] == RELEASE and r["inputs"]["chart"].endswith(chart))


def test_the_summary_shows_each_tier_and_the_slices_promised_vs_present(plan):
    summary = render_summary(plan)
    assert "| `team-nlp` | memory-capped | — | `l40s` | `gpu-tenancy-team-nlp-isolation` |" in summary
    assert "| `team-vision` | mig | `3g.40gb` | `h100` |" in summary
    assert "| `h100` | `all-balanced` | `3g.40gb` | 8 (at desiredSize) | 2 | `team-vision` |" in summary


@pytest.mark.parametrize("instance_types", [["p4de.24xlarge", "p4d.24xlarge"], ["p4d.24xlarge", "p4de.24xlarge"]])
def test_the_summary_counts_a_two_model_pool_at_its_fewer_slices(instance_types):
    # all-1g.10gb: 7 slices on a p4de GPU, 4 on a p4d one; the summary took the shorter layout, whichever came first.
    config = isolation_config()
    config["cluster"]["eks"]["gpuNodeGroups"][0].update(instanceTypes=instance_types, migConfig="all-1g.10gb")
    config["teams"] = [team for team in config["teams"] if team["name"] != "team-vision"]
    summary = render_summary(build_plan(run(prefixed(config), stack="isolation"), "isolation"))
    assert "| `h100` | `all-1g.10gb` | `1g.10gb` | 32 (at desiredSize) | 4 | `team-llm` |" in summary


def test_the_summary_counts_the_slices_of_the_nodes_a_group_can_have():
    config = isolation_config()
    config["cluster"]["eks"]["gpuNodeGroups"][0].update(desiredSize=0, maxSize=2)
    summary = render_summary(build_plan(run(prefixed(config), stack="isolation"), "isolation"))
    assert "| `h100` | `all-balanced` | `3g.40gb` | 0 (at desiredSize) |" in summary
    assert "Nothing scales the groups: each runs its desired size" in summary
    config["cluster"]["eks"]["autoscaler"] = "cluster-autoscaler"
    summary = render_summary(build_plan(run(prefixed(config), stack="isolation"), "isolation"))
    assert "| `h100` | `all-balanced` | `3g.40gb` | 16 (at maxSize) |" in summary
    assert "The site's Cluster Autoscaler sizes the groups within min and max" in summary


def test_the_pools_and_charts_are_set_up_for_each_tier(plan):
    groups = {r["inputs"]["labels"]["gpu-tenancy/pool"]: r["inputs"]["labels"] for r in plan["resources"]
              if r["type"] == EKS_NODE_GROUP and r["inputs"]["labels"].get("gpu-tenancy/role") == "gpu"}
    assert groups["h100"][MIG_CONFIG_LABEL] == "all-balanced" and MIG_CONFIG_LABEL not in groups["l40s"]
    operator = _release(plan, "gpu-operator")["inputs"]["values"]
    assert operator["mig"] == {"strategy": "mixed"} and operator["migManager"] == {"enabled": True}
    kai = _release(plan, "kai-scheduler")["inputs"]["values"]
    assert kai["binder"] == {"plugins": {"hamicore": {"enabled": True}}}


def test_the_isolation_site_passes_the_deployability_check_on_the_program_objects(plan):
    found = deployability.check(program_objects(plan["resources"]), site_from_plan(plan))
    assert not [f for f in found if f.severity == ERROR], "\n".join(map(str, found))


def test_the_isolation_site_is_deployable_with_the_real_charts(plan, tmp_path):
    cache = real_charts_or_skip(plan)
    rendered = render_plan_releases(plan["resources"], cache, tmp_path)
    _, _, found = deployability.check_plan(plan, rendered, tmp_path, cache)
    errors = [f for f in found if f.severity == ERROR]
    assert not errors, "\n".join(map(str, errors))


def test_memory_capped_under_restricted_pod_security_is_a_valid_site(tmp_path):
    """HAMi-core reaches a memory-capped team's pods as an image volume, a type restricted takes from Kubernetes
    1.33 on, and memory-capped teams need 1.35 or later: a memory-capped team may enforce restricted."""
    config = put(isolation_config(), "teams[2].vcluster", {"podSecurity": "restricted"})
    plan = build_plan(run(prefixed(config), stack="isolation"), "isolation")
    cache = real_charts_or_skip(plan)
    rendered = render_plan_releases(plan["resources"], cache, tmp_path)
    _, _, found = deployability.check_plan(plan, rendered, tmp_path, cache)
    errors = [f for f in found if f.severity == ERROR]
    assert not errors, "\n".join(map(str, errors))
