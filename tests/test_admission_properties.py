"""The tenant boundary under random hostile pods.

Hypothesis writes pods from every lever a tenant has (scheduler, queue and project labels, PodGroup
annotations, runtime class, nodeName, device-list env in every form, envFrom, GPU and MIG requests,
the virtual kube-system). Each pod is synced as vCluster would and mutated as KAI's webhook would;
whenever the host policy admits it, an independent check of what the node would then run must find
no GPU outside a KAI allocation in the team's own queue.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.admission_keys import ANNOTATION, GRANTED, HARMLESS, LABEL, NOT_ON_PODS, REFUSED, UNREAD_RESERVED
from tests.conftest import ACCEPTED_TAGS, MIRRORS_VARIABLE, dev_config
from tests.kai_keys import keys_of, source_at
from tests.tenant_sim import (
    KAI_SCHEDULER, Tenant, container, tenant_of, virtual_pod,
)
from tests.kai_pods import WebhookRefusal, kai_mutate
from tests.vcluster_pods import vcluster_sync

VISIBLE = "NVIDIA_VISIBLE_DEVICES"
BLANK = ("void", "none")
QUEUE_LABEL = "kai.scheduler/queue"

ENV_ENTRIES = [
    {"name": VISIBLE, "value": "all"}, {"name": VISIBLE, "value": "void"}, {"name": VISIBLE, "value": "none"},
    {"name": VISIBLE, "value": "0"}, {"name": VISIBLE, "value": ""},
    {"name": VISIBLE, "valueFrom": {"configMapKeyRef": {"name": "all-gpus", "key": VISIBLE}}},
    {"name": "HF_HOME", "value": "/cache"},
]
ENV_FROM = [{"configMapRef": {"name": "gpus"}}, {"prefix": "APP_", "configMapRef": {"name": "gpus"}},
            {"prefix": "NVIDIA_", "configMapRef": {"name": "gpus"}}, {"prefix": "N", "secretRef": {"name": "gpus"}}]


@st.composite
def hostile_container(draw, name):
    entry = container(name, gpus=draw(st.sampled_from([None, "0", "1"])),
                      mig=draw(st.sampled_from([None, "nvidia.com/mig-1g.10gb"])),
                      env_entries=draw(st.lists(st.sampled_from(ENV_ENTRIES), max_size=3)),
                      env_from=draw(st.lists(st.sampled_from(ENV_FROM), max_size=1)))
    return entry


@st.composite
def hostile_pod(draw):
    names = draw(st.lists(st.sampled_from(["main", "sidecar", "model"]), min_size=1, max_size=2, unique=True))
    annotations = {} if draw(st.booleans()) else {key: value for key, value in draw(st.lists(st.sampled_from([
        ("gpu-fraction", "0.5"), ("gpu-memory", "2048"), ("pod-group-name", "pg-other"),
        ("kai.scheduler/skip-podgrouper", "true"), ("runai/shared-gpu-configmap", "mine-x-default"),
        ("gpu-fraction-container-name", names[-1]), ("cdi.k8s.io/gpu", "nvidia.com/gpu=all")]), max_size=2))}
    labels = {} if draw(st.booleans()) else {key: value for key, value in draw(st.lists(st.sampled_from([
        ("project", "team-vision"), ("spark-app-name", "etl"), ("spark-app-selector", "pg-other"),
        ("release", "team-nlp"), ("app", "loft")]), max_size=1))}
    spec = {}
    # Mostly well-formed pods with one or two hostile levers: a pod refused for its queue proves little.
    runtime = draw(st.sampled_from([None, None, None, "nvidia", "nvidia-cdi", "runc"]))
    if runtime:
        spec["runtimeClassName"] = runtime
    if draw(st.integers(0, 4)) == 0:
        spec["nodeName"] = "gpu-node-1"
    return virtual_pod(namespace=draw(st.sampled_from(["default", "kube-system"])),
                       queue=draw(st.sampled_from(["team-nlp"] * 4 + [None, "team-vision", "default-queue"])),
                       scheduler=draw(st.sampled_from([KAI_SCHEDULER] * 4 + [None, "default-scheduler"])),
                       annotations=annotations, labels=labels,
                       containers=[draw(hostile_container(name)) for name in names], **spec)


def _holds_gpu(entry: dict) -> bool:
    requests = entry["resources"]["requests"]
    return any((key == "nvidia.com/gpu" or key.startswith("nvidia.com/mig-")) and value != "0"
               for key, value in requests.items())


def gpu_escapes(host: dict) -> list[str]:
    """What a node would give this host pod beyond a KAI allocation in team-nlp's queue."""
    problems = []
    metadata, spec = host["metadata"], host["spec"]
    annotations, labels = metadata.get("annotations", {}), metadata.get("labels", {})
    if spec.get("schedulerName") != KAI_SCHEDULER or labels.get(QUEUE_LABEL) != "team-nlp":
        problems.append("outside KAI's team-nlp queue")
    if spec.get("nodeName"):
        problems.append("bypasses the scheduler")
    if {"pod-group-name", "kai.scheduler/skip-podgrouper"} & set(annotations) or "spark-app-selector" in labels:
        problems.append("chooses its PodGroup")
    if any(key.startswith("cdi.k8s.io/") for key in annotations):
        problems.append("names CDI devices itself")
    fractional = "gpu-fraction" in annotations or "gpu-memory" in annotations
    fraction_name = annotations.get("gpu-fraction-container-name", spec["containers"][0]["name"]) if fractional \
        else None
    uses_gpu = fractional or any(_holds_gpu(entry) for entry in spec["containers"])
    if spec.get("runtimeClassName", "").startswith("nvidia") and not uses_gpu:
        problems.append("nvidia runtime without a GPU")
    if labels.get("release") == "team-nlp" or labels.get("app") in ("loft", "vcluster-snapshot"):
        problems.append("wears control-plane network labels")
    for entry in spec["containers"]:
        settings_ = [item for item in entry.get("env", []) if item["name"] == VISIBLE]
        effective = settings_[-1] if settings_ else None
        if entry["name"] == fraction_name:
            reference = (effective or {}).get("valueFrom", {}).get("configMapKeyRef", {}).get("name", "")
            if not reference.endswith("-shared-gpu-0") and not reference.endswith("-shared-gpu-1"):
                problems.append(f"{entry['name']}: fractional device list not KAI's")
        elif _holds_gpu(entry):
            if effective is not None and effective.get("value") not in BLANK:
                problems.append(f"{entry['name']}: widens its device list")
            # A key of the source completes its prefix to the device plugin's variable.
            if any(VISIBLE.startswith(source.get("prefix", "")) for source in entry.get("envFrom", [])):
                problems.append(f"{entry['name']}: envFrom may override its device list")
        elif effective is None or effective.get("value") not in BLANK:
            problems.append(f"{entry['name']}: sees the node's GPUs through its image or env")
    return problems


