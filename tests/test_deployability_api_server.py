"""Spec of the deployability rules for what the API server itself refuses, whatever the site: built-in objects
against the site's Kubernetes schemas, custom resources against their CRD as the API server stores them (with its
CEL rules), names and labels, containers' requests and limits and LimitRanges, and workloads' selectors and
mounts."""

from __future__ import annotations

import dataclasses
import re

import kubernetes_validate
import pytest

from config import versions
from tests.conftest import MIRRORED_TAGS, git, go_function, mirrored_tag
from tests.test_deployability import (  # noqa: F401 (fixtures)
    assert_found, attack, attack_cache, errors, findings, sites,
)
from tools.deployability.custom_resources import as_stored
from tools.deployability.findings import ERROR, WARNING
from tools.deployability.inputs import K8sObject, Release, crds_of
from tools.deployability.schemas import check_schemas, kubernetes_api_groups
from tools.offline.recording import REDACTED, UNKNOWN


# --- schemas ----------------------------------------------------------------------------------------


def test_a_site_newer_than_every_known_schema_is_checked_against_the_newest_with_a_warning(sites):
    # A Kubernetes minor released after the pinned kubernetes-validate: the config accepts one once
    # KUBERNETES_NEWEST_ACCEPTED_VERSION passes it (a kubectl pinned for it), so the check must run, not crash
    # (kubernetes-validate raises VersionNotSupportedError for it).
    newest = ".".join(kubernetes_validate.utils.latest_version().split(".")[:2])
    major, minor = versions.release_numbers(newest)
    site = dataclasses.replace(sites["kubeconfig"], kubernetes_version=f"{major}.{minor + 1}")
    valid = K8sObject({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "apps"},
                       "data": {"k": "v"}}, "test")
    [warning] = check_schemas([valid], site, [])
    assert warning.severity == WARNING and warning.object == f"site {site.stack}"
    assert f"Kubernetes {major}.{minor + 1} is newer" in warning.message and f"against Kubernetes {newest}" in \
        warning.message
    typo = K8sObject({**valid.manifest, "dataa": {"k": "v"}}, "test")
    found = check_schemas([typo], site, [])
    assert [f.severity for f in found] == [WARNING, ERROR]
    assert "dataa" in found[1].message
    # A site the schemas know gets no warning.
    assert not check_schemas([valid], dataclasses.replace(site, kubernetes_version=newest), [])


def test_an_invalid_object_is_a_kubernetes_validate_finding(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"configMap": {"enabled": True, "extraField": {"data": ["not", "a map"]}}})
    [finding] = errors(objects, sites["eks"], "schema")
    assert "ConfigMap apps/probe-settings" in finding.object and "kubernetes-validate" in finding.message
    assert "data" in finding.message
    assert not errors(attack(attack_cache, tmp_path, {"configMap": {"enabled": True}}), sites["eks"], "schema")


def test_a_field_a_chart_sets_that_the_site_lacks_is_dropped_with_a_warning_not_an_error(attack_cache, tmp_path,
                                                                                          sites):
    # Helm creates chart objects without field validation, and the API server's default is then Warn: it drops an
    # unknown field and creates the object. A chart written for a newer Kubernetes (pod-level resources, say)
    # deploys on an older one; what it set has no effect there.
    objects = attack(attack_cache, tmp_path, {"configMap": {"enabled": True, "extraField": {"dataa": {"k": "v"}}}})
    schema = findings(objects, sites["eks"], "schema")
    assert [f.severity for f in schema] == [WARNING]
    assert "dataa" in schema[0].message and "drops the field" in schema[0].message
    # The program's own objects must be right for the site: there an unknown field stays an error.
    [chart_object] = [obj for obj in objects if "dataa" in obj.manifest]
    program = K8sObject(chart_object.manifest, "program: settings")
    [error] = errors([program], sites["eks"], "schema")
    assert "dataa" in error.message and "strict" in error.message


