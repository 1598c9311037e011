"""The benchmark's site and its rollout-chain measure (tools/offline/benchmark.py); its timings are not tested.

The rollout chain is structural, not a timing: the longest path of dependencies and parents must not grow
with the number of teams, or every team would add a step that ``pulumi up`` has to wait for."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ops.sites import platform_of
from tests.conftest import run
from tools.offline.benchmark import longest_chain, run_inputs_floor, site_with_teams
from tools.offline.recording import ProgramRun, RecordedResource


def resource(urn: str, parent: str | None = None, dependencies: tuple[str, ...] = ()) -> RecordedResource:
    return RecordedResource(urn=urn, type="t", name=urn, custom=True, parent=parent, provider=None,
                            dependencies=list(dependencies), options={}, inputs={})


def test_the_chain_follows_dependencies_and_parents():
    program = ProgramRun(resources=[
        resource("a"), resource("b", parent="a"), resource("c", dependencies=("b",)),
        resource("d", dependencies=("a",)), resource("e", dependencies=("outside-the-run",))])
    assert longest_chain(program) == 3  # a -> b (child) -> c (dependent)


@pytest.mark.parametrize("teams", [1, 7, 300])
def test_the_benchmark_site_is_a_valid_site_of_that_many_teams(teams):
    platform = platform_of(site_with_teams(teams), stack="benchmark")
    assert len(platform.teams) == len({team.name for team in platform.teams}) == teams


def test_the_rollout_chain_does_not_grow_with_the_team_count():
    assert longest_chain(run(site_with_teams(2), stack="benchmark")) == \
        longest_chain(run(site_with_teams(9), stack="benchmark"))


def test_the_inputs_floor_registers_the_programs_resources_plainly(tmp_path):
    program = run(site_with_teams(2), stack="benchmark")
    floor = run_inputs_floor(program, tmp_path)

    def shape(resources):
        return Counter((resource.type, resource.custom, json.dumps(resource.inputs, sort_keys=True)) for resource in resources)
    assert shape(floor.resources) == shape(program.resources)
    stack = {resource.parent for resource in floor.resources}
    assert len(stack) == 1 and stack.pop().endswith("::pulumi:pulumi:Stack::gpu-tenancy-benchmark")
    assert not any(resource.dependencies or resource.provider for resource in floor.resources)
