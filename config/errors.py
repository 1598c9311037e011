"""Validation results: every problem names the config key, the bad value and the fix."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pulumi import RunError

from config.vocabulary import PROJECT_PREFIX


@dataclass(frozen=True)
class ConfigIssue:
    key: str
    value: object
    problem: str
    fix: str

    @property
    def full_key(self) -> str:
        """The key as a stack file spells it: project keys get the ``gpu-tenancy:`` namespace."""
        head = re.split(r"[.\[]", self.key, maxsplit=1)[0]
        return self.key if ":" in head else PROJECT_PREFIX + self.key

    def __str__(self) -> str:
        return f"{self.full_key} = {_show(self.value)}: {self.problem}. Fix: {self.fix}"


class ConfigError(RunError, ValueError):
    """Raised before any resource is registered when the stack config is invalid.

    A ``RunError`` so that ``pulumi up`` prints the message alone, without a Python traceback.
    """

    def __init__(self, issues: list[ConfigIssue]):
        self.issues = list(issues)
        lines = "\n".join(f"  - {issue}" for issue in self.issues)
        super().__init__(f"invalid stack config ({len(self.issues)} problem(s)):\n{lines}")

    @property
    def keys(self) -> list[str]:
        return [issue.key for issue in self.issues]


class _Missing:
    def __repr__(self) -> str:
        return "<not set>"


MISSING = _Missing()


def _show(value: object) -> str:
    if value is MISSING:
        return "<not set>"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
