"""The JSON Schema and the loader agree on a corpus of sites (tests/site_corpus.py).

Every site the loader accepts the schema accepts; every problem the schema reports the loader reports;
every problem the loader reports the schema reports too, unless it comes from a rule listed in
``config.schema.LOADER_ONLY``: the rules that compare several values (or a value with one derived from
another, or keys of two blocks). Those are exactly the remaining disagreements.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Optional

import jsonschema
import pytest

from config import ConfigError, load_platform
from config.schema import LOADER_ONLY
from config.secrets import SECRET_KEYS
from config.vocabulary import PROJECT_PREFIX
from tests.site_corpus import BROKEN, VALID_SITES, broken_site, stack_document
from tools.docs import schema as schema_tool



@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_tool.SCHEMA_FILE.read_text()))


def _key(path: Iterable[object]) -> str:
    steps = list(path)[1:]  # below "config"
    key = ""
    for step in steps:
        if isinstance(step, int):
            key += f"[{step}]"
        else:
            step = step.removeprefix(PROJECT_PREFIX) if not key else step
            key += f".{step}" if key else step
    return key


def _forbidden_present(schema: dict, error, document: dict) -> list[str]:
    for step in error.schema_path:
        schema = schema[step]
    instance = document
    for step in error.absolute_path:
        instance = instance[step]
    return [name for name, rule in schema.items() if rule is False and name in instance]


def schema_keys(validator, document: dict, missing: Optional[set[str]] = None) -> set[str]:
    """The config keys the schema's errors point at (a missing or unknown key by its own name); the missing
    ones are also added to ``missing``."""
    keys = set()
    missing = set() if missing is None else missing
    for error in validator.iter_errors(document):
        key = _key(error.absolute_path)
        if error.validator == "required":
            absent = {f"{key}.{name}" if key else name.removeprefix(PROJECT_PREFIX)
                      for name in error.validator_value if name not in error.instance}
            keys |= absent
            missing |= absent
        elif error.validator == "additionalProperties":
            known = error.schema.get("properties", {})
            keys |= {f"{key}.{name}" if key else name.removeprefix(PROJECT_PREFIX) for name in error.instance
                     if name not in known and not re.match(next(iter(error.schema.get("patternProperties", {})), "$^"),
                                                           name)}
        elif error.validator is None:  # a `false` schema: keys a block's condition forbids (the error names none)
            keys |= {f"{key}.{name}" for name in _forbidden_present(validator.schema, error, document)}
        else:
            keys.add(key)
    return keys


def loader_issues(config: dict) -> list:
    try:
        load_platform(config, placeholders=SECRET_KEYS)
    except ConfigError as error:
        return error.issues
    return []


def _inside(key: str, outer: str) -> bool:
    return key.startswith((outer + ".", outer + "["))


def _related(loader_key: str, schema_key: str, missing: set[str]) -> bool:
    """The same key; a key inside a block the schema reports missing (the loader names what the block lacks);
    or a key inside one the loader refuses as a whole (the schema also checks the refused block's content)."""
    return loader_key == schema_key or (schema_key in missing and _inside(loader_key, schema_key)) \
        or _inside(schema_key, loader_key)


def loader_only(issue) -> bool:
    return any(re.fullmatch(pattern, issue.key) and words in issue.problem for pattern, words in LOADER_ONLY)


@pytest.mark.parametrize("name", VALID_SITES)
def test_every_valid_site_is_valid_for_both(validator, name):
    config = VALID_SITES[name]()
    assert loader_issues(config) == []
    assert schema_keys(validator, stack_document(config)) == set()


@pytest.mark.parametrize("name", BROKEN)
def test_schema_and_loader_disagree_only_on_the_rules_a_schema_cannot_state(validator, name):
    config = broken_site(name)
    issues = loader_issues(config)
    assert issues, "the corpus holds broken sites only: the loader must refuse this one"
    missing: set[str] = set()
    found = schema_keys(validator, stack_document(config), missing)
    for issue in issues:
        reported = any(_related(issue.key, key, missing) for key in found)
        assert reported != loader_only(issue), (
            f"{issue}: {'the schema reports a rule listed as loader-only' if reported else 'the schema misses it'}")
    for key in found:
        assert any(_related(issue.key, key, missing) for issue in issues), f"only the schema refuses {key}"


def test_every_loader_only_rule_is_met_in_the_corpus():
    met = {(pattern, words) for name in BROKEN for issue in loader_issues(broken_site(name))
           for pattern, words in LOADER_ONLY if re.fullmatch(pattern, issue.key) and words in issue.problem}
    assert met == set(LOADER_ONLY)
