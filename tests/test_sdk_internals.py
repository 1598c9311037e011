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
from pulumi.runtime.mocks import MockEngine, MockMonitor
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import Stack, run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from tools.offline import sdk_internals

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
             ("RegisterResource", "ReadResource", "RegisterResourceOutputs", "GetDeploymentInfo")),
     "takes the mocks and serves the monitor calls the recorder overrides"),
    ("mocks.MockEngine", lambda: "logger" in _parameters(MockEngine.__init__) and hasattr(MockEngine, "Log"),
     "takes a logger and serves Log"),
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
