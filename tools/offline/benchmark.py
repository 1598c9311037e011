"""How fast the program runs offline, against the SDK's own floor for the same number of resources.

``python -m tools.offline.benchmark --teams 300`` runs the program through the mocks (mockrun) for a site of
that many teams, then five floor programs through the same mocks and monitor (tools/offline/floors.py): the same
number of plain resources of one input each (the plain floor), as many typed ones (pulumi-kubernetes ConfigMaps of
one input through one provider: the typed floor), the program's own resources with its values but none of its
structure (the inputs floor), the same with each Kubernetes object through its typed class (the typed objects
floor), and the program's own resources with its structure (parents, providers, dependencies, options) but one
input each (the shape floor). Each run is in a fresh interpreter, as ``pulumi up`` runs a program. It prints the
CPU times (best of ``--repeat``; CPU rather than wall-clock time, as the machines that run it are shared), the part
of each that the cyclic garbage collector took, and the program's ratio to each floor. Each floor runs twice: as a
program on the SDK runs by default, with the collector on, and with it off from its first line, as this program
runs (``__main__.py``): what the collector costs depends on all the run holds, so a run's time less its collector's
part is not what the run takes without it. The plain floor is what the SDK costs per resource at the least; the
typed, inputs and shape floors each add one thing the program has to the plain floor (a typed SDK's classes, its
values, its structure), so their ratios to the plain floor say what each costs by itself. It also prints the
committed dev stack's time and the longest rollout chain (dependencies and parents: the number of steps
``pulumi up`` has to take one after the other) for a few teams and for ``--teams``; a chain that grows with the
team count would make a large site's rollout slower with every team. ``--profile FILE`` writes a cProfile of one
program run (read it with ``python -m pstats FILE``).

A measurement, not a test: timings depend on the machine, so no test asserts them (docs/testing-speed.md keeps the
numbers of the last change that needed them).
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import functools
import gc
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

from config.stack_file import PROJECT_DIR
from config.vocabulary import PROJECT
from tools.offline.floors import FLOOR_PROGRAMS, plain_listing, program_listing, run_floor, shape_listing, typed_listing
from tools.offline.mockrun import load_stack_file, owned_event_loops, run_program
from tools.offline.recording import ProgramRun


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


class Measurement(NamedTuple):
    seconds: float    # CPU, all threads (the mocks answer on worker threads)
    collector: float  # of which the cyclic garbage collector
    resources: int
    engine: float     # of which the mocks answering: the engine's work under `pulumi up`, in its own process

    @property
    def language_host(self) -> float:
        """What the program's own process pays under ``pulumi up``: the run less the engine's work."""
        return self.seconds - self.engine


def measure(run: Callable[[], ProgramRun]) -> Measurement:
    """One run's CPU time, and the part of it the cyclic collector took (it holds the GIL while it runs), both as
    CPU time: on a busy machine the collector's wall-clock time can exceed the whole run's CPU time."""
    started: list[float] = []
    collecting: list[float] = []

    def clock(phase: str, _info: dict) -> None:
        if phase == "start":
            started.append(time.process_time())
        else:
            collecting.append(time.process_time() - started.pop())
    gc.collect()
    gc.callbacks.append(clock)
    start = time.process_time()
    try:
        registered = run()
    finally:
        seconds = time.process_time() - start
        gc.callbacks.remove(clock)
    return Measurement(seconds, sum(collecting), len(registered.resources), registered.engine_seconds)


def _run_one(kind: str, argument: str) -> ProgramRun:
    """One run in a measuring child, whose process ends with the run as the language host's does."""
    if kind == "program":
        return run_program(site_with_teams(int(argument)), stack="benchmark", ends_process=True)
    if kind == "dev":
        return run_program(load_stack_file("dev"), stack="dev", ends_process=True)
    with tempfile.TemporaryDirectory() as directory:
        return run_floor(Path(argument), Path(directory), FLOOR_PROGRAMS[kind], ends_process=True)


def best_in_fresh_processes(kind: str, argument: str, repeat: int) -> Measurement:
    """The least CPU time of ``repeat`` runs, each in a new interpreter as ``pulumi up`` runs a program: a
    run in a process that still holds an earlier run's objects pays for the collector walking them."""
    measurements = []
    for _ in range(repeat):
        child = subprocess.run([sys.executable, "-m", "tools.offline.benchmark", "--measure", kind, argument],
                               cwd=PROJECT_DIR, capture_output=True, text=True)
        if child.returncode != 0:
            raise RuntimeError(f"the measured {kind} run ({argument}) failed:\n{child.stderr}")
        measurements.append(Measurement(*json.loads(child.stdout.splitlines()[-1])))
    return min(measurements)


