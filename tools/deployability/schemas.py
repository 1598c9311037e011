"""The ``schema`` and ``custom-resource`` rules of the deployability check: built-in objects against the Kubernetes
schemas of the site's version (kubernetes-validate, strict), custom resources against their CRDs
(``custom_resources``), and an object of an API group no schema or CRD serves.

Apart from the other rules because it is the one that reads kubernetes-validate's schema files, which are large
enough to be cached here once per process.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import kubernetes_validate

from config import versions
from tools.deployability.custom_resources import custom_resource_problems
from tools.deployability.findings import ERROR, WARNING, Finding
from tools.deployability.inputs import K8sObject, Site, known_fields

# kubernetes-validate reads its schema files (the definitions are megabytes of JSON) on every
# call; the files never change, so each is read once. The validator does not mutate them.
if not hasattr(kubernetes_validate.utils.schema_contents, "cache_info"):
    kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(
        kubernetes_validate.utils.schema_contents)


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
