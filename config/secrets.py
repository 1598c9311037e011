"""The secret keys of the stack config, and which of them a site still has to set.

Secrets are set with ``pulumi config set --secret``; their values never reach the loader, which
only learns which of them are set.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable, Optional

from config.errors import MISSING, ConfigIssue
from config.reader import Reader
from config.vocabulary import PROJECT, PROJECT_PREFIX


@dataclass(frozen=True)
class Secret:
    name: str
    # Where its value usually comes from, for the command that sets it.
    source: str
    description: str


SECRETS = (
    Secret("sshPrivateKey", "~/.ssh/id_ed25519",
           "SSH private key for `cluster.microk8s.host`. Required when `host` is set."),
    Secret("kubeconfig", "path/to/kubeconfig",
           "Kubeconfig of the existing cluster. Required when `cluster.kind` is `kubeconfig`."),
    Secret("grafanaClientSecret", "grafana-client-secret.txt",
           "Secret of Grafana's OAuth client (`observability.grafanaLogin.clientId`), if that client has one."),
    Secret("alertReceiver", "alert-receiver.txt",
           "Where Alertmanager sends alerts (`observability.alerting.receiver`): the Slack incoming-webhook URL, "
           "the webhook URL, or the PagerDuty routing key. Required when a receiver is set."),
    Secret("alertHeartbeat", "alert-heartbeat.txt",
           "URL of the dead man's switch Alertmanager posts its heartbeat to (`observability.alerting.heartbeat`). "
           "Required when the heartbeat is on."),
    Secret("teamAlertReceivers", "team-alert-receivers.yaml",
           "Where Alertmanager sends each team's own alerts (`teams[].alerting.receiver`): a YAML map of team name "
           "to its Slack or webhook URL or PagerDuty routing key. Required when a team has a receiver."),
    Secret("backupAccessKeyId", "backup-access-key-id.txt",
           "Access key ID the teams' snapshots are written to the `backup` bucket with. Required when `backup` is set."),
    Secret("backupSecretAccessKey", "backup-secret-access-key.txt",
           "Secret access key of `backupAccessKeyId`. Required when `backup` is set."),
)
SECRET_KEYS = tuple(secret.name for secret in SECRETS)
# What a config error shows in place of a value set with --secret.
ENCRYPTED = "<encrypted>"


def secret_command(name: str, stack: Optional[str] = None) -> str:
    """The command that sets one secret key, encrypted."""
    [source] = [secret.source for secret in SECRETS if secret.name == name]
    target = f" --stack {stack}" if stack else ""
    return f"pulumi config set --secret {PROJECT}:{name}{target} < {source}"


def encrypted_key_issues(encrypted: Iterable[str]) -> list[ConfigIssue]:
    """``encrypted`` names the project keys whose value is encrypted (``--secret``, whole or under ``--path``),
    wherever that was read (Pulumi's runtime, a stack file); one issue per key among them outside ``SECRET_KEYS``,
    the value left out: the program reads such a key as plain config, so the decrypted value would reach resource
    inputs, plans, previews and error messages."""
    by_lower_name = {name.lower(): name for name in SECRET_KEYS}
    issues = []
    for name in sorted(set(encrypted) - set(SECRET_KEYS)):
        close = difflib.get_close_matches(name.lower(), list(by_lower_name), n=1, cutoff=0.6)
        if close:
            secret = by_lower_name[close[0]]
            fix = (f"if it is the secret {PROJECT_PREFIX}{secret}: pulumi config rm {PROJECT_PREFIX}{name}, then "
                   f"run: {secret_command(secret)}")
        else:
            fix = (f"set it without --secret (pulumi config set {PROJECT_PREFIX}{name} ...); the secrets the program "
                   f"keeps secret are {', '.join(SECRET_KEYS)}")
        issues.append(ConfigIssue(name, ENCRYPTED, "is encrypted, but only the secret keys are read as secrets: "
                                                   "this value would reach resource inputs, plans and error messages "
                                                   "in plain text", fix))
    return issues


class Secrets:
    """Which secret keys are set, and which required ones are missing."""

    def __init__(self, reader: Reader, set_: set[str], placeholders: set[str]):
        self.reader, self.set, self.placeholders = reader, set_, placeholders
        self.missing: list[str] = []

    def require(self, name: str, problem: str) -> None:
        if name in self.set:
            return
        if name in self.placeholders:
            self.missing.append(name)
            return
        self.reader.fail(name, MISSING, problem, f"run: {secret_command(name)}")
