"""The ``image-volume`` rule: pods that mount an image (``volumes[].image``) need a host that serves and mounts it.

Two sources of such pods: a pod template among the objects, and a tenant's vCluster whose in-cluster manifests
(``experimental.deploy.vcluster.manifests``) hold a MutatingAdmissionPolicy adding an image volume to its pods
(a memory-capped team's ``gpu-tenancy-hami-core``): vCluster syncs those pods to the host unchanged. What the
host's Kubernetes version does with them is config/image_volumes.py's.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from config.image_volumes import IMAGE_VOLUME_FLOOR, image_volume_problem
from config.vocabulary import RELEASE as RELEASE_TYPE
from tools.charts.manifest_yaml import load_manifests
from tools.deployability.inputs import K8sObject, Site, pod_templates
from tools.plan.lookup import dig

RULE = "image-volume"
# An apply configuration that adds an image volume writes the image's source: ``<...>.volumes.image{reference: ...}``.
# One that only sets the pull policy of the image volumes a pod already has (``gpu-tenancy-image-pull``) adds none.
_ADDS_IMAGE_VOLUME = re.compile(r"\.volumes\.image\s*\{[^{}]*\breference\s*:")


def _mutations(policy: Mapping[str, Any]) -> Iterable[str]:
    for mutation in dig(policy, "spec", "mutations", default=[]) or []:
        yield str(dig(mutation, "applyConfiguration", "expression", default="") or "")


def tenant_policies_adding_image_volumes(resources: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(release, namespace, policy) of each vCluster release whose in-cluster MutatingAdmissionPolicy adds an
    image volume to the pods created inside it."""
    found = []
    for resource in resources:
        inputs = resource.get("inputs") or {}
        if resource.get("type") != RELEASE_TYPE or inputs.get("chart") != "vcluster":
            continue
        manifests = dig(inputs, "values", "experimental", "deploy", "vcluster", "manifests", default="")
        for document in load_manifests(manifests) if isinstance(manifests, str) and manifests else []:
            if isinstance(document, dict) and document.get("kind") == "MutatingAdmissionPolicy" and any(
                    _ADDS_IMAGE_VOLUME.search(expression) for expression in _mutations(document)):
                found.append((str(inputs.get("name", resource.get("name"))), str(inputs.get("namespace", "")),
                              str(dig(document, "metadata", "name", default=""))))
    return found


def check_image_volumes(resources: Iterable[Mapping[str, Any]], objects: Sequence[K8sObject],
                        site: Site) -> list[tuple[str, str, str]]:
    """(object, problem, fix) for every source of image-volume pods the site's host cannot run."""
    problem = image_volume_problem(site.kind, site.kubernetes_version)
    if problem is None:
        return []
    fix = (f"run the site on Kubernetes {IMAGE_VOLUME_FLOOR} or later and state it in "
           f"cluster.{site.kind}.kubernetesVersion, or drop the image volume")
    found = []
    for obj, _, spec in pod_templates(objects):
        names = [volume.get("name") for volume in spec.get("volumes") or [] if volume.get("image") is not None]
        if names:
            found.append((obj.describe(), f"its pods mount image volume(s) {', '.join(map(str, names))}, and on "
                          f"this {site.kind} host (Kubernetes {site.kubernetes_version}) {problem}", fix))
    for release, namespace, policy in tenant_policies_adding_image_volumes(resources):
        found.append((f"vCluster {namespace}/{release}", f"its MutatingAdmissionPolicy {policy} adds an image volume "
                      f"to the tenant's pods, which vCluster syncs to the host unchanged, and on this {site.kind} host "
                      f"(Kubernetes {site.kubernetes_version}) {problem}",
                      f"{fix} (for a memory-capped team: give it another isolation tier)"))
    return found
