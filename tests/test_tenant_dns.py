"""The tenant DNS manifests: written once as YAML for all teams, yet each team's text is what dumping its
own objects gives, whatever its name (names YAML would quote, long names, both Corefile variants)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from components.tenant_dns import coredns_manifests, coredns_objects
from config import load_platform
from config.key_types import DNS_LABEL
from tests.config_spec import dev_config


def dumped(team) -> str:
    return "---\n".join(yaml.safe_dump(document, sort_keys=False) for document in coredns_objects(team))


@pytest.fixture(scope="module")
def team():
    return load_platform(dev_config()).teams[0]


@pytest.mark.parametrize("name", ["team-nlp", "yes", "on", "null", "123", "1e3", "0x1f", "2020-01-01", "t" * 63])
@pytest.mark.parametrize("network_policy", [True, False])
def test_each_teams_dns_manifests_are_its_objects_dumped(team, name, network_policy):
    named = dataclasses.replace(team, name=name,
                                vcluster=dataclasses.replace(team.vcluster, network_policy=network_policy))
    text = coredns_manifests(named)
    assert text == dumped(named)
    deployment = next(d for d in yaml.safe_load_all(text) if d["kind"] == "Deployment")
    assert deployment["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"] == name


@given(st.from_regex(DNS_LABEL, fullmatch=True).filter(lambda name: len(name) <= 63))
def test_any_team_name_gives_the_dumped_text(name):
    team = load_platform(dev_config()).teams[1]
    named = dataclasses.replace(team, name=name)
    assert coredns_manifests(named) == dumped(named)
