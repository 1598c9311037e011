"""Key types for versions: a chart's release, one of those config/versions.py lists for it (its floor, its pin
and every release between), and a site's Kubernetes minor version, from its floor to the newest one a pinned
kubectl serves (``parse`` refuses the others, ``schema`` says the same in the JSON Schema)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from config.key_types import Invalid, Text
from config.versions import (
    KUBERNETES_MINIMUM_VERSION, KUBERNETES_NEWEST_ACCEPTED_VERSION, release_numbers, release_order,
)
from config.vocabulary import EXACT_VERSION

KUBERNETES_MINOR = re.compile(r"^1\.(0|[1-9][0-9]*)$")
# Why a chart release newer than the program's pin is refused.
NEWER_THAN_CHECKED = ("it is the newest release the program was checked against: its chart renders with the "
                      "program's values, and the tenant boundary lists what that release's source reads; a "
                      "later one (a tag numbered higher, a pre-release of the next) may read keys or sync fields "
                      "the boundary lets through")
# Why a version between the floor and the pin that is not one of the chart's releases is refused.
NOT_A_CHECKED_RELEASE = ("the program accepts only the chart's releases in that range, each rendered with the "
                         "program's values and read for the tenant boundary; a pre-release, a build (+...) or a "
                         "number no release carries was not")


@dataclass(frozen=True)
class Version:
    """One of a chart's ``releases`` (config/versions.py, oldest first: the floor, every release between, the pin),
    written with the chart's own prefix (``v`` or none); ``minimum_reason`` says what breaks below the floor."""

    prefix: str
    releases: tuple[str, ...]
    minimum_reason: str
    fix: ClassVar[str] = "set it to a string"

    def parse(self, value: object, fix: str) -> str:
        value = Text().parse(value, fix)
        floor, newest = self.releases[0], self.releases[-1]
        example = newest
        if value.strip().lower() in ("latest", "stable", "*"):
            raise Invalid("chart versions must be pinned", f"set an exact version such as {example}")
        if not EXACT_VERSION.fullmatch(value):
            raise Invalid("is not an exact version (no ranges or wildcards)", f"set an exact version such as {example}")
        if self.prefix and not value.startswith(self.prefix):
            raise Invalid(f"this chart's versions start with '{self.prefix}'", f"write it as {self.prefix}{value}")
        if not self.prefix and value.startswith("v"):
            raise Invalid("this chart's versions have no leading 'v'", f"write it as {value[1:]}")
        refuse_below(value, floor, self.minimum_reason)
        if release_order(value) > release_order(newest):
            raise Invalid(f"releases after {newest} are not supported: {NEWER_THAN_CHECKED}",
                          f"pin {newest} or older (a later release comes with an upgrade of gpu-tenancy)")
        if value not in self.releases:
            raise Invalid(f"is not a release from {floor} to {newest}: {NOT_A_CHECKED_RELEASE}",
                          f"pin one of {', '.join(self.releases)}")
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.releases)}

    def shown(self) -> str:
        return "release " + ", ".join(f"`{release}`" for release in self.releases) + " (no pre-releases)"


def refuse_below(value: str, minimum: str, reason: str) -> None:
    """Refuse a version older than ``minimum`` (a pre-release of it included), saying what breaks (``reason``)
    and which version to pin."""
    if release_order(value) < release_order(minimum):
        raise Invalid(f"releases before {minimum} are not supported: {reason}", f"pin {minimum} or later")


@dataclass(frozen=True)
class KubernetesVersion:
    """A Kubernetes minor version ``1.NN`` as a string, from ``minimum`` to ``newest`` (config/versions.py)."""

    minimum: str
    minimum_reason: str
    newest: str
    newest_reason: str
    fix: ClassVar[str] = 'set it to a quoted minor version such as "1.33"'

    def parse(self, value: object, fix: str) -> str:
        value = Text().parse(value, fix)
        if not KUBERNETES_MINOR.fullmatch(value):
            raise Invalid("must be a pinned Kubernetes minor version", "use the form 1.NN, e.g. 1.33")
        refuse_below(value, self.minimum, self.minimum_reason)
        if release_order(value) > release_order(self.newest):
            raise Invalid(f"versions after {self.newest} are not supported: {self.newest_reason}",
                          f"state {self.newest} or older (a later one comes with an upgrade of gpu-tenancy)")
        return value

    def minors(self) -> list[str]:
        """Every version accepted, oldest first."""
        major, oldest = release_numbers(self.minimum)
        return [f"{major}.{minor}" for minor in range(oldest, release_numbers(self.newest)[1] + 1)]

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": self.minors()}

    def shown(self) -> str:
        return f"string `1.NN`, {self.minimum} to {self.newest}"


# The site's Kubernetes minor version (cluster.<kind>.kubernetesVersion) and why others are refused.
SITE_KUBERNETES = KubernetesVersion(
    KUBERNETES_MINIMUM_VERSION, "every tenant namespace is guarded by ValidatingAdmissionPolicy v1, GA from 1.30",
    KUBERNETES_NEWEST_ACCEPTED_VERSION,
    "the platform's kubectl Jobs and kube-prometheus-stack's CRD upgrade hook run a kubectl pinned for the site's "
    "Kubernetes (config/versions.py KUBECTL_IMAGES), and kubectl is supported only within one minor version of "
    "the API server")