@pytest.fixture(scope="module")
def nlp(dev_run) -> Tenant:
    return tenant_of(dev_run, dev_config(), "team-nlp")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pod=hostile_pod())
def test_an_admitted_pod_never_reaches_a_gpu_outside_its_kai_allocation(nlp, pod):
    try:
        host = kai_mutate(vcluster_sync(pod, nlp.team))
    except WebhookRefusal:
        return
    # The whole CREATE path: the API server's own validation first, then the policy.
    if nlp.create_host(host) == []:
        assert gpu_escapes(host) == [], pod


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(share=st.sampled_from([{"gpu-fraction": "0.25"}, {"gpu-memory": "4096"}, {}]),
       gpus=st.sampled_from([None, "1", "2"]), sidecars=st.integers(0, 2),
       namespace=st.sampled_from(["default", "kube-system", "ml"]))
def test_well_formed_work_in_the_teams_queue_is_always_admitted(nlp, share, gpus, sidecars, namespace):
    main = container("main", gpus=None if share else gpus)
    pod = virtual_pod(namespace=namespace, queue="team-nlp", scheduler=KAI_SCHEDULER, annotations=share,
                      containers=[main] + [container(f"side-{index}") for index in range(sidecars)])
    host = kai_mutate(vcluster_sync(nlp.vcluster_defaults(pod), nlp.team))
    assert nlp.create_host(host) == []
    assert gpu_escapes(host) == []


