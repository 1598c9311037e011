"""Write (or check) the config reference, derived from the key definitions.

    python -m tools.docs.config_reference [--check]

Writes ``docs/config-reference.md``, the index, and one page per group of top-level keys (``PAGES``): a
chapter per key with a table of its keys (type, default, example, meaning), each block's own introduction
and notes, and the secrets and the hand-written chapters of tools/docs/config_prose.py on the page that
names them. ``--check`` writes nothing and exits 1 when a committed page is stale or missing.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from typing import Optional, Sequence

from config.keys import REQUIRED, Block, Derived, Key, ListOf
from config.load import STACK_CONFIG
from config.secrets import SECRETS, secret_command
from config.stack_file import PROJECT_DIR
from tools.docs import config_prose
from tools.docs.generated import write_or_check

DOCS_DIR = PROJECT_DIR / "docs"
INDEX = "config-reference.md"
HEADER = ["Key", "Type", "Default", "Example", "Meaning"]
GENERAL = {"Secrets": config_prose.SECRETS, "Validation rules": config_prose.VALIDATION_RULES,
           "Sharing profiles": config_prose.SHARING_PROFILES,
           "Editor support: the JSON Schema": config_prose.EDITOR_SUPPORT}


@dataclass(frozen=True)
class Page:
    file: str
    title: str  # as it reads after "Config reference: "
    holds: tuple[str, ...]  # top-level keys and GENERAL chapters, in the page's order


# One page per job a reader comes with; every top-level key and general chapter is on exactly one.
PAGES = (
    Page("config-cluster.md", "the host", ("cluster",)),
    Page("config-gpus-and-queues.md", "GPUs and queues", ("gpuOperator", "kaiScheduler", "organization",
                                                          "Sharing profiles")),
    Page("config-teams.md", "teams and their vClusters", ("teams", "vcluster")),
    Page("config-site-services.md", "CI, observability, mirrors and backups",
         ("ci", "observability", "mirrors", "backup")),
    Page("config-secrets-and-rules.md", "secrets, validation rules and editor support",
         ("Secrets", "Validation rules", "Editor support: the JSON Schema")),
)


@dataclass
class Row:
    shown: str  # how the table names the key: its path inside the chapter's block
    key: Key


@dataclass
class Chapter:
    heading: str
    level: int
    block: Block
    path: str  # of the first key that holds the block, list items written ``teams[]``
    page: str  # the file it is written on: its top-level key's page
    lead: str = ""
    rows: list[Row] = field(default_factory=list)


def page_of(name: str) -> str:
    """The page holding a top-level key or a general chapter."""
    found = [page.file for page in PAGES if name in page.holds]
    assert len(found) == 1, f"{name} is on {len(found)} pages of tools/docs/config_reference.py PAGES, not one"
    return found[0]


def anchor(heading: str) -> str:
    """The fragment GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _block_of(key: Key) -> Optional[Block]:
    if isinstance(key.type, ListOf):
        return key.type.block
    return key.type if isinstance(key.type, Block) else None


def _references(block: Block, counts: dict[int, int]) -> dict[int, int]:
    """How many keys hold each block (by identity): a block held by several is named by its title alone."""
    for key in block.keys:
        inner = _block_of(key)
        if inner is not None:
            counts[id(inner)] = counts.get(id(inner), 0) + 1
            if counts[id(inner)] == 1:
                _references(inner, counts)
    return counts


class Layout:
    """Chapters in reading order: each top-level key, and after a chapter the titled blocks it holds."""

    def __init__(self) -> None:
        self.counts = _references(STACK_CONFIG, {})
        self.chapters: list[Chapter] = []
        self.placed: dict[int, str] = {}  # block id -> page#anchor of its chapter
        tops = []
        for key in STACK_CONFIG.keys:
            block = _block_of(key)
            assert block is not None and block.title, f"top-level key {key.name} needs a titled block"
            path = key.name + ("[]" if isinstance(key.type, ListOf) else "")
            heading = f"`{path}` — {block.title}"
            page = page_of(key.name)
            self.placed[id(block)] = f"{page}#{anchor(heading)}"
            required = " Required." if key.default is REQUIRED else ""
            tops.append(Chapter(heading, 2, block, path, page, lead=key.description + required))
        for chapter in tops:
            self._add(chapter)

    def _add(self, chapter: Chapter) -> None:
        self.chapters.append(chapter)
        nested: list[Chapter] = []
        self._rows(chapter, chapter.block, chapter.path, "", nested)
        for inner in nested:
            self._add(inner)

    def _rows(self, chapter: Chapter, block: Block, path: str, prefix: str, nested: list[Chapter]) -> None:
        for key in block.keys:
            full = f"{path}.{key.name}" if path else key.name
            chapter.rows.append(Row(prefix + key.name, key))
            inner = _block_of(key)
            if inner is None:
                continue
            item = "[]" if isinstance(key.type, ListOf) else ""
            if not inner.title:
                self._rows(chapter, inner, full + item, f"{prefix}{key.name}{item}.", nested)
            elif id(inner) not in self.placed:
                shared = self.counts[id(inner)] > 1
                heading = inner.title[0].upper() + inner.title[1:] if shared else f"`{full}{item}` — {inner.title}"
                self.placed[id(inner)] = f"{chapter.page}#{anchor(heading)}"
                nested.append(Chapter(heading, chapter.level + 1, inner, full + item, chapter.page))


