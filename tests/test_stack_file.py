"""Spec of reading a stack file as the Pulumi CLI does (YAML 1.2): what YAML 1.1 would read differently is
an error naming its key, never a traceback."""

from __future__ import annotations


import pytest
import yaml

from config import ConfigError
from config.stack_file import StackFileError, read_stack_file
from tests.config_spec import DEV_STACK


# --- stack files: read as Pulumi reads them (YAML 1.2) -----------------------------------------


def _stack_file(tmp_path, body: str):
    path = tmp_path / "Pulumi.site.yaml"
    path.write_text("config:\n" + body)
    return path


@pytest.mark.parametrize("line, key, fix", [
    ("  gpu-tenancy:teams:\n    - name: a\n      protect: yes\n", "teams[0].protect", "write true for a boolean"),
    ("  gpu-tenancy:teams:\n    - name: a\n      displayName: 2026-01-01\n", "teams[0].displayName",
     'quote it ("2026-01-01")'),
    ("  gpu-tenancy:kaiScheduler:\n    gpuSharing: off\n", "kaiScheduler.gpuSharing", "write false"),
    ("  aws:region: on\n", "aws:region", 'quote it ("on") for text'),
    ("  gpu-tenancy:vcluster:\n    nodeLabels:\n      gpu-tenancy/pool: 0777\n",
     'vcluster.nodeLabels["gpu-tenancy/pool"]', 'quote it ("0777")'),
])
def test_a_value_yaml_1_1_reads_differently_is_a_config_error_naming_its_key(tmp_path, line, key, fix):
    with pytest.raises(ConfigError) as raised:
        read_stack_file(_stack_file(tmp_path, line))
    assert raised.value.keys == [key]
    assert fix in raised.value.issues[0].fix and "YAML 1.2" in raised.value.issues[0].problem


def test_quoted_values_are_text_and_true_false_are_booleans(tmp_path):
    config = read_stack_file(_stack_file(tmp_path, '  gpu-tenancy:teams:\n    - name: a\n      displayName: '
                                                   '"2026-01-01"\n      protect: true\n      strict: False\n'
                                                   "      vclusterName: 'on'\n"))["config"]
    assert config["gpu-tenancy:teams"] == [{"name": "a", "displayName": "2026-01-01", "protect": True,
                                            "strict": False, "vclusterName": "on"}]


def test_a_key_set_twice_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as raised:
        read_stack_file(_stack_file(tmp_path, "  gpu-tenancy:organization:\n    name: a\n    name: b\n"))
    assert raised.value.keys == ["organization.name"]


def test_broken_yaml_names_the_file_and_line(tmp_path):
    with pytest.raises(StackFileError, match=r"Pulumi.site.yaml line 4, column \d+: not valid YAML"):
        read_stack_file(_stack_file(tmp_path, "  gpu-tenancy:organization:\n    name: [a\n  x: 1\n"))


def test_explicit_tags_are_refused(tmp_path):
    with pytest.raises(ConfigError) as raised:
        read_stack_file(_stack_file(tmp_path, "  gpu-tenancy:organization: !!python/object:os.system {}\n"))
    assert raised.value.keys == ["organization"]


@pytest.mark.parametrize("stack", sorted(p.name[len("Pulumi."):-len(".yaml")]
                                         for p in DEV_STACK.parent.glob("Pulumi.*.yaml")))
def test_committed_stack_files_mean_the_same_to_yaml_1_1_and_1_2_readers(stack):
    path = DEV_STACK.parent / f"Pulumi.{stack}.yaml"
    assert read_stack_file(path) == yaml.safe_load(path.read_text())
