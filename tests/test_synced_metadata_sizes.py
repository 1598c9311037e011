"""A team cannot fill the host's datastore through the labels and annotations its vCluster copies (rules
``metadata-size`` of the synced-objects and pod policies, ``object-size`` counting them in for ConfigMaps and Secrets;
config/synced_data.py SYNCED_METADATA_BYTES).

- Attack: a Service, Endpoints, EndpointSlice, claim or pod whose host copy carries one byte of labels and
  annotations past the cap, as vCluster's syncer creates it and copies an update (tests/synced_objects_sim.py,
  tests/tenant_sim.py: what vCluster adds counted), is refused; so are more keys than the policy sums affordably,
  and a ConfigMap or Secret whose data fits the cap only without its annotations.
- Honest: what tools write (kubectl apply's last-applied-configuration on a typical object, Helm's meta.helm.sh
  annotations, a chart's labels) passes; KAI's keys on a pod are not counted, nor their lines in
  vcluster.loft.sh/labels once the syncer has carried them back, so KAI's updates and the syncer's later updates
  pass on a pod created at the cap (tests/test_vcluster_sync_real.py holds that against vCluster's own syncer), and
  on one created with as many keys as the rule sums.
- Attack on that allowance: keys named like KAI's are refused (created or added), a tenant's own
  vcluster.loft.sh/labels with KAI's lines counts whole, and after KAI binds a pod an edit one byte past the cap is
  refused. The pods of the honest tests pass through the same pod policy
  (tests/test_admission_honest.py).
"""

from __future__ import annotations

import copy
import json

import pytest

from components.admission import policy_validations
from components.admission_keys import kai_writer
from components.admission_metadata import MAX_FRACTION_DEVICES, kai_owned_keys
from config.synced_data import SYNCED_METADATA_BYTES, SYNCED_METADATA_KEYS
from tests.conftest import dev_config
from tests.kai_pods import KAI_SCHEDULER
from tests.synced_objects_sim import (
    create_service, sync_claim, sync_endpoint_slice, sync_endpoints, synced_objects_admission_for,
)
from tests.tenant_sim import KAI_BINDER, tenant_of, virtual_pod
from tests.test_synced_object_sizes import CAP, Syncer, config_map, metadata_bytes, secret
from tests.test_synced_objects_admission import (
    Synced, claim, defaulted, endpoint_slice, endpoints, service, team_of,
)
from tests.vcluster_pods import copy_back, syncer_update

TEAM = "team-nlp"
PAD = "example.com/notes"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ECHOED = "vcluster.loft.sh/labels"


def refused_for_size(messages: list[str], rule: str = "metadata-size") -> bool:
    return any(message.startswith(f"[{rule}]") for message in messages)


def _kai(kind: str, key: str) -> bool:
    return any(key.startswith(k[:-1]) if k.endswith("*") else key == k for k in kai_owned_keys()[kind])


def counted(host: dict) -> int:
    """The tenant's bytes: every label and annotation but KAI's own keys, and but the lines of vcluster.loft.sh/labels
    that repeat a KAI label the pod carries (read in the annotation's text, with the newline joining each)."""
    metadata = host["metadata"]
    total = sum(len(key.encode()) + len(value.encode()) for kind, field in (("label", "labels"),
                                                                             ("annotation", "annotations"))
                for key, value in metadata.get(field, {}).items() if not _kai(kind, key))
    lines = metadata.get("annotations", {}).get(ECHOED, "").split("\n")
    kai_lines = {f"{key}={json.dumps(value)}" for key, value in metadata.get("labels", {}).items() if _kai("label", key)}
    echoed = [line for line in lines if line in kai_lines]
    return total - sum(len(line) + 1 for line in echoed) + (len(echoed) == len(lines) > 0)


def padded(obj: dict, host_of, total: int) -> dict:
    """``obj`` with an annotation long enough that its host copy carries ``total`` bytes of labels and annotations.
    The copy's other metadata does not depend on the value's length, so one measure with an empty value suffices."""
    empty = copy.deepcopy(obj)
    empty["metadata"].setdefault("annotations", {})[PAD] = ""
    result = copy.deepcopy(empty)
    result["metadata"]["annotations"][PAD] = "n" * (total - counted(host_of(empty)))
    assert counted(host_of(result)) == total
    return result


@pytest.fixture(scope="module")
def nlp(dev_run) -> Synced:
    return Synced(synced_objects_admission_for(dev_run, TEAM), team_of(dev_config(), TEAM))


