"""The label and annotation rules of a tenant's host admission policy: components/admission_keys.py in CEL.

On CREATE every key must be one the tenant may set (``reserved-keys``), and a granted key must carry
a value KAI gives the meaning the platform grants (``granted-values``, ``device-list-name``). After
creation the reserved keys are fixed for the syncer (``guarded-fields``), while KAI's own service
accounts add or change only the keys they own (``kai-writes``). Some values of unreserved keys belong
to KAI's and vCluster's own pods (``reserved-values``).
"""

from __future__ import annotations

from components.admission_keys import (
    ANNOTATION, HOST_DNS_LABEL, KAI_WRITERS, LABEL, RESERVED_APP_VALUES, TENANT_DNS_LABEL, fixed, kai_writer,
    matches_any, tenant_may_set,
)
from config.model import Team
from config.synced_data import SYNCED_METADATA_BYTES, SYNCED_METADATA_KEYS
from config.vcluster_images import coredns_image
from config.vocabulary import KAI_NAMESPACE

FIELDS = {LABEL: "labels", ANNOTATION: "annotations"}
# '=', the two quotes around the value and the newline joining a line of vcluster.loft.sh/labels to the next.
LABEL_LINE_FRAMING = 4
# Values every KAI component parses alike (webhook: unsigned/float, scheduler: signed/float,
# podgroup-controller: Quantity). A fraction has a floor, so one GPU is never split among more than
# twenty pods, and no more decimals than the scheduler keeps when it charges a queue (it rounds a
# portion to hundredths, gpu_resource_requirment.go): a pod asking for 0.054 would be charged 0.05.
# gpu-memory is at least 1 GiB and below ten million MiB; KAI charges it as the share of the card it lands on,
# rounded up to hundredths (gpu_sharing_node_info.go), so a twentieth only on cards up to 20 GiB. Zeros after the
# hundredths change no value KAI reads ("0.050" is 0.05 to every parser), so they are admitted.
MIN_GPU_FRACTION = 0.05
FRACTION_DECIMALS = 2
FRACTION_PATTERN = f"^0[.][0-9]{{1,{FRACTION_DECIMALS}}}0*$"
MIN_GPU_MEMORY_MIB = 1024
MEMORY_PATTERN = "^[1-9][0-9]{3,6}$"
# KAI's binder labels a pod with one runai-gpu-group/<group> for each GPU group of its bind, one a device
# (pkg/binder/binding/binder.go reserveGPUs): at most this many.
MAX_FRACTION_DEVICES = 8
NUM_DEVICES_PATTERN = f"^[1-{MAX_FRACTION_DEVICES}]$"
# KAI's own priority classes (deployments/kai-scheduler/templates/priorityclasses, docs/priority).
KAI_PRIORITY_CLASSES = ("train", "build-preemptible", "build", "inference")
PREEMPTIBILITY_VALUES = ("preemptible", "non-preemptible")
GO_DURATION_PATTERN = "^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$"
QUALIFIED_NAME_PATTERN = "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
# KAI's device-list ConfigMap prefix (pkg/binder/common/gpusharingconfigmap/config_map.go): the pod's
# name cut to 33 characters (32 from the tenth container on; v0.17.0 then trims trailing '.' and '-'),
# '-', seven characters of the apimachinery random alphabet, '-shared-gpu'.
DEVICE_LIST_SUFFIX = "-shared-gpu"
RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
DEVICE_LIST_PATTERN = f"^[a-z0-9.-]+-[{RANDOM_ALPHABET}]{{7}}{DEVICE_LIST_SUFFIX}$"
DEVICE_LIST_TAIL = 1 + 7 + len(DEVICE_LIST_SUFFIX)
DEVICE_LIST_BASE_LENGTHS = (33, 32)


def has_key(obj: str, field: str, key: str) -> str:
    return f"(has({obj}.metadata.{field}) && '{key}' in {obj}.metadata.{field})"


def key_value(obj: str, field: str, key: str) -> str:
    return f"({has_key(obj, field, key)} ? {obj}.metadata.{field}['{key}'] : '')"


def served_list(field: str) -> str:
    """A list without omitempty is set: etcd's protobuf keeps no empty list, so the API server hands a policy an empty
    one as null, which has() reports present; CEL has no list-to-null comparison in every implementation
    (tests/test_served_objects_contract.py)."""
    return f"(has({field}) && type({field}) == list)"


