"""Every value of the vCluster chart is classified (config/vcluster_values.py), read from the chart at every accepted
tag, and each refusal's reason holds there: the grants the chart renders when it is on, the code that reads it.

A chart release that adds a value fails here until someone reads what it does and classifies it: a site's
``vcluster.extraValues`` may set only what is classified as the site's or as an override the program allows.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from components.tenant import vcluster_values
from config.merge import deep_merge
from config.vcluster_values import JUDGED, REFUSED, SINCE, TABLE, classified
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, mirrored_tag
from tests.test_host_reads_contract import syncer_reads
from tests.test_synced_kinds_contract import chart, syncer_writes, teams, unchecked_writes  # noqa: F401 (fixture)
from tools.offline.mocks import MOCK_CLUSTER_DNS

VCLUSTER = "loft-sh/vcluster"


def schema_values(schema: dict, node: dict | None = None, path: tuple[str, ...] = ()) -> dict[str, bool]:
    """Every value the chart's schema lets a site write, dotted, each with whether it is a map of the site's own keys
    (an object without properties, or a map of strings) rather than one value."""
    node = schema if node is None else node
    if "$ref" in node:
        return schema_values(schema, schema["$defs"][node["$ref"].rsplit("/", 1)[1]], path)
    if node.get("properties"):
        found: dict[str, bool] = {}
        for key, child in node["properties"].items():
            found.update(schema_values(schema, child, path + (key,)))
        return found
    variants = node.get("anyOf") or node.get("oneOf") or [node]
    return {".".join(path): any(variant.get("type") == "object" or "patternProperties" in variant
                                for variant in variants)}


def chart_schema(tag: str) -> dict[str, bool]:
    return schema_values(json.loads(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:chart/values.schema.json")))


def value_paths(values: object, path: tuple[str, ...] = ()):
    if isinstance(values, dict):
        for key, value in values.items():
            yield from value_paths(value, path + (key,))
    else:
        yield ".".join(path)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_every_value_of_the_chart_is_classified(tag):
    version = tag.removeprefix("v")
    schema = chart_schema(tag)
    values = set(value_paths(yaml.safe_load(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:chart/values.yaml"))))
    unclassified = sorted(path for path in set(schema) | values if classified(path, version) is None)
    assert unclassified == [], (
        f"vCluster {tag} has values config/vcluster_values.py does not classify: read what the host grants and what a "
        "tenant does with each (chart templates, pkg/config, the code that reads it), then classify it")
    # A map of the site's own keys is classified as one (``path.*``), so that its keys pass.
    for path, is_map in schema.items():
        key, _ = classified(path + ".key" if is_map else path, version)
        assert key.endswith(".*") if is_map else True, (tag, path)


def test_each_classified_value_is_one_an_accepted_chart_has():
    schemas = {tag.removeprefix("v"): chart_schema(tag) for tag in ACCEPTED_VCLUSTER_TAGS}
    for key in TABLE:
        path = key.removesuffix(".*")
        holding = {version for version, schema in schemas.items()
                   if path in schema or (key.endswith(".*") and any(p.startswith(path + ".") for p in schema))}
        assert holding, f"{key}: no accepted vCluster chart has it; remove it"
        if not key.endswith(".*"):
            assert schemas and all(not is_map for version in holding for p, is_map in schemas[version].items()
                                   if p == path), key
        expected = {version for version in schemas if classified(path if not key.endswith(".*") else path + ".x",
                                                                 version)}
        assert holding == expected or key.endswith(".*"), (key, sorted(holding), sorted(expected))
    assert set(SINCE) <= set(TABLE)
