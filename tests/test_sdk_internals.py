"""The Pulumi SDK internals the offline runner uses (tools/sdk_internals.py) are still what it expects.

None of them is public API. Each check names the internal and what changed, so whoever bumps
``pulumi`` in requirements.txt knows exactly which adapter in tools/sdk_internals.py to fix.
"""

from __future__ import annotations

import contextvars
import inspect
import re
from importlib.metadata import version
from pathlib import Path

import pytest
from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockEngine, MockMonitor
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import Stack, run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from tools import sdk_internals

PINNED = re.search(r"^pulumi==(\S+)$", (Path(__file__).resolve().parent.parent / "requirements.txt").read_text(),
                   re.MULTILINE).group(1)


def _changed(name: str, what: str) -> str:
    return (f"pulumi {version('pulumi')} (pinned {PINNED}) changed the SDK internal {name}: {what}. "
            "Update tools/sdk_internals.py (and this test) before bumping pulumi.")


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


def test_the_runner_reaches_the_sdk_only_through_the_adapter():
    tools = Path(__file__).resolve().parent.parent / "tools"
    private = re.compile(r"from pulumi\.runtime|import pulumi\.runtime|_sync_await|\._finish\(|settings\.ROOT")
    offenders = [path.name for path in tools.glob("*.py")
                 if path.name != "sdk_internals.py" and private.search(path.read_text())]
    assert offenders == []
