"""``Pulumi.yaml`` as the Pulumi CLI reads it, before any program runs.

The CLI parses the project file and validates it against its project schema (pulumi/pulumi
``sdk/go/common/workspace/project.json``); a file that is not YAML, or breaks the schema, stops every
``pulumi`` command. It then refuses a stack that lacks a declared key with no default, or whose value
has another type than the one declared. The rules below are those of the schema, and, when the
pulumi/pulumi mirror is present ($GPU_TENANCY_MIRRORS), the real schema at the pinned tag is applied too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from config.keys import REQUIRED
from config.load import STACK_CONFIG
from config.secrets import SECRET_KEYS
from config.vocabulary import PROJECT, PROJECT_PREFIX, project_config
from config.stack_file import read_stack_file, stack_names
from tests.conftest import MIRRORED_TAGS, git

ROOT = Path(__file__).resolve().parent.parent
PROJECT_FILE = ROOT / "Pulumi.yaml"
PULUMI = "pulumi/pulumi"

DECLARATION_FIELDS = {"type", "items", "description", "secret", "default"}
CONFIG_TYPES = {"string", "integer", "boolean", "array", "object"}
PYTHON_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict}


def parse(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text)


def project_problems(text: str) -> list[str]:
    """What the CLI would refuse in a project file: not YAML, or against its project schema."""
    try:
        project = parse(text)
    except YAMLError as error:
        return [f"not YAML: {str(error).splitlines()[0]}"]
    if not isinstance(project, dict):
        return ["not a map"]
    problems = [f"{field} is required" for field in ("name", "runtime") if not project.get(field)]
    for key, declaration in (project.get("config") or {}).items():
        if not isinstance(declaration, dict):
            if not isinstance(declaration, (str, int, bool, list)):
                problems.append(f"config {key}: a declaration is a map or a plain value")
            continue
        problems += [f"config {key}: {field} is not a declaration field" for field in set(declaration) - DECLARATION_FIELDS]
        if declaration.get("type") not in CONFIG_TYPES | {None}:
            problems.append(f"config {key}: type {declaration['type']!r} is not one of {sorted(CONFIG_TYPES)}")
        if declaration.get("type") == "array" and "items" not in declaration:
            problems.append(f"config {key}: an array needs items")
        if "default" in declaration and declaration.get("type") in PYTHON_TYPES \
                and not _has_type(declaration["default"], declaration["type"]):
            problems.append(f"config {key}: the default is not a {declaration['type']}")
    return problems


def _has_type(value: Any, config_type: str) -> bool:
    if config_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, PYTHON_TYPES[config_type])


def declarations() -> dict[str, dict]:
    return parse(PROJECT_FILE.read_text())["config"]


def stack_problems(declared: dict[str, dict], stack_config: dict[str, Any]) -> list[str]:
    """What the CLI refuses in a stack against the project's declarations: a declared key with no
    default that the stack does not set, and a value of another type than the one declared."""
    problems = [f"{key} is declared with no default but not set"
                for key, declaration in declared.items() if "default" not in declaration and key not in stack_config]
    for key, value in stack_config.items():
        declaration = declared.get(key)
        if not declaration or isinstance(value, dict) and set(value) == {"secure"}:
            continue
        if not _has_type(value, declaration["type"]):
            problems.append(f"{key} is declared {declaration['type']} but set to {type(value).__name__}")
    return problems


# --- the committed project file ------------------------------------------------------------------


def test_the_project_file_passes_the_clis_rules():
    assert project_problems(PROJECT_FILE.read_text()) == []


def test_the_project_file_passes_the_clis_own_schema_at_the_pinned_tag():
    [tag] = MIRRORED_TAGS[PULUMI]
    schema = json.loads(git(PULUMI, "show", f"{tag}:sdk/go/common/workspace/project.json"))
    jsonschema.validate(parse(PROJECT_FILE.read_text()), schema)


def test_the_clis_own_schema_refuses_an_unknown_declaration_field():
    [tag] = MIRRORED_TAGS[PULUMI]
    schema = json.loads(git(PULUMI, "show", f"{tag}:sdk/go/common/workspace/project.json"))
    project = parse(PROJECT_FILE.read_text())
    project["config"][f"{PROJECT}:extra"] = {"type": "object", "required": True}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(project, schema)


def test_the_declared_keys_are_the_keys_the_loader_reads():
    assert all(key.startswith(PROJECT_PREFIX) for key in declarations())
    declared = set(project_config(declarations()))
    assert declared == set(STACK_CONFIG.names) | set(SECRET_KEYS)


def test_the_cli_requires_the_top_level_keys_the_definitions_require():
    """A declaration without a default makes the CLI refuse a stack that leaves the key out."""
    cli_required = {name for name in STACK_CONFIG.names if "default" not in declarations()[f"{PROJECT}:{name}"]}
    assert cli_required == {key.name for key in STACK_CONFIG.keys if key.default is REQUIRED}


def test_secrets_are_declared_with_an_empty_default_so_a_site_without_them_still_starts():
    for name in SECRET_KEYS:
        assert declarations()[f"{PROJECT}:{name}"]["default"] == ""


@pytest.mark.parametrize("stack", stack_names(ROOT))
def test_every_stack_file_satisfies_the_declarations(stack):
    config = read_stack_file(ROOT / f"Pulumi.{stack}.yaml").get("config") or {}
    assert stack_problems(declarations(), config) == []


# --- what the rules refuse (each could land unnoticed by the program's own tests) -----------------


def with_conflict(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:5] + ["<" * 7 + " HEAD\n", lines[5], "=" * 7 + "\n", lines[5], ">" * 7 + " branch\n"]
                   + lines[6:])


def test_a_conflicted_project_file_is_refused():
    assert project_problems(with_conflict(PROJECT_FILE.read_text()))


@pytest.mark.parametrize("declaration, problem", [
    ({"type": "object", "required": True}, "required is not a declaration field"),
    ({"type": "map"}, "type 'map' is not one of"),
    ({"type": "array"}, "an array needs items"),
    ({"type": "integer", "default": "7"}, "the default is not a integer"),
])
def test_a_declaration_the_cli_refuses_is_refused(declaration, problem):
    project = parse(PROJECT_FILE.read_text())
    project["config"][f"{PROJECT}:extra"] = declaration
    text = json.dumps(project)
    assert any(problem in found for found in project_problems(text))


def test_a_project_without_runtime_is_refused():
    project = parse(PROJECT_FILE.read_text())
    del project["runtime"]
    assert project_problems(json.dumps(project)) == ["runtime is required"]


def test_a_stack_without_a_required_key_or_with_a_wrong_type_is_refused():
    config = read_stack_file(ROOT / "Pulumi.dev.yaml")["config"]
    missing = {key: value for key, value in config.items() if key != f"{PROJECT}:teams"}
    assert stack_problems(declarations(), missing) == [f"{PROJECT}:teams is declared with no default but not set"]
    wrong = {**config, f"{PROJECT}:vcluster": "0.36.1"}
    assert stack_problems(declarations(), wrong) == [f"{PROJECT}:vcluster is declared object but set to str"]
