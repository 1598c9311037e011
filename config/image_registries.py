"""The registries a site lets its GPU nodes pull tenant images from (``vcluster.allowedRegistries``).

An entry is a registry host, with an optional port, and optionally a repository path prefix under it. The node
reads an image reference with github.com/distribution/reference (the kubelet and containerd's CRI plugin both
parse with it), and the entry is written in the form that package normalises a reference to, so that one spelling
means one place: the host exactly as the runtime dials it, Docker Hub as ``docker.io``, paths in lower case. The
shapes below follow that package's grammar (regexp.go); tests/test_image_registries_contract.py holds them to it
at every mirrored tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from config.key_types import Invalid, type_name

# distribution/reference's familiar-name rules (normalize.go): the domain a reference without one gets, the path
# prefix of Docker Hub's official images, its legacy domain (renamed to the default), and the one domain without a
# dot or a port.
DEFAULT_DOMAIN = "docker.io"
OFFICIAL_PREFIX = "library"
LEGACY_DOMAIN = "index.docker.io"
LOCALHOST = "localhost"

# Lower-case only: the runtime refuses an upper-case path, and a host is written as the node resolves it.
PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
HOST_LABEL = r"(?:[a-z0-9]|[a-z0-9][a-z0-9-]*[a-z0-9])"
HOST = rf"(?:{HOST_LABEL}(?:\.{HOST_LABEL})*|\[[a-f0-9:]+\])(?::[0-9]+)?"
TAG = r"[\w][\w.-]{0,127}"
DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"

EXAMPLES = "ghcr.io/acme, nvcr.io/nvidia, docker.io/library, 123456789012.dkr.ecr.eu-west-1.amazonaws.com"


@dataclass(frozen=True)
class Registry:
    """One entry: the host as the runtime dials it (with its port, if any) and a path prefix ('' for all)."""

    host: str
    path: str

    @classmethod
    def of(cls, entry: str) -> "Registry":
        host, _, path = entry.partition("/")
        return cls(host, path)


def _entry_problem(entry: str) -> tuple[str, str]:
    """What is wrong with an entry and how to write it, or ('', '') if nothing is."""
    if "://" in entry:
        return ("names a scheme; the runtime picks the protocol itself",
                f"write the host and path only, e.g. {entry.split('://', 1)[1] or 'ghcr.io/acme'}")
    if "@" in entry:
        return "names a digest; an entry admits every tag and digest under it", f"write {entry.split('@')[0]}"
    if entry != entry.strip() or not entry:
        return "is blank or has spaces around it", "write the registry alone, e.g. ghcr.io/acme"
    if entry.endswith("/") or "//" in entry:
        return "has an empty path component", f"write it without the extra '/': {re.sub('/+', '/', entry).rstrip('/')}"
    host, _, path = entry.partition("/")
    if host.lower() == LEGACY_DOMAIN:
        return (f"{LEGACY_DOMAIN} is Docker Hub's legacy name, which the runtime renames to {DEFAULT_DOMAIN}",
                f"write {DEFAULT_DOMAIN}" + (f"/{path}" if path else ""))
    if host != host.lower() or path != path.lower():
        return ("has upper-case letters; the runtime refuses an upper-case path and resolves a host in any case",
                f"write {entry.lower()}")
    if ":" in path:
        return "names a tag; an entry admits every tag and digest under it", f"write {entry.rsplit(':', 1)[0]}"
    if not re.fullmatch(HOST, host):
        return ("does not start with a registry host (a DNS name or an IPv4 address, or an IPv6 address in "
                "brackets, with an optional :port)", f"start it with the registry host, e.g. {EXAMPLES}")
    if "." not in host and ":" not in host and host != LOCALHOST:
        return (f"'{host}' has no dot and no port and is not {LOCALHOST}, so the runtime reads it as a Docker Hub "
                "repository, not as a host",
                f"write the host with its domain, or for Docker Hub {DEFAULT_DOMAIN}/{entry}")
    bad = [component for component in path.split("/") if path and not re.fullmatch(PATH_COMPONENT, component)]
    if bad:
        return (f"path component '{bad[0]}' is not a repository name (lower-case letters and digits, separated by "
                "'.', '_', '__' or dashes)", f"write the repository path as the registry shows it, e.g. {EXAMPLES}")
    return "", ""


@dataclass(frozen=True)
class RegistryList:
    """A non-empty list of registry entries (a host, optionally with a repository path prefix)."""

    fix: ClassVar[str] = f"write it as a list of registries, e.g. [{EXAMPLES}]"

    def parse(self, value: object, fix: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise Invalid(f"expected a list of registries, got {type_name(value)}", fix)
        if not value:
            raise Invalid("is empty, which would refuse every image of every tenant",
                          "list the registries tenants pull from, or remove the key to allow any registry")
        for index, entry in enumerate(value):
            if not isinstance(entry, str):
                raise Invalid(f"expected a registry, got {type_name(entry)}", "write it as a string, e.g. ghcr.io/acme",
                              entry=f"[{index}]", value=entry)
            problem, entry_fix = _entry_problem(entry)
            if problem:
                raise Invalid(problem, entry_fix, entry=f"[{index}]", value=entry)
        return tuple(value)

    def schema(self) -> dict[str, Any]:
        entry = rf"^{HOST}(?:/{PATH_COMPONENT})*$"
        return {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": entry}}

    def shown(self) -> str:
        return "list of registries (`host[:port][/path]`)"


def unlisted_registries_notes(allowed: Optional[tuple[str, ...]]) -> list[str]:
    """The reviewer is told when tenants may have the nodes pull from any address (the default)."""
    if allowed is not None:
        return []
    return ["vcluster.allowedRegistries is not set: a tenant pod may name an image on any host and port, and the "
            "nodes connect there to pull it, from their own network and outside every NetworkPolicy (the pull "
            "error tells the tenant what answers: a port scan of whatever the nodes reach). List the registries "
            f"the teams pull from, e.g. [{EXAMPLES}] (docs/security-admission.md, Image registries)."]
