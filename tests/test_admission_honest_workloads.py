"""Honest ML workloads as their controllers and charts write them pass the boundary, changed only in the queue.

The pods are built from the documented pod shapes of current releases of Kubeflow's training operator (PyTorchJob)
and Trainer (a TrainJob's JobSet), KubeRay (a RayCluster's head and GPU worker), JupyterHub's Kubernetes chart (a
single-user server), Argo Workflows (the emissary executor's init and wait containers), a vLLM and a Triton
inference Deployment and a Job with a native sidecar; no mirror of those projects is available here, so their
labels, env, probes and volumes are written from their docs, not read from their source. Each goes through the
team's vCluster as tenant_sim syncs it, KAI's webhook and the host policies (tests/tenant_sim.py).

A container that sets a request and no limit of it is common (charts that leave CPU limits out, JupyterHub's
``memory.guarantee``): the host's LimitRanger gives it the namespace's default limit, and a request above that
default would leave the pod invalid on the host, which the in-vCluster defaults prevent.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from config.key_types import quantity_value
from tests.conftest import dev_config, eks_config, run
from tests import test_admission_honest as honest
from tests.test_admission_honest import in_queue
from tests.test_virtual_defaults import Inside
from tests.tenant_sim import Tenant, tenant_of

IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
# The honest suite's check that both CEL implementations judge every review, autouse here too.
both_implementations_judge_every_honest_review = honest.both_implementations_judge_every_honest_review


@pytest.fixture(scope="module", params=["dev:team-nlp", "eks:team-legal"])
def tenant(request, dev_run, eks_run) -> Tenant:
    stack, team = request.param.split(":")
    program, config = {"dev": (dev_run, dev_config()), "eks": (eks_run, eks_config())}[stack]
    return tenant_of(program, config, team)


def pod(text: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", **yaml.safe_load(text)}


RAY_ENV = """
[{name: RAY_CLUSTER_NAME, valueFrom: {fieldRef: {fieldPath: "metadata.labels['ray.io/cluster']"}}},
 {name: RAY_CLOUD_INSTANCE_ID, valueFrom: {fieldRef: {fieldPath: metadata.name}}},
 {name: RAY_NODE_TYPE_NAME, valueFrom: {fieldRef: {fieldPath: "metadata.labels['ray.io/group']"}}},
 {name: RAY_USAGE_STATS_KUBERAY_IN_USE, value: "1"}, {name: RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE, value: "1"}]"""
RAY_LABELS = ("{ray.io/cluster: llm, ray.io/is-ray-node: 'yes', app.kubernetes.io/created-by: kuberay-operator, "
              "app.kubernetes.io/name: kuberay")
ARGO_ENV = """
[{name: ARGO_POD_NAME, valueFrom: {fieldRef: {apiVersion: v1, fieldPath: metadata.name}}},
 {name: ARGO_POD_UID, valueFrom: {fieldRef: {apiVersion: v1, fieldPath: metadata.uid}}},
 {name: ARGO_CONTAINER_NAME, value: main}, {name: ARGO_TEMPLATE, value: '{"name":"train","container":{}}'},
 {name: ARGO_NODE_ID, value: train-x2k4p-1}, {name: ARGO_INCLUDE_SCRIPT_OUTPUT, value: "false"},
 {name: ARGO_DEADLINE, value: "0001-01-01T00:00:00Z"}, {name: ARGO_PROGRESS_FILE, value: /var/run/argo/progress}]"""
ARGO_EXEC = ("image: 'quay.io/argoproj/argoexec:v3.6.5', env: %s, resources: {requests: {cpu: 10m, memory: 64Mi}}, "
             "volumeMounts: [{name: var-run-argo, mountPath: /var/run/argo}], securityContext: {runAsNonRoot: true, "
             "runAsUser: 8737, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}") % ARGO_ENV.strip()

WORKLOADS = {
    "pytorchjob-worker": f"""
metadata:
  name: bert-worker-0
  labels: {{training.kubeflow.org/job-name: bert, training.kubeflow.org/operator-name: pytorchjob-controller,
           training.kubeflow.org/replica-type: worker, training.kubeflow.org/replica-index: "0"}}
