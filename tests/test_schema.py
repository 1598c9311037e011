"""The published JSON Schema of the stack files comes from the loader and agrees with it."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest

from config import ConfigError, load_platform, versions
from config.stack_file import read_stack_file, stack_names
from config.vocabulary import PROJECT_PREFIX, project_config
from tools.docs import schema as schema_tool

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    document = json.loads(schema_tool.SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document)


def test_the_committed_schema_is_the_generated_one():
    assert schema_tool.SCHEMA_FILE.read_text() == schema_tool.render(), "run python -m tools.docs.schema"
    assert schema_tool.main(["--check"]) == 0


@pytest.mark.parametrize("stack", stack_names(ROOT))
def test_every_committed_stack_file_is_valid_under_the_schema(validator, stack):
    assert [error.message for error in validator.iter_errors(read_stack_file(ROOT / f"Pulumi.{stack}.yaml"))] == []


def _dev() -> dict:
    return read_stack_file(ROOT / "Pulumi.dev.yaml")


def _set(document: dict, path: tuple, value) -> dict:
    document = copy.deepcopy(document)
    node = document["config"]
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return document


@pytest.mark.parametrize("path, value", [
    ((PROJECT_PREFIX + "teams", 0, "priority"), "high"),
    ((PROJECT_PREFIX + "teams", 0, "nmae"), "typo"),
    ((PROJECT_PREFIX + "teams", 0, "resources", "gpu", "quota"), -2),
    ((PROJECT_PREFIX + "teams", 0, "name"), "Team_NLP"),
    ((PROJECT_PREFIX + "cluster", "microk8s", "port"), 70000),
    ((PROJECT_PREFIX + "gpuOperator", "mode"), "helm"),
    ((PROJECT_PREFIX + "vcluster", "podSecurity"), "none"),
    ((PROJECT_PREFIX + "ci",), {"runner": []}),
])
def test_what_the_loader_refuses_for_its_type_the_schema_refuses_too(validator, path, value):
    document = _set(_dev(), path, value)
    assert list(validator.iter_errors(document)), "the schema accepts it"
    raw = project_config(document["config"])
    with pytest.raises(ConfigError):
        load_platform(raw)


def test_a_misspelt_namespace_and_a_plain_text_secret_are_refused(validator):
    document = _dev()
    document["config"]["gpu-tenency:kaiScheduler"] = document["config"].pop(PROJECT_PREFIX + "kaiScheduler")
    assert list(validator.iter_errors(document))
    document = _set(_dev(), (PROJECT_PREFIX + "kubeconfig",), "apiVersion: v1")
    assert list(validator.iter_errors(document))
    document = _set(_dev(), ("aws:region",), "eu-west-1")
    assert not list(validator.iter_errors(document))


def _above(version: str) -> str:
    """The next patch release after ``version``."""
    prefix = "v" if version.startswith("v") else ""
    major, minor, patch = versions.release_numbers(version)
    return f"{prefix}{major}.{minor}.{patch + 1}"


# (key, version, accepted): around each chart's floor and pin and between them, where the loader and the schema's
# list of releases must agree (pre-releases, build metadata and numbers no release carries are refused).
VERSIONS = [
    *[(key, version, True) for key, version in (
        ("kaiScheduler", versions.KAI_MINIMUM_VERSION), ("kaiScheduler", "v0.16.8"),
        ("kaiScheduler", versions.KAI_VERSION), ("vcluster", versions.VCLUSTER_MINIMUM_VERSION),
        ("vcluster", "0.35.3"), ("vcluster", versions.VCLUSTER_VERSION),
        ("observability", versions.KUBE_PROMETHEUS_STACK_MINIMUM_VERSION), ("observability", "88.1.6"),
        ("observability", versions.KUBE_PROMETHEUS_STACK_VERSION))],
    *[(key, version, False) for key, version in (
        ("kaiScheduler", "v0.15.9"), ("kaiScheduler", _above(versions.KAI_VERSION)), ("kaiScheduler", "v0.20.1"),
        ("kaiScheduler", "v1.0.0"), ("kaiScheduler", f"{versions.KAI_VERSION}-rc.1"), ("kaiScheduler", "v0.16.9"),
        ("vcluster", _above(versions.VCLUSTER_VERSION)), ("vcluster", "0.37.0-rc.1"), ("vcluster", "0.100.0"),
        ("vcluster", "0.36.1-rc.2"), ("vcluster", f"{versions.VCLUSTER_VERSION}+build.7"), ("vcluster", "0.35.4"),
        ("observability", _above(versions.KUBE_PROMETHEUS_STACK_VERSION)), ("observability", "88.10.0"),
        ("observability", "87.99.99"), ("observability", "88.1.7"))],
]


@pytest.mark.parametrize("key, version, accepted", VERSIONS, ids=[f"{key}={version}" for key, version, _ in VERSIONS])
def test_the_schema_and_the_loader_accept_the_same_chart_versions(validator, key, version, accepted):
    field = "chartVersion" if key == "observability" else "version"
    document = copy.deepcopy(_dev())
    section = document["config"].setdefault(PROJECT_PREFIX + key, {})
    section[field] = version
    if key == "observability":
        section["prometheus"] = "install"
    assert (not list(validator.iter_errors(document))) is accepted
    raw = project_config(document["config"])
    if accepted:
        load_platform(raw)
    else:
        with pytest.raises(ConfigError, match=re.escape(f"{key}.{field} = '{version}'")):
            load_platform(raw)
