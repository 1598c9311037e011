"""Where raw config comes from under a real (or mocked) Pulumi run."""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from config.errors import ConfigError, ConfigIssue
from config.load import PROJECT, SECRET_KEYS


def raw_stack_config() -> tuple[dict[str, Any], set[str]]:
    """All ``gpu-tenancy:*`` values except secrets (parsed from JSON where structured), and the
    names of the secret keys that are set. Every key is read, so unknown ones can be reported.

    A secret key set in plain text is refused: it would sit unencrypted in the stack file.
    """
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
    secrets_set = set()
    plaintext = []
    for name in SECRET_KEYS:
        # Pulumi.yaml declares secrets with an empty default: empty means "not set".
        if name in names and runtime_config.get_config(prefix + name):
            secrets_set.add(name)
            if not runtime_config.is_config_secret(prefix + name):
                plaintext.append(ConfigIssue(name, "<plain text>", "is set without encryption",
                                             f"run: pulumi config set --secret {prefix}{name} ..."))
    if plaintext:
        raise ConfigError(plaintext)
    return raw, secrets_set
