"""Deployability check: will the objects of a plan work on the site, not only validate?

Runs over the program's own Kubernetes objects plus the objects the Helm releases render to
(real charts from the chart cache) and the tenants' CoreDNS pods (``tools.deploy_inputs``), and
reports what a first ``pulumi up`` on the site would trip over, one rule each:

* ``storage``: every PersistentVolumeClaim, StatefulSet volumeClaimTemplate and the claim template of a
  Prometheus operator's Prometheus or Alertmanager names a storage class the site will have, or the site
  has a default class;
* ``api-server-egress``: every vCluster control plane may reach the API server port of the host
  kind through the NetworkPolicies that select it (``network_policy``), and no NetworkPolicy has a
  podSelector the API server refuses;
* ``node-fit``: every pod template's nodeSelector, required node affinity and tolerations fit
  at least one node pool of the site;
* ``pod-security``: every pod template passes the Pod Security level its namespace enforces
  (``tools.pod_security``), the tenant's control plane and CoreDNS included;
* ``schema``: every built-in object is valid for the Kubernetes version the site states
  (``kubernetes-validate``, strict: an unknown field is an error; in a chart's object a warning, since Helm
  creates it without field validation and the API server drops the field);
* ``grafana-admin``: every Grafana container reads its admin password from the stack's own Secret
  (``grafana``): not Grafana's built-in admin/admin, the chart's generated Secret, a literal value or a
  published password;
* ``custom-resource``: every custom resource is valid against its CRD from the pinned chart as the API server
  stores it (``custom_resources``: a null the schema neither admits nor defaults dropped, defaults filled in),
  unknown fields included (the API server would prune them silently), and its CEL rules;
* ``names``: every object's name is one the API server takes for its kind, and short enough for the label its
  controller gives each pod (a StatefulSet's at most 52 characters), and every label is valid (``names``);
* ``resources``: every container requests at most its limit (exactly it, of what cannot be overcommitted), and
  every LimitRange keeps min <= defaultRequest <= default <= max (``resources``);
* ``workloads``: every Deployment, StatefulSet, DaemonSet and ReplicaSet selects its own pod template, and every
  volume a container mounts is the pod's (``workloads``);
* ``image-volume``: pods that mount an image (a memory-capped team's HAMi-core, added inside its vCluster)
  run on a host whose Kubernetes serves image volumes (``image_volumes``);
* ``tenant-quota``: each tenant namespace's quota, as the chart renders it, holds its control plane, its DNS
  and the team's stated pods, its LimitRange admits their containers, and it agrees with the team's KAI
  queue (``quota``).

Each :class:`Finding` names the object, the rule and the fix.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterable, Mapping, Optional, Sequence

import kubernetes_validate

from config import versions
from config.hosts import DEFAULT_STORAGE_CLASS_ANNOTATION
from config.vocabulary import POD_SECURITY_LABEL
from tools.deployability import (
    grafana, image_volumes, names, network_policy, operator_mounts, resources, workloads,
)
from tools.deployability.custom_resources import custom_resource_problems
from tools.deployability.node_fit import fits
from tools.deployability import pod_security
from tools.deployability import quota
from tools.deployability.inputs import (
    K8sObject, Site, addon_operator_version, crds_of, known_fields, pod_templates, program_objects,
    rendered_objects, site_from_plan, vcluster_dns_pods,
)

ERROR, WARNING, INFO = "error", "warning", "info"

# kubernetes-validate reads its schema files (the definitions are megabytes of JSON) on every
# call; the files never change, so each is read once. The validator does not mutate them.
if not hasattr(kubernetes_validate.utils.schema_contents, "cache_info"):
    kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(
        kubernetes_validate.utils.schema_contents)


@dataclasses.dataclass(frozen=True)
class Finding:
    severity: str
    rule: str
    object: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"[{self.severity}] {self.rule}: {self.object}: {self.message}. Fix: {self.fix}"


# --- storage --------------------------------------------------------------------------------------


def _claims(objects: Sequence[K8sObject]) -> Iterable[tuple[K8sObject, str, Optional[str]]]:
    for obj in objects:
        if obj.kind == "PersistentVolumeClaim":
            yield obj, f"claim {obj.name}", (obj.manifest.get("spec") or {}).get("storageClassName")
        elif obj.kind == "StatefulSet":
            for template in (obj.manifest.get("spec") or {}).get("volumeClaimTemplates") or []:
                name = (template.get("metadata") or {}).get("name")
                yield obj, f"volumeClaimTemplate {name}", (template.get("spec") or {}).get("storageClassName")
    # The Prometheus operator turns spec.storage.volumeClaimTemplate into its StatefulSet's claim.
    for obj in operator_mounts.operator_objects(objects):
        template = ((obj.manifest.get("spec") or {}).get("storage") or {}).get("volumeClaimTemplate")
        if template is not None:
            yield obj, "storage.volumeClaimTemplate", (template.get("spec") or {}).get("storageClassName")


def check_storage(objects: Sequence[K8sObject], site: Site) -> list[Finding]:
    facts = site.facts
    provided = set(facts.storage_classes) if site.enables_hostpath_storage or site.kind != "microk8s" else set()
    declared = {obj.name: obj for obj in objects if obj.kind == "StorageClass"}
    defaults = sorted(name for name, obj in declared.items()
                      if (obj.manifest["metadata"].get("annotations") or {}).get(
                          DEFAULT_STORAGE_CLASS_ANNOTATION) == "true")
    if facts.default_storage_class and facts.default_storage_class in provided:
        defaults.append(facts.default_storage_class)
    findings = []
    for obj, what, storage_class in _claims(objects):
        if storage_class == "":
            findings.append(Finding(WARNING, "storage", obj.describe(),
                                    f"{what} has storageClassName \"\" (binds only to a pre-made volume)",
                                    "name a storage class, or create the PersistentVolume it binds to"))
        elif storage_class is None:
            if defaults:
                continue
            if not facts.storage_known:
                findings.append(Finding(INFO, "storage", obj.describe(),
                                        f"{what} uses the default storage class; whether a {site.kind} site has one "
                                        "is not known here", "check `kubectl get storageclass` on the site shows a "
                                        "(default) class, or name a class"))
                continue
            findings.append(Finding(ERROR, "storage", obj.describe(),
                                    f"{what} names no storage class and a {site.kind} site has no default class, "
                                    "so it stays Pending", "install a provisioner with a default StorageClass "
                                    "(EKS: the aws-ebs-csi-driver addon and a gp3 class annotated "
                                    f"{DEFAULT_STORAGE_CLASS_ANNOTATION}: \"true\"), or set the chart's storage class"))
        elif storage_class not in declared and storage_class not in provided:
            severity = ERROR if facts.storage_known else INFO
            findings.append(Finding(severity, "storage", obj.describe(),
                                    f"{what} names storage class {storage_class}, which neither the program nor "
                                    f"a {site.kind} host provides", f"create StorageClass {storage_class} or name "
                                    "one the site has"))
    return findings


# --- API server egress ----------------------------------------------------------------------------


def _control_planes(objects: Sequence[K8sObject]) -> list[tuple[K8sObject, dict[str, Any]]]:
    """Workloads whose pods carry the vCluster chart's control-plane label ``app: vcluster``."""
    return [(obj, metadata) for obj, metadata, _ in pod_templates(objects)
            if (metadata.get("labels") or {}).get("app") == "vcluster"]