def _annotation(key: str) -> str:
    return key_value("object", "annotations", key)


def _each_key(obj: str, kind: str, condition: str) -> str:
    field = FIELDS[kind]
    return f"(!has({obj}.metadata.{field}) || {obj}.metadata.{field}.all(k, {condition}))"


def unchanged_from_old(field: str, key: str) -> str:
    """CEL: ``metadata.<field>[key]`` (``key`` a comprehension's variable) is as the old object held it."""
    return (f"has(oldObject.metadata.{field}) && {key} in oldObject.metadata.{field} && "
            f"oldObject.metadata.{field}[{key}] == object.metadata.{field}[{key}]")


def _same_as_old(kind: str) -> str:
    return f"({unchanged_from_old(FIELDS[kind], 'k')})"


def _kept(kind: str) -> str:
    field = FIELDS[kind]
    return f"(has(object.metadata.{field}) && k in object.metadata.{field})"


def _offending(kind: str, condition: str) -> str:
    field = FIELDS[kind]
    return f"(has(object.metadata.{field}) ? object.metadata.{field}.filter(k, !{condition}).join(', ') : '')"


def cel_string(value: str) -> str:
    """``value`` as a CEL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def refusal(name: str, expression: str, problem: str, fix: str) -> dict:
    """A validation of the tenant's host policies: an object for which ``expression`` is false is refused with
    the message ``[name] problem: fix``."""
    return {"expression": expression, "message": f"[{name}] {problem}: {fix}", "reason": "Forbidden"}


def _reserved_keys() -> dict:
    labels, annotations = tenant_may_set("k", LABEL), tenant_may_set("k", ANNOTATION)
    rule = refusal("reserved-keys",
                   f"request.operation != 'CREATE' || ({_each_key('object', LABEL, labels)} && "
                   f"{_each_key('object', ANNOTATION, annotations)})",
                   "labels and annotations under KAI's, run.ai's, NVIDIA's, vCluster's, Kubernetes' and the network "
                   "plugins' keys are the platform's, except the ones it grants (docs/security-admission.md)",
                   "remove them; request GPUs with gpu-fraction, gpu-memory or nvidia.com/gpu")
    rule["messageExpression"] = (f"'[reserved-keys] labels [' + {_offending(LABEL, labels)} + '] and annotations [' + "
                                 f"{_offending(ANNOTATION, annotations)} + '] are in key spaces the platform reserves "
                                 "(KAI, run.ai, NVIDIA, vCluster, Kubernetes, network plugins) and not granted to "
                                 "tenants: remove them (docs/security-admission.md lists what a pod may carry)'")
    return rule


def _guarded_fields() -> dict:
    checks = []
    for kind in (LABEL, ANNOTATION):
        key_fixed = fixed("k", kind)
        checks.append(_each_key("object", kind, f"!{key_fixed} || {_same_as_old(kind)}"))
        checks.append(_each_key("oldObject", kind, f"!{key_fixed} || {_kept(kind)}"))
    return refusal("guarded-fields",
                   f"request.operation != 'UPDATE' || variables.kaiWriter != '' || ({' && '.join(checks)})",
                   "the queue label, the GPU annotations and every other reserved key of an existing pod are fixed, and "
                   "the keys KAI adds (PodGroup, GPU group, received resources) stay as KAI wrote them",
                   "delete the pod and create it again with the values you need")


def _kai_writes() -> dict:
    per_writer = []
    for account, owned in KAI_WRITERS.items():
        checks = []
        for kind in (LABEL, ANNOTATION):
            own = matches_any("k", owned[kind])
            checks.append(_each_key("object", kind, f"{own} || {_same_as_old(kind)}"))
            checks.append(_each_key("oldObject", kind, f"{own} || {_kept(kind)}"))
        per_writer.append(f"(variables.kaiWriter != '{account}' || ({' && '.join(checks)}))")
    return refusal("kai-writes", f"request.operation != 'UPDATE' || ({' && '.join(per_writer)})",
                   "each KAI service account may only add, change or remove the pod keys it owns",
                   "leave the other labels and annotations as they are")


def _granted_values(team: Team) -> dict:
    fraction, memory = _annotation("gpu-fraction"), _annotation("gpu-memory")
    devices, container = _annotation("gpu-fraction-num-devices"), _annotation("gpu-fraction-container-name")
    names = "object.spec.containers.exists(c, c.name == {0}) || (has(object.spec.initContainers) && " \
            "object.spec.initContainers.exists(c, c.name == {0}))"
    topology = [_annotation(f"kai.scheduler/topology-{kind}-placement") for kind in ("required", "preferred")]
    checks = {
        "gpu-fraction": f"{fraction}.matches('{FRACTION_PATTERN}') && double({fraction}) >= {MIN_GPU_FRACTION}",
        "gpu-memory": f"{memory}.matches('{MEMORY_PATTERN}') && int({memory}) >= {MIN_GPU_MEMORY_MIB}",
        "gpu-fraction-num-devices": f"{devices}.matches('{NUM_DEVICES_PATTERN}') && variables.fractional",
        "gpu-fraction-container-name": f"variables.fractional && ({names.format(container)})",
        "kai.scheduler/topology-required-placement": f"{topology[0]}.matches('{QUALIFIED_NAME_PATTERN}')",
        "kai.scheduler/topology-preferred-placement": f"{topology[1]}.matches('{QUALIFIED_NAME_PATTERN}')",
        "kai.scheduler/preemption-delay":
            f"{_annotation('kai.scheduler/preemption-delay')}.matches('{GO_DURATION_PATTERN}')",
    }
    expression = " && ".join(f"(!{has_key('object', 'annotations', key)} || ({check}))" for key, check in checks.items())
    labels = {"priorityClassName": KAI_PRIORITY_CLASSES, "kai.scheduler/preemptibility": PREEMPTIBILITY_VALUES}
    expression += "".join(f" && (!{has_key('object', 'labels', key)} || "
                          f"object.metadata.labels['{key}'] in {list(values)})" for key, values in labels.items())
    return refusal("granted-values", expression,
                   f"team {team.name}'s granted keys need the values KAI reads the same way everywhere: gpu-fraction "
                   f"a decimal from {MIN_GPU_FRACTION} below 1 in hundredths (KAI charges no finer), gpu-memory whole "
                   f"MiB from {MIN_GPU_MEMORY_MIB} to 9999999, gpu-fraction-num-devices 1-"
                   f"{MAX_FRACTION_DEVICES} with a fraction, "
                   "gpu-fraction-container-name an existing container of a fractional pod, priorityClassName one of "
                   f"{', '.join(KAI_PRIORITY_CLASSES)}, kai.scheduler/preemptibility preemptible or non-preemptible, "
                   "topology placements label keys, preemption-delay a Go duration",
                   "correct the value (for example gpu-fraction: \"0.5\" or gpu-memory: \"4096\")")


def _derived_base(prefix: str, length: int) -> str:
    """The prefix's base is the pod name cut at ``length``, less trailing '.' or '-' (v0.17.0 trims them)."""
    name = "object.metadata.name"
    base = f"{prefix}.substring(0, size({prefix}) - {DEVICE_LIST_TAIL})"
    cut = f"(size({name}) < {length} ? size({name}) : {length})"
    return (f"(size({prefix}) - {DEVICE_LIST_TAIL} <= {cut} && {name}.startsWith({base}) && "
            f"{name}.substring(size({prefix}) - {DEVICE_LIST_TAIL}, {cut}).matches('^[.-]*$'))")


