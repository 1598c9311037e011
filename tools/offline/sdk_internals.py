"""Every private part of the Pulumi Python SDK the offline runner relies on, in one place.

The SDK's public mock API (``pulumi.runtime.set_mocks``, ``Mocks``) runs a program but gives no way
to record what it registered, to collect its log messages, to export stack outputs after mocks are
set, or to wait for the program from synchronous code. ``tools/offline/mockrun.py`` does those through the
internals below, and nothing else in the project touches SDK internals. The recorder also answers a registration
as ``MockMonitor.RegisterResource`` does, reading the request once for the plan and the mocks and writing a plain
answer without awaiting each value: in a large site's run the SDK's own way took a quarter of the CPU, on work
the engine does in its own process under ``pulumi up``.

They are not covered by Pulumi's compatibility promise: ``tests/test_sdk_internals.py`` checks each
one and fails, naming it, when an upgrade of ``pulumi`` (pinned in requirements.txt) changes it.
Whoever bumps ``pulumi`` runs that test first.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from pulumi.output import Unknown
from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockEngine, MockMonitor, MockResourceArgs, _resolve_callbacks
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import Stack, run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await
from google.protobuf import struct_pb2

__all__ = ["MockEngine", "MockMonitor", "UNKNOWN", "as_mocks_read", "deserialize", "finish_root_stack", "is_secret",
           "new_root_stack", "register_with_mocks", "reset_runtime", "run_to_completion", "secret", "serialize_state",
           "set_engine", "unwrap_secret", "wait_for", "without_resource_references"]

# The value the SDK puts where an output is not known yet (preview).
UNKNOWN = rpc.UNKNOWN


def is_secret(value: Any) -> bool:
    """A value as the SDK serializes a secret (a ``4dabf18193072939515e22adb298388d`` envelope)."""
    return rpc.is_rpc_secret(value)


def secret(value: Any) -> dict:
    """``value`` in the envelope a provider's secret output travels in (what the engine sends for a
    resource's ``additionalSecretOutputs``), for a mock to answer with."""
    return {rpc._special_sig_key: rpc._special_secret_sig, "value": value}


def unwrap_secret(value: Any) -> Any:
    return rpc.unwrap_rpc_secret(value)


def deserialize(properties: Any) -> dict:
    """A request's protobuf ``Struct`` as plain Python values, as the SDK reads it with unknowns kept
    (``rpc.deserialize_properties``), but with a map's nulls kept too: the SDK sends them (a Helm value set to null
    deletes the chart's default), but its own reader drops them. Inside a secret the SDK's reading stands."""
    _ensure_event_loop()  # the SDK's reading of a resource reference needs one on this (worker) thread
    if rpc._special_sig_key in properties:
        return rpc.deserialize_properties(properties, keep_unknowns=True)
    return {key: _read(item) for key, item in properties.items()}  # a secret property stays that property's


def _read_map(struct: struct_pb2.Struct) -> Any:
    if rpc._special_sig_key in struct:  # a secret, asset, archive, resource or output value: the SDK's reading
        return rpc.deserialize_properties(struct, keep_unknowns=True)
    output = {key: _read(item) for key, item in struct.items()}
    if any(rpc.is_rpc_secret(item) for item in output.values()):
        return _lifted_secret({key: rpc.unwrap_rpc_secret(item) for key, item in output.items()})
    return output


def _read(value: Any) -> Any:
    if isinstance(value, struct_pb2.Struct):
        return _read_map(value)
    if isinstance(value, struct_pb2.ListValue):
        items = [_read(item) for item in value]
        if any(rpc.is_rpc_secret(item) for item in items):
            return _lifted_secret([rpc.unwrap_rpc_secret(item) for item in items])
        return items
    if value == rpc.UNKNOWN:
        return Unknown()
    return value


def _lifted_secret(value: Any) -> dict:
    """A map or list holding a secret, as the SDK reads it: one secret of the whole, with no nulls in its maps."""
    return rpc.wrap_rpc_secret(_without_nulls(value))


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict) and rpc._special_sig_key not in value:
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def as_mocks_read(inputs: Any) -> Any:
    """What ``deserialize`` gave, as the SDK's mock monitor reads the same request (and hands its ``Mocks``): a
    map's null entries dropped, unknowns none (null) outside a dry run."""
    if isinstance(inputs, dict):
        return {key: as_mocks_read(item) for key, item in inputs.items()
                if item is not None and not isinstance(item, Unknown)}
    if isinstance(inputs, list):
        return [None if isinstance(item, Unknown) else as_mocks_read(item) for item in inputs]
    return inputs


_PLAIN_LEAVES = (str, bool, int, float, type(None))


def _plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(type(key) is str and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    return type(value) in _PLAIN_LEAVES


def serialize_state(state: dict) -> struct_pb2.Struct:
    """A mock's answer as the SDK's mock monitor sends it back (``rpc.serialize_properties``: top-level nulls left
    out); a plain answer (maps, lists, text, numbers, booleans) without the SDK's awaiting of every value."""
    if not _plain(state):
        return _sync_await(rpc.serialize_properties(state, {}))
    struct = struct_pb2.Struct()
    struct.update({key: item for key, item in state.items() if item is not None})
    return struct


def register_with_mocks(monitor: MockMonitor, request: Any, inputs: dict) -> Any:
    """``MockMonitor.RegisterResource`` for a request whose properties are already read (``as_mocks_read``)."""
    urn = monitor.make_urn(request.parent, request.type, request.name)
    _ensure_event_loop()
    resource_id, state = monitor.mocks.new_resource(MockResourceArgs(
        typ=request.type, name=request.name, inputs=inputs, provider=request.provider,
        resource_id=request.importId, custom=request.custom or False,
        transforms=_resolve_callbacks(request.transforms)))
    monitor.resources[urn] = MockMonitor.ResourceRegistration(urn, resource_id, state)
    return resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id, object=serialize_state(state))


def without_resource_references(info: Any) -> Any:
    """The monitor's deployment info without resource-reference support, so references travel as URNs."""
    features = [feature for feature in info.supportedFeatures
                if feature != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES]
    return resource_pb2.DeploymentInfo(supportedFeatures=features)


def reset_runtime() -> None:
    """Forget the options (monitor, engine, stack) a previous run left in the SDK's globals."""
    settings.reset_options()


def set_engine(engine: MockEngine) -> None:
    """Route the program's log calls to ``engine`` (``set_mocks`` installs its own silent one)."""
    settings.SETTINGS.engine = engine


def new_root_stack() -> Stack:
    """A fresh root stack: the one ``set_mocks`` leaves is already sealed, so exports would be lost."""
    settings.ROOT.set(None)
    return Stack()


def finish_root_stack(root: Stack) -> None:
    """Seal the root stack's outputs, as the engine's language host does after the program."""
    root._finish()


def run_to_completion(program: Callable[[], None]) -> None:
    """Run ``program`` as the root stack's body and wait, from synchronous code, until every output settles."""
    _sync_await(run_pulumi_func(program))


def wait_for(awaitable: Awaitable[Any]) -> Any:
    """The result of an SDK awaitable (an ``Output`` future) from synchronous code."""
    return _sync_await(awaitable)
