"""The bytes of free text a tenant pod carries to the host (rule ``pod-size``) and what its lists' entries store
beside it (``pod-entry-size``), both of the site's pod-size policy (components/pod_size_admission.py), and how many
tolerations, containers, volumes, container ports and ConfigMap and Secret references it has (rules ``tolerations``,
``containers``, ``volumes``, ``ports``, ``object-references``).

vCluster copies a pod's spec as the tenant wrote it (pods/translate/translator.go ``Translate`` deep-copies the pod,
adds the Kubernetes and service-link variables and renames the objects it names), and the API server bounds many
of its strings only by the request's size, so a team's cluster-admin could write ``count/pods`` pods of 1.5 MiB
(etcd's request limit) into the host's etcd. This rule counts the UTF-8 bytes of every such string
(components/pod_text_paths.py lists where they are: env, commands and args, images, working directories, mount and
volume item paths, probe paths, node affinity values, DNS options, sysctl values, confinement profiles, ...). The
other text of a pod is bounded already: labels and annotations by ``metadata-size``, names, keys and label values
by the API server's validation, object names the syncer renames (tests/test_pod_text_fields_contract.py classifies
every field).

Cost: the API server stops one expression at 1,000,000 (k8s.io/apiserver pkg/apis/cel/config.go PerCallLimit) and
refuses the pod then (failurePolicy Fail), which is the safe outcome for a hostile pod; an honest one must stay far
inside. Each sum the two rules compare is a policy variable (``SIZE_SUMS``; the byte sum adds one per counted
field), which the limit stops alone, and a rule is charged its own cost and its variables' to the policy's budget of
10,000,000 (tests/celgo_cost.py); the figures below are that charge. cel-go (interpreter/runtimecost.go) charges 1
for each identifier, field selection, has(), operator and call, and 1 for each element a map() macro appends; size()
and bytes() of a field cost 1 whatever its length, since the pod is untyped (``object`` is dyn) and cel-go prices a
call by characters only when the checker resolved its overload. So the rule costs per entry walked and not per
character: the count of list entries comes first and ``&&`` stops the rule there, and the byte sum walks again, each
has() chain stopping at the first absent field (an env variable's reference lies four deep). Measured with cel-go
(tests/test_celgo_figures.py): 15,500 for the large honest pod of tests/test_pod_text_attacks.py (three containers
mounting twenty volumes of ten items), 56,900 for a pod in a namespace of a hundred Services (1,300 service-link
variables), and about 526,000 for twenty containers at 8,192 entries, each an env variable reading a resource field,
with the request (3 MiB, k8s.io/apiserver pkg/server/config.go MaxRequestBodyBytes) filled with text. A hostile pod
of hundreds of fully set containers or volumes can pass the limit or the budget: the API server then refuses it,
which is what the rule is for.

Rule ``pod-entry-size`` sums what those entries store beside their text (config/pod_entry_bytes.py): ``size()`` of
each list times its entry's bytes, so a list of strings or of fixed-size entries costs a handful whatever its
length, and a walk into the entries of the object lists holding lists of their own (containers, volumes, projected
sources, node and pod affinity terms, spread constraints, label selectors, host aliases, restart rules) and into env
variables for their references. The entry count is checked first, as in ``pod-size``: cel-go measures about
204,000 for the pod above of 8,192 env references, the dearest entry to walk; the floods of
tests/test_pod_entry_sizes.py (8,000 mounts, 7,500 references) stay within CEL C++'s 10,000 iterations besides.
"""

from __future__ import annotations

import functools
import json

from components.admission_metadata import refusal, served_list
from components.pod_text_paths import POD_SPEC, TextPaths
from config.model import Team
from config.vocabulary import POD_TEXT_BYTES_ANNOTATION
from components.admission_devices import CONTAINER_LISTS
from config.pod_entry_bytes import SYNCED_POD_ENTRY_BYTES
from config.synced_data import (
    HOST_ADDED_CONTAINERS, HOST_ADDED_VOLUMES, POD_REFERENCE_CAP, SYNCED_POD_CONTAINERS, SYNCED_POD_PORTS,
    SYNCED_POD_REFERENCES, SYNCED_POD_TEXT_ITEMS, SYNCED_POD_TOLERATIONS, SYNCED_POD_VOLUMES, pod_toleration_cap,
)