def test_pod_level_resources_in_a_chart_job_deploy_on_a_kubernetes_without_them(sites):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "prune", "namespace": "gpu-operator"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "resources": {"requests": {"cpu": "10m"}},
                                          "containers": [{"name": "prune", "image": "busybox:1.36"}]}}}}
    release = Release("gpu-operator", "gpu-operator", "gpu-operator", "v26.3.3", {})
    old = dataclasses.replace(sites["eks"], kubernetes_version="1.30")
    [warning] = check_schemas([K8sObject(job, "chart", release=release)], old, [])
    assert warning.severity == WARNING and "resources" in warning.message
    assert not check_schemas([K8sObject(job, "chart", release=release)],
                                           dataclasses.replace(old, kubernetes_version="1.34"), [])


def test_a_field_the_plan_cannot_know_is_left_out_and_the_rest_is_still_checked(sites):
    def secret(**fields):
        return K8sObject({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "admin", "namespace": "m"},
                          **fields}, "program: admin")
    assert not errors([secret(stringData="[secret]", type="[unknown]")], sites["eks"], "schema")
    [finding] = errors([secret(stringData="[secret]", strinqData={"a": "b"})], sites["eks"], "schema")
    assert "strinqData" in finding.message
    [finding] = errors([secret(stringData=["not", "a", "map"])], sites["eks"], "schema")
    assert "stringData" in finding.message


def test_an_api_version_the_site_does_not_serve_is_found(sites):
    old = K8sObject({"apiVersion": "policy/v1beta1", "kind": "PodSecurityPolicy", "metadata": {"name": "p"},
                     "spec": {}}, "program: p")
    [finding] = errors([old], sites["eks"], "schema")
    assert "does not serve policy/v1beta1 PodSecurityPolicy" in finding.message
    # A removed version of a Kubernetes group whose name holds dots is as refused as one of policy.
    ingress = K8sObject({"apiVersion": "networking.k8s.io/v1beta1", "kind": "Ingress",
                         "metadata": {"name": "i", "namespace": "n"}, "spec": {}}, "chart")
    [finding] = errors([ingress], sites["eks"], "schema")
    assert "does not serve networking.k8s.io/v1beta1 Ingress" in finding.message


def test_a_custom_resource_without_its_crd_is_not_blamed_on_the_kubernetes_version(sites):
    # Gateway API (gateway.networking.k8s.io) is a set of CRDs no Kubernetes release ships: a vCluster's TLSRoute
    # deploys where they are installed, whatever the site's version, so the finding names the CRD, not the version.
    route = K8sObject({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
                       "metadata": {"name": "r", "namespace": "vcluster-a"}, "spec": {}}, "chart")
    [finding] = findings([route], sites["eks"], "schema")
    assert finding.severity == WARNING
    assert f"Kubernetes {sites['eks'].kubernetes_version}" not in finding.message
    assert "custom resource" in finding.message and "CRD defining TLSRoute in gateway.networking.k8s.io" in finding.fix
    assert "gateway.networking.k8s.io" not in kubernetes_api_groups()
    assert {"", "apps", "networking.k8s.io", "admissionregistration.k8s.io"} <= kubernetes_api_groups()


