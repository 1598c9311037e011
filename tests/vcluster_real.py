"""vCluster's own syncers, run: tests/vcluster_real/ (package main) built inside vCluster's source at a mirrored tag.

``run_syncer`` hands a batch of virtual pods and other synced objects (and of tenant edits of them), with the Helm
values the program renders for one team, to vCluster's real ``SyncToHost`` (and ``Sync``), or for a Service CREATE
to its API proxy's, on fake host and virtual clients, vCluster's config package parsing the values, and returns
what they write, so tests can hold ``tests/vcluster_pods.py`` and ``tests/synced_objects_sim.py`` against the code
they re-implement (``team_values``, ``as_go_writes``, ``differences``, ``listed``, ``verdict_differences``: how
both real-syncer test files read and compare). ``filters/service_create.go`` goes into vCluster's own filters package: the proxy's Service
CREATE is unexported there.

The harness is built once per tag and harness content, under ``$GPU_TENANCY_GO_CACHE`` (default: the system
temporary folder), with the vendored modules of the tag (``-mod=vendor``, no network). It needs the mirror of
loft-sh/vcluster and a Go toolchain new enough for the tag's go.mod (tests/go_toolchain.py);
without them the tests skip and say which is missing.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Callable, Iterable

from tests.conftest import mirror, mirrored_tag
from tests.go_toolchain import built_in_tree

VCLUSTER = "loft-sh/vcluster"
HARNESS = Path(__file__).with_name("vcluster_real")
# Where filters/ goes: the package of the API proxy's Service CREATE it reaches.
FILTERS_PACKAGE = "pkg/server/filters"
# Where main.go goes in the exported tree: a command of vCluster's own module, so its vendor/ serves the imports.
HARNESS_PACKAGE = "cmd/gpu-tenancy-sync-real"


def harness(tag: str) -> Path:
    """The harness binary for vCluster ``tag``, built when the cache lacks it (minutes the first time)."""
    files = {path: FILTERS_PACKAGE if path.parent.name == "filters" else HARNESS_PACKAGE
             for path in sorted(HARNESS.rglob("*.go"))}
    return built_in_tree(mirror(VCLUSTER), mirrored_tag(VCLUSTER, tag), files, HARNESS_PACKAGE, "vcluster-real")


def run_syncer(tag: str, *, name: str, namespace: str, values: dict, kube_ip: str, dns_ip: str, token: str,
               pods: tuple = (), updates: tuple = (), services: tuple = (), namespaces: tuple = (), nodes: tuple = (),
               objects: tuple = (), object_updates: tuple = (), host_version: str = "") -> dict:
    """vCluster ``tag``'s syncers for the release ``name`` in host ``namespace`` with Helm ``values``:
    ``{"created", "updated", "objectsCreated", "objectsUpdated"}``. For each virtual pod of ``pods``,
    ``{"host": pod}``, what SyncToHost creates; for each ``{"host", "virtualOld", "virtual"}`` (and optionally
    ``"hostOld"``, the host pod the syncer last saw, else ``host``) of ``updates`` (a
    tenant's edit of a running pod), ``{"host", "virtual"}`` after Sync; or ``{"error": text}``. Likewise for
    ``objects`` (``{"kind", "object", "via"}``, ``via`` ``"proxy"`` for a Service the tenant creates, served by the
    API proxy) and ``object_updates`` (``{"kind", "host", "virtualOld", "virtual"}``), or ``{"skipped": why}`` when
    vCluster writes no host object. ``kube_ip``/``dns_ip``: the ClusterIPs of the
    vCluster's Service and of its synced DNS Service; ``token``: what the virtual API server answers a TokenRequest
    with; ``services``, ``namespaces``, ``nodes``: the virtual cluster's objects (nodes as synced from the host)."""
    request = {"name": name, "hostNamespace": namespace, "values": values, "kubeIP": kube_ip, "dnsIP": dns_ip,
               "token": token, "hostVersion": host_version, "namespaces": list(namespaces), "nodes": list(nodes),
               "services": list(services), "pods": list(pods), "updates": list(updates), "objects": list(objects),
               "objectUpdates": list(object_updates)}
    ran = subprocess.run([str(harness(tag))], input=json.dumps(request), capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, f"the vCluster harness failed:\n{ran.stderr[-4000:]}"
    return json.loads(ran.stdout)


# The ClusterIPs the harness gives the vCluster's Service and its synced DNS Service.
KUBE_IP, DNS_IP = "10.96.12.1", "10.96.12.2"


def team_values(program, team: str) -> dict:
    """The team's vCluster Helm values without their nulls, which only unset chart defaults the pod syncer does not
    read (the resource quota's; Helm drops a key set to null)."""
    def drop_nulls(value):
        if isinstance(value, dict):
            return {key: drop_nulls(item) for key, item in value.items() if item is not None}
        return value
    return drop_nulls(program.named(f"tenant-{team}-vcluster").inputs["values"])


def as_go_writes(value):
    """Quantities as the strings Go writes, and no empty maps (Go writes an empty resources block)."""
    if isinstance(value, dict):
        return {key: as_go_writes(item) for key, item in value.items() if item != {}}
    if isinstance(value, list):
        return [as_go_writes(item) for item in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def differences(real, simulated, path: str = "") -> list[str]:
    """Paths at which two JSON values differ."""
    if (isinstance(real, dict) or real is None) and (isinstance(simulated, dict) or simulated is None) and (
            real is not None or simulated is not None):
        real, simulated = real or {}, simulated or {}
        return [found for key in sorted(set(real) | set(simulated))
                for found in differences(real.get(key), simulated.get(key), f"{path}.{key}" if path else key)]
    if isinstance(real, list) and isinstance(simulated, list) and len(real) == len(simulated):
        return [found for index, (a, b) in enumerate(zip(real, simulated))
                for found in differences(a, b, f"{path}[{index}]")]
    return [] if real == simulated else [f"{path}: real {real!r} != simulated {simulated!r}"]


def listed(found: str, not_modelled: dict[str, str]) -> bool:
    """Whether the difference ``found`` is at a path one of ``not_modelled``'s patterns names."""
    return any(re.fullmatch(pattern, found.split(":", 1)[0]) for pattern in not_modelled)


def verdict_differences(team: str, what: str, cases: Iterable[tuple[str, dict, dict, Callable[[dict], set]]]) \
        -> list[str]:
    """For each case ``(name, answer, simulated, judge)``: a line when vCluster's code wrote no host object, or when
    ``judge`` (the rules the host refuses an object by) judges the real host ``what`` otherwise than the simulated."""
    found = []
    for name, answer, simulated, judge in cases:
        if "host" not in answer:
            found.append(f"{team} {name}: vCluster's code wrote no host {what}: {answer}")
            continue
        real, modelled = judge(answer["host"]), judge(simulated)
        if real != modelled:
            found.append(f"{team} {name}: the real host {what} meets {sorted(real)}, the simulated one "
                         f"{sorted(modelled)}")
    return found
