"""What the program renders, checked against the real upstream contracts.

A contract comes from the chart itself when the chart cache holds the version the release pins
(a chart carries its default values, its values schema and its CRDs: ``tools.chart_cache``);
otherwise from ../shared/upstream (files read at one tag, see its SOURCE.txt); a test skips,
saying which of the two is missing and how to fill the cache, only when neither has it.

- every vCluster values object against the chart's values.schema.json (Helm rejects unknown keys);
- every Queue spec against KAI's Queue CRD, made strict: the API server would silently prune an
  unknown field, which for a queue means a quota or limit quietly lost;
- the GPU Operator and KAI values only use keys that exist in the charts' default values;
- the device-plugin profiles only use keys the upstream examples use.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml

from components.gpu_operator import RELEASE_TAGGED
from config import versions
from tests.conftest import COMMITTED_STACKS, UPSTREAM_DIR, dev_config, run, stack_config
from tests.isolation_spec import isolation_config, prefixed
from tools.charts.cache import CACHE_ENV, chart_cache_dir, chart_contracts
from tools.charts.refs import ChartKey
from tools.charts.render import release_chart_key
from tools.charts.pins import pinned_chart_key
from tools.plan.lookup import dig

KAI_CHART = "kai-scheduler"


def contract(key: ChartKey, pick, *fallback: str):
    """``pick(contracts)`` of the cached chart ``key``, else the ../shared/upstream file
    ``fallback`` (parsed), else a skip naming both sources."""
    contracts = chart_contracts(key)
    if contracts is not None:
        return pick(contracts)
    path = UPSTREAM_DIR.joinpath(*fallback)
    if path.exists():
        return json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    pytest.skip(f"no contract for {key.describe()}: the chart cache {chart_cache_dir()} (${CACHE_ENV}) lacks it (fill it with "
                f"`{key.pull_command()}` or `python -m tools.charts add DIR --version {key.version}`) and the "
                f"fallback {path} is absent (set GPU_TENANCY_UPSTREAM to the shared/upstream folder)")


def vcluster_schema_for(version: str) -> dict:
    return contract(pinned_chart_key(versions.VCLUSTER_CHART, version), lambda c: c.schema,
                    "vcluster", "values.schema.json")


def _queue_crd(contracts):
    return contracts.crd("scheduling.run.ai", "Queue")


def queue_schema_for(version: str) -> dict:
    crd = contract(pinned_chart_key(KAI_CHART, version), _queue_crd, "kai-scheduler", "queues.crd.yaml")
    served = next(v for v in crd["spec"]["versions"] if v["name"] == "v2")
    return _strict(copy.deepcopy(served["schema"]["openAPIV3Schema"]["properties"]["spec"]))


@pytest.fixture(scope="module")
def vcluster_schema():
    return vcluster_schema_for(versions.VCLUSTER_VERSION)


@pytest.fixture(scope="module")
def queue_schema():
    return queue_schema_for(versions.KAI_VERSION)


def _strict(schema: dict) -> dict:
    if schema.get("type") == "object" and "properties" in schema:
        schema.setdefault("additionalProperties", False)
    for child in schema.get("properties", {}).values():
        _strict(child)
    return schema


def leaf_paths(values, prefix=()):
    if isinstance(values, dict) and values:
        for key, item in values.items():
            yield from leaf_paths(item, prefix + (key,))
    else:
        yield prefix


ABSENT = object()  # what dig answers for a path the document lacks (a null value is present)


def has_path(document, path) -> bool:
    return dig(document, *path, default=ABSENT) is not ABSENT


@pytest.fixture(scope="module", params=COMMITTED_STACKS)
def stack_run(request):
    return run(stack_config(request.param), stack=request.param)


def releases(program, chart):
    """The program's releases of a chart, by chart name (a KAI release's chart is an oci://
    reference whose registry depends on the version)."""
    return [r for r in program.of_type("kubernetes:helm.sh/v3:Release")
            if release_chart_key(r.inputs).name == chart]


def test_every_rendered_vcluster_values_object_validates(stack_run):
    tenants = releases(stack_run, "vcluster")
    assert tenants
    for release in tenants:
        jsonschema.validate(release.inputs["values"], vcluster_schema_for(release.inputs["version"]))


def test_vcluster_values_with_every_option_set_still_validate(vcluster_schema):
    config = dev_config()
    config["gpu-tenancy:vcluster"].update(
        nodeLabels={"nvidia.com/gpu.present": "true"},
        syncRuntimeClasses=False,
        enforceTolerations=["nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute"],
        controlPlaneResources={"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
        resourceQuota={"cpu": "64", "memory": "256Gi", "pods": 250, "services": 50, "persistentVolumeClaims": 40},
        limitRange={"defaultCpu": "2", "defaultMemory": "4Gi", "defaultRequestCpu": "250m",
                    "defaultRequestMemory": "512Mi"},
        networkPolicy=False,
    )
    for release in releases(run(config), "vcluster"):
        jsonschema.validate(release.inputs["values"], vcluster_schema)


def test_the_schema_check_catches_a_key_vcluster_does_not_have(vcluster_schema):
    # The config refuses such a key in extraValues (tests/test_config_vcluster_values.py); the schema catches one the
    # program itself would render.
    values = releases(run(dev_config()), "vcluster")[0].inputs["values"]
    jsonschema.validate(values, vcluster_schema)
    values["sync"]["toHost"]["pods"]["schedulerName"] = "kai-scheduler"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(values, vcluster_schema)


def test_every_queue_spec_validates_against_the_strict_crd(stack_run):
    queues = stack_run.of_type("kubernetes:scheduling.run.ai/v2:Queue")
    assert queues
    queue_schema = queue_schema_for(releases(stack_run, KAI_CHART)[0].inputs["version"])
    for queue in queues:
        jsonschema.validate(queue.inputs["spec"], queue_schema)


def test_the_strict_crd_catches_a_misspelled_queue_field(queue_schema):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"resources": {"gpu": {"quota": 1, "overquotaWeight": 1}}}, queue_schema)


# Keys the chart's templates read but its values.yaml only shows commented out; dcgmExporter.config.name is checked
# against the templates at the operator tags in tests/test_observability_contract.py, the images' versions by the
# tags of the rendered images in tests/test_chart_images.py.
GPU_OPERATOR_COMMENTED_KEYS = {("dcgmExporter", "config", "name"),
                               *((component, "version") for component in RELEASE_TAGGED)}


def test_gpu_operator_values_only_use_keys_of_the_chart():
    for host_config in (stack_config("eks"), _dev_with_install()):
        release = next(iter(releases(run(host_config), "gpu-operator")))
        defaults = contract(release_chart_key(release.inputs), lambda c: c.values, "gpu-operator", "values.yaml")
        for path in leaf_paths(release.inputs["values"]):
            assert has_path(defaults, path) or tuple(path) in GPU_OPERATOR_COMMENTED_KEYS, \
                f"gpu-operator has no value {'.'.join(path)}"


def _dev_with_install():
    config = dev_config()
    config["gpu-tenancy:gpuOperator"]["mode"] = "install"
    return config


# Maps KAI's values.yaml leaves empty ({}) for a site to fill, and where in KAI's Config the chart copies each
# (templates/_helpers.tpl, tests/test_isolation_contract.py): what the program puts there must fit that schema.
KAI_OPEN_MAPS = {("binder", "plugins"): ("spec", "binder", "plugins")}
# Values the chart's templates read though its values.yaml declares no default: each with what it must hold.
# tests/test_kai_admission.py renders admission.resources into kai-config's admission service at every accepted tag.
KAI_UNDECLARED_MAPS = {("admission", "resources"): {"limits", "requests"}}


def _kai_config_schema(key: ChartKey, path: tuple[str, ...]) -> dict:
    crd = contract(key, lambda c: c.crd("kai.scheduler", "Config"), "kai-scheduler", "configs.crd.yaml")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for name in path:
        schema = schema["properties"][name]
    schema = copy.deepcopy(schema)
    if isinstance(schema.get("additionalProperties"), dict):
        _strict(schema["additionalProperties"])
    return _strict(schema)


def _assert_kai_values_only_use_keys_of_the_chart(program):
    [release] = releases(program, KAI_CHART)
    key = release_chart_key(release.inputs)
    defaults = contract(key, lambda c: c.values, "kai-scheduler", "values.yaml")
    values = release.inputs["values"]
    for path in leaf_paths(values):
        undeclared = next((prefix for prefix in KAI_UNDECLARED_MAPS if tuple(path[:len(prefix)]) == prefix), None)
        if undeclared is not None:
            assert not has_path(defaults, undeclared), f"kai-scheduler now declares {'.'.join(undeclared)}"
            assert path[len(undeclared)] in KAI_UNDECLARED_MAPS[undeclared], path
            continue
        open_map = next((prefix for prefix in KAI_OPEN_MAPS if tuple(path[:len(prefix)]) == prefix), None)
        if open_map is None:
            assert has_path(defaults, path), f"kai-scheduler has no value {'.'.join(path)}"
            continue
        assert dig(defaults, *open_map) == {}, f"kai-scheduler's {'.'.join(open_map)} is no longer an open map"
        jsonschema.validate(dig(values, *open_map), _kai_config_schema(key, KAI_OPEN_MAPS[open_map]))
    assert "gpuSharing" not in values, "a top-level gpuSharing key never existed"


def test_kai_values_only_use_keys_of_the_chart(stack_run):
    _assert_kai_values_only_use_keys_of_the_chart(stack_run)


@pytest.mark.parametrize("version", ["v0.16.0", "v0.17.0"])
def test_kai_contract_holds_for_a_site_pinning_another_release(version):
    # The contract is the pinned release's own chart (when cached), not the default's.
    config = dev_config()
    config["gpu-tenancy:kaiScheduler"]["version"] = version
    program = run(config)
    assert release_chart_key(releases(program, KAI_CHART)[0].inputs).version == version
    _assert_kai_values_only_use_keys_of_the_chart(program)


def test_kai_values_of_a_memory_capped_site_are_the_chart_s():
    # binder.plugins is an empty map in the chart's values, filled for memory-capped teams (found opening a trial
    # site: every site with such a team failed the stack-file test above).
    program = run(prefixed(isolation_config()), stack="isolation")
    assert dig(releases(program, KAI_CHART)[0].inputs["values"], "binder", "plugins") == {"hamicore": {"enabled": True}}
    _assert_kai_values_only_use_keys_of_the_chart(program)


def test_a_plugin_setting_kai_s_config_lacks_is_caught():
    schema = _kai_config_schema(pinned_chart_key(KAI_CHART, versions.KAI_VERSION), KAI_OPEN_MAPS[("binder", "plugins")])
    jsonschema.validate({"hamicore": {"enabled": True}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"hamicore": {"enable": True}}, schema)


def test_sharing_profiles_only_use_keys_of_the_device_plugin_config(stack_run):
    examples = UPSTREAM_DIR / "gpu-operator" / "examples"
    if not examples.is_dir():  # the chart carries no device-plugin config examples
        pytest.skip(f"device-plugin config examples {examples} are absent (set GPU_TENANCY_UPSTREAM)")
    known: set[tuple] = set()
    for path in examples.glob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            for text in (document or {}).get("data", {}).values():
                known |= {p for p in leaf_paths(yaml.safe_load(text))}
    known_prefixes = {path[:i] for path in known for i in range(1, len(path) + 1)}
    config_map = stack_run.of_type("kubernetes:core/v1:ConfigMap")[0]
    for text in config_map.inputs["data"].values():
        for path in leaf_paths(yaml.safe_load(text)):
            if path[:3] == ("sharing", "timeSlicing", "resources"):
                continue
            # renameByDefault / failRequestsGreaterThanOne are device-plugin options the examples omit.
            if path[-1] in ("renameByDefault", "failRequestsGreaterThanOne"):
                assert path[:2] == ("sharing", "timeSlicing")
                continue
            assert path in known_prefixes, f"device plugin config has no key {'.'.join(path)}"
