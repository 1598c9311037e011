"""The Pulumi SDK internals the offline runner uses (tools/offline/sdk_internals.py) are still what it expects.

None of them is public API. Each check names the internal and what changed, so whoever bumps
``pulumi`` in requirements.txt knows exactly which adapter in tools/offline/sdk_internals.py to fix.
"""

from __future__ import annotations

import ast
import contextvars
import inspect
import re
from importlib.metadata import version
from pathlib import Path

import pulumi
import pytest
from pulumi.runtime import rpc, settings
from pulumi.output import Unknown
from pulumi.runtime.mocks import MockEngine, MockMonitor, MockResourceArgs, _resolve_callbacks
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import Stack, run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await
from google.protobuf import struct_pb2

from tests.conftest import COMMITTED_STACKS, run, stack_config
from tests.test_deployability_charts import with_observability
from tools.offline import mockrun, sdk_internals
from tools.offline.recording import RecordingMonitor

PINNED = re.search(r"^pulumi==(\S+)$", (Path(__file__).resolve().parent.parent / "requirements.txt").read_text(),
                   re.MULTILINE).group(1)


def _changed(name: str, what: str) -> str:
    return (f"pulumi {version('pulumi')} (pinned {PINNED}) changed the SDK internal {name}: {what}. "
            "Update tools/offline/sdk_internals.py (and this test) before bumping pulumi.")


def _parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_installed_sdk_is_the_pinned_one():
    assert version("pulumi") == PINNED, _changed("(all)", "a different SDK version is installed")


@pytest.mark.parametrize("name, check, what", [
    ("sync_await._sync_await", lambda: len(_parameters(_sync_await)) == 1, "takes one awaitable"),
    ("stack.run_pulumi_func", lambda: _parameters(run_pulumi_func) == ["func"], "takes the program function"),
    ("stack.Stack._finish", lambda: callable(getattr(Stack, "_finish", None)), "seals the root stack's outputs"),
    ("settings.ROOT", lambda: isinstance(settings.ROOT, contextvars.ContextVar), "is the root-resource ContextVar"),
    ("settings.SETTINGS.engine", lambda: hasattr(settings.SETTINGS, "engine"), "holds the engine stub"),
    ("settings.reset_options", lambda: callable(settings.reset_options), "resets the runtime options"),
    ("rpc.deserialize_properties", lambda: "keep_unknowns" in _parameters(rpc.deserialize_properties),
     "accepts keep_unknowns"),
    ("rpc.is_rpc_secret / unwrap_rpc_secret",
     lambda: rpc.is_rpc_secret({rpc._special_sig_key: rpc._special_secret_sig, "value": 1})
     and rpc.unwrap_rpc_secret({rpc._special_sig_key: rpc._special_secret_sig, "value": 1}) == 1,
     "recognise and open the secret envelope"),
    ("rpc._special_sig_key", lambda: isinstance(rpc._special_sig_key, str), "names the envelope key"),
    ("rpc.UNKNOWN", lambda: rpc.UNKNOWN is sdk_internals.UNKNOWN, "is the unknown-value sentinel"),
    ("mocks.MockMonitor", lambda: _parameters(MockMonitor.__init__)[1:2] == ["mocks"]
     and all(hasattr(MockMonitor, method) for method in
             ("RegisterResource", "ReadResource", "RegisterResourceOutputs", "GetDeploymentInfo", "Invoke")),
     "takes the mocks and serves the monitor calls the recorder overrides"),
    ("mocks.MockEngine", lambda: "logger" in _parameters(MockEngine.__init__) and hasattr(MockEngine, "Log"),
     "takes a logger and serves Log"),
    ("mocks.MockMonitor.RegisterResource's parts",
     lambda: _parameters(MockMonitor.make_urn)[1:] == ["parent", "type_", "name"]
     and MockMonitor.ResourceRegistration._fields == ("urn", "id", "state")
     and {"typ", "name", "inputs", "provider", "resource_id", "custom", "transforms"}
     <= set(_parameters(MockResourceArgs.__init__)) and callable(_resolve_callbacks) and callable(_ensure_event_loop),
     "makes a URN, hands the mocks MockResourceArgs and keeps a ResourceRegistration as register_with_mocks does"),
    ("output.Unknown", lambda: isinstance(rpc.deserialize_property(rpc.UNKNOWN, keep_unknowns=True), Unknown),
     "is what an unknown value is read as"),
    ("proto.resource_pb2 resource references",
     lambda: hasattr(resource_pb2, "RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES")
     and hasattr(resource_pb2, "DeploymentInfo"), "still names the resource-references feature"),
])
def test_each_internal_is_still_there(name, check, what):
    assert check(), _changed(name, f"it no longer {what}")


