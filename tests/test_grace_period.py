"""The longest grace period a tenant pod may set is the site's to choose (rule ``grace-period``,
vcluster.maxTerminationGracePeriodSeconds): stack-wide and per team, within bounds, shown in the plan.

KAI takes a GPU back by deleting the pod with no grace period of its own (tests/test_pod_fields_contract.py reads its
evictor), so the cap is how long a reclaimed GPU may stay with a team whose pod does not exit on SIGTERM.
"""

from __future__ import annotations

import pytest

from tests.config_spec import assert_rejected, put
from tests.config_spec import dev_config as stack_config
from tests.conftest import dev_config, run
from tests.tenant_sim import KAI_SCHEDULER, tenant_of, virtual_pod
from tests.test_virtual_defaults import Inside
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

DEFAULT_CAP = 600


def refused_for_grace(messages: list[str]) -> bool:
    return any(message.startswith("[grace-period]") for message in messages)


def _pod(tenant, seconds: int) -> dict:
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, terminationGracePeriodSeconds=seconds)


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, dev_config(), "team-nlp")


def test_the_default_cap_admits_ten_minutes_and_refuses_a_second_more(tenant):
    assert tenant.create(_pod(tenant, DEFAULT_CAP)) == []
    refused = tenant.create(_pod(tenant, DEFAULT_CAP + 1))
    assert refused_for_grace(refused)
    assert f"at most {DEFAULT_CAP}" in next(m for m in refused if m.startswith("[grace-period]"))


def test_a_pod_without_a_grace_period_gets_kubernetes_default_and_is_admitted(tenant):
    pod = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER)
    assert tenant.create(pod) == []


@pytest.fixture(scope="module")
def overridden():
    """The stack raises the cap to 15 minutes, team-nlp's own block to half an hour."""
    config = put(dev_config(), "gpu-tenancy:vcluster.maxTerminationGracePeriodSeconds", 900)
    put(config, "gpu-tenancy:teams[0].vcluster.maxTerminationGracePeriodSeconds", 1800)
    program = run(config, stack="grace")
    return program, {team: tenant_of(program, config, team) for team in ("team-nlp", "team-vision")}


def test_a_team_and_the_stack_set_their_own_caps(overridden):
    _, tenants = overridden
    nlp, vision = tenants["team-nlp"], tenants["team-vision"]
    assert nlp.create(_pod(nlp, 1800)) == []
    assert refused_for_grace(nlp.create(_pod(nlp, 1801)))
    assert vision.create(_pod(vision, 900)) == []
    assert refused_for_grace(vision.create(_pod(vision, 901)))
    assert refused_for_grace(vision.create(_pod(vision, 1800)))


def test_the_in_vcluster_defaults_hold_the_teams_cap_too(overridden):
    """Each vCluster refuses the pod when it is applied, with the same cap as the host."""
    _, tenants = overridden
    nlp, vision = Inside(tenants["team-nlp"]), Inside(tenants["team-vision"])
    assert nlp.create(_pod(nlp.tenant, 1800))[1] == []
    assert refused_for_grace(nlp.create(_pod(nlp.tenant, 1801))[1])
    assert refused_for_grace(vision.create(_pod(vision.tenant, 1800))[1])


def test_the_plan_shows_each_teams_cap(overridden):
    program, _ = overridden
    summary = render_summary(build_plan(program, "grace"))
    rows = {line.split("|")[1].strip(): line for line in summary.splitlines() if line.startswith("| `team-")
            and "(Deny)" in line}
    assert "grace-period (≤ 1800 s)" in rows["`team-nlp`"]
    assert "grace-period (≤ 900 s)" in rows["`team-vision`"]
    assert "pod-size (≤ 256Ki)" in rows["`team-vision`"]


@pytest.mark.parametrize("value", [29, 3601, 0, -1, "600s", 600.5, True])
def test_values_outside_the_bounds_are_refused_at_their_key(value):
    found = assert_rejected(put(stack_config(), "vcluster.maxTerminationGracePeriodSeconds", value),
                            "vcluster.maxTerminationGracePeriodSeconds", value)
    assert "between 30 and 3600" in found.problem + found.fix


def test_a_teams_value_is_refused_at_the_teams_key():
    config = put(stack_config(), "teams[1].vcluster.maxTerminationGracePeriodSeconds", 7200)
    assert_rejected(config, "teams[1].vcluster.maxTerminationGracePeriodSeconds", 7200, fix="between 30 and 3600")


@pytest.mark.parametrize("value", [30, 3600])
def test_the_bounds_themselves_load(value):
    from config import load_platform
    config = put(stack_config(), "vcluster.maxTerminationGracePeriodSeconds", value)
    assert {team.vcluster.max_termination_grace_seconds for team in load_platform(config).teams} == {value}