# --- keys drawn from KAI's own key list -----------------------------------------------------------------

# A value KAI reads as the platform grants it, for each granted key the property draws.
GRANTED_VALUES = {
    ("priorityClassName", LABEL): "train", ("kai.scheduler/preemptibility", LABEL): "preemptible",
    ("gpu-fraction", ANNOTATION): "0.25", ("kai.scheduler/topology", ANNOTATION): "cluster-topology",
    ("kai.scheduler/topology-required-placement", ANNOTATION): "topology.kubernetes.io/zone",
    ("kai.scheduler/topology-preferred-placement", ANNOTATION): "kubernetes.io/hostname",
    ("kai.scheduler/preemption-delay", ANNOTATION): "90s",
}


@pytest.fixture(scope="module")
def kai_pod_keys() -> list[tuple[str, str, str, bool]]:
    """(key, kind, value, must be refused) for KAI's keys: extracted at every pinned tag when the mirror is
    there (a key nobody classified must be refused), else the project's classified table."""
    extracted: set[tuple[str, str]] = set()
    root = os.environ.get(MIRRORS_VARIABLE)
    path = Path(root or "/nonexistent") / "kai-scheduler+KAI-Scheduler" / "repo"
    if path.exists():
        for tag in ACCEPTED_TAGS["kai-scheduler/KAI-Scheduler"]:
            extracted |= keys_of(source_at(path, tag))
    refused = {(entry.key, entry.kind) for entry in REFUSED}
    admitted = {(entry.key, entry.kind) for entry in (*HARMLESS, *UNREAD_RESERVED)} | set(GRANTED_VALUES)
    not_on_pods = {(entry.key, entry.kind) for entry in NOT_ON_PODS}
    pool = []
    for key, kind in sorted(extracted | refused | admitted):
        if (key, kind) in not_on_pods or ((key, kind) not in admitted | refused and key in {g.key for g in GRANTED}):
            continue
        value = GRANTED_VALUES.get((key, kind), "1")
        pool.append((key.replace("*", "a1b2"), kind, value, (key, kind) not in admitted))
    return pool


HONEST_KEYS = st.tuples(
    st.sampled_from(["", "example.com/", "helm.sh/", "app.kubernetes.io/", "jobset.sigs.k8s.io/"]),
    st.from_regex(r"\A[a-z][a-z0-9-]{0,10}[a-z0-9]\Z"), st.sampled_from([LABEL, ANNOTATION]),
).map(lambda parts: (parts[0] + parts[1], parts[2], "v1", False)).filter(lambda key: not any(
    key[0].startswith(start) for start in ("runai", "gpu-", "mps", "project", "pod-group", "priority", "received",
                                           "spark", "shared-gpu")))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_reserved_kai_key_is_never_admitted_and_honest_keys_always_are(nlp, kai_pod_keys, data):
    keys = data.draw(st.lists(st.one_of(st.sampled_from(kai_pod_keys), HONEST_KEYS), min_size=1, max_size=4,
                              unique_by=lambda key: (key[0], key[1])))
    metadata: dict = {"labels": {}, "annotations": {}}
    for key, kind, value, _ in keys:
        metadata["labels" if kind == LABEL else "annotations"][key] = value
    pod = virtual_pod(queue="team-nlp", scheduler=KAI_SCHEDULER, **metadata)
    messages = nlp.create(pod)
    if any(must_refuse for *_, must_refuse in keys):
        assert "reserved-keys" in {message[1:message.index("]")] for message in messages}, keys
    else:
        assert messages == [], keys