def _sdk_internals_used(source: str) -> list[str]:
    """Names of the Pulumi SDK a module reaches that are not its public API: a submodule of
    ``pulumi.runtime`` (only the names ``pulumi.runtime`` exports are public) or an underscored name.
    ``pulumi.runtime.proto`` is allowed: it holds the generated stubs of the engine's gRPC protocol,
    the contract the CLI itself speaks."""
    public = set(pulumi.runtime.__all__) | {"proto"}
    used = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pulumi":
            if node.module.startswith("pulumi.runtime.") and not node.module.startswith("pulumi.runtime.proto"):
                used.append(node.module)
            elif node.module == "pulumi.runtime":
                used += [f"pulumi.runtime.{alias.name}" for alias in node.names if alias.name not in public]
            used += [f"{node.module}.{alias.name}" for alias in node.names if alias.name.startswith("_")]
        elif isinstance(node, ast.Import):
            used += [alias.name for alias in node.names if alias.name.startswith("pulumi.runtime.")]
        elif isinstance(node, ast.Attribute) and ast.unparse(node.value) == "pulumi.runtime" and node.attr not in public:
            used.append(f"pulumi.runtime.{node.attr}")
    return used


def test_the_guard_sees_each_way_of_reaching_an_internal():
    assert _sdk_internals_used("from pulumi.runtime import config as c\nc.CONFIG.get()") == ["pulumi.runtime.config"]
    assert _sdk_internals_used("from pulumi.runtime.sync_await import _sync_await") == [
        "pulumi.runtime.sync_await", "pulumi.runtime.sync_await._sync_await"]
    assert _sdk_internals_used("import pulumi.runtime.settings") == ["pulumi.runtime.settings"]
    assert _sdk_internals_used("import pulumi\npulumi.runtime.settings.ROOT") == ["pulumi.runtime.settings"]
    assert _sdk_internals_used("import pulumi\npulumi.runtime.get_config_env()\npulumi.runtime.set_mocks") == []


def test_only_the_adapter_reaches_sdk_internals():
    root = Path(__file__).resolve().parent.parent
    fenced = {root / "tools" / "offline" / "sdk_internals.py", Path(__file__).resolve()}
    offenders = {str(path.relative_to(root)): used for path in sorted(root.rglob("*.py"))
                 if ".venv" not in path.parts and "venv" not in path.parts and path not in fenced
                 and (used := _sdk_internals_used(path.read_text()))}
    assert offenders == {}, "reach these through tools/offline/sdk_internals.py (guarded here) or a public API"


def the_sdks_reading_with_nulls(properties: struct_pb2.Struct) -> dict:
    """What sdk_internals.deserialize must give: the SDK's reading with unknowns kept, and a map's nulls put back
    where the request has them, except inside a secret."""
    output = rpc.deserialize_properties(properties, keep_unknowns=True)
    for key, item in properties.items():
        if isinstance(item, (struct_pb2.Struct, struct_pb2.ListValue)) and key in output:
            _restore_nulls(item, output[key])
    return output


def _restore_nulls(value, output) -> None:
    if isinstance(value, struct_pb2.Struct) and isinstance(output, dict) and rpc._special_sig_key not in output:
        for key, item in value.items():
            if item is None:
                output.setdefault(key, None)
            elif key in output:
                _restore_nulls(item, output[key])
    elif isinstance(value, struct_pb2.ListValue) and isinstance(output, list) and len(output) == len(value):
        for item, read in zip(value, output):
            _restore_nulls(item, read)


def same_reading(one, other) -> bool:
    """Equal, with unknowns equal to each other and assets by what they hold (both compare by identity)."""
    if isinstance(one, Unknown) or isinstance(other, Unknown):
        return isinstance(one, Unknown) and isinstance(other, Unknown)
    if isinstance(one, dict) and isinstance(other, dict):
        return one.keys() == other.keys() and all(same_reading(one[key], other[key]) for key in one)
    if isinstance(one, list) and isinstance(other, list):
        return len(one) == len(other) and all(map(same_reading, one, other))
    if isinstance(one, pulumi.Asset):
        return type(one) is type(other) and vars(one) == vars(other)
    return type(one) is type(other) and one == other


