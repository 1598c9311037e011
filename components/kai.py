"""KAI Scheduler, installed as a real Helm release from its OCI registry.

The chart relies on Helm hooks, ``lookup`` and ``.Release.IsInstall``, so it is a
``helm.v3.Release`` (Helm runs it) rather than objects rendered client-side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from config import versions
from config.model import KaiScheduler as KaiSettings

SCHEDULER_NAME = "kai-scheduler"
RELEASE_TIMEOUT_SECONDS = 900


@dataclass
class KaiSchedulerArgs:
    settings: KaiSettings
    provider: k8s.Provider


def kai_values(settings: KaiSettings) -> dict:
    return {"global": {"gpuSharing": settings.gpu_sharing}}


class KaiScheduler(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    namespace: str
    scheduler_name: str = SCHEDULER_NAME

    def __init__(self, name: str, args: KaiSchedulerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gpu-tenancy:platform:KaiScheduler", name, None, opts)
        settings = args.settings
        self.namespace = settings.namespace
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name="kai-scheduler",
            chart=versions.kai_chart_ref(settings.version),
            version=settings.version,
            namespace=settings.namespace,
            create_namespace=True,
            values=kai_values(settings),
            atomic=True,
            cleanup_on_fail=True,
            # Waiting for every workload, the admission webhook included, is what lets the queues
            # created next pass KAI's webhook.
            skip_await=False,
            timeout=RELEASE_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.register_outputs({"namespace": self.namespace, "chart": versions.kai_chart_ref(settings.version),
                               "version": settings.version})
