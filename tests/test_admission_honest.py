"""Honest tenants never notice the key allowlist: their workloads pass the host policy unmodified.

Every pod in KAI's own docs at the pinned tags (read from the mirror), the seed workloads, pods made
by Kubernetes' controllers and by ``kubectl apply``, the tenant's DNS and KAI's own later writes are
admitted, changed only in the queue label (which the in-vCluster defaults set), on dev, eks and a
stack whose teams run at the ``restricted`` and ``privileged`` Pod Security levels.
"""

from __future__ import annotations

import copy
import functools
import re

import pytest
import yaml

from tests.config_spec import put
from tests.conftest import ACCEPTED_TAGS, dev_config, eks_config, git, run
from tests import tenant_sim
from tests.tenant_sim import KAI_SCHEDULER, Tenant, container, tenant_of, virtual_pod
from tests.cel_judges import judged_by_reference_alone as reference_alone

KAI = "kai-scheduler/KAI-Scheduler"
# Docs pods the platform refuses on purpose, with the key that is refused and why: it runs KAI with one
# scheduling shard, so a pod naming a node pool would never be scheduled; and vCluster syncs no PodGroups
# to the host, so a pod naming one (the external-podgroups design) could only join a group it did not make; and it
# offers no dynamic resource allocation, so the DRA example's claims are refused.
REFUSED_DOCS = {"docs/operator/scheduling-shards.md": "kai.scheduler/node-pool",
                "docs/developer/designs/external-podgroups/README.md": "pod-group-name",
                "docs/dra/gpu-imex-pod.yaml": "[resource-claims]"}
# Docs pods that mount a node's directory (the MPS pipe): Pod Security refuses hostPath below the privileged level
# already, and so does the volume rule; a privileged team runs them.
HOST_PATH_DOCS = {"docs/gpu-sharing/mps/gpu-sharing-with-mps.yaml": "[volume-sources] volumes [mps]"}


@pytest.fixture(autouse=True)
def both_implementations_judge_every_honest_review(monkeypatch):
    """An honest workload is no flood: cel-python and CEL C++ both judge each of its reviews
    (tests/cel_judges.py CROSS_CHECKED_BYTES)."""
    judged_alone = []

    def judged(verdict, pod, old) -> bool:
        alone = reference_alone(verdict, pod, old)
        if alone:
            judged_alone.append((pod or old)["metadata"].get("name"))
        return alone
    monkeypatch.setattr(tenant_sim, "judged_by_reference_alone", judged)
    yield
    assert judged_alone == []


def refused_docs(tenant: Tenant) -> dict[str, str]:
    """Docs path -> what the refusal of its pods names, for ``tenant``'s team."""
    return REFUSED_DOCS if tenant.team.vcluster.pod_security == "privileged" else {**REFUSED_DOCS, **HOST_PATH_DOCS}


def mixed_config() -> dict:
    config = put(dev_config(), "gpu-tenancy:teams[0].vcluster", {"podSecurity": "restricted"})
    return put(config, "gpu-tenancy:teams[1].vcluster", {"podSecurity": "privileged"})


@pytest.fixture(scope="module")
def mixed_run():
    return run(mixed_config(), stack="mixed")


@pytest.fixture(scope="module", params=["dev:team-nlp", "eks:team-legal", "mixed:team-nlp", "mixed:team-vision"])
def stack_tenant(request, dev_run, eks_run, mixed_run):
    stack, team = request.param.split(":")
    program, config = {"dev": (dev_run, dev_config()), "eks": (eks_run, eks_config()),
                       "mixed": (mixed_run, mixed_config())}[stack]
    return program, tenant_of(program, config, team)


@pytest.fixture(scope="module")
def tenant(stack_tenant) -> Tenant:
    return stack_tenant[1]


def in_queue(pod: dict, tenant: Tenant) -> dict:
    """The one change the platform asks for: the team's queue (the in-vCluster defaults set it)."""
    changed = copy.deepcopy(pod)
    changed["metadata"].setdefault("labels", {})["kai.scheduler/queue"] = tenant.team.queue_name
    changed["spec"].setdefault("schedulerName", KAI_SCHEDULER)
    changed["metadata"].setdefault("namespace", "default")
    return changed


# --- KAI's docs --------------------------------------------------------------------------------------


def _documents(path: str, text: str) -> list:
    blocks = re.findall(r"```ya?ml\n(.*?)```", text, re.S) if path.endswith(".md") else [text]
    documents = []
    for block in blocks:
        try:
            documents += [document for document in yaml.safe_load_all(block) if isinstance(document, dict)]
        except yaml.YAMLError:
            continue
    return documents


