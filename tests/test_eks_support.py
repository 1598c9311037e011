"""An EKS site stating a Kubernetes minor past the Amazon EKS support it takes is warned, and one in extended
support (billed at a higher rate) is noted, as of a pinned day; the cluster's upgrade policy is the site's.

The dates are the EKS user guide's release calendar (config/versions.py EKS_END_OF_EXTENDED_SUPPORT names the
snapshot read); the day is pinned here, as the program reads today's.
"""

from __future__ import annotations

from datetime import date

import pytest

from config import ConfigError, eks_support, load_platform, versions
from tests.config_spec import dev_config, eks_config, eks_without_containerd_cdi, put
from tests.conftest import run
from tests.conftest import eks_config as eks_stack

DAY = date(2026, 12, 5)


def _site(version: str, support_type: str = "extended") -> dict:
    return put(eks_without_containerd_cdi(eks_config(), version), "cluster.eks.supportType", support_type)


def _warnings(version: str, on: date, monkeypatch, support_type: str = "extended") -> list[str]:
    monkeypatch.setattr(eks_support, "today", lambda: on)
    platform = load_platform(_site(version, support_type), stack="eks")
    return [warning for warning in platform.warnings if "support ended" in warning]


def _notes(version: str, on: date, support_type: str = "extended") -> list[str]:
    platform = load_platform(_site(version, support_type), stack="eks")
    return eks_support.eks_support_notes(platform.cluster, on)


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


def test_the_standard_calendar_lists_the_same_minors_a_year_before_their_extended_support_ends():
    assert list(versions.EKS_END_OF_STANDARD_SUPPORT) == list(versions.EKS_END_OF_EXTENDED_SUPPORT)
    for minor, standard in versions.EKS_END_OF_STANDARD_SUPPORT.items():
        extended = date.fromisoformat(versions.EKS_END_OF_EXTENDED_SUPPORT[minor])
        assert date.fromisoformat(standard) == extended.replace(year=extended.year - 1)


@pytest.mark.parametrize("version, on, noted", [
    ("1.33", date(2026, 7, 28), False),  # the last day of standard support
    ("1.33", date(2026, 7, 29), True),  # billed at the extended rate from the start of this day
    ("1.33", DAY, True),  # the committed eks site
    ("1.33", date(2027, 7, 29), False),  # extended support over: warned instead
    ("1.36", date(2030, 1, 1), False),  # not listed yet: not judged
])
def test_a_site_in_extended_support_is_noted_from_the_calendars_day(version, on, noted):
    assert bool(_notes(version, on)) is noted


def test_the_note_says_what_it_costs_when_it_ends_and_that_only_an_upgrade_ends_it():
    [note] = _notes("1.33", DAY)
    assert note.startswith("cluster.eks.kubernetesVersion is 1.33, which left Amazon EKS standard support on "
                           "2026-07-29: EKS bills the cluster at its extended-support rate")
    # 1.34 left standard support on 2026-12-02 too: no listed minor is in standard support on DAY.
    assert "until it runs a minor in standard support (a minor newer than 1.34)" in note
    assert "by itself after 2027-07-29" in note and "cannot be turned off for a cluster already in it" in note
    [note] = _notes("1.32", date(2026, 6, 1))
    assert "(1.33 or later)" in note


def test_a_site_taking_no_extended_support_is_warned_when_standard_support_ends_and_never_noted(monkeypatch):
    assert not _warnings("1.33", date(2026, 7, 28), monkeypatch, "standard")
    [warning] = _warnings("1.33", date(2026, 7, 29), monkeypatch, "standard")
    assert warning.startswith("cluster.eks.kubernetesVersion is 1.33, whose Amazon EKS standard support ended on "
                              "2026-07-29, and cluster.eks.supportType is standard")
    assert "on a new site to 1.34 or later" in warning and "leaving the node groups on 1.33" in warning
    assert not _notes("1.33", DAY, "standard")
    # With extended support taken, the same day is only noted.
    assert not _warnings("1.33", date(2026, 7, 29), monkeypatch)


@pytest.mark.parametrize("support_type", ["extended", "standard"])
def test_the_cluster_is_given_the_sites_upgrade_policy_in_ekss_spelling(support_type):
    config = eks_stack()
    config["gpu-tenancy:cluster"]["eks"]["supportType"] = support_type
    cluster = run(config).of_type("eks:index:Cluster")[0].inputs
    assert cluster["upgradePolicy"] == {"supportType": support_type.upper()}


def test_an_unknown_support_type_is_refused_naming_the_key_and_the_choices():
    with pytest.raises(ConfigError) as error:
        load_platform(_site("1.35", "EXTENDED"), stack="eks")
    [issue] = error.value.issues
    assert issue.key == "cluster.eks.supportType" and issue.value == "EXTENDED"
    assert "extended, standard" in issue.problem and "did you mean 'extended'?" in issue.fix