def _kinds(tenant: Synced) -> dict:
    """Each kind: the virtual object and how its host copy is built, as vCluster builds it."""
    team = tenant.team
    return {
        "Service": (service(selector={"app": "web"}), lambda obj: create_service(obj, team)),
        "Endpoints": (endpoints("203.0.113.10"), lambda obj: sync_endpoints(obj, team)),
        "EndpointSlice": (endpoint_slice("203.0.113.10"), lambda obj: sync_endpoint_slice(obj, team)),
        "PersistentVolumeClaim": (claim(), lambda obj: defaulted(tenant, sync_claim(obj, team))),
    }


# --- attacks ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["Service", "Endpoints", "EndpointSlice", "PersistentVolumeClaim"])
def test_an_object_one_byte_past_the_metadata_cap_is_refused_created_and_updated(nlp, kind):
    virtual, host_of = _kinds(nlp)[kind]
    at_cap = host_of(padded(virtual, host_of, SYNCED_METADATA_BYTES))
    past = host_of(padded(virtual, host_of, SYNCED_METADATA_BYTES + 1))
    assert nlp.create(at_cap) == []
    assert refused_for_size(nlp.create(past))
    assert refused_for_size(nlp.update(at_cap, past))
    assert refused_for_size(nlp.update(host_of(virtual), past))


@pytest.mark.parametrize("kind", ["Service", "PersistentVolumeClaim"])
def test_labels_count_like_annotations_and_too_many_keys_are_refused(nlp, kind):
    virtual, host_of = _kinds(nlp)[kind]
    # Label values are at most 63 characters: many labels, each within the API server's limits, past the cap.
    labelled = copy.deepcopy(virtual)
    labelled["metadata"]["labels"] = {f"example.com/l{index:04d}": "v" * 63 for index in range(900)}
    assert refused_for_size(nlp.create(host_of(labelled)))
    many = copy.deepcopy(virtual)
    many["metadata"]["annotations"] = {f"a{index}": "" for index in range(SYNCED_METADATA_KEYS + 1)}
    assert refused_for_size(nlp.create(host_of(many)))


def test_annotation_text_counts_its_utf8_bytes(nlp):
    virtual, host_of = _kinds(nlp)["Service"]
    at_cap = padded(virtual, host_of, SYNCED_METADATA_BYTES)
    # Two bytes for one character: the same count of characters is one byte past the cap.
    wide = copy.deepcopy(at_cap)
    value = wide["metadata"]["annotations"][PAD]
    wide["metadata"]["annotations"][PAD] = "é" + value[2:]
    assert counted(host_of(wide)) == SYNCED_METADATA_BYTES and nlp.create(host_of(wide)) == []
    wide["metadata"]["annotations"][PAD] = "é" + value[1:]
    assert refused_for_size(nlp.create(host_of(wide)))


@pytest.fixture(scope="module")
def sizes(dev_run) -> Syncer:
    return Syncer(dev_run, dev_config())


@pytest.mark.parametrize("build", [lambda data: config_map({"blob": data.decode()}),
                                   lambda data: secret({"blob": data})], ids=["ConfigMap", "Secret"])
def test_a_config_maps_or_secrets_annotations_count_within_its_cap(sizes, build):
    """Data at the whole cap was admitted before; with what vCluster adds, and a tenant's annotation, it is refused."""
    data = b"d" * (CAP - len("blob"))
    bare = sizes.copy(build(data))
    assert metadata_bytes(bare) > 0 and refused_for_size(sizes.create(build(data)), "object-size")
    small = build(b"d")
    annotated = copy.deepcopy(small)
    annotated["metadata"]["annotations"] = {PAD: "n" * (sizes.room(small) + 1)}
    assert refused_for_size(sizes.create(annotated), "object-size")
    assert refused_for_size(sizes.update(small, annotated), "object-size")


def test_a_config_map_with_too_many_labels_and_annotations_is_refused(sizes):
    many = config_map({"a": "b"})
    many["metadata"]["labels"] = {f"l{index}": "" for index in range(SYNCED_METADATA_KEYS + 1)}
    assert refused_for_size(sizes.create(many), "object-size")


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, dev_config(), TEAM)


def _pod(tenant, **annotations) -> dict:
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, labels={"app": "trainer"},
                       annotations={"gpu-fraction": "0.5", **annotations})


