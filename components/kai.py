"""KAI Scheduler, installed as a real Helm release from its OCI registry, and a gate that
holds the queues back until KAI's queue webhook answers.

The chart relies on Helm hooks, ``lookup`` and ``.Release.IsInstall``, so it is a
``helm.v3.Release`` (Helm runs it) rather than objects rendered client-side.

The release is "ready" when KAI's operator is; the operator then creates the queue controller
and its validating webhook on its own time, and a Queue created in between is refused
(``failed calling webhook``). The Kubernetes provider does not retry a failed create, so the
queues wait for a Job that server-side dry-runs a probe Queue, retried with back-off by
Kubernetes until the webhook admits it (or, while no webhook is registered yet, at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import yaml

from config import versions
from config.model import KaiScheduler as KaiSettings

SCHEDULER_NAME = "kai-scheduler"
RELEASE_TIMEOUT_SECONDS = 900
PROBE_NAME = "gpu-tenancy-queue-webhook-probe"
# Pod retries with exponential back-off (10s, 20s, ... capped at 6 min): about 15 minutes in all.
PROBE_BACKOFF_LIMIT = 8
PROBE_DEADLINE_SECONDS = 1200


@dataclass
class KaiSchedulerArgs:
    settings: KaiSettings
    provider: k8s.Provider


def kai_values(settings: KaiSettings) -> dict:
    # blockNvidiaVisibleDevices: KAI's pod webhook writes NVIDIA_VISIBLE_DEVICES=void into every container
    # that holds no GPU, so a tenant image's own ENV cannot open the node's GPUs.
    return {"global": {"gpuSharing": settings.gpu_sharing, "blockNvidiaVisibleDevices": True}}


class KaiScheduler(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    queue_webhook_ready: k8s.batch.v1.Job
    namespace: str
    scheduler_name: str = SCHEDULER_NAME

    def __init__(self, name: str, args: KaiSchedulerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gpu-tenancy:platform:KaiScheduler", name, None, opts)
        settings = args.settings
        self.namespace = settings.namespace
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name="kai-scheduler",
            chart=versions.KAI_CHART,
            version=settings.version,
            namespace=settings.namespace,
            create_namespace=True,
            values=kai_values(settings),
            atomic=True,
            cleanup_on_fail=True,
            skip_await=False,
            timeout=RELEASE_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.queue_webhook_ready = self._queue_webhook_probe(name, settings, args.provider)
        self.register_outputs({"namespace": self.namespace, "chart": versions.KAI_CHART,
                               "version": settings.version})

    def _queue_webhook_probe(self, name: str, settings: KaiSettings, provider: k8s.Provider) -> k8s.batch.v1.Job:
        labels = {"app.kubernetes.io/managed-by": "gpu-tenancy", "app.kubernetes.io/name": PROBE_NAME}
        metadata = {"name": PROBE_NAME, "namespace": settings.namespace, "labels": labels}
        after_release = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.release])
        probe_queue = {
            "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
            "metadata": {"name": PROBE_NAME},
            "spec": {"resources": {resource: {"quota": -1, "limit": -1, "overQuotaWeight": 1}
                                   for resource in ("gpu", "cpu", "memory")}},
        }
        manifest = k8s.core.v1.ConfigMap(f"{name}-probe-queue", metadata=metadata,
                                         data={"queue.yaml": yaml.safe_dump(probe_queue, sort_keys=True)},
                                         opts=after_release)
        account = k8s.core.v1.ServiceAccount(f"{name}-probe", metadata=metadata, opts=after_release)
        role = k8s.rbac.v1.ClusterRole(f"{name}-probe", metadata={"name": PROBE_NAME, "labels": labels}, rules=[
            {"apiGroups": ["scheduling.run.ai"], "resources": ["queues"], "verbs": ["create"]}],
            opts=after_release)
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-probe", metadata={"name": PROBE_NAME, "labels": labels},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PROBE_NAME},
            subjects=[{"kind": "ServiceAccount", "name": PROBE_NAME, "namespace": settings.namespace}],
            opts=after_release)
        return k8s.batch.v1.Job(
            f"{name}-queue-webhook-probe",
            metadata=metadata,
            spec={
                "backoffLimit": PROBE_BACKOFF_LIMIT,
                "activeDeadlineSeconds": PROBE_DEADLINE_SECONDS,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restartPolicy": "Never",
                        "serviceAccountName": PROBE_NAME,
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                            "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{
                            "name": "probe",
                            "image": versions.KUBECTL_IMAGE,
                            "args": ["create", "--dry-run=server", "-f", "/probe/queue.yaml"],
                            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                                          "limits": {"memory": "128Mi"}},
                            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}},
                            # kubectl caches API discovery under $HOME; the root filesystem is read-only.
                            "env": [{"name": "HOME", "value": "/tmp"}],
                            "volumeMounts": [{"name": "probe", "mountPath": "/probe", "readOnly": True},
                                             {"name": "home", "mountPath": "/tmp"}],
                        }],
                        "volumes": [{"name": "probe", "configMap": {"name": PROBE_NAME}},
                                    {"name": "home", "emptyDir": {}}],
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                        depends_on=[self.release, manifest, account, role, binding],
                                        custom_timeouts=pulumi.CustomTimeouts(create="25m")),
        )
