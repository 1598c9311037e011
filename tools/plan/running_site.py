"""Changes a running site refuses or that lose state, from two renders of the charts.

Helm upgrades a release by patching each object it rendered before into the one it renders now. The API
server refuses a patch that touches a field its update validation keeps (``tools.plan.update_rules``): the
upgrade fails, the program's releases are ``atomic`` so Helm rolls back, and ``pulumi up`` stops on that
release. An object the new render no longer has is deleted (unless annotated ``helm.sh/resource-policy:
keep``), and with a volume claim or a CRD goes its data. Files of a chart's ``crds/`` folder are installed at the
first install only and never deleted by Helm: a newer CRD reaches the cluster only through a ``pre-upgrade`` hook of
the chart allowed to write it (``crd_upgraders``). Hooks are created anew each time: neither is patched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

import yaml

from tools.charts.manifest_yaml import load_manifests
from tools.plan.diff import MISSING, value_changes
from tools.plan.update_rules import group_of, is_mutable, refused_field, rule_of

REFUSED = "refused"
STOPS = "stops"
LOST = "lost"
NOT_APPLIED = "not applied"
DISRUPTS = "disrupts"
UNKNOWN = "unknown"
# A ClusterRole rule naming no CRD: it may write every one.
EVERY_CRD = "*"

# API groups served by Kubernetes itself: an object of one whose kind has no rule is unknown, not a custom resource.
BUILT_IN_GROUPS = frozenset({
    "", "apps", "batch", "policy", "autoscaling", "rbac.authorization.k8s.io", "storage.k8s.io",
    "networking.k8s.io", "scheduling.k8s.io", "node.k8s.io", "admissionregistration.k8s.io",
    "apiextensions.k8s.io", "apiregistration.k8s.io", "coordination.k8s.io", "discovery.k8s.io",
    "certificates.k8s.io", "flowcontrol.apiserver.k8s.io", "resource.k8s.io", "events.k8s.io"})

# What goes with an object of these kinds when it is deleted (by an upgrade that no longer renders it, or by a
# replacement).
STATE_OF_KIND = {
    "PersistentVolumeClaim": "its volume and every file on it (a claim's volume is deleted with it under the usual "
                             "Delete reclaim policy)",
    "PersistentVolume": "the volume, under a Delete reclaim policy",
    "StatefulSet": "its pods; its volume claims stay behind, unused by a StatefulSet of another name, which starts "
                   "on new, empty ones",
    "CustomResourceDefinition": "every object of that custom resource, in every namespace",
    "Namespace": "everything in it: workloads, Secrets, volume claims and their volumes",
}


@dataclass(frozen=True)
class Finding:
    """One change a running site refuses (``refused``, ``stops``), that loses state (``lost``), that it does not
    take (``not applied``) or that the plan cannot judge (``unknown``)."""

    category: str
    subject: str
    field: str
    old: Any
    new: Any
    why: str
    fix: str


@dataclass(frozen=True)
class _Object:
    release: str
    manifest: dict[str, Any]
    crd_file: bool
    hook: bool
    file: str = ""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        metadata = self.manifest.get("metadata") or {}
        return (self.release, group_of(str(self.manifest.get("apiVersion", ""))), str(self.manifest.get("kind")),
                str(metadata.get("namespace") or ""), str(metadata.get("name")))

    @property
    def subject(self) -> str:
        _, group, kind, namespace, name = self.key
        where = f"{namespace}/" if namespace else ""
        return f"{self.release}: {kind} {where}{name}" + (f" ({group})" if group else "")


def is_crd_file(path: str) -> bool:
    """A file of a ``crds/`` folder of the chart (``[<chart>/]crds/x.yaml``) or of a subchart
    (``<chart>/charts/<sub>/crds/x.yaml``), not a template of a subchart that happens to be named ``crds``
    (kube-prometheus-stack's)."""
    parts = path.split("/")
    return (len(parts) >= 2 and parts[-2] == "crds" and (len(parts) <= 3 or parts[-4] == "charts")
            and parts[-1].endswith((".yaml", ".yml")))


def chart_objects(manifests: Mapping[str, str]) -> dict[tuple, _Object]:
    """The objects of a render (``tools.plan.diff.read_manifests``: ``<release>/<template path>`` -> YAML), by
    release, API group, kind, namespace and name."""
    found: dict[tuple, _Object] = {}
    for path, text in manifests.items():
        release, _, template = path.partition("/")
        try:
            documents = list(load_manifests(text))
        except yaml.YAMLError:
            continue  # the render itself reports it
        for document in documents:
            if not isinstance(document, dict) or not document.get("kind"):
                continue
            annotations = (document.get("metadata") or {}).get("annotations") or {}
            item = _Object(release, document, is_crd_file(template), "helm.sh/hook" in annotations,
                           template.rsplit("/", 1)[-1])
            found[item.key] = item
    return found


def _with_defaults(manifest: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server keeps it, for the fields an update rule compares: status dropped, the
    defaults of ``update_rules`` filled in (a StatefulSet's claim templates included)."""
    manifest = json.loads(json.dumps(manifest))
    manifest.pop("status", None)
    rule = rule_of(str(manifest.get("apiVersion", "")), str(manifest.get("kind")))
    for path, value in (rule.defaults if rule else {}).items():
        *parents, leaf = path.split(".")
        node = manifest
        for part in parents:
            node = node.setdefault(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.setdefault(leaf, value)
    if manifest.get("kind") == "StatefulSet":
        for template in (manifest.get("spec") or {}).get("volumeClaimTemplates") or []:
            template.setdefault("apiVersion", "v1")
            template.setdefault("kind", "PersistentVolumeClaim")
            template.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
            template.pop("status", None)
    return manifest


def _transition_rules(crds: Iterable[dict[str, Any]], group: str, kind: str) -> Optional[bool]:
    """Whether the CRD of ``group``/``kind`` has rules comparing old and new (``oldSelf``); None without a CRD."""
    for crd in crds:
        spec = crd.get("spec") or {}
        if spec.get("group") == group and (spec.get("names") or {}).get("kind") == kind:
            return "oldSelf" in json.dumps(spec.get("versions"))
    return None


def _object_findings(before: _Object, after: _Object, crds: list[dict[str, Any]]) -> list[Finding]:
    api_version, kind = str(after.manifest.get("apiVersion", "")), str(after.manifest.get("kind"))
    old, new = _with_defaults(before.manifest), _with_defaults(after.manifest)
    changes = [change for change in value_changes(old, new)
               if not change.path.startswith(("metadata.labels", "metadata.annotations"))]
    if not changes:
        return []
    rule = rule_of(api_version, kind)
    if rule is not None:
        refused: dict[str, Finding] = {}
        for change in changes:
            where = refused_field(rule, change.path, change.old, change.new)
            if where is not None and where not in refused:
                refused[where] = Finding(REFUSED, after.subject, change.path, change.old, change.new,
                                         f"{rule.why} ({rule.source})", rule.fix)
        return list(refused.values())
    if kind in ("Secret", "ConfigMap") and old.get("immutable") is True:
        return [Finding(REFUSED, after.subject, change.path, change.old, change.new,
                        f"the {kind} is marked immutable (core/validation Validate{kind}Update)",
                        f"delete the {kind} right before `pulumi up`")
                for change in changes if change.path.split(".")[0].split("[")[0] in ("data", "stringData",
                                                                                     "binaryData", "immutable")][:1]
    if is_mutable(api_version, kind):
        return []
    group = group_of(api_version)
    if group not in BUILT_IN_GROUPS:
        transition = _transition_rules(crds, group, kind)
        if transition is False:
            return []  # the CRD validates each object on its own: any field may change
        why = ("its CRD compares old and new objects (x-kubernetes-validations with oldSelf), which the plan diff "
               "does not evaluate") if transition else "no CRD for it in the rendered charts"
    else:
        why = "no update rule for this kind is known to the plan diff (tools/plan/update_rules.py)"
    paths = ", ".join(change.path for change in changes[:5]) + (" ..." if len(changes) > 5 else "")
    return [Finding(UNKNOWN, after.subject, paths, MISSING, MISSING, why,
                    "check the update against a cluster (`pulumi preview` does not show it) or add the kind's rule")]


def _removal_findings(before: _Object) -> list[Finding]:
    metadata = before.manifest.get("metadata") or {}
    kept = (metadata.get("annotations") or {}).get("helm.sh/resource-policy") == "keep"
    lost = STATE_OF_KIND.get(str(before.manifest.get("kind")))
    if lost is None or kept:
        return []
    return [Finding(LOST, before.subject, "(the object)", "present", MISSING,
                    f"the upgrade no longer renders it, so Helm deletes it, and with it {lost}",
                    "back it up first, or keep the setting that renders it")]


def _crd_writes(role: Mapping[str, Any]) -> set[str]:
    """The CRDs a ClusterRole may patch or update, by name (``EVERY_CRD`` for a rule naming none)."""
    names: set[str] = set()
    for rule in role.get("rules") or []:
        if (set(rule.get("apiGroups") or ()) & {"apiextensions.k8s.io", "*"}
                and set(rule.get("resources") or ()) & {"customresourcedefinitions", "*"}
                and set(rule.get("verbs") or ()) & {"patch", "update", "*"}):
            names.update(rule.get("resourceNames") or [EVERY_CRD])
    return names


def _named_files(pod: Mapping[str, Any], files: set[str]) -> set[str]:
    """Which of the chart's ``crds/`` files (by file name) a hook pod's containers name in their command or
    arguments: the GPU Operator's hook applies the files it names (``--filepath=/opt/gpu-operator/<file>``), and
    only those, whatever its role allows."""
    named = set()
    for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
        for word in [*(container.get("command") or []), *(container.get("args") or [])]:
            named |= {token.rstrip(";").rsplit("/", 1)[-1] for token in str(word).replace("=", " ").split()} & files
    return named


def crd_upgraders(objects: Iterable[_Object], release: str) -> frozenset[str]:
    """The CRDs ``release`` applies itself on upgrade, by name (``EVERY_CRD``: any): those a ``pre-upgrade`` hook
    Job runs under a service account bound to write (the GPU Operator's ``upgrade-crd`` hook, KAI's
    ``crd-upgrader``, kube-prometheus-stack's ``crds.upgradeJob``), narrowed to the chart's ``crds/`` files the
    Job names where it names any."""
    objects = [item for item in objects if item.release == release]
    mine = [item.manifest for item in objects]
    files = {item.file for item in objects if item.crd_file}
    # account -> the CRDs its hook Jobs name through their files (None: a Job of it names none, so its role decides)
    accounts: dict[str, Optional[set[str]]] = {}
    for job in mine:
        hooks = str(((job.get("metadata") or {}).get("annotations") or {}).get("helm.sh/hook", ""))
        if job.get("kind") == "Job" and "pre-upgrade" in (hook.strip() for hook in hooks.split(",")):
            pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
            account = pod.get("serviceAccountName") or "default"
            named = _named_files(pod, files)
            crds = {str((item.manifest.get("metadata") or {}).get("name")) for item in objects
                    if item.crd_file and item.file in named}
            accounts[account] = (None if not named or (account in accounts and accounts[account] is None)
                                 else crds | (accounts.get(account) or set()))
    roles = {(role.get("metadata") or {}).get("name"): role for role in mine if role.get("kind") == "ClusterRole"}
    names: set[str] = set()
    for binding in mine:
        role = roles.get((binding.get("roleRef") or {}).get("name"))
        if binding.get("kind") != "ClusterRoleBinding" or role is None:
            continue
        for subject in binding.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount" and subject.get("name") in accounts:
                writes, named = _crd_writes(role), accounts[subject["name"]]
                names |= writes if named is None else {name for name in named
                                                       if EVERY_CRD in writes or name in writes}
    return frozenset(names)


def _applied_by_hook(upgraders: frozenset[str], crd: _Object) -> bool:
    return EVERY_CRD in upgraders or (crd.manifest.get("metadata") or {}).get("name") in upgraders


def chart_findings(old_manifests: Mapping[str, str], new_manifests: Mapping[str, str]) -> list[Finding]:
    """What the upgrade from one render to the other would have the API server refuse, would delete with data,
    or would leave unapplied, object by object."""
    before, after = chart_objects(old_manifests), chart_objects(new_manifests)
    crds = [item.manifest for item in after.values() if item.manifest.get("kind") == "CustomResourceDefinition"]
    findings: list[Finding] = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if (old and old.hook) or (new and new.hook):
            continue  # created anew by Helm on every install or upgrade
        if old is not None and new is None:
            findings += [] if old.crd_file else _removal_findings(old)
        elif new is not None and new.crd_file:
            if (old is None or old.manifest != new.manifest) and not _applied_by_hook(
                    crd_upgraders(after.values(), new.release), new):
                findings.append(Finding(
                    NOT_APPLIED, new.subject, "(the CRD)", "absent" if old is None else "as installed",
                    "new" if old is None else "changed",
                    "Helm installs a chart's crds/ files at the first install only, and no pre-upgrade hook of the "
                    "chart may write this CRD",
                    "apply the new CRD before the upgrade (`kubectl apply --server-side -f` the chart's file)"))
        elif old is not None and new is not None:
            findings += _object_findings(old, new, crds)
    return findings
