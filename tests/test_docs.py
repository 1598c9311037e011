"""The README is an entry, not a manual: short, and every page of the manual under docs/ one link away.

- README.md stays under 250 lines;
- every markdown page under docs/ is linked from the README itself, every picture shown by a page;
- every relative link and image in README.md and docs/ points to a file that exists, and an anchor into a
  markdown file names one of its headings (as GitHub spells heading anchors);
- every page under docs/ that a tracked file names (code, config, error messages, tests, golden plans:
  `docs/<page>.md`, `docs/<page>.md#anchor`, or `<page>.md#anchor` for a page under docs/) exists, with that heading.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

from tests.test_repository import tracked_files

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) and ![alt](target); the target may carry a "title".
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# A page of this manual named in any text: docs/<page>.md[#anchor], or <page>.md#anchor. Not a deeper path
# (an upstream repository's docs/<dir>/<page>.md), nor one inside another path or URL.
DOC_REFERENCE = re.compile(r"(?<![\w/.-])(docs/)?([\w-]+\.md)(?:#([\w-]+))?")
HTML_ANCHOR = re.compile(r'<a (?:id|name)="([\w-]+)"')
# A section of a page named in words: docs/<page>.md, "Section") or docs/<page>.md, Section), capitalised.
SECTION_REFERENCE = re.compile(r'docs/([\w-]+\.md), \\?"?([A-Z][^)"`;\\]{2,80}?)\\?"?\)')
BOLD = re.compile(r"\*\*([^*]+)\*\*")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """Lines outside fenced code blocks, with their numbers."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def links(text: str) -> list[tuple[int, str]]:
    """Every link and image target of a markdown text, outside code, with its line number."""
    return [(number, target) for number, line in prose_lines(text)
            for target in LINK.findall(CODE_SPAN.sub("", line)) if target]


