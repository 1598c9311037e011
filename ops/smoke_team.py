"""One team's smoke run, the steps ops.smoke lists: each recorded in the team's report, the first failure ending
the run, the team's namespace in its vCluster deleted in any case."""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

from config.gpu_asks import GpuAsk, gpu_ask
from config.mirrors import Mirrors
from config.vocabulary import QUEUE_LABEL, SEED_GPU_FRACTION, syncer_account
from ops.smoke_kube import ApiError, Kube
from ops.smoke_objects import (
    FRACTION_ANNOTATION, KAI_SCHEDULER, MANAGED_BY, SMOKE_LABEL, VIRTUAL_NAME, VIRTUAL_NAMESPACE, gpu_pod,
    in_phase, plain_deployment, pod_state, synced_pod,
)

# vCluster's exported server when the control plane has no endpoint (vcluster.access.exposure none).
UNEXPOSED_SERVER = re.compile(r"https://(localhost|127\.0\.0\.1):8443")
RULE_MESSAGE = re.compile(r"\[[a-z-]+\]")
OWN_QUEUE_RULE = "[own-queue]"


class StepFailed(Exception):
    """A step failed: the team's run ends there, its report naming the step."""


class Skipped(StepFailed):
    """Nothing to test from here: the team's vCluster has no endpoint."""


@dataclass
class Step:
    name: str
    object: str
    ok: bool
    detail: str
    skipped: bool = False


@dataclass
class TeamTarget:
    team: str
    namespace: str  # the team's host namespace
    queue: str
    vcluster: str
    kubeconfig: str
    # A kubeconfig the operator gave (e.g. from `vcluster connect`, whose port-forward serves localhost).
    given: bool = False
    # The team's isolation as the stack exports it (config/gpu_asks.py); none from a site deployed before: shared.
    isolation: Mapping = field(default_factory=dict)


@dataclass
class Report:
    team: str
    steps: list[Step] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(step.ok for step in self.steps)

    @property
    def outcome(self) -> str:
        if any(step.skipped for step in self.steps):
            return "SKIPPED"
        return "passed" if self.ok else "FAILED"

    def table(self) -> list[str]:
        lines = [f"### {self.team}: {self.outcome}", "", "| Step | Object | Result | Detail |",
                 "| --- | --- | --- | --- |"]
        lines += [f"| {s.name} | `{s.object}` | {'skipped' if s.skipped else 'ok' if s.ok else '**FAILED**'} | "
                  f"{s.detail.replace('|', '/')} |" for s in self.steps]
        return lines + [""]


@dataclass
class Settings:
    fraction: str = SEED_GPU_FRACTION
    timeout: float = 300
    refusal_timeout: float = 60
    poll: float = 2
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # The site's image mirrors (its imageMirrors output): the smoke pods' images come from them as the site's do.
    mirrors: Mirrors = Mirrors()


