"""config/key_types.py Quantity: every quantity key reads a value as the API server reads it.

The grammar is apimachinery's resource.Quantity (a number, then a binary or decimal SI suffix or a
decimal exponent), non-negative, at most 2^63-1; a number in the stack file is written as one.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, strategies as st
from kubernetes.utils.quantity import parse_quantity

from config import load_platform
from config.key_types import LARGEST_NUMBER, LARGEST_QUANTITY, QUANTITY_SUFFIXES, Invalid, Quantity, quantity_value
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.config_spec import assert_rejected, dev_config, put

APIMACHINERY = "kubernetes/apimachinery"


@pytest.mark.parametrize("written, value", [
    ("16Gi", 16 * 2**30), ("500m", 0.5), ("4", 4), ("1.5", 1.5), (".5", 0.5), ("5.", 5), ("+2", 2),
    ("250n", 250e-9), ("3u", 3e-6), ("2k", 2000), ("1E", 1e18),
    ("1e9", 1e9), ("2E3", 2000), ("2E+3", 2000), ("1.5e-3", 0.0015), ("0e99999999999", 0),
])
def test_every_form_the_api_server_reads_is_accepted_with_its_value(written, value):
    assert Quantity().parse(written, Quantity.fix) == written
    assert math.isclose(quantity_value(written), value)


@pytest.mark.parametrize("written", ["2GB", "lots", "-1", "e9", "1e", "1e1.5", "1.2.3", "1Ki5", "1ki", "1K", ".",
                                     "", " 1", "1e5M", "1e19", "10Ei", "1e99999999999"])
def test_what_is_no_quantity_or_more_than_one_holds_is_refused(written):
    with pytest.raises(Invalid):
        Quantity().parse(written, Quantity.fix)


@given(st.floats(min_value=0, max_value=LARGEST_NUMBER) | st.integers(min_value=0, max_value=LARGEST_NUMBER))
def test_a_number_in_the_stack_file_is_the_quantity_of_exactly_that_number(number):
    assert quantity_value(Quantity().parse(number, Quantity.fix)) == number


@given(st.from_regex(r"\A\+?([0-9]{1,4}(\.[0-9]{0,3})?|\.[0-9]{1,3})([eE][-+]?[0-9]{1,2}|[KMGTPE]i|[numkMGTPE])?\Z"))
def test_what_is_accepted_another_client_reads_as_the_same_number(written):
    value = float(parse_quantity(written))
    if value > LARGEST_QUANTITY:
        return
    assert math.isclose(quantity_value(Quantity().parse(written, Quantity.fix)), value, rel_tol=1e-12)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[APIMACHINERY])
def test_the_suffixes_are_the_api_servers(tag):
    source = git(APIMACHINERY, "show", f"{mirrored_tag(APIMACHINERY, tag)}:pkg/api/resource/suffix.go")
    upstream = set(re.findall(r'addSuffix\("([^"]*)"', source))
    assert upstream == set(QUANTITY_SUFFIXES)


def test_a_site_may_write_its_quota_in_exponent_form_and_is_told_when_it_is_too_large():
    exponent = load_platform(put(dev_config(), "vcluster.resourceQuota.memory", "64e9")).teams[0]
    suffix = load_platform(put(dev_config(), "vcluster.resourceQuota.memory", "64G")).teams[0]
    assert exponent.vcluster.resource_quota.memory == "64e9"
    assert exponent.resources == suffix.resources  # the queue KAI schedules in is sized from the same number
    found = assert_rejected(put(dev_config(), "vcluster.resourceQuota.memory", "1e19"),
                            "vcluster.resourceQuota.memory", "1e19")
    assert "larger than a Kubernetes quantity holds" in found.problem
