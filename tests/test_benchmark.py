"""The benchmark's site and its rollout-chain measure (tools/offline/benchmark.py); its timings are not tested.

The rollout chain is structural, not a timing: the longest path of dependencies and parents must not grow
with the number of teams, or every team would add a step that ``pulumi up`` has to wait for."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from config.stack_file import PROJECT_DIR
from ops.sites import platform_of
from tests.conftest import run
from tools.offline.benchmark import (Measurement, best_in_fresh_processes, longest_chain, measure, report,
                                     site_with_teams)
from tools.offline.floors import (FLOOR_PROGRAMS, SHAPE_FLOOR_PROGRAM, TYPED_FLOOR_PROGRAM,
                                  TYPED_OBJECTS_FLOOR_PROGRAM, plain_listing, program_listing, run_floor,
                                  shape_listing, typed_listing)
from tools.offline.mocks import PlatformMocks
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
    floor = run_floor(program_listing(program, tmp_path), tmp_path)

    def shape(resources):
        return Counter((resource.type, resource.custom, json.dumps(resource.inputs, sort_keys=True)) for resource in resources)
    assert shape(floor.resources) == shape(program.resources)
    stack = {resource.parent for resource in floor.resources}
    assert len(stack) == 1 and stack.pop().endswith("::pulumi:pulumi:Stack::gpu-tenancy-benchmark")
    assert not any(resource.dependencies or resource.provider for resource in floor.resources)


def test_the_typed_objects_floor_registers_each_of_the_programs_objects_through_its_typed_class(tmp_path):
    program = run(site_with_teams(2), stack="benchmark")
    floor = run_floor(program_listing(program, tmp_path), tmp_path, TYPED_OBJECTS_FLOOR_PROGRAM)

    def shape(resources):
        return Counter((resource.type, resource.custom, json.dumps(resource.inputs, sort_keys=True))
                       for resource in resources)
    assert shape(floor.resources) == shape(program.resources)
    [provider] = [resource for resource in floor.resources if resource.type == "pulumi:providers:kubernetes"]
    objects = [resource for resource in program.resources
               if resource.type.startswith("kubernetes:") and not resource.read]
    typed = floor.program_globals["typed"]
    # Each object through the pulumi-kubernetes class of its type (custom resources through apiextensions'),
    # and nothing but the provider as an option.
    assert len(typed) == len(objects) > 20
    assert all(type(resource).__module__.startswith("pulumi_kubernetes.") for resource in typed)
    assert {type(resource).__name__ for resource in typed} >= {
        "Namespace", "Release", "ValidatingAdmissionPolicy", "Job", "CustomResource"}
    registered = [resource for resource in floor.resources if resource.type.startswith("kubernetes:")]
    assert sum(resource.provider == provider.urn for resource in registered) == len(objects)
    assert not any(resource.dependencies or resource.options for resource in floor.resources)
    stack = {resource.parent for resource in floor.resources}
    assert len(stack) == 1 and stack.pop().endswith("::pulumi:pulumi:Stack::gpu-tenancy-benchmark")
    assert best_in_fresh_processes("typed-objects", str(program_listing(program, tmp_path)), repeat=1).resources \
        == len(program.resources)



def test_the_shape_floor_registers_the_programs_structure_with_one_input_each(tmp_path):
    program = run(site_with_teams(2), stack="benchmark")
    floor = run_floor(shape_listing(program, tmp_path), tmp_path, SHAPE_FLOOR_PROGRAM)

    def structure(resource):
        return (resource.type, resource.custom, resource.read, resource.parent, resource.provider,
                resource.dependencies, resource.options)
    assert {resource.urn: structure(resource) for resource in floor.resources} == \
        {resource.urn: structure(resource) for resource in program.resources}
    # The program's structure is there to be measured: children of components, an explicit provider, dependencies
    # between objects, options, reads.
    assert sum(resource.provider is not None for resource in floor.resources) > 20
    assert sum(bool(resource.dependencies) for resource in floor.resources) > 10
    assert any(resource.read for resource in floor.resources) and any(resource.options for resource in floor.resources)
    reads = {resource.urn: resource.inputs["id"] for resource in program.resources if resource.read}
    assert all(set(resource.inputs) == ({"id", "index"} if resource.read else {"index"})
               for resource in floor.resources)
    assert {resource.urn: resource.inputs["id"] for resource in floor.resources if resource.read} == reads
    assert best_in_fresh_processes("shape", str(shape_listing(program, tmp_path)), repeat=1).resources \
        == len(program.resources)

COLLECTIONS_OF_RUNS = """
import gc, json, sys
from tools.offline.benchmark import site_with_teams
from tools.offline.mockrun import owned_event_loops, run_program
if sys.argv[1] == "default":
    gc.disable = lambda: None  # the program's own setting does not take
