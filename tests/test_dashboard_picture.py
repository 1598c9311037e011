"""The dashboard pictures of docs/observability-dashboards.md are drawn from the dashboards the program provisions."""

from __future__ import annotations

from html import escape
from itertools import combinations

from components.observability_dashboards import dashboards
from config import load_platform
from config.vocabulary import project_config
from tests.conftest import dev_config
from tools.docs import dashboard_picture


def _boards():
    return dashboards(load_platform(project_config(dev_config())))


def test_the_committed_pictures_are_what_the_code_draws(capsys):
    assert dashboard_picture.main(["dev", "--check"]) == 0, capsys.readouterr().err


def test_every_panel_is_in_the_picture_at_its_place_and_none_overlap():
    for name, (_, board) in _boards().items():
        svg = dashboard_picture.render(board)
        panels = [panel for panel in board["panels"] if panel["type"] != "row"]
        for panel in panels:
            assert escape(panel["title"].split()[0]) in svg, (name, panel["title"])
        for first, second in combinations(panels, 2):
            a, b = first["gridPos"], second["gridPos"]
            overlap = a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and \
                a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]
            assert not overlap, (name, first["title"], second["title"])
            assert a["x"] + a["w"] <= 24 and b["x"] + b["w"] <= 24
