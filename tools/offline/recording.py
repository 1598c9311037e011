"""What an offline run registered: the recording monitor and the records it keeps.

The recording monitor keeps, per resource, what a reviewer needs: type, name, parent, provider,
dependencies, options and inputs, with every secret replaced by ``[secret]``; the stack's and the
components' outputs; and the warnings and notes the program logged.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import pulumi

from tools.offline import sdk_internals as sdk

REDACTED = "[secret]"
UNKNOWN = "[unknown]"


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
    # CPU seconds the mocks spent answering the program: under `pulumi up` the engine's and the providers' work, done
    # in their own processes.
    engine_seconds: float = 0.0

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
        self._engine_lock = threading.Lock()

    @contextlib.contextmanager
    def _engine_work(self) -> Iterator[None]:
        """Count the CPU time of an answer (on the SDK's worker thread that asked) as the engine's."""
        started = time.thread_time()
        try:
            yield
        finally:
            spent = time.thread_time() - started
            with self._engine_lock:
                self.run.engine_seconds += spent

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
        with self._engine_work():
            if request.type == "pulumi:pulumi:Stack":
                return super().RegisterResource(request)
            # Read once: what the plan records (nulls and unknowns kept), and from it what the mocks are handed.
            inputs = sdk.deserialize(request.object)
            response = sdk.register_with_mocks(self, request, sdk.as_mocks_read(inputs))
            self._record(request, response.urn, read=False, inputs=inputs)
            return response

    def ReadResource(self, request):
        with self._engine_work():
            response = super().ReadResource(request)
            inputs = {"id": request.id, **sdk.deserialize(request.properties)}
            self._record(request, response.urn, read=True, inputs=inputs)
            return response

    def Invoke(self, request):
        with self._engine_work():
            return super().Invoke(request)

    def RegisterResourceOutputs(self, request):
        with self._engine_work():
            return self._register_outputs(request)

    def _register_outputs(self, request):
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


class WarningCollector(sdk.MockEngine):
    """Keeps the warnings and notes the program logs, as the engine would show them."""

    def __init__(self, run: ProgramRun):
        super().__init__(logger=None)
        self.run = run

    def Log(self, request):
        if request.severity == 2:  # LogSeverity.WARNING
            self.run.warnings.append(request.message)
        elif request.severity == 1:  # LogSeverity.INFO
            self.run.notes.append(request.message)