collections = {}
with owned_event_loops():
    run_program(site_with_teams(1), stack="benchmark")  # the program's imports, which come before its setting
    for teams in (1, 40):
        gc.collect()
        made = collections[teams] = []
        gc.callbacks.append(lambda phase, info: made.append(info["generation"]) if phase == "stop" else None)
        run_program(site_with_teams(teams), stack="benchmark")
        gc.callbacks.clear()
print(json.dumps({"one team": len(collections[1]), "40 teams": len(collections[40]),
                  "full": collections[40].count(2), "collecting after": gc.isenabled()}))
"""


def collections_of_runs(setting: str) -> dict:
    """Collections during a 1-team and a 40-team run in a fresh interpreter (in a test process, how many happen
    depends on how much earlier tests left alive), and whether the collector runs again afterwards."""
    child = subprocess.run([sys.executable, "-c", COLLECTIONS_OF_RUNS, setting], cwd=PROJECT_DIR,
                           capture_output=True, text=True, check=True)
    return json.loads(child.stdout.splitlines()[-1])


def test_the_program_spares_its_run_the_collector():
    # Each collection would re-walk the futures the SDK still holds and free little. The runner's own work before
    # the program and after it may collect once each (as the language host's may); its process goes on after the
    # run, so it collects again.
    runs = collections_of_runs("the program's")
    assert runs["40 teams"] <= 2 and runs["one team"] <= 2 and runs["full"] == 0 and runs["collecting after"]


def test_with_the_collector_on_the_same_run_makes_full_collections():
    # What the test above guards against.
    runs = collections_of_runs("default")
    assert runs["full"] > 0 and runs["40 teams"] > 10 * runs["one team"]


def test_a_measurement_counts_what_the_run_registered_and_the_collectors_part(tmp_path):
    def floor_then_a_full_collection():
        floor = run_floor(plain_listing(5, tmp_path), tmp_path)
        gc.collect()
        return floor
    measurement = measure(floor_then_a_full_collection)
    assert measurement.resources == 5
    assert 0 < measurement.collector < measurement.seconds
    # The mocks' answers, on the SDK's worker threads, are the engine's part: some of the run, not all of it.
    assert 0 < measurement.engine < measurement.language_host < measurement.seconds


def test_the_engines_part_is_what_the_mocks_spent_answering(monkeypatch):
    answering = []
    original = PlatformMocks.new_resource

    def slow_answer(self, args):
        started = time.thread_time()
        while time.thread_time() - started < 0.01:  # ten milliseconds of CPU in each provider's answer
            pass
        answering.append(args.name)
        return original(self, args)
    monkeypatch.setattr(PlatformMocks, "new_resource", slow_answer)
    program = run(site_with_teams(1), stack="benchmark")
    assert len(answering) > 20
    assert 0.01 * len(answering) <= program.engine_seconds < 0.01 * len(answering) + 1


def test_the_report_gives_each_ratio_three_ways():
    def floor(on_seconds: float, off_seconds: float, engine: float) -> dict:
        return {"on": Measurement(on_seconds, 1.0, 10, engine), "off": Measurement(off_seconds, 0.0, 10, engine)}
    measured = {"plain floor": floor(5.0, 3.0, 1.0), "typed floor": floor(10.0, 6.0, 1.0),
                "inputs floor": floor(12.5, 9.0, 3.0), "typed objects floor": floor(20.0, 12.0, 2.0),
                "shape floor": floor(6.0, 4.0, 1.5)}
    floors = {(label, collector): measurement for label, both in measured.items()
              for collector, measurement in both.items()}
    lines = report(300, 2, Measurement(10.0, 0.0, 10, 2.0), floors, Measurement(0.5, 0.0, 3, 0.1))
    # The program's 10 s, 8 s of them its own process's: against the plain floor's 5 s, 3 s, and 2 s less the engine.
    assert "  plain floor: 2.00x | 3.33x | 4.00x" in lines
    assert "  shape floor: 1.67x | 2.50x | 3.20x" in lines
    assert "  inputs floor (the program's values): 2.50x | 3.00x | 3.00x" in lines
    assert "  shape floor (the program's structure): 1.20x | 1.33x | 1.25x" in lines

def test_the_plain_floor_registers_plain_resources_of_one_input_each(tmp_path):
    floor = run_floor(plain_listing(3, tmp_path), tmp_path)
    assert [(resource.type, resource.custom, resource.inputs) for resource in floor.resources] == [
        ("benchmark:index:Plain", True, {"index": index}) for index in range(3)]


def test_the_typed_floor_registers_as_many_typed_resources_of_one_input_through_one_provider(tmp_path):
    floor = run_floor(typed_listing(4, tmp_path), tmp_path, TYPED_FLOOR_PROGRAM)
    [provider] = [resource for resource in floor.resources if resource.type == "pulumi:providers:kubernetes"]
    config_maps = [resource for resource in floor.resources if resource is not provider]
    assert len(floor.resources) == 4
    assert sorted(resource.inputs["data"]["index"] for resource in config_maps) == ["0", "1", "2"]
    assert all(resource.type == "kubernetes:core/v1:ConfigMap" and resource.provider == provider.urn
               and set(resource.inputs) <= {"data", "apiVersion", "kind"} for resource in config_maps)
    assert best_in_fresh_processes("typed", str(typed_listing(5, tmp_path)), repeat=1).resources == 5


def test_each_run_is_measured_in_a_child_process_that_reports_what_it_registered(tmp_path):
    measurement = best_in_fresh_processes("floor", str(plain_listing(7, tmp_path)), repeat=2)
    assert measurement.resources == 7 and measurement.seconds > measurement.collector >= 0


def test_each_floor_also_runs_with_the_collector_off_as_the_program_runs(tmp_path):
    # Enough resources that the default thresholds collect: the same floor then collects, and with the collector
    # off it does not (the measuring child's one collection before the run is not counted).
    listing = str(plain_listing(3_000, tmp_path))
    assert best_in_fresh_processes("floor", listing, repeat=1).collector > 0
    assert best_in_fresh_processes("floor-collector-off", listing, repeat=1).collector == 0
    assert {kind for kind in FLOOR_PROGRAMS if kind.endswith("-collector-off")} == {
        f"{kind}-collector-off" for kind in ("floor", "typed", "typed-objects", "shape")}


def test_a_failed_child_run_says_what_failed(tmp_path):
    with pytest.raises(RuntimeError, match=r"(?s)measured floor run .*No such file or directory"):
        best_in_fresh_processes("floor", str(tmp_path / "no-listing.json"), repeat=1)


def test_a_measured_run_leaves_the_collector_off_as_the_language_hosts_process_ends():
    # Turning it on again would make the next collection walk everything the run made: not the program's cost.
    script = """
import gc, json
from tools.offline.mockrun import owned_event_loops, run_program
from tools.offline.benchmark import site_with_teams
with owned_event_loops():
    run_program(site_with_teams(2), stack="benchmark", ends_process=True)
    after_measured = gc.isenabled()
    gc.enable()
    run_program(site_with_teams(2), stack="benchmark")
print(json.dumps([after_measured, gc.isenabled()]))
"""
    child = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    assert json.loads(child.stdout.splitlines()[-1]) == [False, True]