def check_api_server_egress(objects: Sequence[K8sObject], site: Site) -> list[Finding]:
    network_policies = [obj for obj in objects if obj.kind == "NetworkPolicy"]
    policies = [obj.manifest for obj in network_policies]
    findings = []
    for obj in network_policies:
        problem = network_policy.pod_selector_problem(obj.manifest)
        if problem is not None:
            findings.append(Finding(ERROR, "api-server-egress", obj.describe(),
                                    f"{problem}; the API server refuses this NetworkPolicy, so it isolates no pod",
                                    "write the selector as Kubernetes does: operators In, NotIn, Exists, "
                                    "DoesNotExist and string label values"))
    for obj, metadata in _control_planes(objects):
        labels = {k: str(v) for k, v in (metadata.get("labels") or {}).items()}
        for port in site.facts.api_server_ports:
            allowed, names = network_policy.egress_verdict(obj.namespace or "", labels, policies, port)
            if allowed:
                continue
            known = site.facts.api_server_ports_known
            findings.append(Finding(
                ERROR if known else WARNING, "api-server-egress", obj.describe(),
                f"NetworkPolicies {', '.join(sorted(names))} allow no egress to TCP {port}, "
                f"{'the' if known else 'a common'} {site.kind} API server port, so the control plane "
                "cannot reach the host API server",
                f"add an egress rule for TCP {port} (vCluster values "
                "policies.networkPolicy.controlPlane.egress) or turn the network policy off"))
    return findings