def test_a_pod_one_byte_past_the_metadata_cap_is_refused_created_and_updated(tenant):
    at_cap = padded(_pod(tenant), tenant.host_pod, SYNCED_METADATA_BYTES)
    past = padded(_pod(tenant), tenant.host_pod, SYNCED_METADATA_BYTES + 1)
    assert tenant.create(at_cap) == []
    assert refused_for_size(tenant.create(past))
    # The syncer copies a grown annotation onto the running pod; the key was there from the start, so only its value
    # changes size.
    small = _pod(tenant, **{PAD: ""})
    host = tenant.host_pod(small)
    assert tenant.create_host(host) == []
    seen = copy_back(host, small, tenant.team)
    grown = copy.deepcopy(seen)
    grown["metadata"]["annotations"][PAD] = past["metadata"]["annotations"][PAD]
    updated = syncer_update(host, seen, grown, tenant.team)
    assert counted(updated) == SYNCED_METADATA_BYTES + 1
    assert refused_for_size(tenant.update(host, updated))
    updated["metadata"]["annotations"][PAD] = updated["metadata"]["annotations"][PAD][1:]
    assert tenant.update(host, updated) == []


def test_a_pods_labels_count_with_vclusters_copy_of_them(tenant):
    """vCluster writes a pod's labels twice: as labels and again in its vcluster.loft.sh/labels annotation."""
    labels = {f"example.com/l{index:03d}": "v" * 63 for index in range(450)}
    pod = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, labels=labels)
    once = sum(len(key) + len(value) for key, value in labels.items())
    assert once < SYNCED_METADATA_BYTES < counted(tenant.host_pod(pod))
    assert refused_for_size(tenant.create(pod))


# --- honest ----------------------------------------------------------------------------------------------


def _last_applied(obj: dict) -> dict:
    """``obj`` as `kubectl apply` creates it: the manifest again, as JSON, in last-applied-configuration."""
    applied = copy.deepcopy(obj)
    applied["metadata"].setdefault("annotations", {})[LAST_APPLIED] = json.dumps(obj, separators=(",", ":")) + "\n"
    return applied


HELM = {"meta.helm.sh/release-name": "inference", "meta.helm.sh/release-namespace": "serving"}
CHART_LABELS = {"app.kubernetes.io/name": "inference", "app.kubernetes.io/instance": "inference",
                "app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "inference-1.4.2",
                "app.kubernetes.io/version": "1.4.2"}


@pytest.mark.parametrize("kind", ["Service", "Endpoints", "EndpointSlice", "PersistentVolumeClaim"])
def test_objects_as_kubectl_apply_and_helm_write_them_are_admitted(nlp, kind):
    virtual, host_of = _kinds(nlp)[kind]
    charted = copy.deepcopy(virtual)
    charted["metadata"].setdefault("labels", {}).update(CHART_LABELS)
    charted["metadata"]["annotations"] = dict(HELM)
    for obj in (_last_applied(virtual), charted):
        assert nlp.create(host_of(obj)) == []
        assert nlp.update(host_of(obj), host_of(copy.deepcopy(obj))) == []


def test_config_maps_kubectl_apply_can_create_are_admitted(sizes):
    """kubectl apply's annotation holds the data again; the API server takes at most 256 KiB of annotations, so no
    kubectl-applied ConfigMap holds much more than that in data, and at the default cap they all fit."""
    largest = config_map({"config.yaml": "c" * (255 * 2 ** 10)})
    applied = _last_applied(largest)
    assert sum(len(k) + len(v) for k, v in applied["metadata"]["annotations"].items()) < 256 * 2 ** 10
    assert sizes.create(applied) == []
    helm = config_map({"config.yaml": "model: llama\n" * 200})
    helm["metadata"].update(labels=dict(CHART_LABELS), annotations=dict(HELM))
    assert sizes.create(helm) == []
    tls = _last_applied(secret({"tls.crt": b"C" * 6000, "tls.key": b"K" * 3272}, "kubernetes.io/tls", "serving"))
    assert sizes.create(tls) == []


def test_a_bare_pod_applied_with_kubectl_and_charted_pods_are_admitted(tenant):
    pod = _pod(tenant)
    pod["metadata"]["labels"].update(CHART_LABELS)
    assert tenant.create(pod) == []
    assert tenant.create(_last_applied(_pod(tenant))) == []


