"""Registration without the aliases pulumi-kubernetes adds for a kind's pre-release API versions.

Every typed pulumi-kubernetes class aliases its kind's other API versions (a ValidatingAdmissionPolicy
also answers to v1alpha1 and v1beta1), so that a stack which once declared an older version updates in
place instead of replacing. This program declares only GA versions and always has (a test checks every
kind it registers), so no stack's state holds a pre-release one and those aliases can match nothing. The
SDK still turns each into a URN output when the resource is constructed: a sixth of an offline run's CPU.

Aliases to GA versions are kept: they are what moves a resource in place when a kind's declared version
changes (v1 to v2), as are aliases the program sets itself (a new name or parent).
"""

from __future__ import annotations

import copy
import re
from typing import Optional

import pulumi

PRE_RELEASE_KIND = re.compile(r"^kubernetes:[^:]+/v\d+(alpha|beta)\d*:[^:]+$")


def _is_pre_release_version(alias: object) -> bool:
    """An alias that only names another type, a pre-release API version of a Kubernetes kind."""
    return (isinstance(alias, pulumi.Alias) and isinstance(alias.type_, str)
            and PRE_RELEASE_KIND.match(alias.type_) is not None
            and alias.name is ... and alias.parent is ... and alias.stack is ... and alias.project is ...)


def without_pre_release_aliases(
        args: pulumi.ResourceTransformationArgs) -> Optional[pulumi.ResourceTransformationResult]:
    aliases = args.opts.aliases or []
    kept = [alias for alias in aliases if not _is_pre_release_version(alias)]
    if len(kept) == len(aliases):
        return None
    opts = copy.copy(args.opts)
    opts.aliases = kept or None
    return pulumi.ResourceTransformationResult(args.props, opts)