@pytest.mark.parametrize("spec, words", [
    ({"size": 2}, None),
    ({"size": 0}, "minimum"),
    ({"sise": 2}, "required"),
    ({"size": 2, "colour": "red"}, "colour"),
    ({"size": 2, "labels": {"free": "form"}}, None),  # preserve-unknown-fields
    # OpenAPI v3.0: a boolean exclusiveMinimum qualifies minimum; nullable admits null.
    ({"size": 2, "ratio": 0.9}, None),
    ({"size": 2, "ratio": None}, None),
    # As the API server stores it: a null the schema neither admits nor defaults is dropped, and an absent or
    # null field with a default is filled in before validation; a dropped null still leaves a required field out.
    ({"size": 2, "owner": None}, None),
    ({"size": None}, "'size' is a required property"),
    ({"size": 2, "mode": None}, None),
    ({"size": 2, "mode": "warp"}, "'warp' is not one of"),
    ({"size": 2, "nested": {}}, None),
    ({"size": 2, "nested": {"depth": "deep"}}, "'deep' is not of type 'integer'"),
    ({"size": 2, "steps": [{}, {"weight": None}]}, None),
    ({"size": 2, "limits": {"gpus": None}}, None),
    ({"size": 2, "limits": {"gpus": "many"}}, "'many' is not of type 'integer'"),
    # The CRD's CEL rules, on the object as stored (a transition rule, reading oldSelf, only runs on update).
    ({"size": 2, "owner": "ml"}, None),
    ({"size": 1, "owner": "ml"}, "at spec: an owned gizmo is bigger than one"),
    ({"size": 2, "steps": [{"weight": 3}, {"weight": 11}]}, "at spec/steps/1: a step weighs at most 10"),
    ({"size": 2, "steps": [{"label": "first"}]}, "at spec/steps/0: failed rule: self.label.startsWith('step-')"),
    ({"size": 2, "ratio": 0}, "less than or equal to the minimum of 0"),
])
def test_custom_resources_are_checked_against_the_chart_crd(attack_cache, tmp_path, sites, spec, words):
    objects = attack(attack_cache, tmp_path, {"gizmo": {"enabled": True, "spec": spec}})
    found = errors(objects, sites["eks"], "custom-resource")
    if words is None:
        assert not found
    else:
        assert found and any(words in f.message for f in found), found
        assert "gizmos.attack.example.invalid" in found[0].message
    gizmo = next(o for o in objects if o.kind == "Gizmo")
    assert gizmo.namespace is None, "a cluster-scoped custom resource gets no namespace"


def test_a_patch_is_checked_without_required_fields(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"gizmo": {"enabled": True, "spec": {"size": 1}}})
    crds = crds_of(objects)
    patch = K8sObject({"apiVersion": "attack.example.invalid/v1", "kind": "Gizmo", "metadata": {"name": "g"},
                       "spec": {"labels": {}}}, "program: patch", patch=True)
    assert not check_schemas([patch], sites["eks"], crds)
    patch.manifest["spec"]["colour"] = "red"
    assert check_schemas([patch], sites["eks"], crds)


def test_a_custom_resource_is_stored_with_unadmitted_nulls_dropped_and_defaults_filled_in(attack_cache, tmp_path):
    objects = attack(attack_cache, tmp_path, {"gizmo": {"enabled": True, "spec": {"size": 2}}})
    [crd] = crds_of(objects)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    manifest = {"spec": {"size": 2, "owner": None, "ratio": None, "nested": {}, "steps": [{"weight": None}],
                         "limits": {"gpus": None, "cpus": 3}}}
    stored = as_stored(manifest, schema)
    assert stored == {"spec": {"size": 2, "mode": "fast", "ratio": None, "nested": {"depth": 1},
                               "steps": [{"weight": 1, "label": "step-0"}], "limits": {"gpus": 5, "cpus": 3}}}
    assert manifest["spec"]["owner"] is None and "mode" not in manifest["spec"], "the manifest is left as it is"


def _named(kind: str, name: str, *, labels: dict | None = None, template_labels: dict | None = None,
           containers: list | None = None, ports: list | None = None, api_version: str = "v1",
           patch: bool = False) -> K8sObject:
    manifest = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "labels": labels or {}}}
    if template_labels is not None:
        manifest["spec"] = {"template": {"metadata": {"labels": template_labels},
                                         "spec": {"containers": containers or [{"name": "app"}]}}}
    if ports is not None:
        manifest["spec"] = {"ports": ports}
    return K8sObject(manifest, "test", patch=patch)


