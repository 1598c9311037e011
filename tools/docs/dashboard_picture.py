"""Pictures of the Grafana dashboards' layout, drawn from the dashboards the program provisions.

    python -m tools.docs.dashboard_picture [STACK] [--check]

Writes ``docs/dashboards/platform.svg`` and ``docs/dashboards/team.svg`` (the board of the stack's
first team) from ``components/observability_dashboards.py``: every panel at its grid position, with
its title and type, rows as bands. docs/observability-dashboards.md shows them, so its pictures follow the code.
``--check`` exits 1 when the committed pictures are not what the code draws now.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from html import escape
from typing import Any, Optional, Sequence

from components.observability_dashboards import dashboards
from config import load_platform
from config.stack_file import PROJECT_DIR
from config.vocabulary import project_config
from tools.docs.generated import write_or_check
from tools.offline.mockrun import load_stack_file

OUT_DIR = PROJECT_DIR / "docs" / "dashboards"
# Grafana's grid is 24 columns wide; one grid unit of height is about 30 px.
COLUMN, ROW, MARGIN = 40, 30, 4
# Average width of a 13 px bold character, for wrapping titles inside narrow panels.
CHARACTER = 7.5
PANEL_FILL = {"stat": "#e8f1fb", "table": "#eef7ee", "timeseries": "#fdf3e6", "bargauge": "#f5ecf9"}


def render(board: dict[str, Any]) -> str:
    panels = board["panels"]
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) * ROW + 40
    width = 24 * COLUMN
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="13">',
             f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
             f'<text x="{MARGIN}" y="24" font-size="16" font-weight="bold">{escape(board["title"])}</text>']
    for panel in panels:
        grid = panel["gridPos"]
        x, y = grid["x"] * COLUMN + MARGIN / 2, grid["y"] * ROW + 36
        w, h = grid["w"] * COLUMN - MARGIN, grid["h"] * ROW - MARGIN
        if panel.get("type") == "row":
            parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="#444444"/>')
            parts.append(f'<text x="{x + 6}" y="{y + h - 8}" fill="#ffffff" font-weight="bold">'
                         f'{escape(panel.get("title", ""))}</text>')
            continue
        fill = PANEL_FILL.get(panel.get("type", ""), "#f0f0f0")
        parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="4" fill="{fill}" stroke="#888888"/>')
        lines = textwrap.wrap(panel.get("title", ""), max(8, int((w - 12) / CHARACTER)))
        for number, line in enumerate(lines):
            parts.append(f'<text x="{x + 6}" y="{y + 18 + 16 * number}" font-weight="bold">{escape(line)}</text>')
        parts.append(f'<text x="{x + 6}" y="{y + 20 + 16 * len(lines)}" fill="#555555">'
                     f'{escape(panel.get("type", ""))}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def pictures(stack: str) -> dict[str, str]:
    """File name -> SVG text of the platform board and of the first team's board."""
    platform = load_platform(project_config(load_stack_file(stack)), secrets_set={"sshPrivateKey", "kubeconfig"}, stack=stack)
    boards = dashboards(platform)
    first_team = next(name for name in boards if name != "platform")
    return {"platform.svg": render(boards["platform"][1]), "team.svg": render(boards[first_team][1])}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs.dashboard_picture", description=__doc__.split("\n")[0])
    parser.add_argument("stack", nargs="?", default="dev")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed pictures are out of date")
    args = parser.parse_args(argv)
    return write_or_check({OUT_DIR / name: text for name, text in pictures(args.stack).items()},
                          f"python -m tools.docs.dashboard_picture {args.stack}", args.check)


if __name__ == "__main__":
    sys.exit(main())
