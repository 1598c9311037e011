"""Run the Pulumi program offline, through the SDK's mocks, and record what it registers.

No engine, cloud or cluster is involved: ``pulumi.runtime.set_mocks`` stands in for the engine,
and ``PlatformMocks`` answers for the providers with the few outputs the program reads back
(an EKS kubeconfig, the MicroK8s kubeconfig printed by a command, a tenant's ``vc-*`` Secret).
The recording monitor keeps, per resource, what a reviewer needs: type, name, parent, provider,
dependencies, options and inputs, with every secret replaced by ``[secret]``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import runpy
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import pulumi
import yaml

from config.source import OFFLINE_PLACEHOLDER
from config.stack_file import PROJECT_DIR, stack_config as read_stack_config
from config.secrets import SECRET_KEYS
from config.vocabulary import COMMANDS, EKS_CLUSTER, PROJECT, RELEASE
from tools.offline import sdk_internals as sdk

REDACTED = "[secret]"
UNKNOWN = "[unknown]"
SECRET_PLACEHOLDER = "offline-plan-placeholder"
# The EBS CSI add-on build the AWS lookup answers in offline runs (a made-up build of the real form).
MOCK_ADDON_VERSION = "v1.0.0-eksbuild.1"
# The host DNS Service's IP in offline runs (a kubeadm cluster's usual address).
MOCK_CLUSTER_DNS = "10.96.0.10"
RANDOM_PASSWORD = "random:index/randomPassword:RandomPassword"
GRAFANA_ORGANIZATION = "grafana:oss/organization:Organization"


def fake_kubeconfig(cluster: str, server: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster,
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": "ZmFrZQ=="}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": "admin"}}],
        "users": [{"name": "admin", "user": {"token": "offline-plan-token"}}],
    }, sort_keys=False)


class PlatformMocks(pulumi.runtime.Mocks):
    """Deterministic provider answers: ids derive from names, never from time or randomness."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        if args.typ == EKS_CLUSTER:
            kubeconfig = yaml.safe_load(fake_kubeconfig(args.name, "https://eks.offline.invalid"))
            issuer = f"https://oidc.eks.offline.invalid/id/{args.name}"
            state.update(kubeconfigJson=json.dumps(kubeconfig), kubeconfig=kubeconfig, oidcIssuer=issuer,
                         oidcProviderArn=f"arn:aws:iam::000000000000:oidc-provider/{issuer.removeprefix('https://')}")
        elif args.typ in COMMANDS:
            state["stdout"] = fake_kubeconfig("microk8s", "https://10.0.0.10:16443") \
                if args.name.endswith("read-kubeconfig") else ""
            state["stderr"] = ""
        elif args.typ == "kubernetes:core/v1:Secret" and args.resource_id:
            namespace, name = str(args.resource_id).split("/", 1)
            config = fake_kubeconfig(name, "https://localhost:8443")
            state = {"metadata": {"name": name, "namespace": namespace},
                     "data": {"config": base64.b64encode(config.encode()).decode()}}
        elif args.typ == "kubernetes:core/v1:Service" and args.resource_id:
            namespace, name = str(args.resource_id).split("/", 1)
            state = {"metadata": {"name": name, "namespace": namespace},
                     "spec": {"type": "ClusterIP", "clusterIP": MOCK_CLUSTER_DNS}}
        elif args.typ == RELEASE:
            state["status"] = {"name": state.get("name", args.name), "namespace": state.get("namespace"),
                               "status": "deployed", "version": state.get("version")}
        elif args.typ == RANDOM_PASSWORD:
            # pulumi-random marks result and bcryptHash secret; the engine would encrypt them, so the mock does too.
            state["result"] = sdk.secret(f"offline-password-{args.name}")
            state["bcryptHash"] = sdk.secret(f"offline-bcrypt-{args.name}")
        elif args.typ == GRAFANA_ORGANIZATION:
            # Grafana numbers organizations itself (the default one is 1); here a number derived from the name.
            state["orgId"] = 2 + zlib.crc32(args.name.encode()) % 10000
        elif args.typ.startswith("aws:"):
            state.setdefault("arn", f"arn:aws:offline:::{args.name}")
            state.setdefault("name", args.name)
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {"names": ["zone-a", "zone-b", "zone-c", "zone-d", "zone-e", "zone-f"],
                    "zoneIds": ["z1", "z2", "z3", "z4", "z5", "z6"]}
        if args.token == "aws:eks/getAddonVersion:getAddonVersion":
            return {"addonName": args.args.get("addonName"), "kubernetesVersion": args.args.get("kubernetesVersion"),
                    "mostRecent": args.args.get("mostRecent"), "version": MOCK_ADDON_VERSION,
                    "id": str(args.args.get("addonName")), "region": "offline"}
        return {}


