"""The served-object model (tests/served_objects.py) is upstream's: its table of fields is what the struct tags of
k8s.io/api and apimachinery's meta/v1 say at the pinned Kubernetes, its releases' differences what they say at the
newest patch of every other minor a site may run, each release's converter what its converter.go does, and its round
trip is the real one.

A release that adds a field the converter writes even when unset (no ``omitempty``), or any field at all to a
kind the host policies judge, turns ``test_the_table_is_upstreams`` or ``test_every_release_is_upstreams`` red;
rewrite both tables with ``PYTHONPATH=. python -m tests.test_served_objects_contract`` and read what the new field
does to the policies.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from components.admission_pod_size import NULL_LISTS_WHEN_UNSET, NULL_WHEN_UNSET
from components.pod_text_paths import counted_fields
from components.synced_endpoints import SLICE_NULL_WHEN_UNSET
from config.versions import KUBERNETES_MINIMUM_VERSION, KUBERNETES_NEWEST_ACCEPTED_VERSION
from config.versions import KUBERNETES_NEWEST_CHECKED_VERSION, release_numbers
from tests.conftest import MIRRORED_TAGS, git, go_function, mirrored_tag
from tests.go_struct_fields import Source, differences, schema, written, written_releases
from tests.served_objects import KINDS, PINNED_RELEASE, RELEASES, SERVED_FIELDS, SOURCE_TAG, SOURCES, as_served
from tests.served_objects import canonical_quantity, null_when_unset, null_when_unset_anywhere, other_release_fields

TABLE = Path(__file__).with_name("served_fields.json")
RELEASES_TABLE = Path(__file__).with_name("served_releases.json")
API, APIMACHINERY = "kubernetes/api", "kubernetes/apimachinery"
# Fields served null when unset that never reach a policy null: the API server's validation, which runs first,
# refuses the object (kubernetes/kubernetes pkg/apis/core/validation ValidatePodSpec: at least one container).
VALIDATED = {"containers": "a pod without containers is invalid"}


def upstream(tag: str = SOURCE_TAG) -> dict[str, dict[str, str]]:
    """The judged kinds' structs at k8s.io/api and apimachinery ``tag`` (the two are tagged together)."""
    sources = [Source(package, git(repository, "show", f"{mirrored_tag(repository, tag)}:{path}"))
               for package, (repository, path) in SOURCES.items()]
    return schema(sources, list(KINDS.values()))


def release_tags() -> dict[str, str]:
    """Each Kubernetes minor from the host floor to the newest checked one -> the newest patch release of it the
    k8s.io/api mirror holds."""
    tags = git(API, "tag", "--list").split()
    found = {}
    for minor in range(release_numbers(KUBERNETES_MINIMUM_VERSION)[1],
                       release_numbers(KUBERNETES_NEWEST_CHECKED_VERSION)[1] + 1):
        patches = [tag for tag in tags if re.fullmatch(rf"v0\.{minor}\.\d+", tag)]
        assert patches, f"the k8s.io/api mirror has no release of 1.{minor}: fetch it"
        found[f"1.{minor}"] = max(patches, key=release_numbers)
    return found


def converter_omits_zero(tag: str) -> bool:
    """apimachinery ``tag``'s converter leaves an ``omitzero`` field out when zero (it reads the option)."""
    converter = git(APIMACHINERY, "show", f"{mirrored_tag(APIMACHINERY, tag)}:pkg/runtime/converter.go")
    reads = go_function(converter, "fieldInfoFromField")
    skips = go_function(converter, "structToUnstructured")
    return '== "omitzero"' in reads and "fieldInfo.omitzero != nil && fieldInfo.omitzero(fv)" in skips


def releases_upstream() -> dict[str, dict]:
    pinned = upstream()
    return {release: {"tags": {API: tag, APIMACHINERY: tag}, "omitzero": converter_omits_zero(tag),
                      "fields": differences(pinned, upstream(tag))} for release, tag in release_tags().items()}


def test_the_table_is_upstreams():
    assert TABLE.read_text() == written(upstream()), \
        "k8s.io/api changed a judged kind's fields: run `PYTHONPATH=. python -m tests.test_served_objects_contract`"


def test_every_release_is_upstreams():
    assert RELEASES_TABLE.read_text() == written_releases(releases_upstream()), \
        "a release's fields or converter differ: run `PYTHONPATH=. python -m tests.test_served_objects_contract`"


