"""Markdown building blocks of the review summary: numbers, code spans, tables."""

from __future__ import annotations

from typing import Any, Iterable, Sequence


def fmt_num(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(round(value, 6))
    if value is None:
        return "—"
    return str(value)


def fmt_amount(value: Any) -> str:
    """A queue quota/limit: -1 reads as unlimited."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == -1:
        return "unlimited"
    return fmt_num(value)


def code(text: Any) -> str:
    text = str(text)
    if "`" in text:
        return f"`` {text} ``"
    return f"`{text}`"


def cell(text: str) -> str:
    """A markdown table cell (GFM needs pipes escaped even inside code spans)."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(str(item)) for item in row) + " |" for row in rows]
    return lines


def fmt_labels(labels: Any) -> str:
    if not isinstance(labels, dict) or not labels:
        return "—"
    return ", ".join(code(f"{key}={value}") for key, value in sorted(labels.items()))
