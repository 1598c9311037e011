"""The attack tests' synced pods, held against vCluster's own syncer running (tests/vcluster_real.py).

Every security test builds a tenant pod's host copy with ``tests/vcluster_pods.py vcluster_sync``. Here the same
virtual pods go through vCluster's real ``SyncToHost`` at the pinned tag, configured by the Helm values the program
renders for each team of the committed stacks, and the two host pods must be equal but for the fields in
``NOT_MODELLED`` (each with the reason the simulation leaves it out). A new difference fails.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from config import versions
from config.synced_data import SYNCED_METADATA_BYTES
from tests.apiserver_pods import limit_ranger, pull_policy_defaults
from tests.conftest import dev_config, eks_config
from tests.kai_pods import WebhookRefusal, kai_mutate
from tests.tenant_sim import KAI_SCHEDULER, Tenant, tenant_of, virtual_pod
from tests.vcluster_pods import VIRTUAL_UID, copy_back, syncer_update, vcluster_sync
from tests.vcluster_real import (
    DNS_IP, KUBE_IP, as_go_writes, differences, listed, run_syncer, team_values, verdict_differences,
)
from tests.vcluster_sync_corpus import EDITS, honest_pods, hostile_pods
from tests.vcluster_volumes import TOKEN_ANNOTATION, VIRTUAL_TOKEN

TAG = f"v{versions.VCLUSTER_VERSION}"
# ClusterIPs of the team's vCluster Service and of its DNS Service on the host.
# Host pod fields (dotted paths, list indices as [N], a regular expression each) the simulation does not model,
# and why no host policy decision depends on them.
ADDED_ENV = r"spec\.(containers|initContainers|ephemeralContainers)\[\d+\]\.env\."
NOT_MODELLED: dict[str, str] = {
    r"spec\.hostname": "the pod's own hostname, the virtual pod's name cut to 63 characters with dots as dashes; a "
                       "harmless field to the host policy (components/admission_pod_fields.py)",
    r"spec\.hostAliases": "the /etc/hosts line naming the vCluster's API Service for kubernetes.default; harmless",
    r"spec\.dnsPolicy|spec\.dnsConfig(\..*)?": "ClusterFirst becomes None with the vCluster DNS Service as first "
                                             "nameserver and the virtual namespace's search path; harmless",
    ADDED_ENV + r"KUBERNETES_(PORT|PORT_443_TCP(_ADDR|_PORT|_PROTO)?|SERVICE_HOST|SERVICE_PORT(_HTTPS)?)"
                r"(\.name|\.value)?":
        "the eight variables naming the vCluster's API Service, plain values added to every container that does not "
        "set them; no device-list or toolkit name (the device-env rule's), and the pod-size rules count the host pod",
    r"spec\.affinity\.(podAffinity|podAntiAffinity)\..*": "each term rewritten to select only the vCluster's pods "
                                                          "of the host namespace; rewritten, not judged by the host "
                                                          "policy (components/admission_pod_fields.py)",
    r"spec\.topologySpreadConstraints\[\d+\]\.labelSelector\..*": "likewise rewritten to the vCluster's pods",
    r"spec\.initContainers\[0\]\.args": "the hosts-rewriting init container's sed script (the simulation keeps "
                                         "its command, image, resources and security context)",
    r"spec\.volumes\[\d+\]\.downwardAPI\.items\[\d+\]\.resourceFieldRef\.divisor":
        "Go writes the unset divisor as \"0\"; the API server defaults it alike",
}


def stored(pod: dict) -> dict:
    """The virtual pod as the virtual API server hands it to the syncer: in a namespace, with its uid, and the
    defaults the syncer reads (the ServiceAccount admission's account, the DNS policy, service links)."""
    virtual = copy.deepcopy(pod)
    virtual["metadata"].setdefault("namespace", "default")
    virtual["metadata"]["uid"] = VIRTUAL_UID
    spec = virtual["spec"]
    spec.setdefault("serviceAccountName", spec.get("serviceAccount", "default"))
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("enableServiceLinks", True)
    return virtual


def normalized(pod: dict) -> dict:
    """``pod`` with each service account token annotation named by its place among them (vCluster draws eight
    random characters), and the fields the fake API server stamps dropped."""
    pod = copy.deepcopy(pod)
    # The type meta stays: the harness answers it as the API server does, and the simulation must write the same.
    pod.pop("status", None)
    # Variables by name, so one the syncer adds shows as itself.
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for entry in pod["spec"].get(field, []):
            if "env" in entry:
                entry["env"] = {variable["name"]: variable for variable in entry["env"]}
    metadata = pod["metadata"]
    for key in ("creationTimestamp", "resourceVersion", "uid", "generation"):
        metadata.pop(key, None)
    # Token annotations by the order the volumes name them.
    named = re.findall(r"metadata\.annotations\['(" + re.escape(TOKEN_ANNOTATION) + r"[^']*)'\]",
                       json.dumps(pod["spec"]))
    text = json.dumps(pod)
    for position, key in enumerate(dict.fromkeys(named)):
        text = text.replace(json.dumps(key)[1:-1], f"{TOKEN_ANNOTATION}#{position}")
    return as_go_writes(json.loads(text))


def unexplained(real: dict, simulated: dict) -> list[str]:
    return [found for found in differences(normalized(real), normalized(simulated)) if not listed(found, NOT_MODELLED)]


STACKS = {"dev": dev_config, "eks": eks_config}


@pytest.fixture(scope="module", params=sorted(STACKS))
def stack(request, dev_run, eks_run):
    program = {"dev": dev_run, "eks": eks_run}[request.param]
    return program, STACKS[request.param]()


def gpu_node(tenant: Tenant) -> dict:
    """The node pods name in ``nodeName``, as the virtual cluster has it: synced from the host, where it wears the
    team's node-sync labels."""
    return {"metadata": {"name": "gpu-node-1", "labels": {"kubernetes.io/hostname": "gpu-node-1",
                                                          **tenant.team.vcluster.node_labels}}}


def created(program, config, team: str, corpus) -> tuple[Tenant, dict, list]:
    """Team ``team``, its corpus pods as the syncer receives them, and what vCluster's SyncToHost made of each."""
    tenant = tenant_of(program, config, team)
    pods = {name: stored(tenant.vcluster_defaults(pod)) for name, pod in corpus(program, tenant).items()}
    namespaces = [{"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}}
                  for name in sorted({pod["metadata"]["namespace"] for pod in pods.values()})]
    real = run_syncer(TAG, name=tenant.team.vcluster_name, namespace=tenant.team.namespace,
                      values=team_values(program, team), pods=list(pods.values()), kube_ip=KUBE_IP, dns_ip=DNS_IP,
                      token=VIRTUAL_TOKEN, namespaces=namespaces, nodes=[gpu_node(tenant)])["created"]
    return tenant, pods, real


def synced_both_ways(program, config, corpus) -> list[str]:
    """For each team of the stack: each corpus pod synced by vCluster and by the simulation, and their
    unexplained differences."""
    found = []
    for team in sorted(t["name"] for t in config["gpu-tenancy:teams"]):
        tenant, pods, real = created(program, config, team, corpus)
        for (name, pod), answer in zip(pods.items(), real):
            if "error" in answer:
                found.append(f"{team} {name}: vCluster's syncer: {answer['error']}")
                continue
            found += [f"{team} {name}: {line}" for line in unexplained(answer["host"], vcluster_sync(pod, tenant.team))]
    return found


def test_honest_pods_sync_as_vclusters_syncer_does(stack):
    program, config = stack
    assert synced_both_ways(program, config, honest_pods) == []


def test_hostile_pods_sync_as_vclusters_syncer_does(stack):
    program, config = stack
    assert synced_both_ways(program, config, hostile_pods) == []


def edited_both_ways(program, config) -> list[str]:
    """For each team of the stack: each edit of a running pod carried to the host pod by vCluster and by the
    simulation, and their unexplained differences."""
    found = []
    for team in sorted(t["name"] for t in config["gpu-tenancy:teams"]):
        tenant = tenant_of(program, config, team)
        virtual = stored(tenant.vcluster_defaults(virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER,
                                                            annotations={"gpu-fraction": "0.5"})))
        run = dict(name=tenant.team.vcluster_name, namespace=tenant.team.namespace, values=team_values(program, team),
                   kube_ip=KUBE_IP, dns_ip=DNS_IP, token=VIRTUAL_TOKEN,
                   namespaces=[{"metadata": {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}}])
        host = run_syncer(TAG, pods=[virtual], **run)["created"][0]["host"]
        edited = {}
        for name, edit in EDITS.items():
            edited[name] = copy.deepcopy(virtual)
            edit(edited[name])
        real = run_syncer(TAG, updates=[{"host": host, "virtualOld": virtual, "virtual": new}
                                        for new in edited.values()], **run)["updated"]
        for (name, new), answer in zip(edited.items(), real):
            if "error" in answer:
                found.append(f"{team} {name}: vCluster's syncer: {answer['error']}")
                continue
            found += [f"{team} {name}: {line}" for line in unexplained(
                answer["host"], syncer_update(host, virtual, new, tenant.team))]
    return found


def test_a_tenants_edits_reach_the_host_pod_as_vclusters_syncer_carries_them(stack):
    program, config = stack
    assert edited_both_ways(program, config) == []


def test_only_the_listed_fields_may_differ():
    host = {"metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"hostname": "p", "containers": [{"name": "main", "env": [
                {"name": "KUBERNETES_SERVICE_HOST", "value": KUBE_IP}, {"name": "CM", "valueFrom": {
                    "configMapKeyRef": {"name": "settings-x-default-x-vc", "key": "a"}}}]}]}}
    simulated = copy.deepcopy(host)
    del simulated["spec"]["hostname"]
    simulated["spec"]["containers"][0]["env"] = simulated["spec"]["containers"][0]["env"][1:]
    assert unexplained(host, simulated) == []
    simulated["metadata"]["labels"]["a"] = "2"
    simulated["spec"]["containers"][0]["env"][0]["valueFrom"]["configMapKeyRef"]["name"] = "settings"
    assert [line.split(":")[0] for line in unexplained(host, simulated)] == [
        "metadata.labels.a", "spec.containers[0].env.CM.valueFrom.configMapKeyRef.name"]