@pytest.mark.parametrize("obj, words", [
    (_named("StatefulSet", "s" * 52, api_version="apps/v1"), None),
    (_named("StatefulSet", "s" * 53, api_version="apps/v1"), "a StatefulSet name may have at most 52"),
    (_named("Job", "j" * 63, api_version="batch/v1"), None),
    (_named("Job", "j" * 64, api_version="batch/v1"), "a Job name may have at most 63"),
    (_named("Service", "api"), None),
    (_named("Service", "9api"), "is not a DNS-1035 label"),
    (_named("Namespace", "n" * 64), "is not a DNS-1123 label"),
    (_named("ConfigMap", "settings.v2"), None),
    (_named("ConfigMap", "Settings"), "is not a DNS-1123 subdomain"),
    (_named("ClusterRole", "system:gpu-tenancy:reader", api_version="rbac.authorization.k8s.io/v1"), None),
    (_named("ClusterRole", "a/b", api_version="rbac.authorization.k8s.io/v1"), "is not a path segment"),
    (_named("ConfigMap", "c", labels={"team": "t" * 63, "gpu-tenancy/role": "gpu"}), None),
    (_named("ConfigMap", "c", labels={"team": "t" * 64}), "metadata.labels: label team="),
    (_named("ConfigMap", "c", labels={"bad key!": "x"}), "label key 'bad key!'"),
    (_named("Deployment", "d", template_labels={"app": "-x"}, api_version="apps/v1"),
     "pod template: label app='-x'"),
    (_named("Deployment", "d", template_labels={}, containers=[{"name": "web", "ports": [{"name": "http-metrics"}]}],
            api_version="apps/v1"), None),
    (_named("Deployment", "d", template_labels={}, containers=[{"name": "Web"}], api_version="apps/v1"),
     "containers: container name 'Web'"),
    (_named("Deployment", "d", template_labels={},
            containers=[{"name": "web", "ports": [{"name": "http-metrics-tls"}]}], api_version="apps/v1"),
     "port name 'http-metrics-tls' of container 'web' is not an IANA service name"),
    (_named("Service", "api", ports=[{"name": "https", "port": 443}]), None),
    (_named("Service", "api", ports=[{"name": "HTTPS", "port": 443}]), "port name 'HTTPS'"),
    (_named("StatefulSet", "s" * 60, api_version="apps/v1", patch=True), None),  # someone else's object
    # What the plan cannot know (another resource's output, a secret) is left out.
    (_named("ConfigMap", UNKNOWN, labels={"team": UNKNOWN, "owner": REDACTED}), None),
])
def test_names_and_labels_are_ones_the_api_server_and_its_controllers_take(obj, words, sites):
    assert_found(errors([obj], sites["eks"], "names"), words)


def _workload(*containers: dict) -> K8sObject:
    return K8sObject({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "apps"},
                      "spec": {"template": {"metadata": {}, "spec": {"containers": list(containers)}}}}, "test")


def _container(requests: dict | None = None, limits: dict | None = None, name: str = "app") -> dict:
    return {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}}


