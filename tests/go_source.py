"""Which label and annotation keys a Go project names, read from its source at a mirrored tag (tests of the network
plugins and load-balancer implementations a host may run: tests/test_network_plugin_keys.py,
tests/test_load_balancer_keys.py).

Read with regular expressions, not a Go parser: a key is found written whole (``"ipam.antrea.io/pod-ips"``), as a
constant holding a prefix joined to a name (``AnnotationPre + "/ippool"``), or as a constant holding a whole key
that the code looks up in an object's labels or annotations (``svc.Annotations[svcDSRAnnotation]``), also through a
variable set from such a constant. A key built another way (``fmt.Sprintf``, a constant of another module joined
there) is missed; each test asserts that what it found is not empty.
"""

from __future__ import annotations

import re
import subprocess
from typing import Optional, Sequence

from tests.conftest import git

DOMAIN = r"([a-z0-9-]+\.)+[a-z]+"
KEY = DOMAIN + "/[A-Za-z0-9_.-]+"
# Tests, test helpers and vendored code: none of it runs in the plugin.
_NOT_SHIPPED = (":!*_test.go", ":!*test/*", ":!*testing/*", ":!*e2etest*", ":!vendor", ":!*/vendor/*")
_IMPORT_OR_COMMENT = re.compile(r'^\s*(import\s+)?(\w+\s+)?"[^"]+"\s*$|^\s*//')


def code_lines(repository: str, tag: str, pattern: str, paths: Sequence[str] = ("pkg", "cmd")) -> list[str]:
    """Lines of the project's shipped Go code under ``paths`` matching ``pattern``, imports and comments left out."""
    try:
        found = git(repository, "grep", "-h", "-E", pattern, tag, "--",
                    *(f"{path}/*.go" if path != "." else "*.go" for path in paths), *_NOT_SHIPPED).splitlines()
    except subprocess.CalledProcessError as nothing:
        if nothing.returncode == 1:  # git grep's "no line matched"
            return []
        raise
    return [line for line in found if not _IMPORT_OR_COMMENT.match(line)]


def string_constants(repository: str, tag: str, value: str, paths: Sequence[str] = ("pkg", "cmd")) -> dict[str, str]:
    """The project's constants (or variables set once) holding a string matching ``value``, by name."""
    assigned = rf'(\w+)(?:[ \t]+\w+)?[ \t]*:?=[ \t]*"({value})"[ \t]*(?://.*)?$'
    lines = "\n".join(line.strip() for line in code_lines(repository, tag, rf'= *"{value}"', paths))
    return {name: text for name, text, *_ in re.findall(assigned, lines, re.MULTILINE)}


def named_keys(repository: str, tag: str, paths: Sequence[str] = ("pkg", "cmd")) -> set[str]:
    """Every label or annotation key the code names: written whole, a prefix constant joined to a name (Spiderpool's
    AnnotationPre + "/ippool", Cilium's Prefix + "/lb-ipam-ips"), or a bare constant it looks up (bare_keys)."""
    whole = {key for line in code_lines(repository, tag, f'"{DOMAIN}/[A-Za-z0-9_.-]+"', paths)
             for key in (found.group(1) for found in re.finditer(f'"({KEY})"', line))}
    domains = string_constants(repository, tag, DOMAIN, paths)
    joined = {(name, tail) for line in code_lines(repository, tag, r'\w+ *\+ *"[/.][A-Za-z0-9_.-]+"', paths)
              for name, tail in re.findall(r'(\w+)\s*\+\s*"([/.][A-Za-z0-9_.-]+)"', line)}
    prefixed = {domains[name] + tail for name, tail in joined if name in domains}
    return whole | prefixed | bare_keys(repository, tag, paths)


def bare_keys(repository: str, tag: str, paths: Sequence[str] = ("pkg", "cmd")) -> set[str]:
    """Keys without a prefix that the code looks up in an object's labels or annotations by a constant holding a
    domain (Antrea's NPLAnnotationKey, "nodeportlocal.antrea.io")."""
    domains = string_constants(repository, tag, DOMAIN, paths)
    return {domains[name] for name in looked_up(repository, tag, paths) if name in domains}


def looked_up(repository: str, tag: str, paths: Sequence[str] = ("pkg", "cmd"), *, objects: Optional[str] = None,
              metadata: str = "(?:[Aa]nnotations|[Ll]abels)") -> set[str]:
    """What the code looks up in labels or annotations (``metadata``), of any object or of those its variables
    matching ``objects`` hold: each a literal key (quoted), the name of a constant or variable (a package's name
    dropped), or the expression as written (which names no key the tests know, so they fail on it)."""
    owner = rf"(?<![\w.])(?:{objects})\.(?:ObjectMeta\.)?" if objects else ""
    lookup = rf"{owner}(?:Get)?{metadata}(?:\(\))?\[([^]\[]+)\]"
    return {name.split(".")[-1] if re.fullmatch(r"(\w+\.)?\w+", name) else name
            for line in code_lines(repository, tag, r"(Annotations|Labels)(\(\))?\[", paths)
            for name in re.findall(lookup, line)}


def key_names(repository: str, tag: str, key: str, paths: Sequence[str] = ("pkg", "cmd")) -> dict[str, str]:
    """The constants holding a whole key matching ``key``, and the variables set from one of them (kube-vip v0.9.2
    picks its IPv4 or IPv6 endpoint key into one variable), by name."""
    constants = string_constants(repository, tag, key, paths)
    aliases = code_lines(repository, tag, r"\w+\s*:?=\s*(\w+\.)?\w+\s*$", paths)
    for alias, value in (found for line in aliases
                         for found in re.findall(r"(\w+)\s*:?=\s*(?:\w+\.)?(\w+)\s*$", line)):
        if value in constants:
            constants.setdefault(alias, constants[value])
    return constants
