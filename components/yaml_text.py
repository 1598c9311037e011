"""YAML streams the program hands to charts and controllers, written by libyaml where it writes the same text.

A large site writes the defaults applied inside each tenant's vCluster as a YAML stream of about 36 kB
per tenant. PyYAML's pure-Python emitter spent about a quarter of a 300-team run's CPU on them; libyaml's
emitter, from which PyYAML's was ported, is about fifteen times faster. The two write the same text for
documents whose keys are non-empty and whose strings are printable ASCII, tabs and newlines, as long
as no line is long enough to be wrapped: they wrap long quoted scalars at different columns, and differ
on other characters and on an empty key. So libyaml writes only such documents with a width no line can
reach, and PyYAML's own emitter writes everything else. Either way the text is what ``yaml.safe_dump_all``
gives (tests/test_yaml_text.py).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import yaml

# A PyYAML built without libyaml writes every document with its own emitter.
_FAST_DUMPER = getattr(yaml, "CSafeDumper", None)
_AGREED_TEXT = re.compile(r"[\x20-\x7e\t\n]*")
_PYYAML_DEFAULT_WIDTH = 80


def yaml_documents(documents: Sequence[Any], **options: Any) -> str:
    """``yaml.safe_dump_all(documents, **options)``'s text."""
    fast = written_by_libyaml(documents, options.get("width") or _PYYAML_DEFAULT_WIDTH)
    return yaml.dump_all(documents, Dumper=_FAST_DUMPER if fast else yaml.SafeDumper, **options)


def written_by_libyaml(documents: Sequence[Any], width: int = _PYYAML_DEFAULT_WIDTH) -> bool:
    """Whether libyaml writes these documents: PyYAML has it, they hold only what the two emitters agree
    on, and no line of theirs can reach ``width`` (escapes at most double a string; each level of
    nesting indents by at most four)."""
    if _FAST_DUMPER is None:
        return False
    size = [0]
    agreed = all(isinstance(document, (dict, list)) and _agreed(document, size) for document in documents)
    return agreed and size[0] + 16 < width


def _agreed(value: Any, size: list[int]) -> bool:
    size[0] += 4
    if isinstance(value, str):
        size[0] += 2 * len(value)
        return _AGREED_TEXT.fullmatch(value) is not None
    if isinstance(value, dict):
        return all(isinstance(key, str) and key != "" and _agreed(key, size) and _agreed(item, size)
                   for key, item in value.items())
    if isinstance(value, list):
        return all(_agreed(item, size) for item in value)
    if isinstance(value, (int, float)):  # bool too; NaN is left to PyYAML
        size[0] += len(repr(value))
        return value == value
    return value is None