def _device_list_name() -> dict:
    prefix = _annotation("runai/shared-gpu-configmap")
    derived = " || ".join(_derived_base(prefix, length) for length in DEVICE_LIST_BASE_LENGTHS)
    return refusal("device-list-name",
                   f"!{has_key('object', 'annotations', 'runai/shared-gpu-configmap')} || (variables.fractional && "
                   f"{prefix}.matches('{DEVICE_LIST_PATTERN}') && ({derived}))",
                   "runai/shared-gpu-configmap names the ConfigMaps KAI's binder creates, takes over and deletes; only "
                   "the prefix KAI derives from this pod's own name is allowed, and only on a fractional pod",
                   "remove the annotation; KAI's webhook writes it")


def _reserved_values(team: Team) -> dict:
    app, release = key_value("object", "labels", "app"), key_value("object", "labels", "release")
    dns_key, dns_value = TENANT_DNS_LABEL
    host_dns_key, host_dns_value = HOST_DNS_LABEL
    # On the host the syncer's namespace label says where the pod lives in the virtual cluster (a tenant
    # namespace is never kube-system); inside the virtual cluster a copy of this rule reads the namespace.
    in_virtual_kube_system = (f"({key_value('object', 'labels', 'vcluster.loft.sh/namespace')} == 'kube-system' || "
                              "request.namespace == 'kube-system')")
    shipped_dns = (f"{in_virtual_kube_system} && object.spec.containers.all(c, c.image == '{coredns_image(team.vcluster)}')"
                   " && (!has(object.spec.initContainers) || size(object.spec.initContainers) == 0)"
                   " && (!has(object.spec.ephemeralContainers) || size(object.spec.ephemeralContainers) == 0)")
    return refusal("reserved-values",
                   f"!({app} in {list(RESERVED_APP_VALUES)}) && {release} != '{team.vcluster_name}' && "
                   f"{key_value('object', 'labels', host_dns_key)} != '{host_dns_value}' && "
                   f"({key_value('object', 'labels', dns_key)} != '{dns_value}' || ({shipped_dns}))",
                   f"the labels app={', app='.join(RESERVED_APP_VALUES)} mark KAI's reservation and scaling pods and "
                   f"vCluster's own pods, release={team.vcluster_name} and {host_dns_key}={host_dns_value} select control "
                   f"planes and DNS, and {dns_key}={dns_value} opens the host's DNS to the DNS the platform ships only",
                   "use other label values on workload pods")


