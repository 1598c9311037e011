"""How fast the program runs offline, against the SDK's own floor for the same number of resources.

``python -m tools.offline.benchmark --teams 300`` runs the program through the mocks (mockrun) for a site of
that many teams, then four floor programs through the same mocks and monitor: one that registers the same number
of plain resources (one input each), one that registers as many typed ones (pulumi-kubernetes ConfigMaps of one
input, through one provider), one that registers the program's own resources plainly (same types, custom or
component, and input values; no parents, providers, dependencies, aliases or typed classes), and one that
registers them again with each Kubernetes object through its own typed class and one provider (the typed objects
floor). Each run is in a fresh interpreter, as ``pulumi up`` runs a program. It prints the CPU times (best of
``--repeat``; CPU rather than wall-clock time, as the machines that run it are shared), the part of each that
the cyclic garbage collector took, and the program's ratio to each floor. Each floor runs twice: as a program on
the SDK runs by default, with the collector on, and with it off from its first line, as this program runs
(``__main__.py``): what the collector costs depends on all the run holds, so a run's time less its collector's
part is not what the run takes without it. The plain floor is what the SDK costs per resource at the least, the
typed floor what it costs per resource of a typed provider SDK such as pulumi-kubernetes (the SDK records a
stack trace and converts inputs and outputs by their Python types for those), the inputs floor what it costs to
send these inputs, and the typed objects floor what the typed SDK costs at the least for exactly these objects,
so the gap between the program and that floor is what the program's shape (components, parents, dependencies)
and its own work cost on top. It also prints the committed dev stack's time and the longest rollout chain
(dependencies and parents: the number of steps ``pulumi up`` has to take one after the other) for a few teams
and for ``--teams``; a chain that grows with the team count would make a large site's rollout slower with every
team. ``--profile FILE`` writes a cProfile of one program run (read it with ``python -m pstats FILE``).

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
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

import pulumi

from config.stack_file import PROJECT_DIR
from config.vocabulary import PROJECT
from tools.offline.mockrun import load_stack_file, owned_event_loops, run_program
from tools.offline.recording import ProgramRun

FLOOR_PROGRAM = '''\
import json
import pulumi

with open(pulumi.Config().require("resources"), encoding="utf-8") as listing:
    resources = json.load(listing)
for index, resource in enumerate(resources):
    kind = pulumi.CustomResource if resource["custom"] else pulumi.ComponentResource
    kind(resource["type"], f"{index}-{resource['name']}", resource["inputs"])
'''


# The same number of the cheapest resources the typed SDK registers: kubernetes ConfigMaps of one input, through
# one explicit provider (the provider is one of the resources), as the program registers its objects.
TYPED_FLOOR_PROGRAM = '''\
import json
import pulumi
import pulumi_kubernetes as k8s

with open(pulumi.Config().require("resources"), encoding="utf-8") as listing:
    resources = json.load(listing)
provider = pulumi.ResourceOptions(provider=k8s.Provider("typed-floor"))
for index, resource in enumerate(resources):
    k8s.core.v1.ConfigMap(f"{index}-{resource['name']}", data=resource["data"], opts=provider)
'''


# The program's own resources again, each Kubernetes object through its own pulumi-kubernetes class (looked up by
# its type in the SDK's registry) and one provider, with the aliases to pre-release API versions dropped, as the
# program sends none (components/kubernetes_resources.py); components, providers and reads plainly. No parents, dependencies or other options: the least the typed
# SDK pays for exactly these objects.
TYPED_OBJECTS_FLOOR_PROGRAM = '''\
import importlib
import json
import re
import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime.rpc import get_resource_module
from tools.offline.benchmark import without_pre_release_aliases

pulumi.runtime.register_stack_transformation(without_pre_release_aliases)


def typed_class(token):
    package, module, _ = token.split(":")
    registered = get_resource_module(package, module, "")
    name = registered and registered.mod_info["classes"].get(token)
    if name:
        return getattr(importlib.import_module(registered.mod_info["fqn"]), name)
    kind = token.rsplit(":", 1)[1]
    return k8s.apiextensions.CustomResourcePatch if kind.endswith("Patch") else k8s.apiextensions.CustomResource


def arguments(inputs):
    return {re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower(): value for key, value in inputs.items()}


with open(pulumi.Config().require("resources"), encoding="utf-8") as listing:
    resources = json.load(listing)
first = next(index for index, resource in enumerate(resources) if resource["type"] == "pulumi:providers:kubernetes")
provider = pulumi.ProviderResource("kubernetes", f"{first}-{resources[first]['name']}", resources[first]["inputs"])
typed = []
for index, resource in enumerate(resources):
    name = f"{index}-{resource['name']}"
    if index == first:
        continue
    if not resource["custom"]:
        pulumi.ComponentResource(resource["type"], name, resource["inputs"])
    elif resource["type"].startswith("kubernetes:") and not resource["read"]:
        typed.append(typed_class(resource["type"])(
            name, **arguments(resource["inputs"]), opts=pulumi.ResourceOptions(provider=provider)))
    else:
        pulumi.CustomResource(resource["type"], name, resource["inputs"])
'''


# Every typed pulumi-kubernetes class aliases its kind's other API versions (a ValidatingAdmissionPolicy also answers
# to v1alpha1 and v1beta1); for the kinds the program registers these are all pre-release versions, which it never
# declared (tests/test_kubernetes_resources.py), so it sends no alias. The typed objects floor drops them too: the
# SDK turns each alias into a URN output, a sixth of an offline run's CPU.
PRE_RELEASE_KIND = re.compile(r"^kubernetes:[^:]+/v\d+(alpha|beta)\d*:[^:]+$")


def _is_pre_release_version(alias: object) -> bool:
    """An alias that only names another type, a pre-release API version of a Kubernetes kind."""
    return (isinstance(alias, pulumi.Alias) and isinstance(alias.type_, str)
            and PRE_RELEASE_KIND.match(alias.type_) is not None
            and alias.name is ... and alias.parent is ... and alias.stack is ... and alias.project is ...)


def without_pre_release_aliases(
        args: pulumi.ResourceTransformationArgs) -> Optional[pulumi.ResourceTransformationResult]:
    aliases = args.opts.aliases or []
    kept = [alias for alias in aliases if not _is_pre_release_version(alias)]
    if len(kept) == len(aliases):
        return None
    opts = copy.copy(args.opts)
    opts.aliases = kept or None
    return pulumi.ResourceTransformationResult(args.props, opts)


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
        registered = len(run().resources)
    finally:
        seconds = time.process_time() - start
        gc.callbacks.remove(clock)
    return Measurement(seconds, sum(collecting), registered)


def plain_listing(resources: int, directory: Path) -> Path:
    """``resources`` plain resources of one input each, for the plain floor to register."""
    return _write_listing(directory / "plain.json", [
        {"type": "benchmark:index:Plain", "name": "plain", "custom": True, "inputs": {"index": index}}
        for index in range(resources)])


def typed_listing(resources: int, directory: Path) -> Path:
    """``resources`` typed resources for the typed floor: a provider and ConfigMaps of one input each."""
    return _write_listing(directory / "typed.json", [
        {"name": "typed", "data": {"index": str(index)}} for index in range(resources - 1)])


def program_listing(program: ProgramRun, directory: Path) -> Path:
    """The program's resources (types, names, reads, inputs with secrets redacted), for the inputs floor and the
    typed objects floor to register."""
    return _write_listing(directory / "program.json", [
        {"type": resource.type, "name": resource.name, "custom": resource.custom, "read": resource.read,
         "inputs": resource.inputs}
        for resource in program.resources])


def _write_listing(path: Path, resources: list[dict]) -> Path:
    path.write_text(json.dumps(resources), encoding="utf-8")
    return path


def run_floor(listing: Path, directory: Path, program: str = FLOOR_PROGRAM, *,
              ends_process: bool = False) -> ProgramRun:
    """The listed resources registered plainly (no parents, providers, dependencies, aliases or typed classes),
    or with ``TYPED_FLOOR_PROGRAM`` as typed ConfigMaps."""
    (directory / "__main__.py").write_text(program, encoding="utf-8")
    return run_program({f"{PROJECT}:resources": str(listing)}, stack="benchmark", project_dir=directory,
                       ends_process=ends_process)


FLOOR_PROGRAMS = {"floor": FLOOR_PROGRAM, "typed": TYPED_FLOOR_PROGRAM, "typed-objects": TYPED_OBJECTS_FLOOR_PROGRAM}
# The same floors with the collector off before their first import, as ``__main__.py`` turns it off.
COLLECTOR_OFF = "import gc\ngc.disable()\n"
FLOOR_PROGRAMS.update({f"{kind}-collector-off": COLLECTOR_OFF + program
                       for kind, program in list(FLOOR_PROGRAMS.items())})


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
          ("inputs floor", "floor", "inputs"), ("typed objects floor", "typed-objects", "inputs"))
FLOOR_LABELS = {
    "plain floor": "{count} plain resources, one input each",
    "typed floor": "{count} typed resources (kubernetes ConfigMaps, one input each)",
    "inputs floor": "the program's resources registered plainly",
    "typed objects floor": "the program's resources, each object through its typed class",
}


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
                        "typed": typed_listing(count, Path(directory))}
            del program_run
            program = best_in_fresh_processes("program", str(args.teams), args.repeat)
            floors = {(label, collector): best_in_fresh_processes(
                          kind if collector == "on" else f"{kind}-collector-off", str(listings[listing]), args.repeat)
                      for label, kind, listing in FLOORS for collector in ("on", "off")}
        dev = best_in_fresh_processes("dev", "-", args.repeat)
    assert {program.resources, *(floor.resources for floor in floors.values())} == {count}
    print(f"CPU seconds, best of {args.repeat} runs each in a fresh process (of which the cyclic collector):")
    print(f"  program, {args.teams} teams, {count} resources (collector off): {program.seconds:.2f} s")
    for label, _, _ in FLOORS:
        on, off = floors[label, "on"], floors[label, "off"]
        print(f"  {label}: {FLOOR_LABELS[label].format(count=count)}: {on.seconds:.2f} s ({on.collector:.2f} s), "
              f"{off.seconds:.2f} s with the collector off")
    print(f"  dev stack, {dev.resources} resources: {dev.seconds:.2f} s")
    print("the program's ratio to each floor, run as a program on the SDK runs by default (collector on) and as this "
          "program runs (collector off):")
    for label, _, _ in FLOORS:
        print(f"  {label}: {ratio(program, floors[label, 'on']):.2f}x, "
              f"{ratio(program, floors[label, 'off']):.2f}x with the collector off")
    print("the typed floor's ratio to the plain floor (what the SDK's typed classes cost by themselves): "
          f"{ratio(floors['typed floor', 'on'], floors['plain floor', 'on']):.2f}x, "
          f"{ratio(floors['typed floor', 'off'], floors['plain floor', 'off']):.2f}x with the collector off")
    print(f"longest rollout chain: {chains[0]} resources with 3 teams, {chains[1]} with {args.teams}")
    if args.profile:
        print(f"profile of one program run -> {args.profile} (python -m pstats {args.profile})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
