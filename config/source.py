"""Where raw config comes from under a real (or mocked) Pulumi run."""

from __future__ import annotations

import json
from typing import Any

import pulumi

from config.errors import ConfigError, ConfigIssue
from config.load import namespace_issues
from config.model import Platform
from config.secrets import SECRET_KEYS, encrypted_key_issues
from config.team_alerting import SECRET as TEAM_ADDRESSES, team_addresses
from config.vocabulary import PROJECT, PROJECT_PREFIX, project_config

# The value tools.offline.mockrun gives a secret key the stack does not set, so that an offline plan of a
# site whose secrets are not set yet can run. A real `pulumi up` never sees it: there an unset
# secret the site needs is a config error.
OFFLINE_PLACEHOLDER = "offline-plan-placeholder-for-an-unset-secret"
# The value tools.offline.mockrun gives a secret the stack file holds encrypted (an offline run cannot decrypt
# it): a secret whose content the program judges (teamAlertReceivers) is taken on trust there.
ENCRYPTED_PLACEHOLDER = "offline-plan-placeholder"


def raw_stack_config() -> tuple[dict[str, Any], set[str], set[str]]:
    """All ``gpu-tenancy:*`` values except secrets (parsed from JSON where structured), the
    names of the secret keys that are set, and those that only hold the offline placeholder.
    Every key is read, so unknown ones (and unknown namespaces) can be reported.

    A secret key set in plain text is refused: it would sit unencrypted in the stack file. So is a value
    set with ``--secret`` under any other key, which the program would read as plain config.
    """
    # The language host hands the program its config as PULUMI_CONFIG (tools.offline.mockrun does the same),
    # so the public reader sees every key, the unknown ones included.
    keys = pulumi.runtime.get_config_env()
    misspelt = namespace_issues(keys)
    if misspelt:
        raise ConfigError(misspelt)
    names = set(project_config(keys))
    stack_config = pulumi.Config(PROJECT)
    encrypted = {name for name in names if pulumi.runtime.is_config_secret(PROJECT_PREFIX + name)}
    raw: dict[str, Any] = {}
    for name in sorted(names - set(SECRET_KEYS) - encrypted):
        text = stack_config.get(name)
        try:
            raw[name] = json.loads(text) if text is not None else None
        except json.JSONDecodeError:
            raw[name] = text
    secrets_set, placeholders = set(), set()
    plaintext = []
    for name in SECRET_KEYS:
        value = pulumi.runtime.get_config(PROJECT_PREFIX + name) if name in names else None
        # Pulumi.yaml declares secrets with an empty default: empty means "not set".
        if value == OFFLINE_PLACEHOLDER:
            placeholders.add(name)
        elif value:
            secrets_set.add(name)
            if name not in encrypted:
                plaintext.append(ConfigIssue(name, "<plain text>", "is set without encryption",
                                             f"run: pulumi config set --secret {PROJECT_PREFIX}{name} ..."))
    refused = encrypted_key_issues(encrypted) + plaintext
    if refused:
        raise ConfigError(refused)
    return raw, secrets_set, placeholders


def team_alert_addresses(platform: Platform) -> dict[str, pulumi.Output[str]]:
    """Each team receiver's address from the secret ``teamAlertReceivers``, as a Pulumi secret; its content judged
    first (config/team_alerting.py: a ConfigError naming the team, never the value). In an offline run that cannot
    decrypt it, or of a site that has not set it yet, a placeholder stands in for every team's."""
    receiving = [team.name for team in platform.teams if team.alerting.delivers]
    if platform.observability.prometheus != "install" or not receiving:
        return {}
    text = pulumi.runtime.get_config(PROJECT_PREFIX + TEAM_ADDRESSES) or ""
    if text in (OFFLINE_PLACEHOLDER, ENCRYPTED_PLACEHOLDER):
        found = {name: text for name in receiving}
    else:
        found = team_addresses(text, platform.teams)
    return {name: pulumi.Output.secret(address) for name, address in found.items()}