spec:
  restartPolicy: OnFailure
  initContainers:
  - {{name: init-pytorch, image: "alpine:3.10", command: [sh, -c, "until nslookup bert-master-0; do sleep 2; done"],
     resources: {{limits: {{cpu: 100m, memory: 20Mi}}, requests: {{cpu: 50m, memory: 10Mi}}}}}}
  containers:
  - name: pytorch
    image: {IMAGE}
    command: [torchrun, train.py]
    ports: [{{containerPort: 23456, name: pytorchjob-port, protocol: TCP}}]
    env: [{{name: MASTER_PORT, value: "23456"}}, {{name: MASTER_ADDR, value: bert-master-0}},
          {{name: WORLD_SIZE, value: "2"}}, {{name: RANK, value: "1"}}, {{name: PYTHONUNBUFFERED, value: "1"}}]
    resources: {{limits: {{nvidia.com/gpu: 1, cpu: "8", memory: 32Gi}}}}
""",
    "trainjob-node": f"""
metadata:
  name: llm-node-0-0-x7k2p
  labels: {{jobset.sigs.k8s.io/jobset-name: llm, jobset.sigs.k8s.io/replicatedjob-name: node,
           jobset.sigs.k8s.io/job-index: "0", jobset.sigs.k8s.io/job-key: 3f2a,
           trainer.kubeflow.org/trainjob-ancestor-step: trainer, batch.kubernetes.io/job-completion-index: "0",
           batch.kubernetes.io/job-name: llm-node-0, job-name: llm-node-0}}
  annotations: {{batch.kubernetes.io/job-completion-index: "0", jobset.sigs.k8s.io/jobset-name: llm,
                jobset.sigs.k8s.io/replicatedjob-replicas: "1"}}
spec:
  restartPolicy: OnFailure
  subdomain: llm
  hostname: llm-node-0-0
  containers:
  - name: node
    image: {IMAGE}
    command: [torchrun, train.py]
    ports: [{{containerPort: 29400}}]
    env:
    - name: PET_NODE_RANK
      valueFrom: {{fieldRef: {{fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}}
    - {{name: PET_NNODES, value: "2"}}
    - {{name: PET_MASTER_ADDR, value: llm-node-0-0.llm}}
    resources: {{limits: {{nvidia.com/gpu: 1}}}}
""",
    "ray-head": f"""
metadata:
  name: llm-head-x7k2p
  labels: {RAY_LABELS}, ray.io/node-type: head, ray.io/group: headgroup, ray.io/identifier: llm-head}}
  annotations: {{ray.io/ft-enabled: "false"}}
spec:
  enableServiceLinks: false
  containers:
  - name: ray-head
    image: "rayproject/ray:2.46.0"
    command: [/bin/bash, -c, --]
    args: ["ulimit -n 65536; ray start --head --dashboard-host=0.0.0.0 --block --metrics-export-port=8080"]
    ports: [{{containerPort: 6379, name: gcs-server}}, {{containerPort: 8265, name: dashboard}},
            {{containerPort: 10001, name: client}}, {{containerPort: 8080, name: metrics}}]
    env: {RAY_ENV.strip()}
    resources: {{limits: {{cpu: "1", memory: 2G}}, requests: {{cpu: "1", memory: 2G}}}}
    livenessProbe: {{exec: {{command: [bash, -c, "wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz"]}},
                    initialDelaySeconds: 30, periodSeconds: 5, failureThreshold: 120}}
    volumeMounts: [{{mountPath: /dev/shm, name: shared-mem}}]
  volumes: [{{name: shared-mem, emptyDir: {{medium: Memory, sizeLimit: 2G}}}}]
""",
    "ray-gpu-worker": f"""
metadata:
  name: llm-gpu-group-worker-abcde
  labels: {RAY_LABELS}, ray.io/node-type: worker, ray.io/group: gpu-group, ray.io/identifier: llm-worker}}