def is_relative(target: str) -> bool:
    return not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) and not target.startswith("//")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a markdown text: each heading's, as GitHub numbers repeats, and each HTML anchor's."""
    found, seen = set(HTML_ANCHOR.findall(text)), {}
    for _, line in prose_lines(text):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    problems = []
    text = page.read_text()
    for number, target in links(text):
        if not is_relative(target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / unquote(path)).resolve() if path else page
        where = f"{page.relative_to(root)}:{number}: {target}"
        if not resolved.exists():
            problems.append(f"{where} (no such file)")
        elif anchor and resolved.suffix == ".md" and unquote(anchor).lower() not in anchors(resolved.read_text()):
            problems.append(f"{where} (no heading with that anchor in {resolved.relative_to(root)})")
    return problems


def tracked_lines(files: list[Path]):
    """Every line of the readable ``files``, with its file and number."""
    for path in files:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            yield path, number, line


def broken_doc_references(files: list[Path], root: Path = ROOT) -> list[str]:
    problems = []
    for path, number, line in tracked_lines(files):
        for prefix, name, anchor in DOC_REFERENCE.findall(line):
            page = root / "docs" / name
            where = f"{path.relative_to(root)}:{number}: {prefix}{name}" + (f"#{anchor}" if anchor else "")
            if not page.is_file():
                if prefix:
                    problems.append(f"{where} (no such page)")
            elif anchor and anchor.lower() not in anchors(page.read_text()):
                problems.append(f"{where} (no heading with that anchor in docs/{name})")
    return problems


def broken_section_references(files: list[Path], root: Path = ROOT) -> list[str]:
    """Sections named in words: each must be a heading of the page, a bold lead-in holding those words or an HTML
    anchor of their slug."""
    problems = []
    for path, number, line in tracked_lines(files):
        for name, section in SECTION_REFERENCE.findall(line):
            page = root / "docs" / name
            if not page.is_file():
                continue  # the page check reports it
            target = page.read_text()
            if slug(section) not in anchors(target) and not any(section.lower() in bold.lower()
                                                                 for bold in BOLD.findall(target)):
                problems.append(f"{path.relative_to(root)}:{number}: docs/{name}, {section}")
    return problems


def linked_files(page: Path) -> set[Path]:
    return {(page.parent / unquote(target.partition("#")[0])).resolve()
            for _, target in links(page.read_text()) if is_relative(target) and target.partition("#")[0]}


# --- the README is an entry ----------------------------------------------------------------------


def test_the_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines < MAX_README_LINES, f"README.md has {lines} lines; move the topic to a page under docs/"


def test_every_page_under_docs_is_linked_from_the_readme():
    unlinked = [str(page.relative_to(ROOT)) for page in sorted(DOCS.rglob("*.md"))
                if page.resolve() not in linked_files(README)]
    assert unlinked == []


def test_every_picture_under_docs_is_shown_by_a_page():
    shown = set().union(*(linked_files(page) for page in pages()))
    pictures = [p for p in sorted(DOCS.rglob("*")) if p.suffix in {".svg", ".png", ".jpg", ".gif"}]
    assert pictures and [str(p.relative_to(ROOT)) for p in pictures if p.resolve() not in shown] == []


# --- links and images ----------------------------------------------------------------------------


def test_every_relative_link_and_image_points_to_an_existing_file_and_heading():
    assert [problem for page in pages() for problem in broken_links(page)] == []


def test_the_link_check_sees_a_broken_link_and_a_broken_anchor(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## `vcluster` — tenant defaults\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text("See [other](other.md#vcluster--tenant-defaults), [twice](other.md#twice-1), ![pic](x.svg),\n"
                    "[gone](other.md#nowhere), [web](https://example.com/x.md), `[code](missing.md)`, [self](#top).\n"
                    "```\n[fenced](missing.md)\n```\n# Top\n")
    assert broken_links(page, root=tmp_path) == ["page.md:1: x.svg (no such file)",
                        "page.md:2: other.md#nowhere (no heading with that anchor in other.md)"]


# --- pages named outside the manual --------------------------------------------------------------


def test_every_page_and_anchor_of_the_manual_a_tracked_file_names_exists():
    # This file's own examples name the pages of a made-up manual.
    assert broken_doc_references([path for path in tracked_files() if path != Path(__file__).resolve()]) == []


def test_the_reference_check_sees_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## Node pressure\n")
    code = tmp_path / "load.py"
    code.write_text('"See [Node pressure](guide.md#node-pressure), docs/guide.md#node-pressure, docs/guide.md."\n'
                    '"See docs/gone.md, docs/guide.md#sizes and [Sizes](guide.md#sizes); CHANGELOG.md#v1, summary.md,"\n'
                    '"KAI\'s docs/operator/scheduling-shards.md, https://example.com/docs/x.md#y."\n')
    assert broken_doc_references([code], root=tmp_path) == [
        "load.py:2: docs/gone.md (no such page)",
        "load.py:2: docs/guide.md#sizes (no heading with that anchor in docs/guide.md)",
        "load.py:2: guide.md#sizes (no heading with that anchor in docs/guide.md)"]


def test_every_section_of_the_manual_a_tracked_file_names_in_words_exists():
    assert broken_section_references([path for path in tracked_files() if path != Path(__file__).resolve()]) == []


def test_the_section_check_sees_a_missing_section_and_takes_headings_bold_lead_ins_and_html_anchors(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text('# Guide\n\n## What expires\n\n- **Not closed: volume claims.** x\n'
                                                '<a id="node-pressure"></a>\n')
    code = tmp_path / "notes.py"
    code.write_text('"(docs/guide.md, What expires) (docs/guide.md, \\"Volume claims\\") (docs/guide.md, Node '
                    'pressure)"\n"(docs/guide.md, Gone section) (docs/guide.md, lower case is prose)"\n')
    assert broken_section_references([code], root=tmp_path) == ["notes.py:2: docs/guide.md, Gone section"]
