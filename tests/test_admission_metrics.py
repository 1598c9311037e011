"""Every refusal of a team's vCluster reaches that team's alert, board and counts.

The API server counts a refused request by policy and binding, never by namespace
(``apiserver_validating_admission_policy_check_total{policy, policy_binding}``), so the platform states which
bindings judge which team: ``gpu_tenancy_team_policy_info`` (components/observability_rules.py
``judging_bindings``). These tests hold that list to what a program run really binds, for every committed stack and
the sites of the corpus, the isolation tiers' site included:

- each Deny binding that selects a team's host namespace is listed for that team, and nothing else is;
- a listing that misses one binding (here: a tier's policy) is caught;
- each listed binding counts for one team only, so no refusal is charged to two.

How the alert and the boards join the list: tests/test_observability_rules.py (promtool) and
tests/test_team_views.py (a real Prometheus behind prom-label-proxy).
"""

from __future__ import annotations

import pytest

from components import isolation_admission, observability_rules as rules
from config import load_platform
from config.errors import MISSING, ConfigError
from config.secrets import SECRET_KEYS
from config.stack_file import stack_names
from config.vocabulary import ADMISSION_BINDING, PROJECT_PREFIX, project_config
from policy.label_selectors import selector_matches
from tests.conftest import run, stack_config
from tests.isolation_spec import isolation_config, prefixed
from tests.site_corpus import VALID_SITES
from tests.tenant_sim import namespaces_of


def platform_of(config: dict):
    """The platform of a stack's ``config:`` block, its encrypted secrets standing in for their values."""
    encrypted = [key.removeprefix(PROJECT_PREFIX) for key, value in config.items()
                 if isinstance(value, dict) and set(value) == {"secure"}]
    return load_platform(project_config(config), placeholders=encrypted)


def with_required_secrets(config: dict) -> dict:
    """The site with each secret its loader asks for set, encrypted, as its stack file would hold it."""
    try:
        platform_of(config)
    except ConfigError as error:
        config.update({issue.full_key: {"secure": "v1:ciphertext"} for issue in error.issues
                       if issue.full_key.removeprefix(PROJECT_PREFIX) in SECRET_KEYS and issue.value is MISSING})
    return config


SITES = {**{stack: lambda stack=stack: with_required_secrets(stack_config(stack)) for stack in stack_names()},
         **{name: lambda site=site: with_required_secrets(prefixed(site())) for name, site in VALID_SITES.items()
            if name not in stack_names()},
         "isolation-tiers": lambda: prefixed(isolation_config())}


def bound_pairs(program, namespace: str) -> set[tuple[str, str]]:
    """(policy, binding) of each Deny binding of the run that selects ``namespace`` as the run creates it."""
    labels = namespaces_of(program)[namespace]["metadata"]["labels"]
    return {(binding.inputs["spec"]["policyName"], binding.inputs["metadata"]["name"])
            for binding in program.of_type(ADMISSION_BINDING)
            if "Deny" in binding.inputs["spec"]["validationActions"]
            and selector_matches(binding.inputs["spec"]["matchResources"]["namespaceSelector"], labels)}


def listed_pairs(platform, team_name: str) -> set[tuple[str, str]]:
    return {(rule["labels"]["policy"], rule["labels"]["policy_binding"]) for rule in rules.info_rules(platform)
            if rule["record"] == rules.POLICY_INFO and rule["labels"]["team"] == team_name}


def unlisted(config: dict) -> dict[str, set]:
    """Per team, the bindings judging its namespace that the info series does not list, and those it lists that
    judge nothing there."""
    program, platform = run(config), platform_of(config)
    gaps = {}
    for team in platform.teams:
        bound, listed = bound_pairs(program, team.namespace), listed_pairs(platform, team.name)
        if bound != listed:
            gaps[team.name] = {"bound, not listed": bound - listed, "listed, not bound": listed - bound}
    return gaps


@pytest.mark.parametrize("site", sorted(SITES))
def test_every_binding_judging_a_team_is_listed_for_it(site):
    assert unlisted(SITES[site]()) == {}


def test_a_listing_that_misses_a_tier_policy_is_caught(monkeypatch):
    monkeypatch.setattr(rules, "has_tier_policy", lambda team: False)
    gaps = unlisted(prefixed(isolation_config()))
    tiered = {team.name for team in platform_of(prefixed(isolation_config())).teams
              if isolation_admission.has_tier_policy(team)}
    assert tiered and set(gaps) == tiered
    assert all(gap["bound, not listed"] == {(f"gpu-tenancy-{team}-isolation",) * 2} for team, gap in gaps.items())


@pytest.mark.parametrize("site", sorted(SITES))
def test_each_listed_binding_counts_for_one_team(site):
    platform = platform_of(SITES[site]())
    owners: dict[tuple[str, str], set[str]] = {}
    for team in platform.teams:
        for pair in listed_pairs(platform, team.name):
            owners.setdefault(pair, set()).add(team.name)
    assert {pair: teams for pair, teams in owners.items() if len(teams) > 1} == {}
    assert len(owners) == sum(len(rules.judging_bindings(team)) for team in platform.teams)
