"""KAI Scheduler, installed as a real Helm release from its OCI registry, and a gate that
holds the queues back until KAI's queue webhook answers.

The chart relies on Helm hooks, ``lookup`` and ``.Release.IsInstall``, so it is a
``helm.v3.Release`` (Helm runs it) rather than objects rendered client-side.

The release is "ready" when KAI's operator is; the operator then registers the queue
validating webhook on its own time (after the chart's post-install hook writes ``kai-config``),
and a Queue created in between is refused (``failed calling webhook``). The Kubernetes provider
does not retry a failed create, so the queues wait for a Job that first waits for the webhook
configuration to exist (a dry-run before that would pass trivially), then server-side dry-runs a
probe Queue, retried with back-off by Kubernetes until the webhook admits it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.kubernetes_resources import CONFIG_MAP, JOB, HelmRelease, KubernetesObject
from components.kubectl_job import (
    HOME_VOLUME, POD_SECURITY_CONTEXT, job_identity, kubectl_container, wait_for_create_args,
)
from config.model import KaiScheduler as KaiSettings
from config.system_pods import KAI_ADMISSION_CPU_LIMIT, KAI_ADMISSION_REPLICAS
from config.vocabulary import HELM_MAX_HISTORY, KAI_COMPONENT, MANAGED_BY, QUEUE_RESOURCES

SCHEDULER_NAME = "kai-scheduler"
RELEASE_TIMEOUT_SECONDS = 900
PROBE_NAME = "gpu-tenancy-queue-webhook-probe"
# Pod retries with exponential back-off (10s, 20s, ... capped at 6 min): about 15 minutes in all.
PROBE_BACKOFF_LIMIT = 8
PROBE_DEADLINE_SECONDS = 1200
# Named by KAI's operator: webhookConfigurationNamePrefix (default kai-queue-validation-) + the
# Queue API version; the same from v0.16.4 to v0.17.0.
QUEUE_WEBHOOK = "kai-queue-validation-v2"
# Each pod attempt waits this long for the webhook configuration; attempts repeat until the deadline.
WEBHOOK_WAIT_SECONDS = 300
# The admission's replicas (config/system_pods.py says why two): the operator adds a PodDisruptionBudget only above 1.
ADMISSION_REPLICAS = KAI_ADMISSION_REPLICAS
ADMISSION_MAX_UNAVAILABLE = 1
# The operator's input (CRD configs.kai.scheduler, cluster-scoped); the chart's post-install/upgrade hook
# server-side applies it without spec.admission.replicas, so a patch of that one field survives upgrades.
KAI_CONFIG = {"apiVersion": "kai.scheduler/v1", "kind": "Config", "name": "kai-config"}


@dataclass
class KaiSchedulerArgs:
    settings: KaiSettings
    provider: k8s.Provider
    # The site's kubectl (config/model.py Cluster.kubectl_image), which runs the queue webhook probe.
    kubectl_image: str


def kai_values(settings: KaiSettings) -> dict:
    # blockNvidiaVisibleDevices: KAI's pod webhook writes NVIDIA_VISIBLE_DEVICES=void into every container
    # that holds no GPU, so a tenant image's own ENV cannot open the node's GPUs.
    budget = {"enabled": True, "maxUnavailable": ADMISSION_MAX_UNAVAILABLE}
    # Every KAI image (the operator, the services it deploys, the CRD upgrade and config hooks) is the release's,
    # from where KAI publishes it (config/versions.py).
    values: dict = {"global": {"registry": settings.image_registry, "tag": settings.version,
                               "gpuSharing": settings.gpu_sharing, "blockNvidiaVisibleDevices": True},
                    "admission": {"podDisruptionBudget": budget,
                                  "resources": {"limits": {"cpu": KAI_ADMISSION_CPU_LIMIT}}}}
    if settings.hamicore:
        # Memory-capped teams: the binder writes each fraction's CUDA_DEVICE_MEMORY_LIMIT and the operator starts
        # the pod webhook with --hami-core-enabled, which points the fractional container at it.
        values["binder"] = {"plugins": {"hamicore": {"enabled": True}}}
    return values


def admission_patch_spec() -> dict:
    """The ``kai-config`` fields the program owns: the admission replica count (the chart offers only
    ``operator.replicaCount``, which would scale every KAI service and the operator too)."""
    return {"admission": {"replicas": ADMISSION_REPLICAS}}


class KaiScheduler(pulumi.ComponentResource):
    release: HelmRelease
    admission_replicas: k8s.apiextensions.CustomResourcePatch
    queue_webhook_ready: KubernetesObject
    namespace: str
    scheduler_name: str = SCHEDULER_NAME

    def __init__(self, name: str, args: KaiSchedulerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(KAI_COMPONENT, name, None, opts)
        settings = args.settings
        self.namespace = settings.namespace
        self.release = HelmRelease(
            f"{name}-release",
            name="kai-scheduler",
            chart=settings.chart,
            version=settings.version,
            repository_opts={"repo": settings.repo} if settings.repo else None,
            namespace=settings.namespace,
            create_namespace=True,
            values=kai_values(settings),
            atomic=True,
            max_history=HELM_MAX_HISTORY,
            cleanup_on_fail=True,
            skip_await=False,
            timeout=RELEASE_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.admission_replicas = k8s.apiextensions.CustomResourcePatch(
            f"{name}-admission-replicas",
            api_version=KAI_CONFIG["apiVersion"],
            kind=KAI_CONFIG["kind"],
            # The chart's hook owns the rest of kai-config; this takes only the field set here.
            metadata={"name": KAI_CONFIG["name"], "annotations": {"pulumi.com/patchForce": "true"}},
            spec=admission_patch_spec(),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.release]),
        )
        self.queue_webhook_ready = self._queue_webhook_probe(name, settings, args.provider, args.kubectl_image)
        self.register_outputs({"namespace": self.namespace, "chart": settings.chart,
                               "version": settings.version})

    def _queue_webhook_probe(self, name: str, settings: KaiSettings, provider: k8s.Provider,
                             kubectl_image: str) -> KubernetesObject:
        labels = {**MANAGED_BY, "app.kubernetes.io/name": PROBE_NAME}
        metadata = {"name": PROBE_NAME, "namespace": settings.namespace, "labels": labels}
        after_release = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.release])
        probe_queue = {
            "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
            "metadata": {"name": PROBE_NAME},
            "spec": {"resources": {resource: {"quota": -1, "limit": -1, "overQuotaWeight": 1}
                                   for resource in QUEUE_RESOURCES}},
        }
        manifest = KubernetesObject(f"{name}-probe-queue", CONFIG_MAP, metadata=metadata,
                                         data={"queue.yaml": yaml.safe_dump(probe_queue, sort_keys=True)},
                                         opts=after_release)
        identity = job_identity(f"{name}-probe", metadata, [
            {"apiGroups": ["scheduling.run.ai"], "resources": ["queues"], "verbs": ["create"]},
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
             "resourceNames": [QUEUE_WEBHOOK], "verbs": ["get", "list", "watch"]}],
            cluster_wide=True, opts=after_release)
        return KubernetesObject(
            f"{name}-queue-webhook-probe", JOB,
            metadata=metadata,
            spec={
                "backoffLimit": PROBE_BACKOFF_LIMIT,
                "activeDeadlineSeconds": PROBE_DEADLINE_SECONDS,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restartPolicy": "Never",
                        "serviceAccountName": PROBE_NAME,
                        "securityContext": POD_SECURITY_CONTEXT,
                        "initContainers": [kubectl_container(
                            "wait-for-webhook", kubectl_image,
                            wait_for_create_args("validatingwebhookconfigurations", QUEUE_WEBHOOK,
                                                 WEBHOOK_WAIT_SECONDS))],
                        "containers": [kubectl_container(
                            "probe", kubectl_image, ["create", "--dry-run=server", "-f", "/probe/queue.yaml"],
                            [{"name": "probe", "mountPath": "/probe", "readOnly": True}])],
                        "volumes": [{"name": "probe", "configMap": {"name": PROBE_NAME}}, HOME_VOLUME],
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                        depends_on=[self.release, manifest, *identity],
                                        custom_timeouts=pulumi.CustomTimeouts(create="25m")),
        )
