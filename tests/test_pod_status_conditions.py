"""A team cannot fill the host's datastore through its pods' status conditions (rule ``pod-conditions`` of the
synced-objects policy; config/synced_data.py SYNCED_POD_CONDITIONS, SYNCED_POD_CONDITION_BYTES).

vCluster copies a virtual pod's changed conditions onto the host pod whole, through ``pods/status``, and the API server
checks only a custom condition's type: its status, reason and message are bounded by the request's size alone. So a
tenant that patches its virtual pod's status (``kubectl patch pod --subresource status``, its cluster-admin's right)
had the syncer write up to the request's size into every host pod, past every size rule, which judge labels,
annotations and the spec.

- Attack: one condition whose message, reason or status is long, and many short conditions, each written by the
  tenant into its running pod's virtual status and copied onto the host pod as vCluster's syncer does
  (tests/vcluster_pods.py ``syncer_status_update``), are refused.
- Honest: a readiness gate's condition set by a controller inside the vCluster, the host's own conditions (kubelet's
  and KAI's) carried as they were, and a resize that leaves the conditions alone, are admitted.
"""

from __future__ import annotations

import copy
import re

import pytest

from config.synced_data import (
    ENDPOINT_SLICE_BYTES, ENDPOINTS_BYTES, SERVICE_BYTES, SYNCED_POD_CONDITION_BYTES, SYNCED_POD_CONDITIONS,
    pod_list_bytes, worst_case,
)
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, dev_config, eks_config, git, go_function, mirrored_tag
from tests.kai_pods import kai_bind, kai_group
from tests.synced_objects_sim import synced_objects_admission_for
from tests.tenant_sim import KAI_SCHEDULER, container, tenant_of, virtual_pod
from tests.test_synced_objects_admission import Synced, rules, team_of
from tests.vcluster_pods import copy_back, syncer_status_update