def test_the_releases_are_every_minor_a_site_may_run_that_is_released():
    """The floor to the newest checked minor, each at a tag the PR workflow fetches, the pin with no differences. The
    newest accepted minor (1.37) has no k8s.io/api release in the mirror yet: it turns this red when it has one."""
    assert RELEASES[PINNED_RELEASE] == {"tags": {API: SOURCE_TAG, APIMACHINERY: SOURCE_TAG},
                                        "omitzero": True, "fields": {}}
    for facts in RELEASES.values():
        assert facts["tags"][API] in MIRRORED_TAGS[API] and facts["tags"][APIMACHINERY] in MIRRORED_TAGS[APIMACHINERY]
    newest = release_numbers(KUBERNETES_NEWEST_ACCEPTED_VERSION)[1]
    if f"1.{newest}" not in RELEASES:
        assert not re.search(rf"^v0\.{newest}\.\d+$", git(API, "tag", "--list"), re.MULTILINE), \
            f"k8s.io/api has released 1.{newest}: add it to MIRRORED_TAGS and KUBERNETES_NEWEST_CHECKED_VERSION"


def test_the_differences_are_read_from_the_mirror_not_assumed():
    """Facts known by hand: creationTimestamp is omitzero from apimachinery v0.34.0, and v0.30's converter reads
    only omitempty; PodSpec.workloadRef exists at 1.35 only; 1.30's pod resource claims name their claim through
    ``source``."""
    assert not converter_omits_zero("v0.33.13") and converter_omits_zero("v0.34.10")
    assert upstream("v0.33.13")["meta/v1.ObjectMeta"]["creationTimestamp"] == "time,omitempty"
    assert upstream("v0.34.10")["meta/v1.ObjectMeta"]["creationTimestamp"] == "time,omitempty,omitzero"
    assert RELEASES["1.35"]["fields"]["core/v1.PodSpec"]["workloadRef"] == "*core/v1.WorkloadReference,omitempty"
    assert RELEASES["1.30"]["fields"]["core/v1.PodResourceClaim"]["source"] == "core/v1.ClaimSource,omitempty"
    assert {"metadata.creationTimestamp"} <= null_when_unset("Pod", "1.33") - null_when_unset("Pod", "1.34")


def test_the_parser_reads_what_the_converter_writes_as_null():
    """The two fields stop 55 found by hand are among the parsed ones; a field with omitempty is not."""
    tables = upstream()
    assert tables["core/v1.TypedLocalObjectReference"]["apiGroup"] == "*string"
    assert tables["core/v1.GRPCAction"]["service"] == "*string"
    assert tables["core/v1.ServiceSpec"]["selector"] == "map[string]string,omitempty"
    assert {"spec.dataSource.apiGroup", "spec.dataSourceRef.apiGroup"} <= null_when_unset("PersistentVolumeClaim")
    assert "spec.containers[].livenessProbe.grpc.service" in null_when_unset("Pod")
    assert {"endpoints", "ports", "endpoints[].addresses"} <= null_when_unset("EndpointSlice")


@pytest.mark.parametrize("tag", MIRRORED_TAGS["kubernetes/apimachinery"])
def test_the_converter_writes_unset_lists_and_maps_as_null_and_every_struct(tag):
    """What ``as_served`` does beyond the nil pointers tests/test_synced_claims_admission.py reads: a nil map or
    list is set to the zero of its destination, an interface (null), and the emptiness test of ``omitempty`` has no
    case for a struct, so it never leaves one out."""
    converter = git("kubernetes/apimachinery", "show", f"{mirrored_tag('kubernetes/apimachinery', tag)}:"
                    "pkg/runtime/converter.go")
    for function in ("mapToUnstructured", "sliceToUnstructured"):
        assert re.search(r"if sv\.IsNil\(\) \{\n\s*dv\.Set\(reflect\.Zero\(dt\)\)\n\s*return nil",
                         go_function(converter, function)), (tag, function)
    empty = go_function(converter, re.search(r"fieldInfo\.omitempty && (\w+)\(fv\)", converter).group(1))
    assert "reflect.Struct" not in empty and empty.endswith("\n\t}\n\treturn false"), tag


def test_a_served_claim_keeps_only_its_types_fields_and_writes_the_unset_ones():
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "n"},
             "spec": {"dataSource": {"kind": "PersistentVolumeClaim", "name": "src", "namespace": "other"},
                      "resources": {"requests": {"storage": "1024Mi"}}, "unknown": 1}}
    served = as_served("PersistentVolumeClaim", claim)
    assert served["spec"]["dataSource"] == {"apiGroup": None, "kind": "PersistentVolumeClaim", "name": "src"}
    assert "unknown" not in served["spec"]
    assert served["spec"]["resources"]["requests"] == {"storage": "1Gi"}
    assert served["metadata"] == {"name": "c", "namespace": "n"}  # creationTimestamp: omitzero
    assert served["status"] == {}
    assert as_served("PersistentVolumeClaim", served) == served


