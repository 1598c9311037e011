"""The config reference (docs/config-reference.md) is generated from the key definitions and kept current."""

from __future__ import annotations

import re

from config.load import STACK_CONFIG
from tests.test_config_keys import blocks
from tools.docs import config_reference
from tools.docs.config_reference import Layout, anchor, render


def test_the_committed_reference_is_the_generated_one():
    assert config_reference.REFERENCE_FILE.read_text(encoding="utf-8") == render(), \
        "run python -m tools.docs.config_reference"
    assert config_reference.main(["--check"]) == 0


def test_a_stale_reference_is_caught_and_rewritten(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(config_reference, "REFERENCE_FILE", tmp_path / "docs" / "config-reference.md")
    assert config_reference.main(["--check"]) == 1, "a missing file is stale"
    assert config_reference.main([]) == 0 and config_reference.main(["--check"]) == 0
    config_reference.REFERENCE_FILE.write_text(render().replace("SSH port.", "SSH port (old)."), encoding="utf-8")
    assert config_reference.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err


def test_every_top_level_key_has_a_chapter_and_every_other_key_a_row():
    chapters = Layout().chapters
    assert [chapter.path.rstrip("[]") for chapter in chapters if chapter.level == 2] == list(STACK_CONFIG.names)
    documented = {id(row.key) for chapter in chapters for row in chapter.rows}
    missing = [key.name for block in blocks() if block is not STACK_CONFIG for key in block.keys
               if id(key) not in documented]
    assert missing == []
    text = render()
    for block in blocks():
        for key in block.keys:
            assert key.description in text, key.name


def test_every_link_inside_the_reference_leads_to_one_of_its_headings():
    text = render()
    headings = {anchor(line.lstrip("#").strip()) for line in text.splitlines() if line.startswith("#")}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links and links <= headings, links - headings


def test_the_chapters_a_user_needs_are_there():
    headings = [line for line in render().splitlines() if line.startswith("#")]
    for wanted in ("## `cluster` — the host", "### `cluster.microk8s`", "### `cluster.eks`",
                   "### `cluster.kubeconfig`", "## `teams[]`", "### Queue resources", "### Where tenant pods run",
                   "## Secrets", "## Validation rules", "## Sharing profiles", "## Editor support"):
        assert any(heading.startswith(wanted) for heading in headings), wanted


def test_defaults_are_shown_as_a_stack_file_spells_them():
    text = render()
    assert "| `useSudo` | boolean | `true` |" in text
    assert "| `systemNodeGroup.instanceTypes` | non-empty list of strings | `[m6i.large]` |" in text
    assert ("| `controlPlaneResources.requests` | map of `cpu`, `memory`, `ephemeral-storage` → quantity "
            "| `{cpu: 200m, memory: 256Mi}` |") in text
    assert "| `region` | string | required |" in text
    assert "| `mode` | `install` \\| `microk8s-addon` \\| `external` | `install` |" in text