def ratio(program: Measurement, floor: Measurement) -> float:
    return program.seconds / floor.seconds


FLOORS = (("plain floor", "floor", "plain"), ("typed floor", "typed", "typed"),
          ("inputs floor", "floor", "inputs"), ("typed objects floor", "typed-objects", "inputs"),
          ("shape floor", "shape", "shape"))
FLOOR_LABELS = {
    "plain floor": "{count} plain resources, one input each",
    "typed floor": "{count} typed resources (kubernetes ConfigMaps, one input each)",
    "inputs floor": "the program's resources registered plainly",
    "typed objects floor": "the program's resources, each object through its typed class",
    "shape floor": "the program's resources with their parents, providers, dependencies and options, one input each",
}


def report(teams: int, repeat: int, program: Measurement, floors: dict[tuple[str, str], Measurement],
           dev: Measurement) -> list[str]:
    """The measurements, the program's ratio to each floor three ways, and each floor's ratio to the plain floor."""
    lines = [f"CPU seconds, best of {repeat} runs each in a fresh process; in brackets the cyclic collector's part "
             "and the engine's (the mocks answering, which under `pulumi up` is the engine's work, in its own "
             "process):",
             f"  program, {teams} teams, {program.resources} resources (collector off): {program.seconds:.2f} s "
             f"(engine {program.engine:.2f} s)"]
    for label, _, _ in FLOORS:
        on, off = floors[label, "on"], floors[label, "off"]
        lines.append(f"  {label}: {FLOOR_LABELS[label].format(count=on.resources)}: {on.seconds:.2f} s "
                     f"(collector {on.collector:.2f} s, engine {on.engine:.2f} s); collector off: {off.seconds:.2f} s "
                     f"(engine {off.engine:.2f} s)")
    lines += [f"  dev stack, {dev.resources} resources: {dev.seconds:.2f} s",
              "the program's ratio to each floor: with the collector on (as a program on the SDK runs by default) | "
              "off (as this program runs) | off, the language host's part only (the run less the engine's):"]
    for label, _, _ in FLOORS:
        on, off = floors[label, "on"], floors[label, "off"]
        lines.append(f"  {label}: {ratio(program, on):.2f}x | {ratio(program, off):.2f}x | "
                     f"{program.language_host / off.language_host:.2f}x")
    lines.append("each floor's ratio to the plain floor (what the one thing it adds costs by itself), "
                 "the same three ways:")
    plain_on, plain_off = floors["plain floor", "on"], floors["plain floor", "off"]
    for label, added in (("typed floor", "a typed SDK's classes"), ("inputs floor", "the program's values"),
                         ("shape floor", "the program's structure")):
        on, off = floors[label, "on"], floors[label, "off"]
        lines.append(f"  {label} ({added}): {ratio(on, plain_on):.2f}x | {ratio(off, plain_off):.2f}x | "
                     f"{off.language_host / plain_off.language_host:.2f}x")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.offline.benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=300, help="teams of the benchmarked site (default 300)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each program; the best counts (default 3)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of one program run to this file")
    parser.add_argument("--measure", nargs=2, metavar=("KIND", "ARGUMENT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    with owned_event_loops():
        if args.measure:
            print(json.dumps(measure(lambda: _run_one(*args.measure))))
            return 0
        config = site_with_teams(args.teams)
        if args.profile:
            cProfile.runctx("run_program(config, stack='benchmark')", globals(), {"config": config},
                            filename=str(args.profile))
        program_run = run_program(config, stack="benchmark")
        count = len(program_run.resources)
        chains = longest_chain(run_program(site_with_teams(3), stack="benchmark")), longest_chain(program_run)
        with tempfile.TemporaryDirectory() as directory:
            listings = {"plain": plain_listing(count, Path(directory)),
                        "inputs": program_listing(program_run, Path(directory)),
                        "typed": typed_listing(count, Path(directory)),
                        "shape": shape_listing(program_run, Path(directory))}
            del program_run
            program = best_in_fresh_processes("program", str(args.teams), args.repeat)
            floors = {(label, collector): best_in_fresh_processes(
                          kind if collector == "on" else f"{kind}-collector-off", str(listings[listing]), args.repeat)
                      for label, kind, listing in FLOORS for collector in ("on", "off")}
        dev = best_in_fresh_processes("dev", "-", args.repeat)
    assert {program.resources, *(floor.resources for floor in floors.values())} == {count}
    print("\n".join(report(args.teams, args.repeat, program, floors, dev)))
    print(f"longest rollout chain: {chains[0]} resources with 3 teams, {chains[1]} with {args.teams}")
    if args.profile:
        print(f"profile of one program run -> {args.profile} (python -m pstats {args.profile})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