VCLUSTER = "loft-sh/vcluster"
GATE = "example.com/load-balancer-ready"
# What the host's kubelet writes on a running pod (pkg/kubelet/status: five conditions of a few words each).
KUBELET_CONDITIONS = [
    {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-12-05T12:00:00Z"}
    for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]


@pytest.fixture(scope="module", params=["dev:team-nlp", "eks:team-legal"])
def team(request, dev_run, eks_run):
    stack, name = request.param.split(":")
    program, config = {"dev": (dev_run, dev_config()), "eks": (eks_run, eks_config())}[stack]
    return tenant_of(program, config, name), Synced(synced_objects_admission_for(program, name), team_of(config, name))


def running(team) -> tuple[dict, dict]:
    """(the virtual pod as the tenant sees it, the host pod): synced, grouped and bound by KAI, started by the
    kubelet, and the host's status copied back into the virtual pod."""
    tenant, synced = team
    virtual = virtual_pod(queue=synced.team.queue_name, scheduler=KAI_SCHEDULER,
                          annotations={"gpu-fraction": "0.5"}, containers=[container()])
    virtual["spec"]["readinessGates"] = [{"conditionType": GATE}]
    host = kai_bind(kai_group(tenant.host_pod(virtual)))
    host["status"] = {"phase": "Running", "conditions": copy.deepcopy(KUBELET_CONDITIONS)}
    seen = copy_back(host, virtual, synced.team)
    seen["status"] = copy.deepcopy(host["status"])
    return seen, host


def tenant_writes(team, *conditions: dict) -> list[str]:
    """The tenant adds ``conditions`` to its running pod's virtual status; the syncer copies them to the host."""
    seen, host = running(team)
    edited = copy.deepcopy(seen)
    edited["status"]["conditions"] += [dict(condition) for condition in conditions]
    updated = syncer_status_update(host, seen, edited)
    assert updated is not None
    return team[1].update(host, updated, subresource="status")


def condition(kind: str = GATE, **fields) -> dict:
    return {"type": kind, "status": "True", **fields}


@pytest.mark.parametrize("field", ["message", "reason", "status"])
def test_a_condition_padded_past_the_cap_is_refused(team, field):
    padding = "n" * (SYNCED_POD_CONDITION_BYTES + 1)
    assert rules(tenant_writes(team, condition(**{field: padding}))) == {"pod-conditions"}


def test_the_cap_counts_utf8_bytes_and_every_condition(team):
    # The kubelet's own conditions count: the tenant's may only fill what they leave.
    used = sum(len(c["type"]) + len(c["status"]) for c in KUBELET_CONDITIONS) + len(GATE) + len("True")
    room = SYNCED_POD_CONDITION_BYTES - used
    assert tenant_writes(team, condition(message="n" * room)) == []
    assert rules(tenant_writes(team, condition(message="n" * (room + 1)))) == {"pod-conditions"}
    # Two bytes a character: half as many characters fit.
    assert rules(tenant_writes(team, condition(message="é" * (room // 2 + 1)))) == {"pod-conditions"}


def test_more_conditions_than_the_count_are_refused(team):
    # The API server does not refuse repeated types either.
    many = [condition(f"example.com/c{i}") for i in range(SYNCED_POD_CONDITIONS - len(KUBELET_CONDITIONS) + 1)]
    assert rules(tenant_writes(team, *many)) == {"pod-conditions"}
    assert tenant_writes(team, *many[:-1]) == []


def test_a_readiness_gate_set_inside_the_vcluster_reaches_the_host(team):
    # A controller inside the vCluster marks its gate; vCluster copies it, with the kubelet's conditions as they were.
    assert tenant_writes(team, condition(reason="TargetHealthy", message="target group tg-1 reports healthy")) == []


def test_what_others_wrote_is_not_judged(team):
    tenant, synced = team
    seen, host = running(team)
    long_host = copy.deepcopy(host)
    long_host["status"]["conditions"][-1].update(status="False", reason="BindingError",
                                                 message="n" * (SYNCED_POD_CONDITION_BYTES + 1))
    # A resize or a status write that leaves the conditions as they are passes whatever they hold.
    resized = copy.deepcopy(long_host)
    resized["spec"]["containers"][0].setdefault("resources", {}).setdefault("limits", {})["memory"] = "2Gi"
    assert synced.update(long_host, resized, subresource="resize") == []
    assert synced.update(long_host, copy.deepcopy(long_host), subresource="status") == []
    # With nothing changed in the virtual pod, the syncer writes no status at all.
    assert syncer_status_update(host, seen, copy.deepcopy(seen)) is None


def test_the_worst_case_counts_every_pod_with_its_conditions_at_the_cap():
    team = team_of(dev_config(), "team-nlp")
    assert worst_case(team.vcluster) == (96 + 54) * 512 * 2 ** 10 + 178 * 64 * 2 ** 10 + \
        25 * (256 * 2 ** 10 + SYNCED_POD_CONDITION_BYTES + pod_list_bytes(team.vcluster)) + \
        23 * (SERVICE_BYTES + ENDPOINTS_BYTES) + 86 * ENDPOINT_SLICE_BYTES


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_writes_a_changed_virtual_condition_list_onto_the_host_pod_whole(tag):
    tag = mirrored_tag(VCLUSTER, tag)
    diff = go_function(git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/pods/translate/diff.go"),
                       "(t *translator) Diff")
    # The host's list is what a bidirectional copy of the four lists, the virtual pod's first, returns.
    copied = diff[diff.index("event.Host.Status.Conditions ="):]
    call, rest = copied.split("(", 1)
    assert "CopyBidirectional" in call
    arguments = [argument.strip() for argument in rest[:rest.index(")")].split(",") if argument.strip()]
    assert arguments == ["event.VirtualOld.Status.Conditions", "event.Virtual.Status.Conditions",
                         "event.HostOld.Status.Conditions", "event.Host.Status.Conditions"]
    # A virtual list that changed replaces the host's, whatever the host's holds.
    sync = git(VCLUSTER, "show", f"{tag}:pkg/patcher/sync.go")
    copy_function = sync[sync.index("\nfunc CopyBidirectional"):]
    assert re.search(r"if !(eq|apiequality\.Semantic\.DeepEqual)\(virtualOld, virtual\) \{\s*newHost = virtual\s*\}",
                     copy_function)
    # The syncer writes a pod's status through the status subresource.
    assert "kubeClient.Status().Update(ctx, obj)" in git(VCLUSTER, "show", f"{tag}:pkg/patcher/apply.go")
