"""Run the Pulumi program offline, through the SDK's mocks, and record what it registers.

No engine, cloud or cluster is involved: ``pulumi.runtime.set_mocks`` stands in for the engine,
``mocks.PlatformMocks`` answers for the providers and ``recording.RecordingMonitor`` keeps what was
registered in a ``recording.ProgramRun``. This module runs ``__main__.py`` with a stack's config, as
the language host would, on event loops it closes afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import pulumi

from config.source import ENCRYPTED_PLACEHOLDER, OFFLINE_PLACEHOLDER
from config.stack_file import PROJECT_DIR, stack_config as read_stack_config
from config.secrets import SECRET_KEYS
from config.vocabulary import PROJECT
from tools.offline import sdk_internals as sdk
from tools.offline.mocks import PlatformMocks
from tools.offline.recording import ProgramRun, RecordingMonitor, WarningCollector

SECRET_PLACEHOLDER = ENCRYPTED_PLACEHOLDER


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
                record: Optional[ProgramRun] = None, secret_placeholders: bool = True,
                decrypted: Optional[dict[str, str]] = None, ends_process: bool = False) -> ProgramRun:
    """Run ``__main__.py`` with the given ``config:`` block (keys ``gpu-tenancy:<name>``).

    Values marked ``{secure: ...}`` (encrypted in a stack file) become secret placeholders; a key holding
    one anywhere in its value is a secret as a whole, as Pulumi marks it. ``decrypted`` gives such keys (by
    full key) the plain text the language host would pass instead, so that a test can follow a value it
    recognises through the run. With ``secret_placeholders`` (an offline plan), a secret key the stack does
    not set gets ``OFFLINE_PLACEHOLDER``, which the program accepts with a warning naming the command that
    sets it; without, the run sees the config exactly as ``pulumi up`` would. Raises what the program
    raises, e.g. ``config.ConfigError``; pass ``record`` to see what was registered before it did.
    The program turns the cyclic collector off; it is turned on again afterwards unless ``ends_process`` (a
    process that ends with the run, as the language host's does, need not pay the collection that walks
    everything the run made).
    """
    run = record if record is not None else ProgramRun()
    config: dict[str, str] = {}
    secret_keys = []
    for key, value in stack_config.items():
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        value, encrypted = _with_placeholders(value)
        if encrypted:
            secret_keys.append(full_key)
            value = (decrypted or {}).get(full_key, value)
        config[full_key] = value if isinstance(value, str) else json.dumps(value)
    if secret_placeholders:
        for name in SECRET_KEYS:
            full_key = f"{PROJECT}:{name}"
            if not config.get(full_key):
                config[full_key] = OFFLINE_PLACEHOLDER
                secret_keys.append(full_key)

    sdk.reset_runtime()
    collecting = gc.isenabled()
    try:
        with _language_host_environment(config, secret_keys):
            _run_main(run, stack, project_dir)
    finally:
        if collecting and not ends_process:
            gc.enable()
    run.resources.sort(key=lambda resource: resource.urn)
    return run


def _with_placeholders(value: Any) -> tuple[Any, bool]:
    """``value`` with each ``{secure: ...}`` in it replaced by ``SECRET_PLACEHOLDER``; whether it held one."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return SECRET_PLACEHOLDER, True
    if isinstance(value, dict):
        items = {name: _with_placeholders(item) for name, item in value.items()}
        return {name: item for name, (item, _) in items.items()}, any(found for _, found in items.values())
    if isinstance(value, list):
        entries = [_with_placeholders(item) for item in value]
        return [item for item, _ in entries], any(found for _, found in entries)
    return value, False


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
    sdk.set_engine(WarningCollector(run))
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
