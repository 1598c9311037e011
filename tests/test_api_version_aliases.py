"""The program sends no aliases to pre-release API versions, and declares none (components/api_version_aliases.py).

Dropping pulumi-kubernetes' aliases to a kind's alpha and beta versions is safe only while no stack's state can
hold such a version: the program must declare GA versions only, which these tests check on what it registers
and in its source, where a kind behind a config switch is found too."""

from __future__ import annotations

import re

import pulumi
import pytest

from components.api_version_aliases import PRE_RELEASE_KIND, without_pre_release_aliases
from config.stack_file import PROJECT_DIR
from tests.conftest import COMMITTED_STACKS, run, stack_config
from tests.test_deployability_charts import with_observability
from tools.offline.sdk_internals import wait_for

GA_KUBERNETES_TYPE = re.compile(r"^kubernetes:[^:]+/v\d+:[^:]+$")
TYPED_CLASS_USE = re.compile(r"\bk8s\.([a-z_]+)\.(v\w+)\.[A-Z]\w*")


def transformed(aliases: list) -> list:
    args = pulumi.ResourceTransformationArgs(
        resource=None, type_="kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", name="p",
        props={}, opts=pulumi.ResourceOptions(aliases=aliases))
    result = without_pre_release_aliases(args)
    assert result is None or args.opts.aliases == aliases, "the caller's options are not changed in place"
    return aliases if result is None else list(result.opts.aliases or [])


def test_aliases_to_pre_release_versions_are_dropped_and_every_other_alias_is_kept():
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


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_every_kubernetes_kind_the_program_registers_is_a_ga_version(stack):
    config = with_observability(stack_config(stack), "install")
    kinds = {resource.type for resource in run(config, stack=stack).resources
             if resource.type.startswith("kubernetes:") and not resource.type.startswith("pulumi:providers:")}
    assert kinds and not {kind for kind in kinds if not GA_KUBERNETES_TYPE.match(kind)}


def test_every_typed_kubernetes_class_in_the_source_is_a_ga_version():
    sources = [PROJECT_DIR / "__main__.py", *sorted((PROJECT_DIR / "components").glob("*.py"))]
    versions = {(path.name, group, version) for path in sources
                for group, version in TYPED_CLASS_USE.findall(path.read_text(encoding="utf-8"))}
    assert versions, "the pattern no longer finds the program's typed classes"
    assert not {use for use in versions if not re.fullmatch(r"v\d+", use[2])}


def test_the_program_sends_no_alias_to_a_pre_release_version():
    program = run(stack_config("dev"), stack="dev")
    live = program.program_globals
    seen, pending = set(), [live["host"], live["kai"], live["queues"], *live["tenants"].values()]
    aliases = []
    while pending:
        resource = pending.pop()
        if id(resource) in seen:
            continue
        seen.add(id(resource))
        aliases += resource._aliases  # noqa: SLF001 the URNs the SDK computed from the options it was given
        pending += list(resource._childResources)  # noqa: SLF001
    admission = [resource for resource in program.resources if "ValidatingAdmissionPolicy" in resource.type]
    assert admission, "the walk reaches the resources pulumi-kubernetes gives pre-release aliases"
    urns = [wait_for(alias.future()) for alias in aliases]
    assert not [urn for urn in urns if PRE_RELEASE_KIND.match(urn.split("::")[2].split("$")[-1])]