def _present(var: str, path: str) -> str:
    """Every field on ``path`` under ``var`` is set (CEL's has() reads one field at a time)."""
    parts = path.split(".")
    return " && ".join(f"has({var}.{'.'.join(parts[:depth])})" for depth in range(1, len(parts) + 1))


# Fields the API server hands a policy as null when unset: pointers without omitempty (k8s.io/api core/v1
# GRPCAction.Service), which has() reports present (tests/test_synced_claims_admission.py) ...
NULL_WHEN_UNSET = ("grpc.service",)
# ... and lists without omitempty (NodeSelector.NodeSelectorTerms, ProjectedVolumeSource.Sources), tested with
# served_list (tests/test_served_objects_contract.py derives both from tests/served_fields.json).
NULL_LISTS_WHEN_UNSET = ("nodeSelectorTerms", "projected.sources")


def _when(var: str, path: str, value: str) -> str:
    present = _present(var, path) + (f" && {var}.{path} != null" if path.endswith(NULL_WHEN_UNSET) else "") + (
        f" && {served_list(f'{var}.{path}')}" if path.endswith(NULL_LISTS_WHEN_UNSET) else "")
    return f"({present} ? {value} : 0)"


def _sum(terms: list[str]) -> str:
    """A list's sum, not a chain of +: a chain nests one level per term, and CEL parsers stop at a depth (32 in
    CEL C++, 250 in cel-go)."""
    return f"[{', '.join(terms)}].sum()" if terms else "0"


def _total(terms: list[tuple[str, str]]) -> str:
    """The sum of (path, expression) terms."""
    return _sum([term for _, term in terms])


def _entry_terms(var: str, paths: TextPaths, depth: int) -> list[tuple[str, str]]:
    """How many list entries (strings and objects) ``var`` holds along each of ``paths``: (path, count)."""
    inner = f"e{depth}"
    terms = [(path, _when(var, path, f"size({var}.{path})")) for path in paths.string_lists]
    for path, element in paths.objects.items():
        nested = _total(_entry_terms(inner, element, depth + 1))
        per_entry = "" if nested == "0" else f" + {var}.{path}.map({inner}, {nested}).sum()"
        terms.append((path, _when(var, path, f"size({var}.{path}){per_entry}")))
    return terms


def _text_terms(var: str, paths: TextPaths, depth: int) -> list[tuple[str, str]]:
    """The UTF-8 bytes of the strings ``var`` holds along each of ``paths``: (path, bytes). CEL's size() of a string
    counts characters."""
    inner = f"e{depth}"
    terms = [(path, _when(var, path, f"size(bytes({var}.{path}))")) for path in paths.strings]
    terms += [(path, _when(var, path, f"{var}.{path}.map({inner}, size(bytes({inner}))).sum()"))
              for path in paths.string_lists]
    for path, element in paths.objects.items():
        nested = _total(_text_terms(inner, element, depth + 1))
        if nested != "0":
            terms.append((path, _when(var, path, f"{var}.{path}.map({inner}, {nested}).sum()")))
    return terms


def _stored_terms(var: str, paths: TextPaths, depth: int) -> list[tuple[str, str]]:
    """What the entries of the lists and maps ``var`` holds along each of ``paths`` store beside their text: per
    entry, ``size()`` times its bytes, plus what each entry of an object list holds below it. (path, bytes)."""
    inner = f"e{depth}"
    terms = []
    for path, each in paths.entry_bytes.items():
        own = [f"size({var}.{path}) * {each}"] if each else []
        nested = _total(_stored_terms(inner, paths.objects[path], depth + 1)) if path in paths.objects else "0"
        below = [] if nested == "0" else [f"{var}.{path}.map({inner}, {nested}).sum()"]
        terms.append((path, _when(var, path, " + ".join(own + below) or "0")))
    terms += [(path, _when(var, path, str(each))) for path, each in paths.present_bytes.items()]
    return terms


