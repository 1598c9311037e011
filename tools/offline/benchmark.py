"""How fast the program runs offline, against the SDK's own floor for the same number of resources.

``python -m tools.offline.benchmark --teams 300`` runs the program through the mocks (mockrun) for a
site of that many teams, then two floor programs through the same mocks and monitor: one that registers
the same number of plain resources (one input each), and one that registers the program's own resources
plainly (same types, custom or component, and input values; no parents, providers, dependencies,
aliases or typed classes). It prints the CPU times (best of ``--repeat``; CPU rather than wall-clock
time, as the machines that run it are shared) and the program's ratio to each floor: the first is what
the SDK costs per resource at the least, the second what it costs to send these inputs, so the gap
between the program and the second floor is what the program's shape (components, typed classes,
dependencies) costs on top. It also prints the
committed dev stack's time and the longest rollout chain (dependencies and parents: the number of
steps ``pulumi up`` has to take one after the other) for a few teams and for ``--teams``; a chain that
grows with the team count would make a large site's rollout slower with every team. ``--profile FILE``
writes a cProfile of one program run (read it with ``python -m pstats FILE``).

A measurement, not a test: timings depend on the machine, so no test asserts them (docs/testing.md
keeps the numbers of the last change that needed them).
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import functools
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from config.vocabulary import PROJECT
from tools.offline.mockrun import load_stack_file, owned_event_loops, run_program
from tools.offline.recording import ProgramRun

FLOOR_PROGRAM = '''\
import pulumi

for index in range(pulumi.Config().require_int("resources")):
    pulumi.CustomResource("benchmark:index:Plain", f"plain-{index}", {"index": index})
'''

INPUTS_FLOOR_PROGRAM = '''\
import json
import pulumi

with open(pulumi.Config().require("resources"), encoding="utf-8") as listing:
    resources = json.load(listing)
for index, resource in enumerate(resources):
    kind = pulumi.CustomResource if resource["custom"] else pulumi.ComponentResource
    kind(resource["type"], f"{index}-{resource['name']}", resource["inputs"])
'''


def site_with_teams(teams: int) -> dict:
    """The committed dev stack with ``teams`` teams sharing its GPU (each a leaf queue and a vCluster)."""
    config = copy.deepcopy(load_stack_file("dev"))
    template = config[f"{PROJECT}:teams"][0]
    share = math.floor(10_000 / teams) / 10_000  # rounded down: the shares never exceed the one GPU
    config[f"{PROJECT}:teams"] = [
        {**copy.deepcopy(template), "name": f"team-{index:03d}",
         "resources": {"gpu": {"quota": share, "limit": 1, "overQuotaWeight": 1}}}
        for index in range(teams)]
    return config


def longest_chain(run: ProgramRun) -> int:
    """Resources in the longest path of dependencies and parents: steps that cannot run side by side."""
    before = {resource.urn: set(resource.dependencies) | ({resource.parent} if resource.parent else set())
              for resource in run.resources}

    @functools.lru_cache(maxsize=None)
    def depth(urn: str) -> int:
        return 1 + max((depth(other) for other in before.get(urn, ()) if other in before), default=0)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(before)))
    return max(map(depth, before), default=0)


def best_time(action: Callable[[], object], repeat: int) -> float:
    """The least CPU time (all threads: the mocks answer on worker threads) of ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        action()
        times.append(time.process_time() - start)
    return min(times)


def run_floor(resources: int, directory: Path) -> ProgramRun:
    (directory / "__main__.py").write_text(FLOOR_PROGRAM, encoding="utf-8")
    return run_program({f"{PROJECT}:resources": str(resources)}, stack="benchmark", project_dir=directory)


def run_inputs_floor(program: ProgramRun, directory: Path) -> ProgramRun:
    """The program's resources registered plainly: same types and inputs (secrets redacted), nothing else."""
    (directory / "__main__.py").write_text(INPUTS_FLOOR_PROGRAM, encoding="utf-8")
    listing = directory / "resources.json"
    listing.write_text(json.dumps([{"type": resource.type, "name": resource.name, "custom": resource.custom,
                                    "inputs": resource.inputs} for resource in program.resources]),
                       encoding="utf-8")
    return run_program({f"{PROJECT}:resources": str(listing)}, stack="benchmark", project_dir=directory)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.offline.benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=300, help="teams of the benchmarked site (default 300)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each program; the best counts (default 3)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of one program run to this file")
    args = parser.parse_args(argv)
    config = site_with_teams(args.teams)
    with owned_event_loops():
        if args.profile:
            cProfile.runctx("run_program(config, stack='benchmark')", globals(), {"config": config},
                            filename=str(args.profile))
        program = run_program(config, stack="benchmark")
        count = len(program.resources)
        program_seconds = best_time(lambda: run_program(config, stack="benchmark"), args.repeat)
        with tempfile.TemporaryDirectory() as directory:
            floor = run_floor(count, Path(directory))
            assert len(floor.resources) == count, (len(floor.resources), count)
            floor_seconds = best_time(lambda: run_floor(count, Path(directory)), args.repeat)
        with tempfile.TemporaryDirectory() as directory:
            inputs_floor = run_inputs_floor(program, Path(directory))
            assert len(inputs_floor.resources) == count, (len(inputs_floor.resources), count)
            inputs_floor_seconds = best_time(lambda: run_inputs_floor(program, Path(directory)), args.repeat)
        dev = load_stack_file("dev")
        dev_seconds = best_time(lambda: run_program(dev, stack="dev"), args.repeat)
        few = run_program(site_with_teams(3), stack="benchmark")
    print(f"program, {args.teams} teams: {count} resources in {program_seconds:.2f} s of CPU")
    print(f"floor, {count} plain resources through the same mocks: {floor_seconds:.2f} s of CPU")
    print(f"ratio: {program_seconds / floor_seconds:.2f}x the floor")
    print(f"floor with the program's inputs ({count} resources registered plainly): "
          f"{inputs_floor_seconds:.2f} s of CPU, {inputs_floor_seconds / floor_seconds:.2f}x the floor")
    print(f"ratio: {program_seconds / inputs_floor_seconds:.2f}x the floor with the program's inputs")
    print(f"dev stack: {len(run_program(dev, stack='dev').resources)} resources in {dev_seconds:.2f} s of CPU")
    print(f"longest rollout chain: {longest_chain(few)} resources with 3 teams, "
          f"{longest_chain(program)} with {args.teams}")
    if args.profile:
        print(f"profile of one program run -> {args.profile} (python -m pstats {args.profile})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
