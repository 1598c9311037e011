"""Where raw config comes from under a real (or mocked) Pulumi run."""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from config.load import PROJECT, SECRET_KEYS


def raw_stack_config() -> tuple[dict[str, Any], set[str]]:
    """All ``gpu-tenancy:*`` values except secrets (parsed from JSON where structured), and the
    names of the secret keys that are set. Every key is read, so unknown ones can be reported."""
    prefix = f"{PROJECT}:"
    names = {key[len(prefix):] for key in {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
             if key.startswith(prefix)}
    stack_config = pulumi.Config(PROJECT)
    raw: dict[str, Any] = {}
    for name in sorted(names - set(SECRET_KEYS)):
        text = stack_config.get(name)
        try:
            raw[name] = json.loads(text) if text is not None else None
        except json.JSONDecodeError:
            raw[name] = text
    return raw, {name for name in SECRET_KEYS if name in names}
