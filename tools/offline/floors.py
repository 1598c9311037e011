"""The floors the benchmark measures the program against (tools/offline/benchmark.py): small programs that register,
through the same mocks and monitor as the program, the least the SDK can register for a site of its size.

- the **plain floor**: as many plain resources as the program registers, one input each;
- the **typed floor**: as many pulumi-kubernetes ConfigMaps of one input, through one provider;
- the **inputs floor**: the program's own resources (types, names, custom or component, input values) registered
  plainly: no parents, providers, dependencies, options or typed classes;
- the **typed objects floor**: the same, each Kubernetes object through its pulumi-kubernetes class and one provider;
- the **shape floor**: the program's own resources with their parents, providers, dependencies and the options the
  plan records, one input each: what the program's shape costs (components with their children parented, one
  explicit provider) without its values or its own work.

Each reads a listing (JSON) that ``*_listing`` writes, and runs as a project of its own with ``run_floor``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Optional

import pulumi

from config.vocabulary import PROJECT
from tools.offline.mockrun import run_program
from tools.offline.recording import ProgramRun, RecordedResource

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
# program sends none (components/kubernetes_resources.py); components, providers and reads plainly. No parents,
# dependencies or other options: the least the typed SDK pays for exactly these objects.
TYPED_OBJECTS_FLOOR_PROGRAM = '''\
import importlib
import json
import re
import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime.rpc import get_resource_module
from tools.offline.floors import without_pre_release_aliases

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


# The program's resources in an order that registers each after its parent, provider and dependencies, with the same
# types, names, parents (so the same URNs), providers, dependencies and recorded options, and one input each.
SHAPE_FLOOR_PROGRAM = '''\
import json
import pulumi

with open(pulumi.Config().require("resources"), encoding="utf-8") as listing:
    resources = json.load(listing)
registered = {}
for index, resource in enumerate(resources):
    options = resource["options"]
    timeouts = options.get("customTimeouts")
    opts = pulumi.ResourceOptions(
        parent=registered.get(resource["parent"]), provider=registered.get(resource["provider"]),
        depends_on=[registered[urn] for urn in resource["dependencies"] if urn in registered],
        protect=options.get("protect"), retain_on_delete=options.get("retainOnDelete"),
        delete_before_replace=options.get("deleteBeforeReplace"), ignore_changes=options.get("ignoreChanges"),
        replace_on_changes=options.get("replaceOnChanges"),
        additional_secret_outputs=options.get("additionalSecretOutputs"),
        custom_timeouts=pulumi.CustomTimeouts(**timeouts) if timeouts else None, id=resource["id"])
    if resource["type"].startswith("pulumi:providers:"):
        made = pulumi.ProviderResource(resource["type"].split(":")[2], resource["name"], {"index": index}, opts)
    elif resource["custom"]:
        made = pulumi.CustomResource(resource["type"], resource["name"], {"index": index}, opts)
    else:
        made = pulumi.ComponentResource(resource["type"], resource["name"], {"index": index}, opts)
    registered[resource["urn"]] = made
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


def shape_listing(program: ProgramRun, directory: Path) -> Path:
    """The program's resources (types, names, parents, providers, dependencies, recorded options, the ids of reads),
    each after what it names, for the shape floor to register."""
    by_urn = {resource.urn: resource for resource in program.resources}
    ordered: list[RecordedResource] = []
    placed: set[str] = set()

    def place(resource: RecordedResource) -> None:
        if resource.urn in placed:
            return
        placed.add(resource.urn)
        for before in (resource.parent, resource.provider, *resource.dependencies):
            if before in by_urn:
                place(by_urn[before])
        ordered.append(resource)
    for resource in program.resources:
        place(resource)
    return _write_listing(directory / "shape.json", [
        {"urn": resource.urn, "type": resource.type, "name": resource.name, "custom": resource.custom,
         "id": resource.inputs["id"] if resource.read else None, "parent": resource.parent,
         "provider": resource.provider, "dependencies": resource.dependencies, "options": resource.options}
        for resource in ordered])


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


FLOOR_PROGRAMS = {"floor": FLOOR_PROGRAM, "typed": TYPED_FLOOR_PROGRAM, "typed-objects": TYPED_OBJECTS_FLOOR_PROGRAM,
                  "shape": SHAPE_FLOOR_PROGRAM}
# The same floors with the collector off before their first import, as ``__main__.py`` turns it off.
COLLECTOR_OFF = "import gc\ngc.disable()\n"
FLOOR_PROGRAMS.update({f"{kind}-collector-off": COLLECTOR_OFF + program
                       for kind, program in list(FLOOR_PROGRAMS.items())})
