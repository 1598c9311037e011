"""Deployability check: will the objects of a plan work on the site, not only validate?

Runs over the program's own Kubernetes objects plus the objects the Helm releases render to
(real charts from the chart cache) and the tenants' CoreDNS pods (``tools.deploy_inputs``), and
reports what a first ``pulumi up`` on the site would trip over, one rule each:

* ``storage``: every PersistentVolumeClaim, StatefulSet volumeClaimTemplate and the claim template of a
  Prometheus operator's Prometheus or Alertmanager names a storage class the site will have, or the site
  has a default class;
* ``api-server-egress``: every vCluster control plane may reach the API server port of the host
  kind through the NetworkPolicies that select it (``network_policy``), at each address the site states
  for the API server (else anywhere in the private ranges), and no NetworkPolicy has a podSelector the
  API server refuses;
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
  queue (``quota``);
* ``system-pool``: the pods that surely land on the nodes the platform's own pods run on (an EKS site's system node
  group, a MicroK8s box's node), the per-team ones and those no chart renders included, fit those nodes' allocatable
  CPU and memory and the pods each may run (``system_pool``).

``storage``, ``api-server-egress``, ``node-fit`` and ``pod-security`` live in ``site_rules``, ``schema`` and
``custom-resource`` in ``schemas``, the others in the modules named above. This module runs them all, with the
tenants' CoreDNS pods and the CRDs of the operators a site runs, and writes the report; each ``findings.Finding``
names the object, the rule and the fix.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from config import versions
from tools.deployability import grafana, image_volumes, names, operator_mounts, quota, resources, system_pool, workloads
from tools.deployability.findings import ERROR, INFO, WARNING, Finding
from tools.deployability.inputs import (
    K8sObject, Site, addon_operator_version, crds_of, program_objects, rendered_objects, site_from_plan,
    vcluster_dns_pods,
)
from tools.deployability.schemas import check_schemas
from tools.deployability.site_rules import check_api_server_egress, check_node_fit, check_pod_security, check_storage


def check_grafana_admin(objects: Sequence[K8sObject]) -> list[Finding]:
    return [Finding(ERROR, grafana.RULE, obj.describe(), problem, fix)
            for obj, problem, fix in grafana.check_grafana_admin(objects)]


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


def render_report(findings: Sequence[Finding], site: Site, object_count: int,
                  releases: Sequence[Mapping[str, Any]] = ()) -> str:
    """The report: the findings, then which chart archive each release was rendered from (``render_plan_releases``'
    entries), so a reviewer knows what was checked."""
    counts = {severity: sum(1 for f in findings if f.severity == severity) for severity in (ERROR, WARNING, INFO)}
    lines = [f"# Deployability of stack {site.stack} ({site.kind}, Kubernetes {site.kubernetes_version})",
             "", f"{object_count} objects checked: {counts[ERROR]} errors, {counts[WARNING]} warnings, "
             f"{counts[INFO]} notes.", ""]
    for finding in findings:
        lines.append(f"- **{finding.severity}** `{finding.rule}` {finding.object}: {finding.message}. "
                     f"Fix: {finding.fix}.")
    if releases:
        lines += [*([""] if lines[-1] else []), "## Charts rendered", ""]
    for release in releases:
        copy = ("" if release["cachedFrom"] == release["source"] else
                f"; the site pulls it from {release['source']}, rendered from the copy pulled from "
                f"{release['cachedFrom']}, which that repository is taken to serve")
        lines.append(f"- `{release['release']}` ({release['namespace']}): {release['chart']} {release['version']} "
                     f"from {release['cachedFrom'] if copy else release['source']}, archive {release['archive']}"
                     + (f" ({release['digest']})" if release.get("digest") else "") + copy)
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
    allowances = quota.tenant_allowances(plan)
    quotas = quota.check_tenant_quotas(objects + tenant_pods(objects), allowances,
                                       lambda *args: Finding(args[0], "tenant-quota", *args[1:]))
    quotas += system_pool.check_system_pool(objects + tenant_pods(objects), site, allowances)
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
