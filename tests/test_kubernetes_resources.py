"""The program's Kubernetes objects and Helm releases reach the engine as pulumi-kubernetes' typed classes send them
(components/kubernetes_resources.py): for every one a site registers, the request its typed class makes of the
same inputs is the same, but for what the caller decides (name, parent, provider, dependencies, protection,
timeouts, where in the source it was made) and for the typed classes' aliases to the kind's pre-release API
versions. Those can match nothing: the program declares GA versions only, and always has."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pulumi
import pytest
from google.protobuf.json_format import MessageToDict

from components import kubernetes_resources
from components.kubernetes_resources import HELM_RELEASE, SECRET, Kind, field_name
from config.stack_file import PROJECT_DIR
from tests.conftest import COMMITTED_STACKS, run, stack_config
from tests.test_deployability_charts import with_observability
from tests.test_observability_alerting import alerting_site, with_receiver_secret
from tests.generated_sites import generated_sites, site_config  # noqa: F401 (a fixture)
from tools.offline import sdk_internals as sdk
from tools.offline.floors import (
    PRE_RELEASE_KIND, TYPED_OBJECTS_FLOOR_PROGRAM, program_listing, run_floor, without_pre_release_aliases,
)
from tools.offline.mockrun import run_program
from tools.offline.recording import RecordingMonitor, redact

# What the code that makes a resource decides, not its class.
CALLER_FIELDS = {"name", "parent", "provider", "dependencies", "propertyDependencies", "protect", "customTimeouts",
                 "sourcePosition", "stackTrace", "parentStackTraceHandle", "object"}
# Sites whose objects, together, are of every kind the module names (backups: a CronJob; the monitoring stack:
# the team views' Services and Deployments).
SITES = (*COMMITTED_STACKS, "gen-box-backed-up", "gen-eks-observed")


@pytest.fixture
def requests(monkeypatch) -> list:
    """Every RegisterResource request the mock engine receives, with its inputs deserialised and redacted."""
    received = []
    register = RecordingMonitor.RegisterResource

    def recording(self, request):
        received.append((request, redact(sdk.deserialize(request.object))[0]))
        return register(self, request)
    monkeypatch.setattr(RecordingMonitor, "RegisterResource", recording)
    return received


def what_the_class_decides(request) -> dict:
    return {key: value for key, value in MessageToDict(request).items() if key not in CALLER_FIELDS}


def objects_of(received: list) -> dict:
    """The requests for Kubernetes objects and releases by type and name (the floor numbers its names)."""
    return {(request.type, re.sub(r"^\d+-", "", request.name)): (request, inputs) for request, inputs in received
            if request.type.startswith("kubernetes:") and request.custom}


@pytest.mark.parametrize("site", SITES)
def test_each_object_is_sent_as_its_typed_class_sends_it(site, generated_sites, requests, tmp_path):  # noqa: F811
    program = run_program(site_config(site), stack=site)
    thin = objects_of(requests)
    requests.clear()
    run_floor(program_listing(program, tmp_path), tmp_path, TYPED_OBJECTS_FLOOR_PROGRAM)
    # The floor registers the program's reads (an existing Secret or Service) plainly.
    reads = {(resource.type, resource.name) for resource in program.resources if resource.read}
    typed = {name: sent for name, sent in objects_of(requests).items() if name not in reads}
    assert typed.keys() == thin.keys() and len(thin) > 20
    for key, (request, inputs) in thin.items():
        typed_request, typed_inputs = typed[key]
        assert inputs == typed_inputs, key
        assert not MessageToDict(request).get("aliases"), key
        assert what_the_class_decides(request) == what_the_class_decides(typed_request), key


def test_the_sites_compared_hold_every_kind_the_program_registers_thinly(generated_sites, requests):  # noqa: F811
    for site in SITES:
        run_program(site_config(site), stack=site)
    sent = {request.type for request, _ in requests}
    kinds = {value.token for value in vars(kubernetes_resources).values() if isinstance(value, Kind)}
    assert kinds | {HELM_RELEASE} <= sent


def test_every_kind_the_components_register_is_named_once_in_the_module():
    """A kind written at a call site would be registered as the module's kinds are, but escape the comparison
    above: the components name their kinds through the module's constants (or a Kind of their own module)."""
    components = [path for path in (PROJECT_DIR / "components").glob("*.py") if path.name != "kubernetes_resources.py"]
    calls = re.compile(r"KubernetesObject\(\s*[^,]+,\s*([A-Za-z_.]+)")
    named = {match for path in components for match in calls.findall(path.read_text(encoding="utf-8"))}
    assert named and all(re.fullmatch(r"[A-Z_]+|\w+_kind", name) for name in named), named
    typed = re.compile(r"\bk8s\.(?:[a-z]+\.v\w+\.[A-Z]\w*|helm\.v3\.Release|apiextensions\.CustomResource)\(")
    assert not [path.name for path in components if typed.search(path.read_text(encoding="utf-8"))]


@pytest.mark.parametrize(("argument", "field"), [("metadata", "metadata"), ("string_data", "stringData"),
                                                  ("role_ref", "roleRef"), ("allow_volume_expansion",
                                                                             "allowVolumeExpansion")])