def _value(value: object) -> str:
    """A default as a stack file would spell it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{name}: {_value(item)}" for name, item in value.items()) + "}"
    return str(value)


def shown_default(key: Key) -> str:
    if key.default is REQUIRED:
        return "required"
    if isinstance(key.default, Derived):
        return key.default.text
    shown = "—" if key.default is None else f"`{_value(key.default)}`"
    return f"{shown} ({key.default_note})" if key.default_note else shown


def _type(key: Key, placed: dict[int, str]) -> str:
    inner = _block_of(key)
    if inner is not None and inner.title:
        return f"{key.type.shown()}, see [{inner.title}]({placed[id(inner)]})"
    return key.type.shown()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join(" --- " for _ in HEADER) + "|"]
    return lines + ["| " + " | ".join(_cell(item) for item in row) + " |" for row in rows]


def _chapter(chapter: Chapter, placed: dict[int, str]) -> list[str]:
    lines = ["#" * chapter.level + " " + chapter.heading, ""]
    for text in (chapter.lead, chapter.block.intro):
        if text:
            lines += [text, ""]
    rows = [[f"`{row.shown}`", _type(row.key, placed), shown_default(row.key),
             f"`{row.key.example}`" if row.key.example else "",
             " ".join(part for part in (row.key.description, row.key.details) if part)] for row in chapter.rows]
    lines += _table(rows) + [""]
    if chapter.block.retired:
        retired = ", ".join(f"`{key.name}`" for key in chapter.block.retired)
        lines += [f"Retired keys, refused with what replaced them: {retired}.", ""]
    if chapter.block.notes:
        lines += [chapter.block.notes, ""]
    return lines


def _headings(text: str) -> set[str]:
    return {anchor(line.lstrip("#").strip()) for line in text.splitlines() if line.startswith("#")}


def _resolve(pages: dict[str, str]) -> dict[str, str]:
    """Links between chapters: ``#a`` where the heading is on the same page, else ``<page>#a``."""
    anchors = {name: _headings(text) for name, text in pages.items()}

    def resolved(name: str, match: re.Match) -> str:
        target, fragment = match.group(1) or name, match.group(2)
        if target == name and fragment in anchors[name]:
            return f"](#{fragment})"
        holders = [other for other, found in anchors.items() if fragment in found]
        return f"]({holders[0]}#{fragment})" if target == name and holders else match.group(0)

    return {name: re.sub(r"\]\((config-[\w-]+\.md)?#([^)]+)\)", lambda match: resolved(name, match), text)
            for name, text in pages.items()}


def render() -> dict[str, str]:
    """Every page of the reference by file name under docs/: the index first."""
    layout = Layout()
    generated = ["<!-- Generated by python -m tools.docs.config_reference from the key definitions in config/: "
                 "edit those, not this file. -->", ""]
    index = ["# Config reference", "", *generated, config_prose.INTRO, ""]
    pages = {}
    for page in PAGES:
        chapters = [chapter for chapter in layout.chapters if chapter.page == page.file]
        lines = [f"# Config reference: {page.title}", "", *generated,
                 "Part of the [config reference](config-reference.md), which says how to read these tables.", ""]
        for chapter in chapters:
            lines += _chapter(chapter, layout.placed)
        for title in (name for name in page.holds if name in GENERAL):
            lines += [f"## {title}", "", GENERAL[title], ""]
            if title == "Secrets":
                lines += _table([[f"`{secret.name}`", "secret string", 'unset (`""`)',
                                  f"`{secret_command(secret.name)}`", secret.description] for secret in SECRETS]) + [""]
        pages[page.file] = "\n".join(lines).rstrip("\n") + "\n"
        tops = [chapter.heading for chapter in chapters if chapter.level == 2]
        tops += [name for name in page.holds if name in GENERAL]
        index += [f"- [{page.title[0].upper() + page.title[1:]}]({page.file}): " + ", ".join(f"[{heading}]({page.file}#{anchor(heading)})"
                                                                 for heading in tops)]
    return _resolve({INDEX: "\n".join(index) + "\n", **pages})


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs.config_reference",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed reference is out of date")
    args = parser.parse_args(argv)
    return write_or_check({DOCS_DIR / name: text for name, text in render().items()},
                          "python -m tools.docs.config_reference", args.check)


if __name__ == "__main__":
    sys.exit(main())
