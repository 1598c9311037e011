"""The rules of the deployability check that hold the objects against what the site provides: ``storage`` (its
storage classes), ``api-server-egress`` (its API server's port and addresses), ``node-fit`` (its node pools) and
``pod-security`` (the level each namespace enforces, at the site's Kubernetes version).

Each takes the objects and the site's facts (``inputs.Site``); ``check`` runs them with the other rules.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Iterable, Optional, Sequence

from config.hosts import DEFAULT_STORAGE_CLASS_ANNOTATION
from config.vocabulary import POD_SECURITY_LABEL
from tools.deployability import network_policy, operator_mounts, pod_security
from tools.deployability.findings import ERROR, INFO, WARNING, Finding
from tools.deployability.inputs import K8sObject, Site, pod_templates
from tools.deployability.node_fit import fits


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
    stated = tuple(ipaddress.ip_network(block, strict=False) for block in site.facts.api_server_addresses)
    for obj, metadata in _control_planes(objects):
        labels = {k: str(v) for k, v in (metadata.get("labels") or {}).items()}
        for port in site.facts.api_server_ports:
            unreachable, names = network_policy.egress_verdict(obj.namespace or "", labels, policies, port,
                                                               stated or network_policy.PRIVATE_RANGES)
            if unreachable:
                findings.append(_unreachable_api_server(obj, site, port, [str(block) for block in unreachable], names))
    return findings


def _unreachable_api_server(obj: K8sObject, site: Site, port: int, unreachable: list[str],
                            names: list[str]) -> Finding:
    known = site.facts.api_server_ports_known
    where = (f"at {', '.join(unreachable)}, the kubernetes Service's address in each of the Service ranges, where "
             "the network plugin judges the connection" if site.facts.judged_at_service else
             f"at {', '.join(unreachable)}, where the site states the API server listens "
             "(cluster.kubeconfig.apiServerAddresses)" if site.facts.api_server_addresses else
             f"anywhere in {', '.join(unreachable)}, the private range{'s' if len(unreachable) > 1 else ''} the API "
             "server's address may be in")
    # The program renders the control planes' policies itself (components/tenant_network.py, the chart's are off):
    # it opens the API server's port where the host says it listens, and adds the site's extraValues rules.
    endpoints = ("set cluster.kubeconfig.apiServerPort and apiServerAddresses to the API server's endpoints (kubectl "
                 "get endpointslices -n default -l kubernetes.io/service-name=kubernetes), which the program's "
                 "control-plane policy opens; or " if site.kind == "kubeconfig" else "")
    return Finding(
        ERROR if known else WARNING, "api-server-egress", obj.describe(),
        f"NetworkPolicies {', '.join(sorted(names))} allow no egress to TCP {port}, "
        f"{'the' if known else 'a common'} {site.kind} API server port, {where}, so the control plane cannot reach "
        "the host API server there",
        f"{endpoints}add an egress rule for TCP {port} there in vcluster.extraValues.policies.networkPolicy."
        "controlPlane.egress (teams[].vcluster.extraValues for one team), which the program adds to its "
        "control-plane policy, or turn the policies off (vcluster.networkPolicy: false)")


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
