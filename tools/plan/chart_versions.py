"""What a new chart version does to a running site: a downgrade, an upgrade whose CRDs change, or a plain upgrade.

Helm takes any version a release is moved to: ``helm upgrade`` to an older chart runs as an upgrade, with the older
chart's hooks, and nothing in the four charts refuses it (vCluster 0.36.1's control plane refuses only a change of
backing store, ``config/config.go`` ``ValidateChanges``, not an older release). Helm installs the files of a
chart's ``crds/`` folders at the first install only (``tools.plan.running_site``), so what the running site's CRDs
become is whatever the new release's pre-upgrade hook applies (``CRD_HOOKS``): the GPU Operator's applies the files
its command names, KAI's and kube-prometheus-stack's every CRD of their chart, with ``--force-conflicts``. Going
back, the older hook applies the older CRDs over the newer ones: fields only the newer schema defines are pruned
from each stored object when it is next written, and CRDs only the newer release carries stay behind.

The CRDs are compared from the two chart archives of the chart cache, so a plain plan diff (no
``--render-charts``) says it too, and says which archive to pull when one is missing.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from config.versions import release_order
from config.vocabulary import RELEASE
from tools.charts.cache import find_cached
from tools.charts.manifest_yaml import load_manifests
from tools.charts.refs import ChartKey
from tools.charts.render import release_chart_key
from tools.plan.diff import Change
from tools.plan.running_site import LOST, NOT_APPLIED, Finding, is_crd_file

DOWNGRADE = "downgrade"
UPGRADE = "upgrade"
VERSION = "version"

# The stack key that moves each chart's release.
VERSION_KEYS = {"vcluster": "vcluster.version (or teams[].vcluster.version)", "kai-scheduler": "kaiScheduler.version",
                "gpu-operator": "gpuOperator.version", "kube-prometheus-stack": "observability.chartVersion"}
# Each chart's pre-upgrade hook Job that applies its CRDs (with the program's values: kube-prometheus-stack's is its
# crds.upgradeJob, components/observability_crds.py); tests/test_chart_versions.py finds it at every accepted release.
CRD_HOOKS = {"gpu-operator": "gpu-operator-upgrade-crd", "kai-scheduler": "crd-upgrader",
             "kube-prometheus-stack": "kube-prometheus-stack-crds-upgrade"}
# CRDs of a release's crds/ folders that its own pre-upgrade hook leaves alone, by release: the GPU Operator's hook
# applies the files its command names, and v26.7.0's names neither DRA ComputeDomain CRD, which its image does not
# carry (docker/Dockerfile copies only the ClusterPolicy, NVIDIADriver, GPUCluster and NFD CRDs). A site that upgrades
# to it keeps them absent. tests/test_chart_versions.py checks this table against every accepted release's render.
HOOK_LEAVES: dict[str, dict[str, frozenset[str]]] = {
    "gpu-operator": {"v26.7.0": frozenset({"computedomaincliques.resource.nvidia.com",
                                           "computedomains.resource.nvidia.com"})},
}


def _archive_files(chart: Path) -> Iterable[tuple[str, str]]:
    if chart.is_dir():
        for path in sorted(chart.rglob("*")):
            relative = f"{chart.name}/{path.relative_to(chart).as_posix()}"
            if path.is_file() and is_crd_file(relative):
                yield path.name, path.read_text(encoding="utf-8")
        return
    with tarfile.open(chart) as archive:
        for member in archive.getmembers():
            if member.isfile() and is_crd_file(member.name):
                yield member.name.rsplit("/", 1)[-1], archive.extractfile(member).read().decode("utf-8")


def chart_crds(chart: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """The CRDs of a chart archive's (or directory's) ``crds/`` folders, its subcharts' included: name -> (file
    name, manifest)."""
    found = {}
    for name, text in _archive_files(chart):
        try:
            documents = list(load_manifests(text))
        except yaml.YAMLError:
            continue  # rendering the chart reports it
        for document in documents:
            if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                found[str(document["metadata"]["name"])] = (name, document)
    return found


def _schema_fields(schema: Any, path: str = "") -> tuple[set[str], set[str]]:
    """The fields a structural schema defines, and those under which it keeps unknown fields
    (``x-kubernetes-preserve-unknown-fields``)."""
    fields: set[str] = set()
    open_ended: set[str] = set()
    if isinstance(schema, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") is True:
            open_ended.add(path)
        children = [(f"{path}.{name}", child) for name, child in (schema.get("properties") or {}).items()]
        fields |= {child_path for child_path, _ in children}
        children += [(f"{path}[*]", schema.get("items")), (f"{path}.*", schema.get("additionalProperties"))]
        for child_path, child in children:
            more, kept = _schema_fields(child, child_path)
            fields |= more
            open_ended |= kept
    return fields, open_ended


def pruned_fields(newer: Mapping[str, Any], older: Mapping[str, Any]) -> list[str]:
    """The fields, as ``<version>:<path>`` (``v1:.spec.replicas``), the newer CRD defines that the API server prunes
    from objects once the older CRD is in place: in no schema of the older, nor under a field it keeps unknown
    fields of."""
    def versions_of(crd: Mapping[str, Any]) -> dict[str, tuple[set[str], set[str]]]:
        return {str(version.get("name")): _schema_fields((version.get("schema") or {}).get("openAPIV3Schema"))
                for version in (crd.get("spec") or {}).get("versions") or []}
    before = versions_of(older)
    pruned = []
    for version, (fields, _) in versions_of(newer).items():
        kept, open_ended = before.get(version, (set(), set()))
        pruned += [f"{version}:{field}" for field in fields - kept
                   if not any(field.startswith((prefix + ".", prefix + "[")) for prefix in open_ended)]
    return sorted(pruned)


def _subject(release: str, crd: str) -> str:
    """Named as ``tools.plan.running_site`` names the CRD, so the two reports of one CRD are one."""
    return f"{release}: CustomResourceDefinition {crd} (apiextensions.k8s.io)"


def _listed(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def _compared(key: ChartKey, old: str, new: str, cache: Path):
    """Each version's CRDs, or the pull command of the first archive missing from the cache."""
    crds = {}
    for version in (old, new):
        versioned = ChartKey(key.name, version, key.repo, key.ref)
        found, _ = find_cached(versioned, cache)
        if found is None:
            return None, versioned.pull_command() + f" --cache {cache}"
        crds[version] = chart_crds(found)
    return crds, None