def test_kais_keys_do_not_count_so_kai_and_the_syncer_keep_updating_a_pod_at_the_cap(tenant):
    virtual = padded(_pod(tenant), tenant.host_pod, SYNCED_METADATA_BYTES)
    created = tenant.host_pod(virtual)
    assert tenant.create_host(created) == []
    refusals, bound = tenant.scheduled_by_kai(created)
    assert refusals == []
    # KAI's keys are on the pod now, past the cap when all are counted; the syncer carries them back.
    assert metadata_bytes(bound) > SYNCED_METADATA_BYTES
    seen = copy_back(bound, virtual, tenant.team)
    edited = copy.deepcopy(seen)
    edited["metadata"]["labels"]["app"] = "tuner"
    assert tenant.update(bound, syncer_update(bound, seen, edited, tenant.team)) == []


# The longest label value the API server takes, and so the longest line KAI's labels can add.
LONGEST_VALUE = "g" * 63


def _bound_at_cap(tenant, groups: tuple[str, ...] = (), **annotations) -> tuple[dict, dict]:
    """A pod created with its padding at the cap, grouped and bound by KAI (to GPU ``groups``): the virtual pod and
    the bound host pod."""
    virtual = padded(_pod(tenant, **annotations), tenant.host_pod, SYNCED_METADATA_BYTES)
    created = tenant.host_pod(virtual)
    assert tenant.create_host(created) == []
    refusals, bound = tenant.scheduled_by_kai(created, groups)
    assert refusals == []
    return virtual, bound


def _edited_to(tenant, bound: dict, seen: dict, total: int) -> dict:
    """The syncer's update of ``bound`` after the tenant resizes its padding so that ``total`` bytes are counted."""
    edited = copy.deepcopy(seen)
    edited["metadata"]["annotations"][PAD] = ""
    room = total - counted(syncer_update(bound, seen, edited, tenant.team))
    edited["metadata"]["annotations"][PAD] = "n" * room
    updated = syncer_update(bound, seen, edited, tenant.team)
    assert counted(updated) == total
    return updated


def test_kais_longest_labels_and_their_changes_keep_a_pod_at_the_cap_updatable(tenant):
    """A multi-device fraction: the binder labels one GPU group a device (runai-gpu-group/<group>), with values as
    long as a label's; after a failed bind it drops them and labels the next groups (RemovePodGpuGroupsConnection).
    Each sync carries the lines back and stays admitted."""
    groups = tuple(f"{index}{LONGEST_VALUE[1:]}" for index in range(3))
    virtual, bound = _bound_at_cap(tenant, groups[:2], **{"gpu-fraction-num-devices": "2"})
    pooled = copy.deepcopy(bound)
    pooled["metadata"]["labels"]["kai.scheduler/node-pool"] = LONGEST_VALUE
    assert tenant.update(bound, pooled, user=kai_writer("scheduler")) == []
    multi = pooled
    seen = copy_back(multi, virtual, tenant.team)
    synced = syncer_update(multi, seen, seen, tenant.team)
    assert all(f"\nrunai-gpu-group/{group}=" in synced["metadata"]["annotations"][ECHOED] for group in groups[:2])
    assert counted(synced) == SYNCED_METADATA_BYTES and tenant.update(multi, synced) == []
    relabelled = copy.deepcopy(synced)
    del relabelled["metadata"]["labels"][f"runai-gpu-group/{groups[0]}"]
    relabelled["metadata"]["labels"][f"runai-gpu-group/{groups[2]}"] = groups[2]
    assert tenant.update(synced, relabelled, user=KAI_BINDER) == []
    again = copy.deepcopy(seen)
    del again["metadata"]["labels"][f"runai-gpu-group/{groups[0]}"]
    again["metadata"]["labels"][f"runai-gpu-group/{groups[2]}"] = groups[2]
    assert tenant.update(relabelled, syncer_update(relabelled, seen, again, tenant.team)) == []


def test_after_kai_binds_a_pod_an_edit_past_the_cap_is_refused(tenant):
    """KAI's lines are allowed as they are, not as room: the tenant's own bytes stay held to the cap, to the byte."""
    virtual, bound = _bound_at_cap(tenant)
    seen = copy_back(bound, virtual, tenant.team)
    assert tenant.update(bound, _edited_to(tenant, bound, seen, SYNCED_METADATA_BYTES)) == []
    assert refused_for_size(tenant.update(bound, _edited_to(tenant, bound, seen, SYNCED_METADATA_BYTES + 1)))


def _keys(host: dict) -> int:
    return len(host["metadata"].get("labels", {})) + len(host["metadata"].get("annotations", {}))