def _pods_of(document: dict, name: str) -> list[dict]:
    if document.get("kind") == "Pod":
        return [document]
    found = []
    for key, value in document.items():
        if key == "template" and isinstance(value, dict) and "containers" in value.get("spec", {}):
            found.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-x7k2p", **value.get(
                "metadata", {})}, "spec": value["spec"]})
        elif isinstance(value, dict):
            found += _pods_of(value, name)
    return found


@functools.lru_cache(maxsize=None)
def kai_doc_pods(tag: str) -> dict[str, list[dict]]:
    """path -> the kai-scheduler pods (and pod templates) of each KAI docs page at ``tag``."""
    paths = git(KAI, "grep", "-l", "schedulerName: kai-scheduler", tag, "--", "docs").split()
    pods = {}
    for path in (entry.split(":", 1)[1] for entry in paths):
        documents = _documents(path, git(KAI, "show", f"{tag}:{path}"))
        found = [pod for document in documents
                 for pod in _pods_of(document, document.get("metadata", {}).get("name", "doc"))
                 if pod["spec"].get("schedulerName") == KAI_SCHEDULER]
        if found:
            pods[path] = found
    return pods


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_every_pod_of_kais_docs_is_admitted_but_for_the_queue(tenant, tag):
    pods = kai_doc_pods(tag)
    assert {"docs/gpu-sharing/gpu-memory.yaml", "docs/priority/example/build-priority-pod.yaml",
            "docs/gpu-sharing/gpu-sharing-init-container.yaml", "docs/batch/batch-job.yaml"} <= set(pods)
    refused = refused_docs(tenant)
    for path, found in pods.items():
        for pod in found:
            messages = tenant.create(in_queue(copy.deepcopy(pod), tenant), kai_version=tag)
            if path in refused:
                assert refused[path] in " ".join(messages), path
            else:
                assert messages == [], f"{path}: {pod['metadata']['name']}"


# --- seeds, controllers, tools -------------------------------------------------------------------------

SEED_000 = """
metadata: {name: nlp-sentiment-model, labels: {kai.scheduler/queue: team-nlp}, annotations: {gpu-fraction: "0.33"}}
spec:
  schedulerName: kai-scheduler
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers: [{name: nlp-inference, image: "nvidia/cuda:12.4.0-base-ubuntu22.04",
                command: [bash, -c, "nvidia-smi; sleep infinity"]}]
  nodeSelector: {nvidia.com/gpu.present: "true"}
"""
SEED_003 = """
metadata: {name: gpu-sharing-pod, labels: {kai.scheduler/queue: test}, annotations: {nvidia.com/gpu-fraction: "0.5"}}
spec:
  schedulerName: kai-scheduler
  runtimeClassName: nvidia
  nodeSelector: {nvidia.com/gpu-present: "true"}
  containers: [{name: ollama-rag, image: "ollama/ollama:latest", command: [ollama, serve],
                resources: {limits: {nvidia.com/gpu: 1}}}]
"""


@pytest.mark.parametrize("seed", [SEED_000, SEED_003], ids=["seed-000", "seed-003"])
def test_the_seed_workloads_are_admitted_but_for_the_queue(tenant, seed):
    pod = {"apiVersion": "v1", "kind": "Pod", **yaml.safe_load(seed)}
    assert tenant.create(in_queue(pod, tenant)) == []


def _owned(pod: dict, kind: str, name: str, labels: dict, annotations: dict = None) -> dict:
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
                                           "name": name, "uid": "4a1e", "controller": True}]
    pod["metadata"]["labels"].update(labels)
    pod["metadata"].setdefault("annotations", {}).update(annotations or {})
    return pod


def controller_pods(tenant: Tenant) -> dict[str, dict]:
    chart = {"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "web", "helm.sh/chart": "web-1.2.0"}
    on_kai = dict(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER)
    return {
        "deployment": _owned(virtual_pod("web-7d9f8-abcde", labels={**chart, "app": "web"}, **on_kai), "ReplicaSet",
                             "web-7d9f8", {"pod-template-hash": "7d9f8"},
                             {"kubectl.kubernetes.io/restartedAt": "2026-12-01T10:00:00Z",
                              "checksum/config": "ab12", "prometheus.io/scrape": "true"}),
        "statefulset": _owned(virtual_pod("db-0", **on_kai), "StatefulSet", "db", {
            "controller-revision-hash": "db-5c6d", "statefulset.kubernetes.io/pod-name": "db-0",
            "apps.kubernetes.io/pod-index": "0"}),
        "job": _owned(virtual_pod("train-x2k4p", annotations={"gpu-memory": "8192"}, **on_kai), "Job", "train", {
            "batch.kubernetes.io/job-name": "train", "job-name": "train", "controller-uid": "4a1e",
            "batch.kubernetes.io/controller-uid": "4a1e"}, {"batch.kubernetes.io/job-completion-index": "0"}),
        "kubectl-applied": virtual_pod(annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}",
                                                    "gpu-fraction": "0.5"}, **on_kai),
        "whole-gpu": virtual_pod(containers=[container(gpus="1")], **on_kai),
        "gpu-memory": virtual_pod(annotations={"gpu-memory": "4096"}, **on_kai),
        "kai-priority-and-preemptibility": virtual_pod(labels={"priorityClassName": "inference",
                                                               "kai.scheduler/preemptibility": "non-preemptible"},
                                                       **on_kai),
        "topology": virtual_pod(annotations={"kai.scheduler/topology": "cluster-topology",
                                             "kai.scheduler/topology-required-placement": "topology.kubernetes.io/zone"},
                                **on_kai),
        "jobset-worker": virtual_pod(labels={"jobset.sigs.k8s.io/jobset-name": "llm", "jobset.sigs.k8s.io/job-index": "0",
                                             "ray.io/node-type": "worker", "user": "alice"}, **on_kai),
    }