# The sums the two size rules compare, each a policy variable. CEL's compile time grows faster than an expression's
# length, and the API server compiles every team's policy at start, refusing every write until it has
# (k8s.io/apiserver policy/generic plugin.go Dispatch): inline, these sums made most of a team's compile time. The byte
# sum, the dearest to compile, adds one variable per counted field of the spec; the others, cheaper to compile than
# the memory more variables hold, are one variable each (docs/security-object-sizes.md, "Compiled once for the site").
SIZE_SUMS = {"podTextItems": (_entry_terms, "object", False), "podTextBytes": (_text_terms, "object", True),
             "podEntryBytes": (_stored_terms, "object", False),
             "oldPodEntryBytes": (_stored_terms, "oldObject", False)}


def _field_variable(total: str, path: str) -> str:
    return f"{total}_{path.replace('.', '_')}"


@functools.cache  # the site's policy asks once per run; the tests ask many times
def pod_size_variables() -> tuple[dict, ...]:
    """The variables of the two size rules, each field's before the sum that reads it (a policy's variables read only
    the ones before them). The old pod's sum is 0 on CREATE, where there is none (tenant_sim and CEL C++ evaluate
    every variable; the API server only those a rule reads)."""
    variables = []
    for total, (terms_of, obj, per_field) in SIZE_SUMS.items():
        guard = "request.operation != 'UPDATE' ? 0 : " if obj == "oldObject" else ""
        terms = terms_of(f"{obj}.spec", POD_SPEC, 0)
        if per_field:
            fields = [{"name": _field_variable(total, path), "expression": guard + term} for path, term in terms]
            variables += [*fields, {"name": total,
                                    "expression": _sum([f"variables.{field['name']}" for field in fields])}]
        else:
            variables.append({"name": total, "expression": guard + _total(terms)})
    return tuple(variables)


def _ephemeral(obj: str) -> str:
    field = f"{obj}.spec.ephemeralContainers"
    return f"(has({field}) ? size({field}) : 0)"


def _images(obj: str) -> str:
    return " + ".join(f"(has({obj}.spec.{field}) ? {obj}.spec.{field}.map(c, c.image) : [])"
                      for field in ("containers", "initContainers"))


MISSING_CAP = (f"[pod-size] this namespace has no {POD_TEXT_BYTES_ANNOTATION} annotation, which states how much "
               "text its pods may carry, so no pod is admitted: the platform team runs pulumi up for the site")


def pod_size() -> dict:
    """Judged on CREATE, when ephemeral containers are added and when an image changes: the API server lets no
    other update change the counted text (a pod's spec is immutable but for images, tolerations, scheduling gates and
    a few numbers), so KAI's and the syncer's updates of an admitted pod (and of one from before the rule) pass
    unjudged. The cap is the team's, read from its namespace (``variables.podTextByteCap``)."""
    unchanged = (f"(request.operation == 'UPDATE' && {_ephemeral('object')} == {_ephemeral('oldObject')} && "
                 f"{_images('object')} == {_images('oldObject')})")

    def problem(cap: str) -> str:
        return (f"the free text of a pod vCluster copies to the host (its containers' env, commands, args, images, "
                f"working directories, mount paths, probe and hook commands, paths and headers, its volumes' item "
                f"paths and image references, node affinity values, DNS options, sysctl values and confinement "
                f"profiles) may hold at most {cap} bytes (config vcluster.resourceQuota.syncedPodTextBytes) in at most "
                f"{SYNCED_POD_TEXT_ITEMS} list entries: every copy lands in the host's etcd, which turns the whole "
                "cluster read-only when full")
    fix = ("keep large configs out of env, args and paths: put them in a ConfigMap mounted as a file (or in the "
           "image), or ask the platform team for a larger syncedPodTextBytes")
    rule = refusal(
        "pod-size",
        f"{unchanged} || (variables.podTextItems <= {SYNCED_POD_TEXT_ITEMS} && "
        "variables.podTextBytes <= variables.podTextByteCap)",
        problem("the team's number of"), fix)
    before, _, after = f"[pod-size] {problem('{}')}: {fix}".partition("{}")
    rule["messageExpression"] = (
        f"variables.podTextByteCap < 0 ? {json.dumps(MISSING_CAP)} : "
        f"{json.dumps(before)} + string(variables.podTextByteCap) + {json.dumps(after)}")
    return rule