def test_fields_are_named_as_in_the_object(argument, field):
    assert field_name(argument) == field


@pytest.mark.parametrize(("kind", "token"), [
    (Kind("v1", "Namespace"), "kubernetes:core/v1:Namespace"),
    (Kind("batch/v1", "CronJob"), "kubernetes:batch/v1:CronJob"),
    (Kind("scheduling.run.ai/v2", "Queue"), "kubernetes:scheduling.run.ai/v2:Queue")])
def test_a_kind_is_registered_under_the_type_pulumi_kubernetes_gives_it(kind, token):
    assert kind.token == token


GA_KUBERNETES_TYPE = re.compile(r"^kubernetes:[^:]+/v\d+:[^:]+$")


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_every_kubernetes_kind_the_program_registers_is_a_ga_version(stack):
    config = with_observability(stack_config(stack), "install")
    program = run(config, stack=stack)
    kinds = {resource.type for resource in program.resources if resource.type.startswith("kubernetes:")}
    assert kinds and not {kind for kind in kinds if not GA_KUBERNETES_TYPE.match(kind)}


def test_every_kind_in_the_source_is_a_ga_version():
    sources = [PROJECT_DIR / "__main__.py", *sorted((PROJECT_DIR / "components").glob("*.py"))]
    versions = {(path.name, version) for path in sources
                for version in re.findall(r"\bKind\(\"([^\"]+)\"", path.read_text(encoding="utf-8"))}
    assert ("queues.py", "scheduling.run.ai/v2") in versions, "the pattern no longer finds the program's kinds"
    assert not {use for use in versions if not re.fullmatch(r"([a-z0-9.-]+/)?v\d+", use[1])}


def typed_class_aliases(token: str) -> list[str]:
    """The aliases pulumi-kubernetes' typed class of a kind gives its objects, read from the class's module."""
    _, group_version, kind = token.split(":")
    registered = pulumi.runtime.rpc.get_resource_module("kubernetes", group_version, "")
    module = importlib.import_module(registered.mod_info["fqn"]) if registered else None
    if module is None or kind not in registered.mod_info["classes"].get(token, ""):
        return []
    source = Path(importlib.import_module(f"{module.__name__}.{kind}").__file__).read_text(encoding="utf-8")
    return re.findall(r'pulumi\.Alias\(type_="([^"]+)"\)', source)


def test_the_typed_classes_alias_the_programs_kinds_to_pre_release_versions_only(generated_sites,  # noqa: F811
                                                                                   requests):
    for site in SITES:
        run_program(site_config(site), stack=site)
    aliases = {alias for request, _ in requests if request.type.startswith("kubernetes:")
               for alias in typed_class_aliases(request.type)}
    assert "kubernetes:batch/v1beta1:CronJob" in aliases, "the typed classes' aliases are no longer found"
    assert not {alias for alias in aliases if not PRE_RELEASE_KIND.match(alias)}


def transformed(aliases: list) -> list:
    args = pulumi.ResourceTransformationArgs(
        resource=None, type_="kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", name="p",
        props={}, opts=pulumi.ResourceOptions(aliases=aliases))
    result = without_pre_release_aliases(args)
    assert result is None or args.opts.aliases == aliases, "the caller's options are not changed in place"
    return aliases if result is None else list(result.opts.aliases or [])


def test_the_typed_objects_floor_drops_aliases_to_pre_release_versions_and_keeps_every_other():
    alpha = pulumi.Alias(type_="kubernetes:admissionregistration.k8s.io/v1alpha1:ValidatingAdmissionPolicy")
    beta = pulumi.Alias(type_="kubernetes:admissionregistration.k8s.io/v1beta1:ValidatingAdmissionPolicy")
    ga_move = pulumi.Alias(type_="kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    renamed = pulumi.Alias(name="old-name")
    beta_elsewhere = pulumi.Alias(type_=beta.type_, parent=pulumi.ROOT_STACK_RESOURCE)
    by_urn = "urn:pulumi:dev::gpu-tenancy::kubernetes:batch/v1beta1:Job::probe"
    assert transformed([alpha, beta]) == []
    assert transformed([alpha, ga_move, beta, renamed, beta_elsewhere, by_urn]) == \
        [ga_move, renamed, beta_elsewhere, by_urn]
    assert transformed([ga_move]) == [ga_move]
    assert transformed([]) == []


@pytest.mark.parametrize("receiver", ["webhook", "slack"])
def test_every_secret_sends_its_data_as_one_secret_as_the_typed_class_does(receiver, requests):
    """The typed Secret class makes ``data`` and ``stringData`` secret inputs whole, so the state keeps them encrypted
    whatever they hold: the Alertmanager configuration too, which names the receivers' addresses by file only."""
    config = alerting_site(receiver=receiver, **({"slackChannel": "#gpu"} if receiver == "slack" else {}))
    run_program(with_receiver_secret(config), stack="dev")
    secrets = {request.name: inputs for request, inputs in requests if request.type == SECRET.token}
    assert any(inputs.get("stringData") for inputs in secrets.values())
    for name, inputs in secrets.items():
        assert [inputs.get(field, "[secret]") for field in ("data", "stringData")] == ["[secret]"] * 2, name
