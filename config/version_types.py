"""Key types for versions: a chart's exact version, no older than its floor in config/versions.py and no newer
than the release the program pins, and a site's Kubernetes minor version, no older than its floor (``parse``
refuses the others, ``schema`` says the same in the JSON Schema)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from config.key_types import Invalid, Text, at_least_pattern, at_most_pattern, string_schema
from config.versions import release_numbers, release_order
from config.vocabulary import EXACT_VERSION

KUBERNETES_MINOR = re.compile(r"^1\.(0|[1-9][0-9]*)$")
# Why a chart release newer than the program's pin is refused.
NEWER_THAN_CHECKED = ("it is the newest release the program was checked against: its chart renders with the "
                      "program's values, and the tenant boundary lists what that release's source reads; a "
                      "later one (a tag numbered higher, a pre-release of the next) may read keys or sync fields "
                      "the boundary lets through")


@dataclass(frozen=True)
class Version:
    """An exact chart version (``config.vocabulary.EXACT_VERSION``) with the chart's own prefix (``v`` or none),
    no older than ``minimum`` (a floor from config/versions.py, prefix included; ``minimum_reason`` says what
    breaks below it) and no newer than ``newest`` (the release config/versions.py pins)."""

    prefix: str
    minimum: Optional[str] = None
    minimum_reason: str = ""
    newest: Optional[str] = None
    fix: ClassVar[str] = "set it to a string"

    def parse(self, value: object, fix: str) -> str:
        value = Text().parse(value, fix)
        example = f"{self.prefix}1.2.3"
        if value.strip().lower() in ("latest", "stable", "*"):
            raise Invalid("chart versions must be pinned", f"set an exact version such as {example}")
        if not EXACT_VERSION.fullmatch(value):
            raise Invalid("is not an exact version (no ranges or wildcards)", f"set an exact version such as {example}")
        if self.prefix and not value.startswith(self.prefix):
            raise Invalid(f"this chart's versions start with '{self.prefix}'", f"write it as {self.prefix}{value}")
        if not self.prefix and value.startswith("v"):
            raise Invalid("this chart's versions have no leading 'v'", f"write it as {value[1:]}")
        refuse_below(value, self.minimum, self.minimum_reason)
        if self.newest is not None and release_order(value) > release_order(self.newest):
            raise Invalid(f"releases after {self.newest} are not supported: {NEWER_THAN_CHECKED}",
                          f"pin {self.newest} or older (a later release comes with an upgrade of gpu-tenancy)")
        return value

    def schema(self) -> dict[str, Any]:
        core = EXACT_VERSION.pattern.removeprefix("^v?").removesuffix("$")
        parts = [{"pattern": f"^{self.prefix}{core}$"}]
        if self.minimum is not None:
            major, minor, patch = release_numbers(self.minimum)
            parts.append({"pattern": f"^{self.prefix}{_release_at_least(major, minor, patch)}$"})
        if self.newest is not None:
            major, minor, patch = release_numbers(self.newest)
            parts.append({"pattern": f"^{self.prefix}{_release_at_most(major, minor, patch)}$"})
        return string_schema(*parts)

    def shown(self) -> str:
        shown = f"exact version `{self.prefix}X.Y.Z`" + ("" if self.prefix else " (no `v`)")
        if self.minimum and self.newest:
            return shown + f", {self.minimum} to {self.newest}"
        return shown + (f", {self.minimum} or later" if self.minimum else "") + (
            f", {self.newest} or older" if self.newest else "")


def refuse_below(value: str, minimum: Optional[str], reason: str) -> None:
    """Refuse a version older than ``minimum`` (a pre-release of it included), saying what breaks (``reason``)
    and which version to pin."""
    if minimum is not None and release_order(value) < release_order(minimum):
        raise Invalid(f"releases before {minimum} are not supported: {reason}", f"pin {minimum} or later")


def _release_at_least(major: int, minor: int, patch: int) -> str:
    """A regular expression for the versions at or above the release ``major.minor.patch``: a later release with
    any suffix, or that release itself with build metadata only (its pre-releases come before it)."""
    above = rf"{at_least_pattern(major + 1)}\.\d+\.\d+"
    minor_above = rf"{major}\.{at_least_pattern(minor + 1)}\.\d+"
    patch_above = rf"{major}\.{minor}\.{at_least_pattern(patch + 1)}"
    return rf"(?:(?:{above}|{minor_above}|{patch_above})(?:[-+].*)?|{major}\.{minor}\.{patch}(?:\+.*)?)"


def _release_at_most(major: int, minor: int, patch: int) -> str:
    """A regular expression for the versions at or below the release ``major.minor.patch``: an earlier release with
    any suffix, or that release itself with any suffix (its pre-releases come before it)."""
    options = [rf"{major}\.{minor}\.{patch}(?:[-+].*)?"]
    if major:
        options.append(rf"{at_most_pattern(major - 1)}\.\d+\.\d+(?:[-+].*)?")
    if minor:
        options.append(rf"{major}\.{at_most_pattern(minor - 1)}\.\d+(?:[-+].*)?")
    if patch:
        options.append(rf"{major}\.{minor}\.{at_most_pattern(patch - 1)}(?:[-+].*)?")
    return "(?:" + "|".join(options) + ")"


@dataclass(frozen=True)
class KubernetesVersion:
    """A Kubernetes minor version ``1.NN`` as a string, no older than ``minimum`` (config/versions.py)."""

    minimum: str
    minimum_reason: str
    fix: ClassVar[str] = 'set it to a quoted minor version such as "1.33"'

    def parse(self, value: object, fix: str) -> str:
        value = Text().parse(value, fix)
        if not KUBERNETES_MINOR.fullmatch(value):
            raise Invalid("must be a pinned Kubernetes minor version", "use the form 1.NN, e.g. 1.33")
        refuse_below(value, self.minimum, self.minimum_reason)
        return value

    def schema(self) -> dict[str, Any]:
        major, minor = release_numbers(self.minimum)
        return string_schema({"pattern": f"^{major}\\.{at_least_pattern(minor)}$"})

    def shown(self) -> str:
        return f"string `1.NN`, {self.minimum} or later"