def test_kais_keys_do_not_count_among_the_keys_either(tenant):
    """A pod of as many keys as the rule sums, grouped and bound by KAI (a GPU group a device of a multi-device
    fraction): the syncer's updates pass; a key of the tenant's more is refused, created or added."""
    owned = kai_owned_keys()
    # The rule bounds KAI's key families by MAX_FRACTION_DEVICES: right for runai-gpu-group/<group> alone.
    assert [key for kind in owned for key in owned[kind] if key.endswith("*")] == ["runai-gpu-group/*"]
    pod = _pod(tenant, **{"gpu-fraction-num-devices": str(MAX_FRACTION_DEVICES), PAD: ""})
    room = SYNCED_METADATA_KEYS - _keys(tenant.host_pod(pod))
    pod["metadata"]["annotations"].update({f"example.com/a{index}": "" for index in range(room)})
    created = tenant.host_pod(pod)
    assert _keys(created) == SYNCED_METADATA_KEYS and tenant.create_host(created) == []
    one_more = copy.deepcopy(pod)
    one_more["metadata"]["annotations"]["example.com/more"] = ""
    assert refused_for_size(tenant.create(one_more))
    refusals, bound = tenant.scheduled_by_kai(created)
    assert sum(key.startswith("runai-gpu-group/") for key in bound["metadata"]["labels"]) == MAX_FRACTION_DEVICES
    pooled = copy.deepcopy(bound)
    pooled["metadata"]["labels"]["kai.scheduler/node-pool"] = "default"
    refusals += tenant.update(bound, pooled, user=kai_writer("scheduler"))
    observed = copy.deepcopy(pooled)
    observed["metadata"]["annotations"]["kai.scheduler/numa-placement-observed"] = "0"
    refusals += tenant.update(pooled, observed, user=kai_writer("numa-placement-exporter"))
    assert refusals == [] and _keys(observed) > SYNCED_METADATA_KEYS + MAX_FRACTION_DEVICES
    seen = copy_back(observed, pod, tenant.team)
    edited = copy.deepcopy(seen)
    edited["metadata"]["annotations"][PAD] = "edited"
    assert tenant.update(observed, syncer_update(observed, seen, edited, tenant.team)) == []
    edited["metadata"]["annotations"]["example.com/more"] = ""
    assert refused_for_size(tenant.update(observed, syncer_update(observed, seen, edited, tenant.team)))


def test_keys_named_like_kais_are_refused_so_they_earn_no_allowance(tenant):
    """The allowance counts only the KAI labels on the pod, which a tenant can neither create nor add nor change."""
    for key in kai_owned_keys()["label"]:
        named = _pod(tenant)
        named["metadata"]["labels"][key.replace("*", "extra")] = LONGEST_VALUE
        assert any(message.startswith("[reserved-keys]") for message in tenant.create(named)), key
    virtual, bound = _bound_at_cap(tenant)
    seen = copy_back(bound, virtual, tenant.team)
    for change in ({"runai-gpu-group/extra": LONGEST_VALUE}, {"runai-gpu-group": LONGEST_VALUE},
                   {"kai.scheduler/node-pool": LONGEST_VALUE}):
        edited = copy.deepcopy(seen)
        edited["metadata"]["labels"].update(change)
        refusals = tenant.update(bound, syncer_update(bound, seen, edited, tenant.team))
        assert any(message.startswith("[guarded-fields]") for message in refusals), change


def test_a_tenants_own_copy_of_kais_lines_counts_whole(tenant):
    """vCluster takes a pod's vcluster.loft.sh/labels from the tenant's pod when it has one (translator.go): lines
    naming KAI's labels there, with no such label on the pod, are the tenant's bytes."""
    forged = "\n".join(f"runai-gpu-group/{index:02d}{LONGEST_VALUE[2:]}={json.dumps(LONGEST_VALUE)}"
                       for index in range(20))
    pod = _pod(tenant, **{ECHOED: forged})
    assert tenant.create(padded(pod, tenant.host_pod, SYNCED_METADATA_BYTES)) == []
    past = padded(pod, tenant.host_pod, SYNCED_METADATA_BYTES + 1)
    assert tenant.host_pod(past)["metadata"]["annotations"][ECHOED] == forged
    assert refused_for_size(tenant.create(past))


def test_the_in_vcluster_defaults_do_not_judge_metadata_sizes(tenant):
    """The virtual pod lacks what vCluster adds and may carry keys the syncer drops: only the host judges sizes."""
    inside = policy_validations(tenant.team, before_sync=True)
    assert not [v for v in inside if v.get("message", "").startswith("[metadata-size]")]
    assert [v for v in policy_validations(tenant.team) if v.get("message", "").startswith("[metadata-size]")]