def _downgrade(chart: str, subject: str, change: Change, older: dict, newer: dict) -> Finding:
    key = VERSION_KEYS.get(chart, "the chart's version key")
    kept = HOOK_LEAVES.get(chart, {}).get(str(change.new), frozenset())  # the older hook does not touch these
    dropped = {name: pruned_fields(newer[name][1], older[name][1])
               for name in older if name in newer and name not in kept}
    dropped = {name: fields for name, fields in dropped.items() if fields}
    left = [name for name in newer if name not in older]
    back = f"set {key} back to {change.old}"
    if dropped:
        shown = "; ".join(f"{name}: {', '.join(fields[:3])}" + (f" and {len(fields) - 3} more" if len(fields) > 3
                                                                 else "") for name, fields in sorted(dropped.items()))
        return Finding(LOST, subject, change.path, change.old, change.new,
                       "a downgrade: the older release's pre-upgrade hook applies its own CRDs over the newer "
                       f"ones, whose schemas lack fields the newer define ({shown}), so the API server prunes "
                       "those fields from the objects of those kinds (at the latest when each is next written)"
                       + (f"; {_listed(left)} only the newer release has stay behind, unused" if left else ""),
                       f"{back}; to go back anyway, export those objects first and check them after `pulumi up`")
    return Finding(DOWNGRADE, subject, change.path, change.old, change.new,
                   "a downgrade: Helm installs the older chart over the newer (nothing in it refuses that), its "
                   "workloads restart on the older release, and "
                   + ("its CRDs define every field the newer ones do" if older or newer else "it has no CRDs")
                   + (f"; {_listed(left)} only the newer release has stay behind, unused" if left else ""),
                   f"{back} unless the newer release is what breaks the site")


def _upgrade(chart: str, release: str, subject: str, change: Change, older: dict,
             newer: dict) -> list[Finding]:
    changed = sorted(name for name in newer if name not in older or older[name][1] != newer[name][1])
    if not changed:
        return [Finding(UPGRADE, subject, change.path, change.old, change.new,
                        "a plain upgrade: the charts' CRDs are the same" if newer else
                        "a plain upgrade: the chart has no CRDs", "none needed")]
    left = HOOK_LEAVES.get(chart, {}).get(str(change.new), frozenset())
    hook = CRD_HOOKS.get(chart)
    findings = [Finding(NOT_APPLIED, _subject(release, name), "(the CRD)", "absent" if name not in older
                        else "as installed", "new" if name not in older else "changed",
                        "Helm installs a chart's crds/ files at the first install only, and the chart's pre-upgrade "
                        f"hook{f' ({hook})' if hook else ''} does not apply this one",
                        f"apply it before the upgrade: `kubectl apply --server-side -f` {newer[name][0]} of the "
                        f"chart at {change.new}")
                for name in changed if name in left or hook is None]
    applied = [name for name in changed if hook is not None and name not in left]
    why = (f"an upgrade whose CRDs change ({_listed(changed)}): Helm never upgrades a chart's crds/ files"
           + (f"; the chart's pre-upgrade hook {hook} applies {_listed(applied)} before the new workloads start"
              if applied else "") + (f"; it does not apply {_listed(set(changed) - set(applied))} (listed as not applied)"
                                     if len(applied) < len(changed) else ""))
    return [Finding(UPGRADE, subject, change.path, change.old, change.new, why, "none needed" if len(applied) ==
                    len(changed) else "apply the CRDs listed as not applied before `pulumi up`"), *findings]


def chart_version_findings(resource: Mapping[str, Any], subject: str, changes: Iterable[Change],
                           cache: Path) -> list[Finding]:
    """The findings of a Helm release moved to another chart version: a downgrade, an upgrade and what becomes of
    its CRDs, compared from the chart cache ``cache``."""
    if resource["type"] != RELEASE:
        return []
    inputs = resource.get("inputs") or {}
    findings: list[Finding] = []
    for change in changes:
        if change.path != VERSION or not isinstance(change.old, str) or not isinstance(change.new, str):
            continue
        try:
            key = release_chart_key(inputs)
            going_back = release_order(change.new) < release_order(change.old)
        except ValueError:
            continue  # a version that is not a release number: the config refuses it
        release = str(inputs.get("name") or resource["name"])
        crds, missing = _compared(key, change.old, change.new, cache)
        if crds is None:
            findings.append(Finding(DOWNGRADE if going_back else UPGRADE, subject, change.path, change.old,
                                    change.new, ("a downgrade" if going_back else "an upgrade")
                                    + "; its CRDs were not compared: a chart is not in the chart cache",
                                    f"`{missing}`, then diff again"))
        elif going_back:
            findings.append(_downgrade(key.name, subject, change, crds[change.new], crds[change.old]))
        else:
            findings += _upgrade(key.name, release, subject, change, crds[change.old], crds[change.new])
    return findings