def pod_entry_size() -> dict:
    """Judged on every CREATE and on an UPDATE that grows what the entries store (an ephemeral container): KAI's and
    the syncer's other updates, and pods from before the rule, pass as they are. A resize (``pods/resize``, not
    matched here) adds no entry: the LimitRange gave every container the CPU and memory limits and requests it may
    change (tests/test_admission_resize.py)."""
    cap = SYNCED_POD_ENTRY_BYTES
    grown = "(request.operation == 'UPDATE' && variables.podEntryBytes <= variables.oldPodEntryBytes)"
    return refusal(
        "pod-entry-size",
        f"(variables.podTextItems <= {SYNCED_POD_TEXT_ITEMS} && variables.podEntryBytes <= {cap}) || {grown}",
        f"the entries of a pod's lists (env variables, mounts, volumes and their items, resources, gates, host "
        f"aliases, affinity terms, spread constraints, ...) may store at most {cap} bytes beside their text, each "
        "counted at its largest (an env variable's field or key reference, a mount's volume name and propagation, "
        "an item's mode, a resource's name and quantity): the API server bounds each of them, not how many a pod "
        "has, and every copy lands in the host's etcd, which turns the whole cluster read-only when full",
        "take several keys of one ConfigMap or Secret with envFrom or one volume instead of a variable or an item "
        "each, mount a directory once instead of each file, or split the work over more pods")


def _count(obj: str, field: str) -> str:
    return f"(has({obj}.spec.{field}) ? size({obj}.spec.{field}) : 0)"


def _no_more(field: str) -> str:
    """An UPDATE that adds no entries to ``field``: a pod from before a rule keeps KAI's and the syncer's updates."""
    return f"(request.operation == 'UPDATE' && {_count('object', field)} <= {_count('oldObject', field)})"


def pod_containers() -> dict:
    """Judged on CREATE and when ephemeral containers are added (the only containers an update can add)."""
    cap = SYNCED_POD_CONTAINERS + HOST_ADDED_CONTAINERS
    counts = " + ".join(_count("object", field) for field in CONTAINER_LISTS)
    return refusal(
        "containers",
        f"{counts} <= {cap} || {_no_more('ephemeralContainers')}",
        f"a pod may have at most {cap} containers, init and ephemeral ones included: the node's kubelet and runtime "
        "start every one on a node other teams share, and kube-state-metrics writes series for each into the shared "
        "Prometheus",
        "split the work over more pods, or run several processes in one container")


def pod_tolerations(team: Team) -> dict:
    """Judged on CREATE and on every UPDATE that adds tolerations (the API server lets an update only add them): a pod
    from before the rule, or one KAI or the syncer updates otherwise, passes as it is."""
    cap = pod_toleration_cap(team.vcluster)
    count = _count("object", "tolerations")
    return refusal(
        "tolerations",
        f"{count} <= {cap} || {_no_more('tolerations')}",
        f"a pod may carry at most {cap} tolerations ({SYNCED_POD_TOLERATIONS} of its own, plus the ones vCluster and "
        "the API server add): the API server bounds each toleration but not how many, and vCluster copies those added "
        "to a running pod as well, into the host's etcd and the memory of every controller that watches pods",
        "keep to the tolerations of the taints of the nodes the pod may run on")