def metadata_keys(obj: str = "object") -> str:
    """How many labels and annotations ``obj`` carries."""
    return " + ".join(f"(has({obj}.metadata.{field}) ? size({obj}.metadata.{field}) : 0)" for field in FIELDS.values())


def metadata_bytes(obj: str = "object", uncounted: dict = None) -> str:
    """The bytes of ``obj``'s label and annotation keys and values, less the keys of ``uncounted`` (kind -> keys, as
    ``matches_any`` reads them). Keys and label values are ASCII (the API server's validation); an annotation's value is
    any text, whose CEL size() counts characters, so its UTF-8 bytes are counted."""
    sums = []
    for kind, field in FIELDS.items():
        source = f"{obj}.metadata.{field}"
        skipped = (uncounted or {}).get(kind, ())
        kept = f"{source}.filter(k, !{matches_any('k', skipped)})" if skipped else source
        value = f"size({source}[k])" if kind == LABEL else f"size(bytes({source}[k]))"
        sums.append(f"(has({source}) ? {kept}.map(k, size(k) + {value}).sum() : 0)")
    return " + ".join(sums)


def metadata_size() -> str:
    """At most SYNCED_METADATA_KEYS labels and annotations, checked first (``&&`` stops there) so that the sum runs over
    few enough keys to stay far within the API server's CEL cost limit, and at most SYNCED_METADATA_BYTES of them."""
    return f"{metadata_keys()} <= {SYNCED_METADATA_KEYS} && {metadata_bytes()} <= {SYNCED_METADATA_BYTES}"


def metadata_size_problem(kinds: str) -> str:
    return (f"the labels and annotations of a {kinds} vCluster copies to the host may hold at most "
            f"{SYNCED_METADATA_BYTES} bytes ({SYNCED_METADATA_BYTES // 2 ** 10}Ki, keys and values, what vCluster adds "
            f"included) in at most {SYNCED_METADATA_KEYS} keys: every copy lands in the host's etcd, which turns the "
            "whole cluster read-only when full")


METADATA_SIZE_FIX = ("keep large data out of labels and annotations (put it in a ConfigMap or the image); an object "
                     "written with kubectl apply carries itself again in the annotation "
                     "kubectl.kubernetes.io/last-applied-configuration: use kubectl create or kubectl apply "
                     "--server-side for large ones")


def kai_owned_keys() -> dict:
    """The keys KAI's own service accounts write on a pod after creation, by kind."""
    return {kind: tuple(key for owned in KAI_WRITERS.values() for key in owned[kind]) for kind in FIELDS}