def test_a_field_another_accepted_kubernetes_serves_is_kept_as_written():
    """v0.36.3's PodSpec has neither workloadRef (1.35 only) nor evictionResponders (from 1.37), but a host of those
    releases serves them, so the policies must see them; a field of no accepted release is dropped."""
    workload, responders = {"name": "training", "podGroup": "workers"}, [{"name": "acme.io/keeper", "priority": 1}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.37"}], "workloadRef": workload,
                    "evictionResponders": responders, "noSuchField": 1}}
    assert {"workloadRef", "evictionResponders"}.isdisjoint(SERVED_FIELDS["core/v1.PodSpec"])
    assert {"workloadRef", "evictionResponders"} <= other_release_fields("core/v1.PodSpec")
    served = as_served("Pod", pod)["spec"]
    assert (served["workloadRef"], served["evictionResponders"]) == (workload, responders)
    assert "noSuchField" not in served


def test_an_empty_endpoint_slice_is_served_with_null_lists():
    served = as_served("EndpointSlice", {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                                         "metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": []})
    assert served["endpoints"] == [] and served["ports"] is None


@pytest.mark.parametrize("written_as,canonical", [
    ("1024Mi", "1Gi"), ("1536Mi", "1536Mi"), ("1.5Gi", "1536Mi"), ("0.5Ki", "512"), ("2000", "2k"),
    ("1500", "1500"), ("0.5", "500m"), ("100m", "100m"), ("1e3", "1e3"), ("1000m", "1"), ("0", "0"),
    ("0.0000000001", "1n"), ("12e6", "12e6"), ("1Ki", "1Ki"), ("1023Mi", "1023Mi")])
def test_quantities_are_canonical(written_as, canonical):
    assert canonical_quantity(written_as) == canonical


def test_an_unknown_kind_passes_unchanged():
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "spec": {"anything": None}}
    assert as_served("Queue", queue) == queue


def test_the_policies_take_null_wherever_a_field_they_read_is_served_null():
    """The fields the pod-size rule walks (components/pod_text_paths.py) and the slice lists the endpoint rules read
    that a host of any accepted release serves as null when unset are exactly the ones the rules guard."""
    walked = {path for path in counted_fields()}
    read = {path for path in (p.removeprefix("spec.") for p in null_when_unset_anywhere("Pod") if p.startswith("spec."))
            if any(field == path or field.startswith((f"{path}[]", f"{path}.")) for field in walked)}
    assert read, "no walked field is served null: read the table again"
    assert {path for path in read if not path.endswith((*NULL_WHEN_UNSET, *NULL_LISTS_WHEN_UNSET))} == set(VALIDATED)
    assert {path for guard in (*NULL_WHEN_UNSET, *NULL_LISTS_WHEN_UNSET) for path in read
            if path.endswith(guard)} == read - set(VALIDATED)
    assert set(SLICE_NULL_WHEN_UNSET) == {path for path in null_when_unset_anywhere("EndpointSlice") if "." not in path}


def _expressions(value) -> list[str]:
    """Every CEL expression of a policy spec."""
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in (
            [item] if key in ("expression", "messageExpression") and isinstance(item, str) else _expressions(item))]
    return [text for item in value for text in _expressions(item)] if isinstance(value, list) else []


def release_only_nulls() -> dict[str, set[str]]:
    """Field name -> the kinds' paths where only a release other than the pin serves it null when unset."""
    found: dict[str, set[str]] = {}
    for kind in KINDS:
        for path in null_when_unset_anywhere(kind) - null_when_unset(kind):
            found.setdefault(re.findall(r"\w+", path)[-1], set()).add(f"{kind} {path}")
    return found


def test_no_host_policy_reads_a_field_only_another_release_serves_null(dev_run, eks_run):
    """The honest objects are judged as the pin serves them almost everywhere: a field only an older host serves null
    (1.30-1.33's creationTimestamp, whose converter ignores omitzero) would refuse them there alone. No host policy
    reads one; one that must takes null (``!= null``, served_list) and gets a test with the object as that release
    serves it (tests/test_served_objects_releases.py)."""
    nulls = release_only_nulls()
    assert "creationTimestamp" in nulls, "no release serves an unset creationTimestamp as null: read the table again"
    policies = [p for run in (dev_run, eks_run)
                for p in run.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")]
    texts = [(policy.inputs["metadata"]["name"], text) for policy in policies
             for text in _expressions(policy.inputs["spec"])]
    assert len(policies) > 2 and any("object.metadata" in text for _, text in texts)
    reads = {f"{policy}: {name}" for policy, text in texts for name in nulls if re.search(rf"\b{name}\b", text)}
    assert reads == set(), {read: sorted(nulls[read.rsplit(": ", 1)[1]]) for read in reads}


def test_every_kind_has_its_table():
    assert set(KINDS.values()) <= set(SERVED_FIELDS)


if __name__ == "__main__":
    TABLE.write_text(written(upstream()))
    RELEASES_TABLE.write_text(written_releases(releases_upstream()))
    sys.exit(0)