spec:
  initContainers:
  - {{name: wait-gcs-ready, image: "rayproject/ray:2.46.0-gpu", command: [/bin/bash, -lc, --],
     args: ["until ray health-check --address llm-head-svc.default.svc.cluster.local:6379; do sleep 5; done"],
     env: [{{name: FQ_RAY_IP, value: llm-head-svc.default.svc.cluster.local}}],
     resources: {{limits: {{cpu: 200m, memory: 256Mi}}, requests: {{cpu: 200m, memory: 256Mi}}}}}}
  containers:
  - name: ray-worker
    image: "rayproject/ray:2.46.0-gpu"
    args: ["ray start --address=llm-head-svc:6379 --block"]
    env: {RAY_ENV.strip()}
    resources: {{limits: {{cpu: "4", memory: 16Gi, nvidia.com/gpu: 1}}, requests: {{cpu: "4", memory: 16Gi,
                nvidia.com/gpu: 1}}}}
    lifecycle: {{preStop: {{exec: {{command: [/bin/sh, -c, ray stop]}}}}}}
    volumeMounts: [{{mountPath: /dev/shm, name: shared-mem}}]
  volumes: [{{name: shared-mem, emptyDir: {{medium: Memory}}}}]
""",
    "jupyterhub-singleuser": """
metadata:
  name: jupyter-alice
  labels: {app: jupyterhub, component: singleuser-server, release: jhub, chart: jupyterhub-4.2.0, heritage: jupyterhub,
           hub.jupyter.org/network-access-hub: "true", hub.jupyter.org/username: alice}
  annotations: {hub.jupyter.org/username: alice, hub.jupyter.org/servername: "", gpu-fraction: "0.5"}
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  securityContext: {fsGroup: 100}
  priorityClassName: jhub-default-priority
  tolerations: [{key: hub.jupyter.org/dedicated, operator: Equal, value: user, effect: NoSchedule}]
  affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, preference:
    {matchExpressions: [{key: hub.jupyter.org/node-purpose, operator: In, values: [user]}]}}]}}
  containers:
  - name: notebook
    image: "quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02"
    args: [jupyterhub-singleuser]
    ports: [{containerPort: 8888, name: notebook-port}]
    env: [{name: JUPYTERHUB_API_URL, value: "http://hub:8081/hub/api"}, {name: JUPYTERHUB_USER, value: alice},
          {name: MEM_GUARANTEE, value: "1000000000"}]
    resources: {requests: {memory: 1G}}
    securityContext: {runAsUser: 1000, allowPrivilegeEscalation: false}
    volumeMounts: [{name: volume-alice, mountPath: /home/jovyan}]
  volumes: [{name: volume-alice, persistentVolumeClaim: {claimName: claim-alice}}]
""",
    "argo-step-with-a-fraction": f"""
metadata:
  name: train-x2k4p-train-1234567
  labels: {{workflows.argoproj.io/completed: "false", workflows.argoproj.io/workflow: train-x2k4p}}
  annotations: {{workflows.argoproj.io/node-id: train-x2k4p-1, workflows.argoproj.io/node-name: train-x2k4p.train,
                kubectl.kubernetes.io/default-container: main, gpu-fraction: "0.5", gpu-fraction-container-name: main}}
spec:
  restartPolicy: Never
  initContainers: [{{name: init, command: [argoexec, init], {ARGO_EXEC}}}]
  containers:
  - {{name: wait, command: [argoexec, wait], {ARGO_EXEC}}}
  - {{name: main, image: "{IMAGE}", command: [/var/run/argo/argoexec, emissary, --, python, train.py],
     resources: {{limits: {{cpu: "4", memory: 16Gi}}}},
     volumeMounts: [{{name: var-run-argo, mountPath: /var/run/argo}}]}}
  volumes: [{{name: var-run-argo, emptyDir: {{}}}}, {{name: tmp-dir-argo, emptyDir: {{}}}}]
""",
    "triton-deployment": """
metadata:
  name: triton-5d8f9-abcde
  labels: {app: triton, pod-template-hash: 5d8f9}
  annotations: {prometheus.io/scrape: "true", prometheus.io/port: "8002"}
