"""The published JSON Schema of the stack files comes from the loader and agrees with it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from config import ConfigError, load_platform
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