def pod_volumes() -> dict:
    """Judged on CREATE: a pod's volumes cannot change afterwards."""
    cap = SYNCED_POD_VOLUMES + HOST_ADDED_VOLUMES
    return refusal(
        "volumes",
        f"request.operation != 'CREATE' || {_count('object', 'volumes')} <= {cap}",
        f"a pod may have at most {cap} volumes ({SYNCED_POD_VOLUMES} of its own, plus the ones vCluster, KAI and the "
        "platform add): kube-state-metrics writes series for each claim volume into the shared Prometheus, and the "
        "API server does not bound how many a pod has",
        "mount several keys of one ConfigMap or Secret, or a projected volume, instead of one volume each, or split "
        "the work over more pods")


def _ports(field: str) -> str:
    return f"(has(object.spec.{field}) ? object.spec.{field}.map(c, has(c.ports) ? size(c.ports) : 0).sum() : 0)"


def pod_ports() -> dict:
    """Judged on CREATE: containers' ports cannot change afterwards, and ephemeral containers have none."""
    counts = " + ".join(_ports(field) for field in ("containers", "initContainers"))
    return refusal(
        "ports",
        f"request.operation != 'CREATE' || {counts} <= {SYNCED_POD_PORTS}",
        f"a pod's containers may list at most {SYNCED_POD_PORTS} ports in all: the API server does not bound how many, "
        "and every copy lands in the host's etcd, which turns the whole cluster read-only when full",
        "list only the ports your Services name (a container receives on any port without listing it)")


def _named(item: str, kinds: tuple[str, ...]) -> str:
    """1 when ``item`` names an object through one of its fields ``kinds`` (the API server allows one), else 0."""
    return f"({' || '.join(f'has({item}.{kind})' for kind in kinds)} ? 1 : 0)"


def _references(obj: str) -> str:
    """The ConfigMaps and Secrets ``obj`` names, counted per reference (CEL has no set of the Kubernetes floor's)."""
    by_key = _named('e.valueFrom', ('configMapKeyRef', 'secretKeyRef'))
    env = f"(has(c.env) ? c.env.map(e, has(e.valueFrom) ? {by_key} : 0).sum() : 0)"
    per_container = f"{env} + (has(c.envFrom) ? size(c.envFrom) : 0)"
    containers = [f"(has({obj}.spec.{field}) ? {obj}.spec.{field}.map(c, {per_container}).sum() : 0)"
                  for field in CONTAINER_LISTS]
    named = _named('s', ('configMap', 'secret'))
    sources = f"({served_list('v.projected.sources')} ? v.projected.sources.map(s, {named}).sum() : 0)"
    volume = f"(has(v.projected) ? {sources} : {_named('v', ('configMap', 'secret'))})"
    return " + ".join([*containers, f"(has({obj}.spec.volumes) ? {obj}.spec.volumes.map(v, {volume}).sum() : 0)",
                       _count(obj, "imagePullSecrets")])


def pod_object_references() -> dict:
    """Judged on CREATE and when ephemeral containers are added (an update can change no other reference); a pod from
    before the rule keeps KAI's and the syncer's updates."""
    cap = POD_REFERENCE_CAP
    debugged = (f"(request.operation == 'UPDATE' && {_ephemeral('object')} > {_ephemeral('oldObject')})")
    return refusal(
        "object-references",
        f"(request.operation == 'UPDATE' && !{debugged}) || {_references('object')} <= {cap}",
        f"a pod may name at most {cap} ConfigMaps and Secrets ({SYNCED_POD_REFERENCES} of its own, in volumes, "
        "projected sources, env and envFrom references and pull secrets, counted per reference): the node's kubelet "
        "opens a watch on the shared host API server for every object a pod names",
        "take several keys of one ConfigMap or Secret with envFrom or one volume instead of a reference each, or "
        "split the work over more pods")