# --- node fit -------------------------------------------------------------------------------------


def check_node_fit(objects: Sequence[K8sObject], site: Site) -> list[Finding]:
    if site.node_pools is None:
        return [Finding(INFO, "node-fit", f"site {site.stack}", f"the node pools of a {site.kind} host are not "
                        "known to the plan, so node selectors and tolerations were not checked",
                        "check them against `kubectl get nodes --show-labels` and the nodes' taints")]
    findings = []
    for obj, _, spec in pod_templates(objects):
        why = {pool.name: fits(spec, pool) for pool in site.node_pools}
        if all(why.values()):
            detail = "; ".join(f"{pool}: {', '.join(reasons)}" for pool, reasons in why.items())
            findings.append(Finding(ERROR, "node-fit", obj.describe(),
                                    f"fits no node pool of the site ({detail}), so its pods stay Pending",
                                    "change its nodeSelector/tolerations or add a node pool that has those "
                                    "labels and taints"))
    return findings


# --- Pod Security ---------------------------------------------------------------------------------


def namespace_levels(objects: Iterable[K8sObject]) -> dict[str, str]:
    """Enforced Pod Security level of each namespace the objects declare; a namespace without the
    label (or not declared, e.g. Helm's createNamespace) is ``privileged``, the cluster default."""
    return {obj.name: ((obj.manifest.get("metadata") or {}).get("labels") or {}).get(POD_SECURITY_LABEL, "privileged")
            for obj in objects if obj.kind == "Namespace"}


def check_pod_security(objects: Sequence[K8sObject], site: Site) -> list[Finding]:
    levels = namespace_levels(objects)
    findings = []
    for obj, metadata, spec in pod_templates(objects):
        level = levels.get(obj.namespace or "", "privileged")
        for violation in pod_security.violations(spec, level, metadata.get("annotations") or {},
                                                 site.kubernetes_version):
            findings.append(Finding(ERROR, "pod-security", obj.describe(),
                                    f"namespace {obj.namespace} enforces {level}; breaks the {violation.level} "
                                    f"control \"{violation.control}\" at {violation.field}",
                                    f"{violation.fix} (or lower the namespace's level)"))
    return findings


def check_grafana_admin(objects: Sequence[K8sObject]) -> list[Finding]:
    return [Finding(ERROR, grafana.RULE, obj.describe(), problem, fix)
            for obj, problem, fix in grafana.check_grafana_admin(objects)]


# --- schemas --------------------------------------------------------------------------------------


def schema_version(site: Site) -> tuple[str, list[Finding]]:
    """The Kubernetes version whose schemas the site's built-in objects are checked against: the site's own, or,
    for a site newer than every schema kubernetes-validate holds, its newest (said in a warning)."""
    newest = ".".join(kubernetes_validate.utils.latest_version().split(".")[:2])
    if versions.release_order(site.kubernetes_version) <= versions.release_order(newest):
        return site.kubernetes_version, []
    return newest, [Finding(WARNING, "schema", f"site {site.stack}",
                            f"Kubernetes {site.kubernetes_version} is newer than the newest schemas "
                            f"kubernetes-validate holds ({newest}): built-in objects were checked against "
                            f"Kubernetes {newest}",
                            "upgrade kubernetes-validate in requirements-dev.txt once a release has "
                            f"Kubernetes {site.kubernetes_version}'s schemas")]


