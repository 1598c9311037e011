"""How fast the program runs offline, against the SDK's own floor for the same number of resources.

``python -m tools.offline.benchmark --teams 300`` runs the program through the mocks (mockrun) for a
site of that many teams, then a floor program that registers the same number of plain resources
through the same mocks and monitor, and prints both times, wall clock and CPU (best of ``--repeat``, the
programs taking turns), their ratios, the
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
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from config.vocabulary import PROJECT
from tools.offline.mockrun import ProgramRun, load_stack_file, owned_event_loops, run_program

FLOOR_PROGRAM = '''\
import pulumi

for index in range(pulumi.Config().require_int("resources")):
    pulumi.CustomResource("benchmark:index:Plain", f"plain-{index}", {"index": index})
'''


def site_with_teams(teams: int) -> dict:
    """The committed dev stack with ``teams`` teams sharing its GPU (each a leaf queue and a vCluster)."""
    config = copy.deepcopy(load_stack_file("dev"))
    template = config[f"{PROJECT}:teams"][0]
    share = round(1 / teams, 4)
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


def timed(action: Callable[[], object]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run. The CPU time of this process (all its threads) does not count
    the time other processes hold a shared CPU, so it is the steadier of the two on a busy machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def best_times(actions: Sequence[Callable[[], object]], repeat: int) -> list[tuple[float, float]]:
    """The best wall-clock and CPU time of ``repeat`` runs of each action, the actions taking turns (a slow
    spell hits all of them)."""
    times: list[list[tuple[float, float]]] = [[] for _ in actions]
    for _ in range(repeat):
        for index, action in enumerate(actions):
            times[index].append(timed(action))
    return [(min(wall for wall, _ in found), min(cpu for _, cpu in found)) for found in times]


def run_floor(resources: int, directory: Path) -> ProgramRun:
    (directory / "__main__.py").write_text(FLOOR_PROGRAM, encoding="utf-8")
    return run_program({f"{PROJECT}:resources": str(resources)}, stack="benchmark", project_dir=directory)


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
        dev = load_stack_file("dev")
        with tempfile.TemporaryDirectory() as directory:
            floor = run_floor(count, Path(directory))
            assert len(floor.resources) == count, (len(floor.resources), count)
            program_seconds, floor_seconds, dev_seconds = best_times(
                [lambda: run_program(config, stack="benchmark"), lambda: run_floor(count, Path(directory)),
                 lambda: run_program(dev, stack="dev")], args.repeat)
        few = run_program(site_with_teams(3), stack="benchmark")
        dev_count = len(run_program(dev, stack="dev").resources)
    print(f"program, {args.teams} teams: {count} resources in {_shown(program_seconds)}")
    print(f"floor, {count} plain resources through the same mocks: {_shown(floor_seconds)}")
    print(f"ratio: {program_seconds[0] / floor_seconds[0]:.2f}x the floor (wall clock), "
          f"{program_seconds[1] / floor_seconds[1]:.2f}x (CPU)")
    print(f"dev stack: {dev_count} resources in {_shown(dev_seconds)}")
    print(f"longest rollout chain: {longest_chain(few)} resources with 3 teams, "
          f"{longest_chain(program)} with {args.teams}")
    if args.profile:
        print(f"profile of one program run -> {args.profile} (python -m pstats {args.profile})")
    return 0


def _shown(seconds: tuple[float, float]) -> str:
    return f"{seconds[0]:.2f} s ({seconds[1]:.2f} s of CPU)"


if __name__ == "__main__":
    sys.exit(main())
