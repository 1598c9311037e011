"""The synced-objects policy's ``object-size`` rule: a ConfigMap or Secret vCluster copies to the host holds at most
the team's cap of keys and values plus labels and annotations, in bytes as the API server stores them
(components/synced_objects_admission.py applies it to each kind)."""

from __future__ import annotations

from typing import Callable

from components.admission_metadata import metadata_bytes, metadata_keys
from config.model import Team
from config.synced_data import SYNCED_METADATA_KEYS, SYNCED_OBJECT_KEYS, object_bytes


def base64_bytes(value: str) -> str:
    """The bytes a []byte field's value holds. The policy sees the object in the API server's unstructured form
    (k8s.io/apiserver pkg/admission/plugin/cel/condition.go objectToResolveVal; apimachinery pkg/runtime/converter.go
    sliceToUnstructured): a []byte value is its padded base64 text, whose n characters hold n/4*3 bytes less the
    padding. Should the API server one day pass such fields as CEL bytes (the TODO there), they are counted as such."""
    return (f"(type({value}) == bytes ? size({value}) : size({value}) / 4 * 3 - "
            f"({value}.endsWith('==') ? 2 : ({value}.endsWith('=') ? 1 : 0)))")


def text_bytes(value: str) -> str:
    """A string's bytes as stored: CEL's size() counts a string's code points, its UTF-8 bytes are counted instead."""
    return f"size(bytes({value}))"


def _data_bytes(field: str, value_bytes: Callable[[str], str]) -> str:
    """The keys and values of the object's map ``field``, in bytes (keys are ASCII: the API server allows
    letters, digits, '-', '_' and '.')."""
    value = f"object.{field}[k]"
    return f"(has(object.{field}) ? object.{field}.map(k, size(k) + {value_bytes(value)}).sum() : 0)"


# Each kind's map fields and how a value's bytes are counted. The host's Secret strategy merges stringData into data
# before admission runs; a ConfigMap's data is text, its binaryData bytes.
SIZED_KINDS: dict[str, tuple[tuple[str, Callable[[str], str]], ...]] = {
    "ConfigMap": (("data", text_bytes), ("binaryData", base64_bytes)),
    "Secret": (("data", base64_bytes),),
}


def object_size_check(team: Team, kind: str) -> tuple[str, str, str]:
    """The expression, problem and fix of a copy of ``kind`` holding at most the team's cap in data keys and values
    plus labels and annotations, in at most SYNCED_OBJECT_KEYS data keys and SYNCED_METADATA_KEYS labels and
    annotations.

    Metadata counts within the cap: vCluster copies every annotation (translate.go HostMetadata, none excluded for
    these kinds), and ``kubectl apply`` writes the object again, data included, into last-applied-configuration. The
    API server refuses annotations past 256 KiB, so ``kubectl apply`` creates no ConfigMap above about 256 KiB of data
    anyway: at the default 512Ki every ConfigMap kubectl apply can create passes.

    Cost: the API server stops one expression at 1,000,000 (k8s.io/apiserver pkg/apis/cel/config.go PerCallLimit),
    and validation has held the values to 1 MiB and the annotations to 256 KiB before admission runs, but not the
    keys nor the labels. Both counts are checked first, at a constant cost, and ``&&`` stops there. Past them, cel-go
    (interpreter/runtimecost.go) charges each key some tens (an identifier, field, index or call 1, the list the map
    macro appends 10, the value read several times) and a tenth of a character for each endsWith() (bytes() and
    size() of an untyped value cost 1 whatever its length): cel-go measures about 293,000 for a Secret of 4,096
    keys, 1 MiB of values and 1,024 labels and annotations (tests/test_celgo_figures.py), below the limit.
    """
    fields = SIZED_KINDS[kind]
    keys = " + ".join(f"(has(object.{field}) ? size(object.{field}) : 0)" for field, _ in fields)
    payload = " + ".join(_data_bytes(field, value_bytes) for field, value_bytes in fields)
    cap = object_bytes(team.vcluster)
    stated = team.vcluster.resource_quota.synced_object_bytes
    return (f"{keys} <= {SYNCED_OBJECT_KEYS} && {metadata_keys()} <= {SYNCED_METADATA_KEYS} && "
            f"{payload} + {metadata_bytes()} <= {cap}",
            f"a {kind} vCluster copies to the host may hold at most {cap} bytes ({stated}) of keys and values, "
            f"its labels and annotations included (config vcluster.resourceQuota.syncedObjectBytes), in at most "
            f"{SYNCED_OBJECT_KEYS} keys and {SYNCED_METADATA_KEYS} labels and annotations: every copy lands in "
            "the host's etcd, which turns the whole cluster read-only when full",
            f"keep large data out of the {kind} (in the image, a volume or object storage); kubectl apply stores "
            "the object again in its kubectl.kubernetes.io/last-applied-configuration annotation, so create a "
            "large one with kubectl create or kubectl apply --server-side; or ask the platform team for a larger "
            "syncedObjectBytes")
