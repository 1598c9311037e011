"""How the node reads an image reference: github.com/distribution/reference's ParseNormalizedNamed, with the
grammar read from the mirrored source at a tag (regexp.go's patterns; normalize.go's rules, which
tests/test_image_registries_contract.py holds to the source), and how vCluster syncs a tenant's image change.

The kubelet parses a container's image with that package before it asks the runtime, and containerd's CRI plugin
pulls from the registry of ``ParseDockerRef`` (the same normalisation). ``registry_of`` is the test oracle: the
host the node dials and the repository path, or None where the node refuses the reference and dials nothing.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Optional

from tests.conftest import git

REFERENCE = "distribution/reference"
# The pieces of the grammar as regexp.go declares them (raw-string constants).
PIECES = ("alphanumeric", "separator", "localhost", "domainNameComponent", "optionalPort", "tag", "digestPat",
          "identifier", "ipv6address")
# Go's POSIX class, which Python's re lacks.
_GO_CLASSES = {"[[:xdigit:]]": "[0-9a-fA-F]"}


def grammar_pieces(tag: str) -> dict[str, str]:
    source = git(REFERENCE, "show", f"{tag}:regexp.go")
    pieces = dict(re.findall(r"^\s*(\w+)\s*=\s*`([^`]*)`", source, re.M))
    missing = [name for name in PIECES if name not in pieces]
    assert not missing, f"regexp.go at {tag} no longer declares {missing}"
    for go, python in _GO_CLASSES.items():
        pieces = {name: text.replace(go, python) for name, text in pieces.items()}
    return pieces


@functools.lru_cache(maxsize=None)
def reference_grammar(tag: str) -> dict[str, re.Pattern]:
    """The anchored patterns of a reference, of a path component and of a registry host, as regexp.go composes
    them (the composition lines are checked against the source by the contract test)."""
    p = grammar_pieces(tag)
    domain_name = f"{p['domainNameComponent']}(?:\\.{p['domainNameComponent']})*"
    domain_and_port = f"(?:{domain_name}|{p['ipv6address']}){p['optionalPort']}"
    path_component = f"{p['alphanumeric']}(?:{p['separator']}{p['alphanumeric']})*"
    remote_name = f"{path_component}(?:/{path_component})*"
    name = f"(?:{domain_and_port}/)?{remote_name}"
    return {"reference": re.compile(f"^({name})(?::({p['tag']}))?(?:@({p['digestPat']}))?$"),
            "identifier": re.compile(f"^{p['identifier']}$"), "path_component": re.compile(f"^{path_component}$"),
            "host": re.compile(f"^{domain_and_port}$"), "tag": re.compile(f"^{p['tag']}$"),
            "digest": re.compile(f"^{p['digestPat']}$")}


def registry_of(reference: str, tag: str = "v0.6.0") -> Optional[tuple[str, str]]:
    """(host, repository path) the node pulls ``reference`` from, or None if it refuses the reference."""
    grammar = reference_grammar(tag)
    if grammar["identifier"].match(reference):
        return None
    first, slash, rest = reference.partition("/")
    if not slash:
        domain, remainder = "docker.io", "library/" + reference
    elif first == "localhost" or "." in first or ":" in first or first.lower() != first:
        domain, remainder = ("docker.io" if first == "index.docker.io" else first), rest
    else:
        domain, remainder = "docker.io", reference
    if domain == "docker.io" and "/" not in remainder:
        remainder = "library/" + remainder
    if remainder.split(":")[0].lower() != remainder.split(":")[0]:
        return None
    parsed = grammar["reference"].match(f"{domain}/{remainder}")
    if not parsed:
        return None
    return domain, parsed.group(1)[len(domain) + 1:]


def under(registry: Optional[tuple[str, str]], entries: tuple[str, ...]) -> bool:
    """The pulled repository is under one of the entries, on a path-component boundary."""
    if registry is None:
        return False
    host, path = registry
    for entry in entries:
        entry_host, _, prefix = entry.partition("/")
        if host == entry_host and (not prefix or path == prefix or path.startswith(prefix + "/")):
            return True
    return False


def syncer_image_update(host: dict, virtual_new: dict) -> dict:
    """The host pod after vCluster's syncer copies a tenant's image change (pods/translate/diff.go
    calcContainerImageDiff): each container and init container of the host pod takes the image of the virtual
    one of its name; one the virtual pod lacks (vCluster's hosts-rewriting init container) keeps its own."""
    updated = copy.deepcopy(host)
    for field in ("containers", "initContainers"):
        images = {entry["name"]: entry["image"] for entry in virtual_new["spec"].get(field, [])}
        for entry in updated["spec"].get(field, []):
            entry["image"] = images.get(entry["name"], entry["image"])
    return updated
