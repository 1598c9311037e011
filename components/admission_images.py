"""Which image references a tenant pod may name on a site with ``vcluster.allowedRegistries``: CEL over the raw
reference, as the node will read it.

vCluster copies a container's ``image`` to the host unchanged (its image translator swaps only names the site
lists in ``translateImage``) and syncs later image changes too; the node's runtime then dials the reference's
registry, wherever that is. The runtime's parser (github.com/distribution/reference) decides the registry: the
first path component is a host only if it has a dot or a colon, is ``localhost`` or has an upper-case letter;
otherwise the name is Docker Hub's (``docker.io``), under ``library/`` if it has one component; ``index.docker.io``
is renamed ``docker.io``. The regular expressions below match exactly the references that this reading puts under
an entry, on a path-component boundary, with any tag and digest after it (RE2 syntax, as ``matches`` takes).
"""

from __future__ import annotations

import json

from config import versions
from config.image_registries import (
    DEFAULT_DOMAIN, DIGEST, LEGACY_DOMAIN, LOCALHOST, OFFICIAL_PREFIX, PATH_COMPONENT, TAG, Registry,
)
from config.model import MEMORY_CAPPED, Team
from config.vcluster_images import coredns_image, hami_core_image, rewrite_hosts_image

# A first path component that the runtime reads as a Docker Hub namespace: no dot (and not localhost, which the
# expression excludes besides, RE2 having no look-ahead).
_NAMESPACE = r"[a-z0-9]+(?:(?:_|__|-+)[a-z0-9]+)*"
# A bare image ID, which the runtime refuses to read as a name (it would be an official image's otherwise).
_IDENTIFIER = "^[a-f0-9]{64}$"
_TAIL = rf"(?::{TAG})?(?:@{DIGEST})?"


def _literal(text: str) -> str:
    """``text`` as an RE2 literal: only '.', '[' and ']' occur in a registry entry that are special."""
    return text.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]")


def _under(prefix: str, at_least: int = 1) -> str:
    """Repository paths of at least ``at_least`` components that start with ``prefix``'s whole components."""
    if not prefix:
        return PATH_COMPONENT + (rf"(?:/{PATH_COMPONENT})+" if at_least > 1 else rf"(?:/{PATH_COMPONENT})*")
    more = "+" if prefix.count("/") + 1 < at_least else "*"
    return _literal(prefix) + rf"(?:/{PATH_COMPONENT}){more}"


def _official(prefix: str) -> str:
    """The one-component names that Docker Hub reads as ``library/<name>`` under ``prefix``, or '' for none."""
    if prefix in ("", OFFICIAL_PREFIX):
        return PATH_COMPONENT
    if prefix.startswith(OFFICIAL_PREFIX + "/") and prefix.count("/") == 1:
        return _literal(prefix.split("/")[1])
    return ""


def _alternatives(registry: Registry) -> tuple[list[str], list[str]]:
    """Patterns of the references under ``registry``: those that name a host, and Docker Hub's familiar ones that
    name none (their first component must not be localhost)."""
    if registry.host != DEFAULT_DOMAIN:
        return [f"{_literal(registry.host)}/{_under(registry.path)}"], []
    hosts = f"(?:{_literal(DEFAULT_DOMAIN)}|{_literal(LEGACY_DOMAIN)})/"
    # Docker Hub paths have two components at least: one alone is an official image's.
    named, familiar = [hosts + _under(registry.path, at_least=2)], []
    first = registry.path.split("/")[0]
    if not registry.path:
        familiar.append(f"{_NAMESPACE}(?:/{PATH_COMPONENT})+")
    elif "." not in first:
        familiar.append(_under(registry.path, at_least=2))
    official = _official(registry.path)
    if official:
        named.append(hosts + official)
        familiar.append(official)
    return named, familiar


def registry_patterns(entries: tuple[str, ...]) -> tuple[str, str]:
    """Anchored RE2 patterns of the references the entries admit: named hosts, and Docker Hub familiar names."""
    named, familiar = [], []
    for entry in entries:
        with_host, without = _alternatives(Registry.of(entry))
        named += with_host
        familiar += without

    def anchored(options: list[str]) -> str:
        return f"^(?:{'|'.join(options)}){_TAIL}$" if options else ""

    return anchored(named), anchored(familiar)


def platform_images(team: Team) -> tuple[str, ...]:
    """The references the platform itself puts into the team's synced pods, admitted whatever the list says: its
    DNS, vCluster's hosts-rewriting init container, the smoke test's pods and, for a memory-capped team,
    HAMi-core."""
    images = [coredns_image(team.vcluster), rewrite_hosts_image(team.vcluster),
              *map(team.vcluster.mirrors.image, (versions.SMOKE_CUDA_IMAGE, versions.SMOKE_PAUSE_IMAGE))]
    if team.isolation.tier == MEMORY_CAPPED:
        images.append(hami_core_image(team.vcluster))
    return tuple(sorted(set(images)))


def allowed_image(team: Team, reference: str) -> str:
    """CEL: the image ``reference`` (an expression) is one of the platform's or under an allowed registry."""
    named, familiar = registry_patterns(team.vcluster.allowed_registries or ())
    options = [f"{reference} in {json.dumps(list(platform_images(team)))}"]
    if named:
        options.append(f"{reference}.matches({json.dumps(named)})")
    if familiar:
        options.append(f"({reference}.matches({json.dumps(familiar)}) && !{reference}.startsWith('{LOCALHOST}/') && "
                       f"!{reference}.matches('{_IDENTIFIER}'))")
    return f"({' || '.join(options)})"
