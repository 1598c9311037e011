"""The config reference (docs/config-reference.md, its index, and the pages of docs/config-*.md it lists) is generated
from the key definitions and kept current."""

from __future__ import annotations

import re

import pytest

from config.load import STACK_CONFIG
from tests.test_config_keys import blocks
from tools.docs import config_reference
from tools.docs.config_reference import GENERAL, INDEX, PAGES, Layout, Page, anchor, page_of, render


def all_text() -> str:
    return "\n".join(render().values())


def test_the_committed_reference_is_the_generated_one():
    for name, text in render().items():
        assert (config_reference.DOCS_DIR / name).read_text(encoding="utf-8") == text, \
            f"docs/{name}: run python -m tools.docs.config_reference"
    assert config_reference.main(["--check"]) == 0


def test_a_stale_or_missing_page_is_caught_and_rewritten(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(config_reference, "DOCS_DIR", tmp_path / "docs")
    assert config_reference.main(["--check"]) == 1, "missing files are stale"
    assert config_reference.main([]) == 0 and config_reference.main(["--check"]) == 0
    assert sorted(path.name for path in (tmp_path / "docs").iterdir()) == sorted([INDEX, *(p.file for p in PAGES)])
    cluster = tmp_path / "docs" / page_of("cluster")
    cluster.write_text(cluster.read_text().replace("SSH port.", "SSH port (old)."), encoding="utf-8")
    assert config_reference.main(["--check"]) == 1
    assert f"out of date: {cluster.name}" in capsys.readouterr().err
    assert config_reference.main([]) == 0
    (tmp_path / "docs" / page_of("Secrets")).unlink()
    assert config_reference.main(["--check"]) == 1


def test_every_top_level_key_and_general_chapter_is_on_one_page_the_index_lists():
    held = [name for page in PAGES for name in page.holds]
    assert sorted(held) == sorted([*STACK_CONFIG.names, *GENERAL])
    index = render()[INDEX]
    for page in PAGES:
        assert f"]({page.file})" in index
        assert len(render()[page.file].splitlines()) < 400, f"docs/{page.file} holds two jobs: split it in PAGES"


def test_a_top_level_key_on_no_page_or_two_is_refused(monkeypatch):
    monkeypatch.setattr(config_reference, "PAGES", (Page("a.md", "a", ("cluster",)), Page("b.md", "b", ("cluster",))))
    with pytest.raises(AssertionError, match="cluster is on 2 pages"):
        page_of("cluster")
    with pytest.raises(AssertionError, match="gpuOperator is on 0 pages"):
        page_of("gpuOperator")


def test_every_top_level_key_has_a_chapter_and_every_other_key_a_row():
    chapters = Layout().chapters
    assert [chapter.path.rstrip("[]") for chapter in chapters if chapter.level == 2] == list(STACK_CONFIG.names)
    assert all(chapter.page == page_of(chapter.path.split(".")[0].rstrip("[]")) for chapter in chapters)
    documented = {id(row.key) for chapter in chapters for row in chapter.rows}
    missing = [key.name for block in blocks() if block is not STACK_CONFIG for key in block.keys
               if id(key) not in documented]
    assert missing == []
    text = all_text()
    for block in blocks():
        for key in block.keys:
            assert key.description in text, key.name


def test_every_link_inside_the_reference_leads_to_one_of_its_headings():
    pages = render()
    headings = {name: {anchor(line.lstrip("#").strip()) for line in text.splitlines() if line.startswith("#")}
                for name, text in pages.items()}
    crossing = 0
    for name, text in pages.items():
        for target, fragment in re.findall(r"\]\((config-[\w-]+\.md)?#([^)]+)\)", text):
            assert fragment in headings[target or name], f"docs/{name}: {target}#{fragment}"
            crossing += bool(target and target != name)
    assert crossing, "no link crosses pages (the teams' queue resources are on the organization's page)"


def test_the_chapters_a_user_needs_are_there():
    headings = [line for line in all_text().splitlines() if line.startswith("#")]
    for wanted in ("## `cluster` — the host", "### `cluster.microk8s`", "### `cluster.eks`",
                   "### `cluster.kubeconfig`", "## `teams[]`", "### Queue resources", "### Where tenant pods run",
                   "## Secrets", "## Validation rules", "## Sharing profiles", "## Editor support"):
        assert any(heading.startswith(wanted) for heading in headings), wanted


def test_defaults_are_shown_as_a_stack_file_spells_them():
    text = all_text()
    assert "| `useSudo` | boolean | `true` |" in text
    assert "| `systemNodeGroup.instanceTypes` | non-empty list of strings | `[m6i.large]` |" in text
    assert ("| `controlPlaneResources.requests` | map of `cpu`, `memory`, `ephemeral-storage` → quantity "
            "| `{cpu: 200m, memory: 256Mi}` |") in text
    assert "| `region` | string | required |" in text
    assert "| `mode` | `install` \\| `microk8s-addon` \\| `external` | `install` |" in text
