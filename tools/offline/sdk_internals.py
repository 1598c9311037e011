"""Every private part of the Pulumi Python SDK the offline runner relies on, in one place.

The SDK's public mock API (``pulumi.runtime.set_mocks``, ``Mocks``) runs a program but gives no way
to record what it registered, to collect its log messages, to export stack outputs after mocks are
set, or to wait for the program from synchronous code. ``tools/offline/mockrun.py`` does those through the
internals below, and nothing else in the project touches SDK internals.

They are not covered by Pulumi's compatibility promise: ``tests/test_sdk_internals.py`` checks each
one and fails, naming it, when an upgrade of ``pulumi`` (pinned in requirements.txt) changes it.
Whoever bumps ``pulumi`` runs that test first.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockEngine, MockMonitor
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import Stack, run_pulumi_func
from pulumi.runtime.sync_await import _sync_await
from google.protobuf import struct_pb2

__all__ = ["MockEngine", "MockMonitor", "UNKNOWN", "deserialize", "finish_root_stack", "is_secret",
           "new_root_stack", "reset_runtime", "run_to_completion", "secret", "set_engine", "unwrap_secret",
           "wait_for", "without_resource_references"]

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
    """A request's protobuf ``Struct`` as plain Python values, unknowns kept, and nulls inside maps kept
    too: the SDK sends them (a Helm value set to null deletes the chart's default), but its own
    deserializer drops them."""
    output = rpc.deserialize_properties(properties, keep_unknowns=True)
    for key, item in properties.items():
        if isinstance(item, (struct_pb2.Struct, struct_pb2.ListValue)) and key in output:
            _restore_nulls(item, output[key])
    return output


def _restore_nulls(value: Any, output: Any) -> None:
    if isinstance(value, struct_pb2.Struct) and isinstance(output, dict) and rpc._special_sig_key not in output:
        for key, item in value.items():
            if item is None:
                output.setdefault(key, None)
            elif key in output:
                _restore_nulls(item, output[key])
    elif isinstance(value, struct_pb2.ListValue) and isinstance(output, list) and len(output) == len(value):
        for item, deserialized in zip(value, output):
            _restore_nulls(item, deserialized)


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