class BothWays(RecordingMonitor):
    """Answers each registration the SDK's way and the recorder's, and keeps where the two differ."""

    differences: list[str] = []
    compared = 0

    def RegisterResource(self, request):
        if request.type == "pulumi:pulumi:Stack":
            return super().RegisterResource(request)
        if not same_reading(sdk_internals.deserialize(request.object), the_sdks_reading_with_nulls(request.object)):
            BothWays.differences.append(f"read: {request.type} {request.name}")
        the_sdks = MockMonitor.RegisterResource(self, request)
        the_sdks_state = self.resources[the_sdks.urn].state
        response = super().RegisterResource(request)
        BothWays.compared += 1
        if response != the_sdks or self.resources[response.urn].state != the_sdks_state:
            BothWays.differences.append(f"{request.type} {request.name}")
        return response


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
@pytest.mark.parametrize("observability", ["install", "off"])
def test_the_recorder_answers_each_registration_as_the_sdks_mock_monitor_does(stack, observability, monkeypatch):
    # The recorder reads a request once and hands the mocks that reading without its nulls, and writes a plain answer
    # without the SDK's awaiting (tools/offline/sdk_internals.py register_with_mocks): the mocks must see the same
    # inputs, keep the same state and answer the program the same outputs as through MockMonitor.RegisterResource.
    monkeypatch.setattr(mockrun, "RecordingMonitor", BothWays)
    monkeypatch.setattr(BothWays, "differences", [])
    monkeypatch.setattr(BothWays, "compared", 0)
    program = run(with_observability(stack_config(stack), observability))
    assert BothWays.differences == []
    assert BothWays.compared == len([resource for resource in program.resources if not resource.read]) > 50


SECRET_TOKEN = {rpc._special_sig_key: rpc._special_secret_sig, "value": "t"}


@pytest.mark.parametrize("properties", [
    {"spec": {"kept": 1, "null": None, "unknown": rpc.UNKNOWN, "list": [None, {"a": None}, [None]]}},
    {"spec": {"token": SECRET_TOKEN, "null": None, "nested": {"null": None}}, "other": {"null": None}},
    {"list": [{"null": None}, SECRET_TOKEN], "secret": {rpc._special_sig_key: rpc._special_secret_sig,
                                                        "value": {"null": None, "kept": 1}}, "plain": [{"n": None}]},
    {"asset": pulumi.StringAsset("text"), "deep": {"deeper": {"token": SECRET_TOKEN, "list": [{"null": None}]}},
     "plain": {"null": None}},
])
def test_the_recorders_reading_is_the_sdks_with_a_maps_nulls_kept(properties):
    struct = _sync_await(rpc.serialize_properties(properties, {}))
    read = sdk_internals.deserialize(struct)
    assert same_reading(read, the_sdks_reading_with_nulls(struct))
    assert not same_reading(read, rpc.deserialize_properties(struct, keep_unknowns=True))  # the nulls are the point


def test_what_the_mocks_are_handed_drops_a_maps_nulls_and_unknowns_as_the_sdks_reading_does():
    struct = _sync_await(rpc.serialize_properties({
        "spec": {"kept": 1, "dropped": None, "unknown": rpc.UNKNOWN, "list": [None, rpc.UNKNOWN, {"a": None}]},
        "secret": {rpc._special_sig_key: rpc._special_secret_sig, "value": {"b": None, "c": "x"}},
        "top": None}, {}))
    read_by_the_recorder = sdk_internals.deserialize(struct)
    spec = read_by_the_recorder["spec"]
    assert spec["dropped"] is None and isinstance(spec["unknown"], Unknown)
    assert sdk_internals.as_mocks_read(read_by_the_recorder) == rpc.deserialize_properties(struct)


@pytest.mark.parametrize("state", [
    {"plain": {"a": [1, 2.5, True, None, "x"], "b": {}}, "null": None},
    {"secret": sdk_internals.secret({"token": "t"}), "n": 3},
    {"asset": pulumi.StringAsset("text"), "n": 3},
    {"tuple": (1, 2)},
])
def test_a_mocks_answer_is_sent_back_as_the_sdk_sends_it(state):
    assert sdk_internals.serialize_state(state) == _sync_await(rpc.serialize_properties(state, {}))