def check_schemas(objects: Sequence[K8sObject], site: Site, crds: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Built-in objects against the Kubernetes schemas of each site version, custom resources
    against their CRD; an object neither knows is reported too."""
    known_crds = {(crd["spec"]["group"], crd["spec"]["names"]["kind"]): crd for crd in crds}
    kube, findings = schema_version(site)
    for obj in objects:
        if obj.synced_model:
            continue
        api_version = str(obj.manifest.get("apiVersion", ""))
        group, _, version = api_version.rpartition("/")
        crd = known_crds.get((group, obj.kind))
        if crd is not None:
            findings.extend(Finding(ERROR, "custom-resource", obj.describe(), problem, fix)
                            for problem, fix in custom_resource_problems(obj.manifest, crd, version, obj.patch))
            continue
        if obj.patch:
            continue  # a patch of a built-in object is partial by design
        try:
            kubernetes_validate.validate(known_fields(obj.manifest), kube, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            findings.append(_unserved(obj, api_version, group, kube))
        except kubernetes_validate.ValidationError as error:
            path = "/".join(str(part) for part in error.absolute_path) or "(top level)"
            if obj.release is not None and _valid_but_for_unknown_fields(obj.manifest, kube):
                findings.append(Finding(WARNING, "schema", obj.describe(),
                                        f"Kubernetes {kube} lacks a field the chart sets, at {path}: {error.message}; "
                                        "Helm creates the object without field validation, so the API server drops "
                                        "the field with a warning and the chart's setting has no effect here",
                                        "nothing blocks the deploy; run a Kubernetes version that has the field, or "
                                        "a chart version that does not set it, if the setting matters"))
                continue
            findings.append(Finding(ERROR, "schema", obj.describe(),
                                    f"invalid for Kubernetes {kube} (kubernetes-validate, strict) at {path}: "
                                    f"{error.message}", "fix the field (an unknown field is a typo or a field "
                                    "this Kubernetes version lacks)"))
    return findings


@functools.cache
def kubernetes_api_groups() -> frozenset[str]:
    """The API groups Kubernetes itself serves (in any version kubernetes-validate holds schemas of); every other
    group is a custom resource's, served only once its CRD is installed."""
    groups = set()
    for version in set(kubernetes_validate.utils.all_versions()):
        definitions = kubernetes_validate.utils.schema_contents(
            f"kubernetes-json-schema/v{version}-local/_definitions.json", version)["$defs"]
        groups.update(kind["group"] for definition in definitions.values()
                      for kind in definition.get("x-kubernetes-group-version-kind", ()))
    return frozenset(groups)


def _unserved(obj: K8sObject, api_version: str, group: str, kube: str) -> Finding:
    if group in kubernetes_api_groups():
        # A Kubernetes API version this site does not serve (removed, or not yet added): the API server refuses it.
        return Finding(ERROR, "schema", obj.describe(), f"Kubernetes {kube} does not serve {api_version} {obj.kind}",
                       f"use an API version of {group or 'the core group'} that Kubernetes {kube} serves")
    # No Kubernetes version serves a custom resource (Gateway API's included): its CRD is installed separately,
    # and the cluster may well have it, so the plan cannot tell.
    return Finding(WARNING, "schema", obj.describe(),
                   f"{api_version} {obj.kind} is a custom resource, served only where its CRD is installed: no "
                   "Kubernetes version ships it and none of the site's charts installs it",
                   f"install the CRD defining {obj.kind} in {group} on the cluster before deploying "
                   "(`kubectl get crd` shows it), or turn off the setting that creates the object")


def _valid_but_for_unknown_fields(manifest: Mapping[str, Any], kube: str) -> bool:
    """Whether the API server creates the object when the client asks for no field validation: Helm 3 sends none
    (its kube client creates and patches without the fieldValidation parameter), and the API server's default is
    then Warn (k8s.io/apiserver endpoints/handlers ``fieldValidation``), which drops unknown fields."""
    try:
        kubernetes_validate.validate(known_fields(manifest), kube, strict=False)
    except kubernetes_validate.ValidationError:
        return False
    return True


# --- the whole check ------------------------------------------------------------------------------


def tenant_pods(objects: Sequence[K8sObject]) -> list[K8sObject]:
    """Each vCluster release's CoreDNS pods (no chart renders them)."""
    seen, pods = set(), []
    for obj in objects:
        release = obj.release
        if release is None or release.chart != "vcluster" or (release.name, release.namespace) in seen:
            continue
        seen.add((release.name, release.namespace))
        pods.extend(vcluster_dns_pods(release))
    return pods


def check(objects: Sequence[K8sObject], site: Site, extra_crds: Sequence[Mapping[str, Any]] = ()) -> list[Finding]:
    """Every rule over the objects (program + rendered); the tenants' CoreDNS pods are added here."""
    everything = list(objects) + tenant_pods(objects)
    crds = crds_of(objects) + list(extra_crds)
    findings = (check_storage(everything, site) + check_api_server_egress(everything, site)
                + check_node_fit(everything, site) + check_pod_security(everything, site)
                + check_schemas(everything, site, crds) + check_grafana_admin(everything)
                + [Finding(ERROR, operator_mounts.RULE, *missing)
                   for missing in operator_mounts.missing_mounts(everything)]
                + [Finding(ERROR, "names", obj.describe(), problem, fix)
                   for obj, problem, fix in names.check_names(objects)]
                + [Finding(ERROR, resources.RULE, obj.describe(), problem, fix)
                   for obj, problem, fix in resources.check_resources(everything)]
                + [Finding(ERROR, workloads.RULE, obj.describe(), problem, fix)
                   for obj, problem, fix in workloads.check_workloads(everything)])
    order = {ERROR: 0, WARNING: 1, INFO: 2}
    return sorted(findings, key=lambda f: (order[f.severity], f.rule, f.object, f.message))


def render_report(findings: Sequence[Finding], site: Site, object_count: int) -> str:
    counts = {severity: sum(1 for f in findings if f.severity == severity) for severity in (ERROR, WARNING, INFO)}
    lines = [f"# Deployability of stack {site.stack} ({site.kind}, Kubernetes {site.kubernetes_version})",
             "", f"{object_count} objects checked: {counts[ERROR]} errors, {counts[WARNING]} warnings, "
             f"{counts[INFO]} notes.", ""]
    for finding in findings:
        lines.append(f"- **{finding.severity}** `{finding.rule}` {finding.object}: {finding.message}. "
                     f"Fix: {finding.fix}.")
    return "\n".join(lines) + "\n"


def check_plan(plan: Mapping[str, Any], rendered: Mapping[str, Any], out_dir: Any,
               cache_dir: Any = None) -> tuple[Site, int, list[Finding]]:
    """The check over a plan and its ``render_plan_releases`` output in ``out_dir``.

    Some custom resources of the program belong to an operator the site runs, not to a release of the plan, so
    their CRDs come from that operator's chart in the cache (a note says so when the cache lacks it): on a MicroK8s
    site the nvidia addon's GPU Operator (the ClusterPolicy the program patches); with an external Prometheus the
    site's Prometheus operator (the ServiceMonitors and PrometheusRule), checked against the pinned
    kube-prometheus-stack's CRDs, the newest the program was checked against."""
    site = site_from_plan(plan)
    objects = program_objects(plan["resources"]) + rendered_objects(rendered, out_dir, plan["resources"])
    extra: list[Mapping[str, Any]] = []
    notes: list[Finding] = []
    if site.kind == "microk8s":
        version = addon_operator_version(plan)
        extra += _site_operator_crds(versions.GPU_OPERATOR_CHART, version, "the MicroK8s addon's",
                                     "the ClusterPolicy patch was", site, cache_dir, notes)
    if ((plan.get("outputs") or {}).get("observability") or {}).get("mode") == "external":
        extra += _site_operator_crds(versions.KUBE_PROMETHEUS_STACK_CHART, versions.KUBE_PROMETHEUS_STACK_VERSION,
                                     "whose CRDs stand in for the site's own Prometheus operator's",
                                     "the ServiceMonitors and the PrometheusRule were", site, cache_dir, notes)
    quotas = quota.check_tenant_quotas(objects + tenant_pods(objects), quota.tenant_allowances(plan),
                                       lambda *args: Finding(args[0], "tenant-quota", *args[1:]))
    images = [Finding(ERROR, image_volumes.RULE, *found)
              for found in image_volumes.check_image_volumes(plan["resources"], objects, site)]
    return site, len(objects), check(objects, site, extra) + quotas + images + notes


def _site_operator_crds(chart: str, version: str, whose: str, what: str, site: Site, cache_dir: Any,
                        notes: list[Finding]) -> list[Mapping[str, Any]]:
    """The CRDs of an operator the site runs, from ``chart`` at ``version`` in the cache; a note when it is absent."""
    from tools.charts.cache import chart_contracts
    from tools.charts.refs import pinned_chart_key

    key = pinned_chart_key(chart, version)
    contracts = chart_contracts(key, cache_dir)
    if contracts is None:
        notes.append(Finding(INFO, "custom-resource", f"site {site.stack}",
                             f"the chart cache has no {chart} {version} ({whose}), so {what} "
                             "not checked against its CRDs", key.pull_command()))
        return []
    return contracts.crds
