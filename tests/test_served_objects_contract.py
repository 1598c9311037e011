"""The served-object model (tests/served_objects.py) is upstream's: its table of fields is what the struct tags of
k8s.io/api and apimachinery's meta/v1 say at the pinned Kubernetes, and its round trip is the real one.

A release that adds a field the converter writes even when unset (no ``omitempty``), or any field at all to a
kind the host policies judge, turns ``test_the_table_is_upstreams`` red; rewrite the table with
``PYTHONPATH=. python -m tests.test_served_objects_contract`` and read what the new field does to the policies.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from components.admission_pod_size import NULL_LISTS_WHEN_UNSET, NULL_WHEN_UNSET
from components.pod_text_paths import counted_fields
from components.synced_endpoints import SLICE_NULL_WHEN_UNSET
from tests.conftest import MIRRORED_TAGS, git, go_function, mirrored_tag
from tests.go_struct_fields import Source, schema, written
from tests.served_objects import KINDS, SERVED_FIELDS, SOURCE_TAG, SOURCES, as_served, canonical_quantity
from tests.served_objects import null_when_unset, other_release_fields

TABLE = Path(__file__).with_name("served_fields.json")
# Fields served null when unset that never reach a policy null: the API server's validation, which runs first,
# refuses the object (kubernetes/kubernetes pkg/apis/core/validation ValidatePodSpec: at least one container).
VALIDATED = {"containers": "a pod without containers is invalid"}


def upstream() -> dict[str, dict[str, str]]:
    sources = [Source(package, git(repository, "show", f"{mirrored_tag(repository, SOURCE_TAG)}:{path}"))
               for package, (repository, path) in SOURCES.items()]
    return schema(sources, list(KINDS.values()))


def test_the_table_is_upstreams():
    assert TABLE.read_text() == written(upstream()), \
        "k8s.io/api changed a judged kind's fields: run `PYTHONPATH=. python -m tests.test_served_objects_contract`"


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
    that the API server serves as null when unset are exactly the ones the rules guard."""
    walked = {path for path in counted_fields()}
    read = {path for path in (p.removeprefix("spec.") for p in null_when_unset("Pod") if p.startswith("spec."))
            if any(field == path or field.startswith((f"{path}[]", f"{path}.")) for field in walked)}
    assert read, "no walked field is served null: read the table again"
    assert {path for path in read if not path.endswith((*NULL_WHEN_UNSET, *NULL_LISTS_WHEN_UNSET))} == set(VALIDATED)
    assert {path for guard in (*NULL_WHEN_UNSET, *NULL_LISTS_WHEN_UNSET) for path in read
            if path.endswith(guard)} == read - set(VALIDATED)
    assert set(SLICE_NULL_WHEN_UNSET) == {path for path in null_when_unset("EndpointSlice") if "." not in path}


def test_every_kind_has_its_table():
    assert set(KINDS.values()) <= set(SERVED_FIELDS)


if __name__ == "__main__":
    TABLE.write_text(written(upstream()))
    sys.exit(0)