spec:
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway,
                               labelSelector: {matchLabels: {app: triton}}, matchLabelKeys: [pod-template-hash]}]
  containers:
  - name: triton
    image: "nvcr.io/nvidia/tritonserver:25.01-py3"
    args: [tritonserver, --model-repository=/models]
    ports: [{containerPort: 8000, name: http}, {containerPort: 8001, name: grpc}, {containerPort: 8002, name: metrics}]
    livenessProbe: {httpGet: {path: /v2/health/live, port: http}}
    readinessProbe: {grpc: {port: 8001}}
    resources: {limits: {nvidia.com/gpu: 1, cpu: "4", memory: 16Gi}}
    volumeMounts: [{name: shm, mountPath: /dev/shm}, {name: models, mountPath: /models}]
  - {name: exporter, image: "prom/statsd-exporter:v0.28.0", resources: {limits: {cpu: 100m, memory: 64Mi}}}
  volumes: [{name: shm, emptyDir: {medium: Memory}}, {name: models, persistentVolumeClaim: {claimName: models}}]
""",
    "job-with-a-native-sidecar": f"""
metadata:
  name: train-x2k4p
  labels: {{batch.kubernetes.io/job-name: train, job-name: train}}
spec:
  restartPolicy: Never
  serviceAccountName: trainer
  securityContext: {{runAsNonRoot: true, runAsUser: 1000, fsGroup: 2000, seccompProfile: {{type: RuntimeDefault}}}}
  initContainers:
  - {{name: log-shipper, image: "fluent/fluent-bit:3.2", restartPolicy: Always,
     resources: {{limits: {{cpu: 100m, memory: 128Mi}}}}, volumeMounts: [{{name: logs, mountPath: /logs}}]}}
  containers:
  - name: train
    image: {IMAGE}
    env: [{{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}},
          {{name: MEMORY, valueFrom: {{resourceFieldRef: {{containerName: train, resource: limits.memory}}}}}}]
    resources: {{limits: {{nvidia.com/gpu: 2, cpu: "8", memory: 64Gi}}}}
    securityContext: {{allowPrivilegeEscalation: false, capabilities: {{drop: [ALL]}}}}
    volumeMounts: [{{name: logs, mountPath: /logs}}, {{name: vault, mountPath: /var/run/secrets/vault}}]
  volumes:
  - {{name: logs, emptyDir: {{}}}}
  - {{name: vault, projected: {{sources: [{{serviceAccountToken: {{audience: vault, expirationSeconds: 3600,
     path: token}}}}]}}}}
""",
}


@pytest.mark.parametrize("kind", WORKLOADS)
def test_ml_workloads_as_their_controllers_write_them_are_admitted_but_for_the_queue(tenant, kind):
    assert tenant.create(in_queue(pod(WORKLOADS[kind]), tenant)) == []


# --- a request above the namespace's default limit, and no limit of it ---------------------------------------------

VLLM_NO_CPU_LIMIT = """
metadata: {name: vllm-6d8f9-abcde, labels: {app: vllm, pod-template-hash: 6d8f9}}
spec:
  containers:
  - name: vllm
    image: "vllm/vllm-openai:v0.11.0"
    args: [--model, meta-llama/Llama-3.1-8B-Instruct]
    resources: {requests: {cpu: "4", memory: 24Gi, nvidia.com/gpu: 1}, limits: {memory: 24Gi, nvidia.com/gpu: 1}}
    volumeMounts: [{name: shm, mountPath: /dev/shm}]
  volumes: [{name: shm, emptyDir: {medium: Memory, sizeLimit: 8Gi}}]
"""
NOTEBOOK_GUARANTEE = """
metadata: {name: jupyter-bob, labels: {component: singleuser-server}, annotations: {gpu-fraction: "0.25"}}
spec:
  containers:
  - {name: notebook, image: "quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02", resources: {requests: {memory: 4G}}}
"""
MODEL_DOWNLOAD = """
metadata: {name: ollama-0}
spec:
  initContainers:
  - {name: pull, image: "ollama/ollama:0.12.3", command: [ollama, pull, "llama3.1:8b"],
     resources: {requests: {cpu: "2", ephemeral-storage: 12Gi}}}
  containers: [{name: ollama, image: "ollama/ollama:0.12.3", resources: {limits: {nvidia.com/gpu: 1}}}]