class TeamSmoke:
    def __init__(self, target: TeamTarget, other_queue: str, host: Kube, settings: Settings,
                 connect: Callable[..., Kube] = Kube, host_kubeconfig: str = ""):
        self.target, self.other_queue, self.host, self.settings = target, other_queue, host, settings
        self.connect, self.host_kubeconfig = connect, host_kubeconfig
        self.report = Report(target.team)
        self.namespace = f"gpu-tenancy-smoke-{secrets.token_hex(3)}"
        # The host's tier policy refuses a GPU asked for in another tier's terms.
        self.ask = gpu_ask(target.isolation, settings.fraction)

    def _record(self, name: str, obj: str, ok: bool, detail: str) -> None:
        self.report.steps.append(Step(name, obj, ok, detail))
        if not ok:
            raise StepFailed(f"{self.target.team}: step {name} failed on {obj}: {detail}")

    def run(self) -> Report:
        vcluster: Optional[Kube] = None
        try:
            vcluster = self._connect()
            self._create(vcluster, "namespace", f"namespace/{self.namespace}",
                         lambda: vcluster.create_namespace(self.namespace, {SMOKE_LABEL: "true"}))
            self._record("namespace", f"namespace/{self.namespace}", True, "created in the vCluster")
            self._gpu_pod(vcluster)
            self._deployment(vcluster)
            self._refusal(vcluster)
            self._host_refusal()
        except Skipped:
            self._host_refusal_alone()
        except StepFailed:
            pass
        finally:
            if vcluster is not None:
                self._cleanup(vcluster)
        return self.report

    def _host_refusal_alone(self) -> None:
        try:
            self._host_refusal()
        except StepFailed:
            pass

    def _connect(self) -> Kube:
        obj = f"vcluster/{self.target.vcluster}"
        try:
            vcluster = self.connect(self.target.kubeconfig)
        except ApiError as error:
            self._record("connect", obj, False, str(error))
        if vcluster.server and UNEXPOSED_SERVER.fullmatch(vcluster.server.rstrip("/")) and not self.target.given:
            # A site without endpoints (today's default) is not a failed site: the table says what was not tested.
            self.report.steps.append(Step(
                "connect", obj, True, f"skipped: the kubeconfig points at {vcluster.server}, reachable only through a "
                "port-forward. Set vcluster.access.exposure, or pass --vcluster-kubeconfig "
                f"{self.target.team}=FILE from `vcluster connect`", skipped=True))
            raise Skipped()
        self._record("connect", obj, True, f"as the team, at {vcluster.server}")
        return vcluster

    def _create(self, vcluster: Kube, step: str, obj: str, create: Callable[[], dict]) -> None:
        try:
            create()
        except ApiError as error:
            self._record(step, obj, False, f"refused: {error}")

    def _gpu_pod(self, vcluster: Kube) -> None:
        name = "smoke-gpu"
        obj = f"pod/{self.namespace}/{name}"
        self._create(vcluster, "gpu-pod", obj, lambda: vcluster.create_pod(
            self.namespace, gpu_pod(name, self.namespace, self.target.queue, self.ask, self.settings.mirrors)))
        self._record("gpu-pod", obj, True, f"created with {self.ask.describe()}")
        host_pod = self._host_pod(vcluster, name, "host", obj)
        self._check_placement(host_pod, obj, ask=self.ask)
        self._wait_phase(name, obj, ("Succeeded",), "nvidia-smi exited 0")

    def _deployment(self, vcluster: Kube) -> None:
        name = "smoke-plain"
        obj = f"deployment/{self.namespace}/{name}"
        self._create(vcluster, "deployment", obj,
                     lambda: vcluster.create_deployment(self.namespace, plain_deployment(name, self.namespace, self.settings.mirrors)))
        pod_name = self._wait(lambda: next((p["metadata"]["name"] for p in vcluster.list_pods(
            self.namespace, f"{SMOKE_LABEL}=deployment")), None), "deployment", obj,
            "the Deployment created no pod")
        self._record("deployment", obj, True, f"pod {pod_name} created without queue label or scheduler name")
        pod_obj = f"pod/{self.namespace}/{pod_name}"
        host_pod = self._host_pod(vcluster, pod_name, "host", pod_obj)
        self._check_placement(host_pod, pod_obj, ask=None)
        self._wait_phase(pod_name, pod_obj, ("Running",), "running")

    def _refusal(self, vcluster: Kube) -> None:
        name = "smoke-other-queue"
        obj = f"pod/{self.namespace}/{name}"
        try:
            vcluster.create_pod(self.namespace, gpu_pod(name, self.namespace, self.other_queue, self.ask,
                                                        self.settings.mirrors))
        except ApiError as error:
            ok = bool(RULE_MESSAGE.search(error.message))
            self._record("refusal", obj, ok, f"refused in the vCluster: {error.message}" if ok else
                         f"refused without a [rule] message: {error}")
            return
        # Accepted inside: the vCluster's defaults put it in the team's queue, or the host refuses its sync.
        deadline = self.settings.clock() + self.settings.refusal_timeout
        while True:
            host_pod = self._find_host_pod(name)
            if host_pod is not None:
                queue = (host_pod["metadata"].get("labels") or {}).get(QUEUE_LABEL)
                self._record("refusal", obj, queue == self.target.queue,
                             f"the vCluster put it in the team's queue {queue}" if queue == self.target.queue else
                             f"it reached the host in queue {queue}")
                return
            message = next((e.get("message", "") for e in vcluster.pod_events(self.namespace, name)
                            if RULE_MESSAGE.search(e.get("message", ""))), None)
            if message:
                self._record("refusal", obj, True, f"refused on the host: {message}")
                return
            if self.settings.clock() >= deadline:
                self._record("refusal", obj, False, f"neither refused with a [rule] message nor synced after "
                             f"{self.settings.refusal_timeout:g}s")
            self.settings.sleep(self.settings.poll)

    def _host_refusal(self) -> None:
        """The host policy judged without the vCluster, whose admission and events the tenant controls."""
        syncer = syncer_account(self.target.namespace, self.target.vcluster)
        # In the team's tier's terms and with its vCluster's defaults, so that the queue is all the host can refuse.
        virtual = gpu_pod("smoke-host-refusal", self.namespace, self.other_queue, self.ask, self.settings.mirrors)
        pod = synced_pod(virtual, self.target.namespace, self.target.vcluster, self.target.isolation)
        obj = f"pod/{self.target.namespace}/{pod['metadata']['name']}"
        try:
            self.connect(self.host_kubeconfig, impersonate=syncer).create_pod(
                self.target.namespace, pod, dry_run=True)
        except ApiError as error:
            ok = OWN_QUEUE_RULE in error.message
            self._record("host-refusal", obj, ok, f"refused as {syncer}: {error.message}" if ok else
                         f"refused as {syncer} without {OWN_QUEUE_RULE}: {error}")
            return
        self._record("host-refusal", obj, False,
                     f"the host admitted a pod in queue {self.other_queue} from {syncer} (dry run)")

    def _find_host_pod(self, virtual_name: str) -> Optional[dict]:
        selector = f"{MANAGED_BY}={self.target.vcluster},{VIRTUAL_NAMESPACE}={self.namespace}"
        return next((p for p in self.host.list_pods(self.target.namespace, selector)
                     if (p["metadata"].get("annotations") or {}).get(VIRTUAL_NAME) == virtual_name), None)

    def _host_pod(self, vcluster: Kube, virtual_name: str, step: str, obj: str) -> dict:
        def last_warning() -> str:
            events = [e for e in vcluster.pod_events(self.namespace, virtual_name) if e.get("type") == "Warning"]
            return f"; last warning: {events[-1].get('message')}" if events else ""
        return self._wait(lambda: self._find_host_pod(virtual_name), step, obj,
                          f"not synced to host namespace {self.target.namespace}", detail=last_warning)

    def _check_placement(self, host_pod: dict, obj: str, ask: Optional[GpuAsk]) -> None:
        """The host pod is in the team's queue, scheduled by KAI, with the GPU ``ask`` (None: a pod without one)."""
        metadata, spec = host_pod["metadata"], host_pod.get("spec") or {}
        queue = (metadata.get("labels") or {}).get(QUEUE_LABEL)
        scheduler = spec.get("schedulerName")
        problems = [f"queue {queue!r}, expected {self.target.queue!r}" for _ in [0] if queue != self.target.queue]
        problems += [f"scheduler {scheduler!r}, expected {KAI_SCHEDULER!r}" for _ in [0] if scheduler != KAI_SCHEDULER]
        gpu = ""
        if ask is not None and ask.fraction is not None:
            found = (metadata.get("annotations") or {}).get(FRACTION_ANNOTATION)
            if found != ask.fraction:
                problems.append(f"{FRACTION_ANNOTATION} {found!r}, expected {ask.fraction!r}")
            gpu = f", fraction {found}"
        elif ask is not None:
            limits = [((c.get("resources") or {}).get("limits") or {}).get(ask.resource) for c in spec["containers"]]
            if "1" not in limits:
                problems.append(f"{ask.resource} limits {limits}, expected 1")
            gpu = f", {ask.resource} 1"
        detail = f"host pod {self.target.namespace}/{metadata['name']}"
        self._record("host", obj, not problems, "; ".join(problems) + f" ({detail})" if problems else
                     f"{detail}, queue {queue}, {KAI_SCHEDULER}{gpu}")

    def _wait_phase(self, name: str, obj: str, phases: Sequence[str], meaning: str) -> None:
        # The host pod's status: the tenant can write the virtual pod's, not this one.
        pod = self._wait(lambda: in_phase(self._find_host_pod(name), phases, obj), "runs", obj,
                         f"not {' or '.join(phases)}", detail=lambda: pod_state(self._find_host_pod(name)))
        self._record("runs", obj, True, f"{pod['status']['phase']}: {meaning}")

    def _wait(self, probe: Callable[[], object], step: str, obj: str, problem: str,
              detail: Callable[[], str] = lambda: ""):
        deadline = self.settings.clock() + self.settings.timeout
        while True:
            try:
                found = probe()
            except ApiError as error:
                self._record(step, obj, False, str(error))
            if found:
                return found
            if self.settings.clock() >= deadline:
                self._record(step, obj, False, f"{problem} after {self.settings.timeout:g}s{detail()}")
            self.settings.sleep(self.settings.poll)

    def _cleanup(self, vcluster: Kube) -> None:
        obj = f"namespace/{self.namespace}"
        try:
            vcluster.delete_namespace(self.namespace)
            self.report.steps.append(Step("cleanup", obj, True, "deleted with its pods and Deployment"))
        except ApiError as error:
            self.report.steps.append(Step("cleanup", obj, False, f"{error}: delete it by hand in the vCluster"))