@pytest.mark.parametrize("kind", ["deployment", "statefulset", "job", "kubectl-applied", "whole-gpu", "gpu-memory",
                                  "kai-priority-and-preemptibility", "topology", "jobset-worker"])
def test_pods_of_controllers_charts_and_tools_are_admitted(tenant, kind):
    assert tenant.create(controller_pods(tenant)[kind]) == []


def test_kais_updates_and_the_syncers_resync_of_them_pass(tenant):
    virtual = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, annotations={"gpu-fraction": "0.5"})

    # vCluster copies KAI's keys into the virtual pod; a later honest edit carries them back unchanged.
    def edit(pod: dict) -> None:
        pod["metadata"]["labels"]["app"] = "web"
        pod["metadata"]["annotations"]["owner"] = "alice"
    assert tenant.run_and_edit(virtual, edit) == []


def test_a_mixed_stack_gives_each_team_its_pod_security_and_the_same_key_rules(mixed_run):
    levels = {name: mixed_run.named(f"tenant-{name}-namespace").inputs["metadata"]["labels"][
        "pod-security.kubernetes.io/enforce"] for name in ("team-nlp", "team-vision")}
    assert levels == {"team-nlp": "restricted", "team-vision": "privileged"}


def test_the_tenants_dns_as_the_program_ships_it_is_admitted_on_every_stack(stack_tenant):
    program, tenant = stack_tenant
    values = program.named(f"tenant-{tenant.team.name}-vcluster").inputs["values"]
    documents = yaml.safe_load_all(values["controlPlane"]["coredns"]["overwriteManifests"])
    template = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "coredns-5d8f9-x2k4p", "namespace": "kube-system", **template["metadata"]},
           "spec": template["spec"]}
    assert tenant.create(pod) == []


@pytest.mark.parametrize("source", [{"prefix": "APP_", "configMapRef": {"name": "settings"}},
                                    {"prefix": "HF_", "secretRef": {"name": "hub-token"}},
                                    {"prefix": "NVIDIA_VISIBLE_DEVICES_", "configMapRef": {"name": "settings"}}],
                         ids=lambda source: source["prefix"])
def test_a_gpu_container_takes_env_from_under_a_prefix_that_cannot_spell_its_device_list(tenant, source):
    pods = [virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, containers=[
        container("model", gpus="1", env_from=[source])]),
        virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, containers=[container()],
                    initContainers=[container("fetch", mig="nvidia.com/mig-1g.10gb", env_from=[source])])]
    assert [tenant.create(pod) for pod in pods] == [[], []]


def test_per_container_resources_are_admitted(tenant):
    # What the [pod-resources] message asks for: the same reservation, set on the container KAI charges for.
    model = container("model")
    model["resources"] = {"requests": {"cpu": "32", "memory": "128Gi"}, "limits": {"cpu": "32", "memory": "128Gi"}}
    assert tenant.create(virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, containers=[model])) == []


@pytest.mark.parametrize("fraction", ["0.05", "0.1", "0.25", "0.33", "0.5", "0.75", "0.99", "0.050", "0.10", "0.2500"])
def test_fractions_in_hundredths_are_admitted(tenant, fraction):
    # Zeros after the hundredths change nothing KAI reads: "0.050" is 0.05 to its webhook, scheduler and controller.
    assert tenant.create(virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER,
                                     annotations={"gpu-fraction": fraction})) == []


def test_mig_slices_of_several_profiles_and_gpus_of_one_kind_are_admitted(tenant):
    # [gpu-kinds] refuses only a MIG slice beside another kind: KAI charges several profiles, or whole GPUs across
    # containers, in full.
    pods = [[container("model", mig="nvidia.com/mig-3g.40gb"), container("tokenizer", mig="nvidia.com/mig-1g.10gb")],
            [container("model", gpus="2"), container("sidecar", gpus="1")]]
    assert [tenant.create(virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, containers=containers))
            for containers in pods] == [[], []]