@pytest.mark.parametrize("obj, words", [
    (_workload(_container({"cpu": "500m", "memory": "1Gi"}, {"cpu": 1, "memory": "1Gi"})), None),
    (_workload(_container({"memory": "4Gi"}, {"memory": "2Gi"})), "requests 4Gi memory, above its limit of 2Gi"),
    (_workload(_container({"cpu": "1500m"}, {"cpu": "1"})), "requests 1500m cpu, above its limit of 1"),
    (_workload(_container({"memory": "lots"})), "request of memory 'lots' is not a quantity"),
    (_workload(_container({"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 1})), None),
    (_workload(_container({"nvidia.com/gpu": 1})), "nvidia.com/gpu cannot be overcommitted"),
    (_workload(_container({"hugepages-2Mi": "1Gi"}, {"hugepages-2Mi": "2Gi"})),
     "hugepages-2Mi cannot be overcommitted"),
    (_workload(_container(limits={"nvidia.com/gpu": 1})), None),  # the request defaults to the limit
    (_workload(_container({"memory": UNKNOWN, "nvidia.com/gpu": UNKNOWN}, {"memory": "1Gi"})), None),
    (K8sObject({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": "apps"},
                "spec": {"limits": [{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"},
                                     "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
                                     "max": {"ephemeral-storage": "8Gi"}}]}}, "test"), None),
    (K8sObject({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": "apps"},
                "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "4"}}]}},
               "test"), "Container cpu: defaultRequest 4 is above default 1"),
    (K8sObject({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": "apps"},
                "spec": {"limits": [{"type": "Container", "min": {"memory": "1Gi"}, "max": {"memory": "512Mi"}}]}},
               "test"), "Container memory: min 1Gi is above max 512Mi"),
])
def test_requests_limits_and_limit_ranges_are_ones_the_api_server_takes(obj, words, sites):
    assert_found(errors([obj], sites["eks"], "resources"), words)


def _selecting(kind: str, selector: dict | None, labels: dict, *, mounts: tuple = (), volumes: tuple = (),
               claims: tuple = ()) -> K8sObject:
    spec: dict = {"template": {"metadata": {"labels": labels}, "spec": {
        "containers": [{"name": "app", "volumeMounts": [{"name": m, "mountPath": f"/{m}"} for m in mounts]}],
        "volumes": [{"name": v, "emptyDir": {}} for v in volumes]}}}
    if selector is not None:
        spec["selector"] = selector
    if claims:
        spec["volumeClaimTemplates"] = [{"metadata": {"name": c}} for c in claims]
    return K8sObject({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "w", "namespace": "apps"},
                      "spec": spec}, "test")


@pytest.mark.parametrize("obj, words", [
    (_selecting("Deployment", {"matchLabels": {"app": "proxy"}}, {"app": "proxy", "team": "nlp"}), None),
    (_selecting("Deployment", {"matchLabels": {"app": "proxy"}}, {"app": "web"}), "does not select its own pod"),
    (_selecting("DaemonSet", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
                {"app": "b"}), None),
    (_selecting("ReplicaSet", {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]},
                {"app": "b"}), "spec.selector is invalid"),
    (_selecting("Deployment", None, {"app": "web"}), "has no spec.selector"),
    (_selecting("Deployment", {"matchLabels": {"app": "w"}}, {"app": "w"}, mounts=("cache",), volumes=("cache",)),
     None),
    (_selecting("Deployment", {"matchLabels": {"app": "w"}}, {"app": "w"}, mounts=("data",)),
     "container app mounts volume 'data', which the pod does not have"),
    (_selecting("StatefulSet", {"matchLabels": {"app": "w"}}, {"app": "w"}, mounts=("data",), claims=("data",)),
     None),
])
def test_workloads_select_their_pods_and_mount_their_volumes(obj, words, sites):
    assert_found(errors([obj], sites["eks"], "workloads"), words)


HELM = "helm/helm"
KUBECTL = "kubernetes/kubectl"
APISERVER = "kubernetes/apiserver"


@pytest.mark.parametrize("tag", MIRRORED_TAGS[HELM])
def test_helm_creates_chart_objects_without_field_validation(tag):
    """Why a chart's unknown field is a warning: Helm 3 validates manifests through kubectl's validator, which
    leaves validation to a server that takes the fieldValidation parameter (every Kubernetes from 1.27), and then
    creates and patches without that parameter; the API server's default for a request without it is Warn."""
    tag = mirrored_tag(HELM, tag)
    client = git(HELM, "show", f"{tag}:pkg/kube/client.go")
    assert "c.Factory.Validator(validationDirective)" in go_function(client, "(c *Client) Build")
    kube = "\n".join(git(HELM, "show", f"{tag}:{path}") for path in
                     git(HELM, "ls-tree", "--name-only", tag, "pkg/kube/").split()
                     if path.endswith(".go") and not path.endswith("_test.go"))
    assert "WithFieldValidation" not in kube and "fieldValidation" not in kube
    [kubectl] = re.findall(r"\n\tk8s\.io/kubectl (v\S+)", git(HELM, "show", f"{tag}:go.mod"))
    schema = go_function(git(KUBECTL, "show", f"{mirrored_tag(KUBECTL, kubectl)}:pkg/validation/schema.go"),
                         "(c *paramVerifyingSchema) ValidateBytes")
    # Client-side validation only where the server lacks the parameter; otherwise the verifier's answer (nil).
    assert "if resource.IsParamUnsupportedError(err) {" in schema and schema.rstrip().endswith("return err")


@pytest.mark.parametrize("tag", MIRRORED_TAGS[APISERVER])
def test_the_api_server_defaults_a_request_without_field_validation_to_warn(tag):
    rest = git(APISERVER, "show", f"{mirrored_tag(APISERVER, tag)}:pkg/endpoints/handlers/rest.go")
    body = go_function(rest, "fieldValidation")
    assert 'if directive == "" {\n\t\treturn metav1.FieldValidationWarn' in body