def echoed_label_bytes(keys: tuple[str, ...], obj: str = "object") -> str:
    """CEL: the bytes the lines of ``obj``'s labels among ``keys`` take in vcluster.loft.sh/labels, where vCluster
    0.36.1 writes every virtual label again as ``key=<value as a JSON string>``, the lines joined by newlines
    (pods/translate/translator.go LabelsAnnotation). A label value is at most 63 letters, digits, '-', '_' and '.',
    which JSON quotes without escapes: a line is its key, its value and ``LABEL_LINE_FRAMING`` bytes."""
    source = f"{obj}.metadata.labels"
    return (f"(has({source}) ? {source}.filter(k, {matches_any('k', keys)}).map(k, size(k) + size({source}[k]) + "
            f"{LABEL_LINE_FRAMING}).sum() : 0)")


def pod_metadata_size() -> dict:
    """KAI's updates change only the keys KAI owns (``kai-writes``), which the tenant cannot set (``reserved-keys``,
    ``guarded-fields``); they are not counted, so neither KAI's updates nor the syncer's carrying them back are refused
    for them, and a pod admitted once stays updatable by KAI and by the syncer. Nor are they counted among the
    SYNCED_METADATA_KEYS keys: their number is bounded first, each single key by a lookup and the
    runai-gpu-group/<group> labels, one a device, by MAX_FRACTION_DEVICES, so that counting those by a filter stays
    cheap.

    The syncer carries KAI's labels back into the virtual pod, and on every later update rewrites
    vcluster.loft.sh/labels from the virtual labels (pods/translate/diff.go Diff): KAI's labels then appear there a
    second time. Their lines are allowed on top of the cap, computed from the KAI labels the host pod carries, not
    searched for in the annotation: a substring search over an annotation of up to 256 KiB costs its length times the
    line's (cel-go ContainsString), past the per-call limit, while this sum takes a few steps a label. The allowance is
    exact when the annotation holds those lines, which it does on every syncer update (the lines come from the
    virtual labels, and ``guarded-fields`` keeps those equal to KAI's), but one byte over when KAI's are its only
    lines (no newline follows the last). A tenant gains nothing from it: on CREATE a pod carries no KAI label
    (``reserved-keys``), so a pod is created within the cap alone, and after that the allowance is never more than
    KAI's own labels again, which only KAI writes. Headroom left at CREATE instead would not hold: a tenant's edit up
    to the cap while the pod waits for KAI would use it up, and the sync after binding be refused all the same."""
    owned = kai_owned_keys()
    own_keys = f"{metadata_keys()} - {_kai_keys(owned, family=False)}"
    size = (f"{own_keys} <= {SYNCED_METADATA_KEYS + MAX_FRACTION_DEVICES} && {own_keys} - "
            f"{_kai_keys(owned, family=True)} <= {SYNCED_METADATA_KEYS} && {metadata_bytes(uncounted=owned)} <= "
            f"{SYNCED_METADATA_BYTES} + {echoed_label_bytes(owned[LABEL])}")
    return refusal("metadata-size", f"variables.kaiWriter != '' || ({size})", metadata_size_problem("pod"),
                   METADATA_SIZE_FIX)


def _kai_keys(owned: dict, family: bool) -> str:
    """CEL: how many of KAI's keys the pod carries, the single ones by lookup (``family``: those of KAI's key families,
    runai-gpu-group/<group>, by a filter, which the count of the other keys must have bounded first)."""
    counts = []
    for kind, field in FIELDS.items():
        source = f"object.metadata.{field}"
        keys = tuple(key for key in owned[kind] if key.endswith("*") == family)
        if family and keys:
            counts.append(f"(has({source}) ? size({source}.filter(k, {matches_any('k', keys)})) : 0)")
        counts += [f"({has_key('object', field, key)} ? 1 : 0)" for key in keys if not family]
    return f"({' + '.join(counts)})"


def metadata_variables(kai_namespace: str = KAI_NAMESPACE) -> list[dict]:
    writer = "''"
    for account in KAI_WRITERS:
        writer = f"request.userInfo.username == '{kai_writer(account, kai_namespace)}' ? '{account}' : {writer}"
    return [{"name": "kaiWriter", "expression": writer}]


def metadata_validations(team: Team) -> list[dict]:
    return [_reserved_keys(), _granted_values(team), _device_list_name(), _guarded_fields(), _kai_writes(),
            _reserved_values(team)]
