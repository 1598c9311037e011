"""Every label and annotation key KAI Scheduler's Go source reads or writes, found by its shape in the code.

A regex over the constants file alone misses most keys: their Go names follow no pattern
(``GpuFraction``, ``GPUGroup``), some live in plugin packages or are literals at the point of use,
two are command-line flag defaults, and two families are found by prefix. So this scans every
non-test Go file under ``pkg/`` and ``cmd/`` at a tag and collects the keys used in

- index expressions on labels or annotations (``pod.Labels[K]``, ``GetAnnotations()[K]``, local maps
  named ``...labels``/``...annotations``),
- label selectors (``client.HasLabels{K}``, ``client.MatchingLabels{K: v}``),
- map literals assigned to labels or annotations,
- defaults of ``--*-label-key`` flags (configurable keys, queue and node-pool),
- prefix tests (``strings.HasPrefix(labelKey, K)`` gives ``K*``; ``IsMigResource`` over annotation keys
  gives ``nvidia.com/mig-*``),

where ``K`` is a string literal or a constant resolved through every ``NAME = "..."`` or
``NAME = OTHER + "..."`` of the tree (by bare name: a superset, which a containment test can afford).
"""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
from collections import defaultdict
from pathlib import Path

SKIPPED_DIRS = ("/test_utils/", "/test-utils/", "/env-tests/")
CONSTANT = re.compile(r'^\s*(?:const\s+)?([A-Za-z_]\w*)\s*(?:[\w.]+\s*)?=\s*"([^"]*)"\s*(?://.*)?$')
CONCATENATED = re.compile(r'^\s*(?:const\s+)?([A-Za-z_]\w*)\s*=\s*([A-Za-z_]\w*)\s*\+\s*"([^"]*)"')
INDEX = re.compile(r'\.(Labels|Annotations|GetLabels\(\)|GetAnnotations\(\))\[([^\]]+)\]')
LOCAL_MAP = re.compile(r'(?<![.\w])(\w*(?:[Ll]abels|[Aa]nnotations))\[([^\]]+)\]')
SELECTOR = re.compile(r'client\.(?:HasLabels|MatchingLabels)\{([^}]*)\}')
MAP_OPENING = re.compile(r'(?i)\b(labels|annotations)\s*(?::=|=|:)\s*map\[string\]string\{\s*$')
MAP_KEY = re.compile(r'^\s*("[^"]+"|[\w.]+)\s*:')
FLAG_DEFAULT = re.compile(r'StringVar\(&[\w.]+,\s*"[\w-]*label-key",\s*([\w."-]+)')
PREFIX_TEST = re.compile(r'strings\.HasPrefix\((\w*(?:[Ll]abel|[Aa]nnotation)\w*),\s*([\w."/-]+)\)')
MIG_ANNOTATION = re.compile(r'IsMigResource\(v1\.ResourceName\(\w*[Aa]nnotation\w*\)\)')
# A Kubernetes label or annotation key (optionally a family ending in '*'); drops log texts and paths.
KEY_SHAPE = re.compile(r'^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?[-/]?\*?$')

LABEL, ANNOTATION = "label", "annotation"


def source_at(mirror: Path, tag: str) -> dict[str, str]:
    """The non-test Go files under pkg/ and cmd/ of the mirror at ``tag``: path -> text."""
    archive = subprocess.run(["git", "--git-dir", str(mirror), "archive", tag, "pkg", "cmd"],
                             capture_output=True, check=True).stdout
    files = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            name = member.name
            if (member.isfile() and name.endswith(".go") and not name.endswith("_test.go")
                    and not Path(name).name.startswith("zz_generated") and not any(d in name for d in SKIPPED_DIRS)):
                files[name] = tar.extractfile(member).read().decode("utf-8", "replace")
    return files


def _constants(files: dict[str, str]) -> dict[str, set[str]]:
    table: dict[str, set[str]] = defaultdict(set)
    lines = [line for text in files.values() for line in text.splitlines()]
    for line in lines:
        if match := CONSTANT.match(line):
            table[match.group(1)].add(match.group(2))
    for line in lines:
        if (match := CONCATENATED.match(line)) and match.group(2) in table:
            table[match.group(1)] |= {value + match.group(3) for value in table[match.group(2)]}
    return table


def string_constants(source: str) -> dict[str, str]:
    """The string constants of one Go file (``NAME = "..."``, ``NAME = OTHER + "..."``), those of one value."""
    return {name: next(iter(values)) for name, values in _constants({"": source}).items() if len(values) == 1}


def keys_of(files: dict[str, str]) -> set[tuple[str, str]]:
    """(key, kind) for every label and annotation key the files use."""
    table = _constants(files)

    def resolve(expression: str) -> set[str]:
        expression = expression.strip()
        if len(expression) > 1 and expression[0] == expression[-1] == '"':
            return {expression[1:-1]}
        return table.get(expression.split(".")[-1], set()) if re.fullmatch(r"[\w.]+", expression) else set()

    found: set[tuple[str, str]] = set()

    def add(values: set[str], kind: str) -> None:
        found.update((value, kind) for value in values if KEY_SHAPE.match(value))

    for text in files.values():
        map_kind = None
        for line in text.splitlines():
            for field, key in INDEX.findall(line):
                add(resolve(key), LABEL if "Label" in field else ANNOTATION)
            for receiver, key in LOCAL_MAP.findall(line):
                add(resolve(key), LABEL if "abels" in receiver else ANNOTATION)
            for entries in SELECTOR.findall(line):
                for entry in entries.split(","):
                    add(resolve(entry.split(":")[0]), LABEL)
            if match := FLAG_DEFAULT.search(line):
                add(resolve(match.group(1)), LABEL)
            if match := PREFIX_TEST.search(line):
                kind = LABEL if "abel" in match.group(1) else ANNOTATION
                add({value if value.endswith("*") else value + "*" for value in resolve(match.group(2))}, kind)
            if MIG_ANNOTATION.search(line):
                add({value + "*" for value in table.get("NvidiaMigResourcePrefix", set())}, ANNOTATION)
            if map_kind is not None:
                if line.strip().startswith("}"):
                    map_kind = None
                elif match := MAP_KEY.match(line):
                    add(resolve(match.group(1)), map_kind)
            if match := MAP_OPENING.search(line):
                map_kind = LABEL if match.group(1).lower() == "labels" else ANNOTATION
    return found