@dataclass
class RecordedResource:
    urn: str
    type: str
    name: str
    custom: bool
    parent: Optional[str]
    provider: Optional[str]
    dependencies: list[str]
    options: dict[str, Any]
    inputs: Any
    read: bool = False
    # Unredacted inputs, for assertions in tests only; never serialized.
    raw_inputs: Any = field(default=None, repr=False)

    def to_json(self) -> dict:
        return {"urn": self.urn, "type": self.type, "name": self.name, "custom": self.custom,
                "parent": self.parent, "provider": self.provider, "dependencies": self.dependencies,
                "options": self.options, "read": self.read, "inputs": self.inputs}


@dataclass
class ProgramRun:
    resources: list[RecordedResource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # What each component registered as its outputs (URN -> outputs, secrets redacted).
    component_outputs: dict[str, Any] = field(default_factory=dict)
    # The program's module globals (components, outputs), for tests that inspect live objects.
    program_globals: dict[str, Any] = field(default_factory=dict, repr=False)

    def of_type(self, typ: str) -> list[RecordedResource]:
        return [resource for resource in self.resources if resource.type == typ]

    def named(self, name: str) -> RecordedResource:
        matches = [resource for resource in self.resources if resource.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]

    def by_urn(self, urn: str) -> RecordedResource:
        return next(resource for resource in self.resources if resource.urn == urn)


def integral_numbers(value: Any) -> Any:
    """The engine's wire format has only doubles: turn 100.0 back into the 100 the program wrote."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: integral_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [integral_numbers(item) for item in value]
    return value


def redact(value: Any) -> tuple[Any, bool]:
    """Replace secrets (as the SDK serializes them) by a marker; say whether any was found."""
    if sdk.is_secret(value):
        return REDACTED, True
    if isinstance(value, dict):
        found = False
        result = {}
        for key, item in value.items():
            result[key], secret = redact(item)
            found = found or secret
        return result, found
    if isinstance(value, list):
        items = [redact(item) for item in value]
        return [item for item, _ in items], any(secret for _, secret in items)
    if value is sdk.UNKNOWN:
        return UNKNOWN, False
    return value, False



class RecordingMonitor(sdk.MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks, run: ProgramRun):
        super().__init__(mocks)
        self.run = run

    def _record(self, request, response_urn: str, *, read: bool, inputs: Any) -> None:
        redacted, _ = redact(inputs)
        options: dict[str, Any] = {}
        if not read:
            if request.protect:
                options["protect"] = True
            if request.additionalSecretOutputs:
                options["additionalSecretOutputs"] = sorted(request.additionalSecretOutputs)
            timeouts = request.customTimeouts
            if timeouts and (timeouts.create or timeouts.update or timeouts.delete):
                options["customTimeouts"] = {k: v for k, v in (("create", timeouts.create),
                                                              ("update", timeouts.update),
                                                              ("delete", timeouts.delete)) if v}
            if request.deleteBeforeReplace:
                options["deleteBeforeReplace"] = True
            if request.replaceOnChanges:
                options["replaceOnChanges"] = sorted(request.replaceOnChanges)
            if request.ignoreChanges:
                options["ignoreChanges"] = sorted(request.ignoreChanges)
            if request.retainOnDelete:
                options["retainOnDelete"] = True
        self.run.resources.append(RecordedResource(
            urn=response_urn,
            type=request.type,
            name=request.name,
            custom=read or bool(request.custom),
            parent=request.parent or None,
            provider=_provider_urn(request.provider),
            dependencies=sorted(set(getattr(request, "dependencies", []) or [])),
            options=options,
            inputs=redacted,
            read=read,
            raw_inputs=_unwrap_secrets(inputs),
        ))

    def GetDeploymentInfo(self, request):
        # Resource references passed as inputs (eks.Cluster -> ManagedNodeGroup) would be
        # rehydrated on the monitor's worker thread, on another event loop; as plain URNs they
        # also read better in a plan.
        return sdk.without_resource_references(super().GetDeploymentInfo(request))

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            inputs = sdk.deserialize(request.object)
            self._record(request, response.urn, read=False, inputs=inputs)
        return response

    def ReadResource(self, request):
        response = super().ReadResource(request)
        inputs = {"id": request.id, **sdk.deserialize(request.properties)}
        self._record(request, response.urn, read=True, inputs=inputs)
        return response

    def RegisterResourceOutputs(self, request):
        outputs = sdk.deserialize(request.outputs)
        if request.urn.split("::")[2] == "pulumi:pulumi:Stack":
            for key, value in outputs.items():
                self.run.outputs[key], secret = redact(value)
                if secret:
                    self.run.secret_outputs.add(key)
        elif outputs:
            self.run.component_outputs[request.urn], _ = redact(outputs)
        return super().RegisterResourceOutputs(request)


def _unwrap_secrets(value: Any) -> Any:
    if sdk.is_secret(value):
        return _unwrap_secrets(sdk.unwrap_secret(value))
    if isinstance(value, dict):
        return {key: _unwrap_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(item) for item in value]
    return value


def _provider_urn(reference: str) -> Optional[str]:
    """Provider references are ``<urn>::<id>``; keep the URN."""
    if not reference:
        return None
    return reference.rsplit("::", 1)[0]


class _WarningCollector(sdk.MockEngine):
    def __init__(self, run: ProgramRun):
        super().__init__(logger=None)
        self.run = run

    def Log(self, request):
        if request.severity == 2:  # LogSeverity.WARNING
            self.run.warnings.append(request.message)
        elif request.severity == 1:  # LogSeverity.INFO
            self.run.notes.append(request.message)


class _TrackingLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """The default policy, remembering every loop it creates (the SDK's mocks make one per thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[asyncio.AbstractEventLoop] = []

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        self.loops.append(loop)
        return loop


def _shut_down(loop: asyncio.AbstractEventLoop) -> None:
    if loop.is_closed() or loop.is_running():
        return
    try:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


@contextlib.contextmanager
def owned_event_loops() -> Iterator[None]:
    """Run the program on event loops the caller (a CLI) owns, and close them all afterwards.

    The SDK runs the program on the main thread's loop and answers mock calls from worker
    threads that each create a loop of their own; none is ever closed, so the interpreter
    reports "unclosed event loop" / "Exception ignored in BaseEventLoop.__del__" at exit. The
    previous policy (and with it any loop the caller had) is restored afterwards.
    """
    previous = asyncio.get_event_loop_policy()
    policy = _TrackingLoopPolicy()
    asyncio.set_event_loop_policy(policy)
    try:
        yield
    finally:
        try:
            for loop in policy.loops:  # the main thread's loop first: it joins the worker threads
                _shut_down(loop)
        finally:
            asyncio.set_event_loop_policy(previous)


def load_stack_file(stack: str, project_dir: Path = PROJECT_DIR) -> dict[str, Any]:
    """The ``config:`` block of ``Pulumi.<stack>.yaml``, read as the Pulumi CLI reads it
    (``config.stack_file``: raises ``StackFileError`` or ``ConfigError``)."""
    return read_stack_config(project_dir, stack)


def run_program(stack_config: dict[str, Any], *, stack: str = "dev", project_dir: Path = PROJECT_DIR,
                record: Optional[ProgramRun] = None, secret_placeholders: bool = True) -> ProgramRun:
    """Run ``__main__.py`` with the given ``config:`` block (keys ``gpu-tenancy:<name>``).

    Values marked ``{secure: ...}`` (encrypted in a stack file) become secret placeholders. With
    ``secret_placeholders`` (an offline plan), a secret key the stack does not set gets
    ``OFFLINE_PLACEHOLDER``, which the program accepts with a warning naming the command that sets
    it; without, the run sees the config exactly as ``pulumi up`` would. Raises what the program
    raises, e.g. ``config.ConfigError``; pass ``record`` to see what was registered before it did.
    """
    run = record if record is not None else ProgramRun()
    config: dict[str, str] = {}
    secret_keys = []
    for key, value in stack_config.items():
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(full_key)
            value = SECRET_PLACEHOLDER
        config[full_key] = value if isinstance(value, str) else json.dumps(value)
    if secret_placeholders:
        for name in SECRET_KEYS:
            full_key = f"{PROJECT}:{name}"
            if not config.get(full_key):
                config[full_key] = OFFLINE_PLACEHOLDER
                secret_keys.append(full_key)

    sdk.reset_runtime()
    with _language_host_environment(config, secret_keys):
        _run_main(run, stack, project_dir)
    run.resources.sort(key=lambda resource: resource.urn)
    return run


@contextlib.contextmanager
def _language_host_environment(config: dict[str, str], secret_keys: list[str]) -> Iterator[None]:
    """The config as Pulumi's Python language host passes it (PULUMI_CONFIG and
    PULUMI_CONFIG_SECRET_KEYS), loaded the way its exec script loads it, for the length of one run."""
    names = ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS")
    saved = {name: os.environ.get(name) for name in names}
    os.environ["PULUMI_CONFIG"] = json.dumps(config)
    os.environ["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(secret_keys)
    try:
        pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run_main(run: ProgramRun, stack: str, project_dir: Path) -> None:
    monitor = RecordingMonitor(PlatformMocks(), run)
    pulumi.runtime.set_mocks(PlatformMocks(), project=PROJECT, stack=stack, preview=False, monitor=monitor)
    sdk.set_engine(_WarningCollector(run))
    if str(project_dir) not in sys.path:
        sys.path.insert(0, str(project_dir))
    main = str(project_dir / "__main__.py")

    root = sdk.new_root_stack()

    def program():
        try:
            run.program_globals.update(runpy.run_path(main, run_name="__main__"))
        finally:
            sdk.finish_root_stack(root)

    sdk.run_to_completion(program)