def verdicts(program, config, corpus) -> list[str]:
    """For the stack's first team: each corpus pod whose host copy from vCluster's syncer the host API server and
    policy judge otherwise than the simulated copy (the host's defaulting and KAI's webhook applied to both)."""
    team = config["gpu-tenancy:teams"][0]["name"]
    tenant, pods, real = created(program, config, team, corpus)

    def judged(host: dict) -> set[str]:
        try:
            defaulted = kai_mutate(limit_ranger(pull_policy_defaults(host), tenant.team.vcluster))
        except WebhookRefusal:
            return {"kai-webhook"}
        return {message[1:message.index("]")] if message.startswith("[") else message
                for message in tenant.create_host(defaulted)}

    return verdict_differences(team, "pod", [(name, answer, vcluster_sync(pod, tenant.team), judged)
                                             for (name, pod), answer in zip(pods.items(), real)])


@pytest.mark.parametrize("corpus", [honest_pods, hostile_pods], ids=["honest", "hostile"])
def test_the_host_policy_judges_the_real_host_pods_as_the_simulated_ones(stack, corpus):
    program, config = stack
    assert verdicts(program, config, corpus) == []


def test_a_pod_created_at_the_metadata_cap_stays_updatable_after_kai_binds_it(dev_run):
    """vCluster's own Sync of a pod KAI has grouped and bound carries KAI's keys into the virtual pod (as
    tests/vcluster_pods.py copy_back does); the syncer's next Sync writes KAI's labels again in
    vcluster.loft.sh/labels, and the host policy admits that update of a pod created at the metadata cap (rule metadata-size), and still refuses one whose tenant's bytes pass the cap by one."""
    from tests.test_synced_metadata_sizes import PAD, counted, padded, refused_for_size
    config = dev_config()
    tenant = tenant_of(dev_run, config, config["gpu-tenancy:teams"][0]["name"])
    pod = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, labels={"app": "trainer"},
                      annotations={"gpu-fraction": "0.5"})
    virtual = stored(tenant.vcluster_defaults(padded(pod, tenant.host_pod, SYNCED_METADATA_BYTES)))
    run = dict(name=tenant.team.vcluster_name, namespace=tenant.team.namespace,
               values=team_values(dev_run, tenant.team.name), kube_ip=KUBE_IP, dns_ip=DNS_IP, token=VIRTUAL_TOKEN,
               namespaces=[{"metadata": {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}}],
               nodes=[gpu_node(tenant)])
    host = run_syncer(TAG, pods=[virtual], **run)["created"][0]["host"]
    created = kai_mutate(limit_ranger(pull_policy_defaults(host), tenant.team.vcluster))
    assert counted(created) == SYNCED_METADATA_BYTES and tenant.create_host(created) == []
    refusals, bound = tenant.scheduled_by_kai(created)
    assert refusals == []
    # The syncer's first Sync after binding, the virtual pod bound to the node already: vCluster copies what others
    # wrote on the host since the pod it last saw (the one it created) into the virtual pod; the simulation agrees.
    placed = copy.deepcopy(virtual)
    placed["spec"]["nodeName"] = bound["spec"]["nodeName"]
    seen = run_syncer(TAG, updates=[{"hostOld": host, "host": bound, "virtualOld": placed, "virtual": placed}],
                      **run)["updated"][0]["virtual"]
    assert seen["metadata"]["labels"]["runai-gpu-group"] == bound["metadata"]["labels"]["runai-gpu-group"]
    assert {field: seen["metadata"].get(field, {}) for field in ("labels", "annotations")} == {
        field: copy_back(bound, placed, tenant.team)["metadata"].get(field, {}) for field in ("labels", "annotations")}
    same, grown = copy.deepcopy(seen), copy.deepcopy(seen)
    same["metadata"]["annotations"][PAD] = "m" + seen["metadata"]["annotations"][PAD][1:]
    grown["metadata"]["annotations"][PAD] += "n"
    updated = run_syncer(TAG, updates=[{"host": bound, "virtualOld": seen, "virtual": new} for new in (same, grown)],
                         **run)["updated"]
    at_cap, past = (answer["host"] for answer in updated)
    echoed = at_cap["metadata"]["annotations"]["vcluster.loft.sh/labels"].split("\n")
    assert [line for line in echoed if line.startswith(("kai.scheduler/subgroup-name=", "runai-gpu-group="))] == [
        'kai.scheduler/subgroup-name="default"', f'runai-gpu-group={json.dumps(bound["metadata"]["labels"]["runai-gpu-group"])}']
    assert counted(at_cap) == SYNCED_METADATA_BYTES and tenant.update(bound, at_cap) == []
    assert counted(past) == SYNCED_METADATA_BYTES + 1 and refused_for_size(tenant.update(bound, past))