"""
ABOVE_THE_DEFAULT = {"vllm-without-a-cpu-limit": VLLM_NO_CPU_LIMIT, "notebook-memory-guarantee": NOTEBOOK_GUARANTEE,
                     "init-container-model-download": MODEL_DOWNLOAD}


def host_limits(host: dict) -> dict:
    """Container name -> the limits the host pod holds, as numbers."""
    return {entry["name"]: {name: quantity_value(str(value)) for name, value in entry["resources"]["limits"].items()}
            for entry in host["spec"]["containers"] + host["spec"].get("initContainers", [])}


@pytest.mark.parametrize("kind", ABOVE_THE_DEFAULT)
def test_a_request_above_the_default_limit_without_a_limit_runs_with_its_request_as_the_limit(tenant, kind):
    written = in_queue(pod(ABOVE_THE_DEFAULT[kind]), tenant)
    inside = Inside(tenant)
    mutated, refused = inside.create(written)
    assert refused == []
    assert tenant.create(mutated) == []
    host = tenant.host_pod(mutated)
    for entry in host["spec"]["containers"] + host["spec"].get("initContainers", []):
        resources = entry["resources"]
        for name, request in resources["requests"].items():
            assert quantity_value(str(resources["limits"][name])) >= quantity_value(str(request)), (entry["name"], name)
    # Only what would be invalid is raised: the pod's other limits are the host's defaults, or its own.
    defaults = tenant.team.vcluster.limit_range
    if kind == "vllm-without-a-cpu-limit":
        assert host_limits(host)["vllm"] == {"cpu": 4, "memory": 24 * 2 ** 30, "nvidia.com/gpu": 1,
                                                     "ephemeral-storage": quantity_value(
                                                         defaults.default_ephemeral_storage)}


def test_a_request_below_the_default_limit_keeps_the_hosts_default_limit(tenant):
    written = in_queue(pod(NOTEBOOK_GUARANTEE), tenant)
    written["spec"]["containers"][0]["resources"]["requests"]["memory"] = "512Mi"
    mutated, refused = Inside(tenant).create(copy.deepcopy(written))
    assert refused == [] and tenant.create(mutated) == []
    assert mutated["spec"]["containers"][0]["resources"] == written["spec"]["containers"][0]["resources"]
    limits = tenant.team.vcluster.limit_range
    assert host_limits(tenant.host_pod(mutated))["notebook"] == {
        "cpu": quantity_value(limits.default_cpu), "memory": quantity_value(limits.default_memory),
        "ephemeral-storage": quantity_value(limits.default_ephemeral_storage)}


# --- the site's extraValues lower the host LimitRange's defaults -------------------------------------------------

LOWERED = {"policies": {"limitRange": {"default": {"cpu": "500m", "memory": "512Mi"}}}}


@pytest.fixture(scope="module")
def lowered() -> Tenant:
    """team-nlp alone on the dev site, with the host's default limits lowered below the config's through extraValues:
    the defaults inside must judge a request against the LimitRange the host gets, not the config's."""
    config = dev_config()
    config["gpu-tenancy:teams"] = [dict(config["gpu-tenancy:teams"][0], vcluster={"extraValues": LOWERED})]
    return tenant_of(run(config), config, "team-nlp")


def cpu_request(cpu: str) -> str:
    return f"""
metadata: {{name: tokenizer}}
spec:
  containers: [{{name: main, image: "{IMAGE}", resources: {{requests: {{cpu: {cpu}}}}}}}]
"""


def test_a_request_above_a_default_limit_lowered_by_extra_values_gets_its_request_as_the_limit(lowered):
    mutated, refused = Inside(lowered).create(in_queue(pod(cpu_request("800m")), lowered))
    assert refused == [] and lowered.create(mutated) == []
    assert host_limits(lowered.host_pod(mutated))["main"]["cpu"] == 0.8


def test_a_request_below_a_default_limit_lowered_by_extra_values_keeps_the_lowered_default(lowered):
    written = in_queue(pod(cpu_request("400m")), lowered)
    mutated, refused = Inside(lowered).create(copy.deepcopy(written))
    assert refused == [] and lowered.create(mutated) == []
    assert mutated["spec"]["containers"][0]["resources"] == written["spec"]["containers"][0]["resources"]
    assert host_limits(lowered.host_pod(mutated))["main"] == {"cpu": 0.5, "memory": 512 * 2 ** 20,
                                                              "ephemeral-storage": quantity_value(
                                                                  lowered.team.vcluster.limit_range
                                                                  .default_ephemeral_storage)}
