"""A custom resource as the API server takes it: stored the way its CRD's structural schema says, then validated.

On create, the API server drops a null the schema neither admits (``nullable``) nor defaults, fills each absent
field that has a ``default`` (a null one too, unless it is nullable), then validates against the schema and its
CEL rules (``x-kubernetes-validations``, evaluated with cel-python; a transition rule, which reads ``oldSelf``,
only runs on update): so a chart that renders ``name: null`` or leaves out a required field the CRD defaults is
accepted, and one that breaks a rule is not. Unknown fields are reported instead of pruned, as the program would
lose them silently.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Iterator, Mapping, Optional

import celpy
import jsonschema


def strict_crd_schema(schema: Mapping[str, Any], partial: bool = False) -> dict[str, Any]:
    """A CRD's structural schema with unknown fields refused where the API server would prune
    them (objects with properties and no ``x-kubernetes-preserve-unknown-fields``); ``partial``
    drops ``required`` (for patches). OpenAPI v3.0 spellings become JSON Schema's: a boolean
    ``exclusiveMinimum``/``exclusiveMaximum`` qualifies ``minimum``/``maximum``; ``nullable``
    admits null."""
    result = dict(schema)
    if partial:
        result.pop("required", None)
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(result.get(exclusive), bool):
            if result.pop(exclusive) and bound in result:
                result[exclusive] = result.pop(bound)
    if result.pop("nullable", False) and isinstance(result.get("type"), str):
        result["type"] = [result["type"], "null"]
    if result.get("properties") is not None:
        result["properties"] = {key: strict_crd_schema(item, partial) for key, item in result["properties"].items()}
        if "additionalProperties" not in result and not result.get("x-kubernetes-preserve-unknown-fields"):
            result["additionalProperties"] = False
    if isinstance(result.get("items"), Mapping):
        result["items"] = strict_crd_schema(result["items"], partial)
    if isinstance(result.get("additionalProperties"), Mapping):
        result["additionalProperties"] = strict_crd_schema(result["additionalProperties"], partial)
    return result


def _field_schema(schema: Optional[Mapping[str, Any]], field: str) -> Optional[Mapping[str, Any]]:
    """The schema of ``field`` of an object: its property's, else the one every other key takes, if any."""
    if not schema:
        return None
    found = (schema.get("properties") or {}).get(field)
    if found is None and isinstance(schema.get("additionalProperties"), Mapping):
        found = schema["additionalProperties"]
    return found


def _null_to_drop(value: Any, schema: Optional[Mapping[str, Any]]) -> bool:
    return value is None and schema is not None and not schema.get("nullable") and "default" not in schema


def _drop_unadmitted_nulls(value: Any, schema: Optional[Mapping[str, Any]]) -> None:
    if isinstance(value, dict):
        for key in list(value):
            field = _field_schema(schema, key)
            if _null_to_drop(value[key], field):
                del value[key]
            else:
                _drop_unadmitted_nulls(value[key], field)
    elif isinstance(value, list):
        for item in value:
            _drop_unadmitted_nulls(item, (schema or {}).get("items"))


def _takes_default(value: Any, found: bool, schema: Mapping[str, Any]) -> bool:
    return "default" in schema and (not found or (value is None and not schema.get("nullable")))


def _fill_defaults(value: Any, schema: Optional[Mapping[str, Any]]) -> None:
    if not schema:
        return
    if isinstance(value, dict):
        for key, field in (schema.get("properties") or {}).items():
            if _takes_default(value.get(key), key in value, field):
                value[key] = copy.deepcopy(field["default"])
        for key in value:
            field = _field_schema(schema, key)
            if field is not None and key not in (schema.get("properties") or {}) and _takes_default(
                    value[key], True, field):
                value[key] = copy.deepcopy(field["default"])
            _fill_defaults(value[key], field)
    elif isinstance(value, list):
        items = schema.get("items")
        for index, item in enumerate(value):
            if isinstance(items, Mapping) and _takes_default(item, True, items):
                value[index] = item = copy.deepcopy(items["default"])
            _fill_defaults(item, items)


def as_stored(document: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` as the API server keeps it under its CRD's ``schema``: unadmitted nulls dropped, then the
    schema's defaults filled in (a copy; the document is left as it is)."""
    stored = copy.deepcopy(dict(document))
    _drop_unadmitted_nulls(stored, schema)
    _fill_defaults(stored, schema)
    return stored


@functools.lru_cache(maxsize=None)
def _rule_program(rule: str) -> Any:
    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def _broken_rules(value: Any, schema: Optional[Mapping[str, Any]], path: str) -> Iterator[tuple[str, str]]:
    """(where, what) for each CEL rule of ``schema`` that ``value`` (stored as the API server keeps it) breaks,
    or that cannot be evaluated on it (the API server refuses those too)."""
    if not schema or value is None:
        return
    for validation in schema.get("x-kubernetes-validations") or []:
        rule = validation["rule"]
        if "oldSelf" in rule:
            continue  # a transition rule: there is no old object on create
        try:
            holds = bool(_rule_program(rule).evaluate({"self": celpy.json_to_cel(value)}))
            broken = None if holds else validation.get("message") or f"failed rule: {rule}"
        except (celpy.CELEvalError, celpy.CELParseError) as error:
            broken = f"rule `{rule}` cannot be evaluated: {error.args[0] if error.args else error}"
        if broken:
            yield path or "(top level)", broken
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _broken_rules(item, _field_schema(schema, key), f"{path}/{key}".lstrip("/"))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _broken_rules(item, schema.get("items"), f"{path}/{index}".lstrip("/"))


def custom_resource_problems(manifest: Mapping[str, Any], crd: Mapping[str, Any], version: str,
                             patch: bool) -> list[tuple[str, str]]:
    """What the API server would refuse in ``manifest`` (a patch is partial: no field is required), each as
    (problem, fix)."""
    served = {v["name"]: v for v in crd["spec"].get("versions") or [] if v.get("served", True)}
    name = crd["metadata"]["name"]
    if version not in served:
        return [(f"CRD {name} serves no version {version} (serves {', '.join(sorted(served)) or 'none'})",
                 "use a served version")]
    schema = (served[version].get("schema") or {}).get("openAPIV3Schema")
    if not schema:
        return []
    document = {key: value for key, value in manifest.items() if key != "status"}
    if not patch:
        document = as_stored(document, schema)
    strict = strict_crd_schema(schema, partial=patch)
    # apiVersion, kind and metadata are the API server's (TypeMeta, ObjectMeta), whatever the CRD lists.
    strict.setdefault("properties", {}).update(apiVersion={"type": "string"}, kind={"type": "string"},
                                               metadata={"type": "object"})
    problems = [(f"invalid against CRD {name} at {'/'.join(str(p) for p in error.absolute_path) or '(top level)'}: "
                 f"{error.message}", "fix the field (an unknown field would be pruned silently)")
                for error in jsonschema.Draft7Validator(strict).iter_errors(document)]
    if not patch:  # a patch's rules run on the merged object, which the plan does not hold
        problems += [(f"breaks a validation rule of CRD {name} at {where}: {what}", "fix the field as the rule says")
                     for where, what in _broken_rules(document, schema, "")]
    return problems
