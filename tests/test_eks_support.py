"""An EKS site stating a Kubernetes minor past Amazon EKS's extended support is warned, as of a pinned day.

The dates are the EKS user guide's release calendar (config/versions.py EKS_END_OF_EXTENDED_SUPPORT names the
snapshot read); the day is pinned here, as the program reads today's.
"""

from __future__ import annotations

from datetime import date

import pytest

from config import eks_support, load_platform, versions
from tests.config_spec import dev_config, eks_config, eks_without_containerd_cdi

DAY = date(2026, 12, 5)


def _warnings(version: str, on: date, monkeypatch) -> list[str]:
    monkeypatch.setattr(eks_support, "today", lambda: on)
    platform = load_platform(eks_without_containerd_cdi(eks_config(), version), stack="eks")
    return [warning for warning in platform.warnings if "extended support" in warning]


@pytest.mark.parametrize("version, ended, instead", [("1.30", "2026-07-23", "1.32 or later"),
                                                     ("1.31", "2026-11-26", "1.32 or later")])
def test_a_minor_past_its_extended_support_is_warned_with_the_version_to_state(version, ended, instead,
                                                                                monkeypatch):
    [warning] = _warnings(version, DAY, monkeypatch)
    assert warning.startswith(f"cluster.eks.kubernetesVersion is {version}, whose Amazon EKS extended support ended "
                              f"on {ended}")
    assert f"on a new site to {instead}" in warning and "aws eks describe-cluster" in warning
    assert f"leaving the node groups on {version}" in warning


@pytest.mark.parametrize("version, on, warned", [
    ("1.31", date(2026, 11, 25), False),  # the last day of extended support
    ("1.31", date(2026, 11, 26), True),  # the day it ends
    ("1.33", DAY, False),  # the committed eks site: in extended support until 2027-07-29
    ("1.36", date(2030, 1, 1), False),  # a minor the calendar read did not list yet is not judged
])
def test_the_warning_starts_on_the_calendars_day(version, on, warned, monkeypatch):
    assert bool(_warnings(version, on, monkeypatch)) is warned


def test_past_every_listed_minor_the_warning_asks_for_a_newer_one():
    platform = load_platform(eks_without_containerd_cdi(eks_config(), "1.34"), stack="eks")
    [warning] = eks_support.eks_support_warnings(platform.cluster, date(2028, 1, 1))
    assert "on a new site to a minor newer than 1.34" in warning


def test_only_eks_sites_are_judged(monkeypatch):
    monkeypatch.setattr(eks_support, "today", lambda: date(2040, 1, 1))
    assert not [warning for warning in load_platform(dev_config()).warnings if "extended support" in warning]


def test_the_calendar_covers_the_oldest_accepted_minors_in_order():
    minors = list(versions.EKS_END_OF_EXTENDED_SUPPORT)
    assert minors[0] == versions.KUBERNETES_MINIMUM_VERSION
    assert minors == sorted(minors, key=versions.release_order)
    ends = [date.fromisoformat(end) for end in versions.EKS_END_OF_EXTENDED_SUPPORT.values()]
    assert ends == sorted(ends) and len(set(ends)) == len(ends)
