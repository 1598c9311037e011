"""The Grafana dashboards: every query parses (promtool), each team's board shows that team only."""

from __future__ import annotations

import re

import yaml

from components import observability_dashboards as boards
from config import load_platform
from tests.test_observability_rules import needs_promtool, promtool, site_config


def platform():
    return load_platform(site_config())


@needs_promtool
def test_every_dashboard_query_parses(tmp_path):
    """promtool has no parse-only command: each query becomes a throwaway recording rule it checks."""
    site = platform()
    exprs = [expr for _, board in boards.dashboards(site).values() for expr in boards.queries(board)]
    assert len(exprs) > 20
    groups = [{"name": "dashboards", "rules": [{"record": f"dashboard:query_{index}", "expr": expr}
                                               for index, expr in enumerate(exprs)]}]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": groups}))
    result = promtool("check", "rules", "queries.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_a_broken_query_is_caught(tmp_path):
    """The parse check above would catch a typo (guards against a check that passes anything)."""
    groups = [{"name": "dashboards", "rules": [{"record": "dashboard:query_0", "expr": "sum by (team (x)"}]}]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": groups}))
    assert promtool("check", "rules", "queries.yml", cwd=tmp_path).returncode != 0


def test_one_platform_board_and_one_board_per_team_each_in_its_folder():
    site = platform()
    provisioned = boards.dashboards(site)
    assert set(provisioned) == {"platform", *(f"team-{team.name}" for team in site.teams)}
    folders = {folder for folder, _ in provisioned.values()}
    assert len(folders) == 1 + len(site.teams), "every team gets a folder of its own"
    uids = [board["uid"] for _, board in provisioned.values()]
    assert len(set(uids)) == len(uids) and all(len(uid) <= 40 for uid in uids)


def test_team_board_queries_name_that_team_and_no_other():
    site = platform()
    for team in site.teams:
        _, board = boards.dashboards(site)[f"team-{team.name}"]
        for expr in boards.queries(board):
            selectors = re.findall(r"\{([^}]*)\}", expr)
            assert selectors, f"{team.name}: unfiltered query {expr}"
            for selector in selectors:
                assert (f'team="{team.name}"' in selector or f'namespace="{team.namespace}"' in selector
                        or f'policy="gpu-tenancy-{team.name}"' in selector), f"{team.name}: {expr}"
            others = [other.name for other in site.teams if other.name != team.name]
            assert not any(f'"{other}"' in expr for other in others)


def test_platform_board_covers_queue_tree_quota_allocation_use_nodes_and_pending():
    _, board = boards.dashboards(platform())["platform"]
    titles = [panel["title"] for panel in board["panels"]]
    for wanted in ("Queue tree (KAI's view)", "GPU quota vs allocated vs held vs used per team", "GPUs per node",
                   "Pending pods per team", "GPUs promised (team quotas)", "GPUs present (DCGM)"):
        assert wanted in titles
    ids = [panel["id"] for panel in board["panels"]]
    assert len(set(ids)) == len(ids)
    assert all(panel.get("datasource", {"uid": "${datasource}"})["uid"] == "${datasource}"
               for panel in board["panels"] if panel["type"] != "row")
