"""Spec of ``python -m tools.plan STACK [--out DIR]``: an offline, reproducible plan of a stack.

The CLI runs the program through Pulumi's mocks and writes ``plan.json`` (every registered
resource, outputs, secret output names, warnings) and ``summary.md`` (a reviewer's digest).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.stack_file import PROJECT_DIR
from tests.conftest import dev_config
from tools.offline import mockrun
from tools.plan import cli as plan
from tools.deployability.inputs import site_from_plan
from tools.offline.recording import REDACTED

RELEASE = "kubernetes:helm.sh/v3:Release"
QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
TEAMS = ("team-nlp", "team-vision", "team-recommender")
FAKE_TOKEN = "offline-plan-token"  # the token of every fake kubeconfig tools.offline.mocks hands out


def run_main(*argv: str, **options) -> tuple[int, str, str]:
    """``main(argv, **options)`` in this process, with its stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = plan.main(list(argv), **options)
    return code, out.getvalue(), err.getvalue()


def files(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in (plan.PLAN_FILE, plan.SUMMARY_FILE)}


@pytest.fixture(scope="module")
def dev_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plan-dev")
    code, stdout, stderr = run_main("dev", "--out", str(out))
    assert code == 0, stderr
    assert "plan.json" in stdout and "summary.md" in stdout and "resources" in stdout
    return out


@pytest.fixture(scope="module")
def dev_plan(dev_out) -> dict:
    return json.loads((dev_out / plan.PLAN_FILE).read_text())


@pytest.fixture(scope="module")
def dev_summary(dev_out) -> str:
    return (dev_out / plan.SUMMARY_FILE).read_text()


# --- reproducibility ----------------------------------------------------------------------------


def test_two_runs_give_byte_identical_files(dev_out, tmp_path):
    again = tmp_path / "again"
    code, _, stderr = run_main("dev", "--out", str(again))
    assert code == 0, stderr
    assert files(again) == files(dev_out)


def test_the_cli_in_a_fresh_interpreter_writes_the_same_files(dev_out, tmp_path):
    out = tmp_path / "subprocess"
    # ResourceWarnings shown: the CLI must close the event loops the SDK leaves behind.
    env = {**os.environ, "PYTHONWARNINGS": "always::ResourceWarning"}
    result = subprocess.run([sys.executable, "-m", "tools.plan", "dev", "--out", str(out)], cwd=PROJECT_DIR,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert str(out / "plan.json") in result.stdout or "plan.json" in result.stdout
    assert "unclosed" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    assert files(out) == files(dev_out)


def test_plan_json_is_canonical(dev_out, dev_plan):
    text = (dev_out / plan.PLAN_FILE).read_text()
    assert text == json.dumps(dev_plan, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert set(dev_plan) == {"project", "stack", "resources", "outputs", "secretOutputs", "warnings", "notes"}
    assert (dev_plan["project"], dev_plan["stack"]) == ("gpu-tenancy", "dev")
    urns = [r["urn"] for r in dev_plan["resources"]]
    assert urns == sorted(urns) and len(set(urns)) == len(urns)
    assert dev_plan["secretOutputs"] == sorted(dev_plan["secretOutputs"])
    assert dev_plan["warnings"] == sorted(dev_plan["warnings"])
    for resource in dev_plan["resources"]:
        assert {"type", "name", "urn", "parent", "provider", "dependencies", "options", "inputs"} <= set(resource)
        assert resource["dependencies"] == sorted(set(resource["dependencies"]))
        for value in resource["options"].values():
            if isinstance(value, list):
                assert value == sorted(value)


def test_files_hold_no_machine_specific_text(dev_out):
    for name, content in files(dev_out).items():
        text = content.decode()
        assert str(PROJECT_DIR) not in text, name
        assert str(dev_out) not in text, name


# --- what dev plans -----------------------------------------------------------------------------


def test_summary_lists_setup_commands_in_the_order_they_run_and_teams_under_the_org_queue(dev_summary):
    # What else the dev summary says is in its golden copy (tests/golden/dev/summary.md).
    assert dev_summary.index("snap refresh --hold") < dev_summary.index("enable dns") \
        < dev_summary.index("enable hostpath-storage") < dev_summary.index("microk8s config`")
    assert "├── team-nlp" in dev_summary and "└── team-vision" in dev_summary


def test_the_summary_reads_the_decisions_the_components_registered(dev_plan):
    """Host kind, operator mode and each tenant's team come from the components' outputs, not from
    resource types, stack outputs or name prefixes: change only what a component registered."""
    document = copy.deepcopy(dev_plan)
    for resource in document["resources"]:
        outputs = resource.get("outputs") or {}
        if "kind" in outputs:
            outputs["kind"] = "kubeconfig"
        if "mode" in outputs:
            outputs["mode"] = "external"
        if "team" in outputs:
            outputs["team"] = outputs["team"].upper()
    summary = plan.render_summary(document)
    assert "Kind: **kubeconfig**" in summary and "Kind: **microk8s**" not in summary
    assert "Mode: **external**" in summary and "Mode: **ClusterPolicy patch**" not in summary
    tenants = summary.split("\n## Tenants\n")[1].split("\n## ")[0]
    for team in TEAMS:
        assert f"\n| `{team.upper()}` |" in tenants and f"\n| `{team}` |" not in tenants
    assert site_from_plan(document).kind == "kubeconfig"


def test_no_secret_value_leaks(dev_out, dev_plan, dev_summary):
    plan_text = (dev_out / plan.PLAN_FILE).read_text()
    for text in (plan_text, dev_summary):
        assert FAKE_TOKEN not in text
        assert mockrun.SECRET_PLACEHOLDER not in text
        assert REDACTED in text
    assert {"hostKubeconfig", "tenantKubeconfigs"} <= set(dev_plan["secretOutputs"])
    assert dev_plan["outputs"]["hostKubeconfig"] == REDACTED


def test_eks_summary_shows_the_cluster_and_its_node_groups(tmp_path):
    code, _, stderr = run_main("eks", "--out", str(tmp_path))
    assert code == 0, stderr
    document = json.loads((tmp_path / plan.PLAN_FILE).read_text())
    summary = (tmp_path / plan.SUMMARY_FILE).read_text()
    cluster = next(r for r in document["resources"] if r["type"] == "eks:index:Cluster")
    assert "Kind: **eks**" in summary
    assert f"EKS cluster `{cluster['inputs']['name']}`" in summary
    for group in (r for r in document["resources"] if r["type"] == "eks:index:ManagedNodeGroup"):
        assert f"`{group['name']}`" in summary
        for instance_type in group["inputs"]["instanceTypes"]:
            assert f"`{instance_type}`" in summary
    assert "nvidia.com/gpu=true:NO_SCHEDULE" in summary
    assert "Mode: **install**" in summary
    assert FAKE_TOKEN not in summary and FAKE_TOKEN not in json.dumps(document)
    # The network and the names EKS will give the node groups.
    vpc = next(r for r in document["resources"] if r["type"] == "aws:ec2/vpc:Vpc")
    assert f"VPC created by this stack: CIDR `{vpc['inputs']['cidrBlock']}`" in summary
    for group in (r for r in document["resources"] if r["type"] == "eks:index:ManagedNodeGroup"):
        assert f"`{group['inputs']['nodeGroupNamePrefix']}<suffix>`" in summary


def test_the_summary_shows_only_the_device_plugin_config_map_as_time_slicing(dev_summary):
    """The operator component holds other ConfigMaps (the DCGM metric list); they are no sharing profiles."""
    assert dev_summary.count("### Time-slicing ConfigMap") == 1
    assert "`time-slicing-config`" in dev_summary and "is not in the ConfigMap" not in dev_summary


def test_summary_lists_every_tenant_guardrail_job_and_cluster_wide_object(dev_plan, dev_summary):
    guardrails = dev_summary.split("### Guardrails per tenant")[1].split("\n## ")[0]
    for team in TEAMS:
        row = next(line for line in guardrails.splitlines() if line.startswith(f"| `{team}` |"))
        assert f"`gpu-tenancy-{team}` (Deny)" in row and "| own-queue, " in row and "`baseline`" in row
        assert "requests.cpu=16" in row
        assert ("limit cpu=1, ephemeral-storage=8Gi, memory=1Gi; request cpu=100m, ephemeral-storage=0, "
                "memory=128Mi; max ephemeral-storage=20Gi") in row
        assert row.endswith("| on |")
    objects = dev_summary.split("## Jobs and cluster-wide objects")[1].split("\n## ")[0]
    for resource in dev_plan["resources"]:
        metadata = resource["inputs"].get("metadata") if isinstance(resource["inputs"], dict) else None
        if resource["type"] == "kubernetes:batch/v1:Job":
            assert f"`{metadata['name']}` | `{metadata['namespace']}`" in objects
        elif resource["type"].startswith("kubernetes:") and resource["custom"] and not resource["read"] \
                and isinstance(metadata, dict) and not metadata.get("namespace") \
                and resource["type"] != RELEASE:
            assert f"`{metadata['name']}` | `{resource['name']}`" in objects, resource["name"]


def test_every_tenant_shows_its_admission_rules(tmp_path):
    code, _, stderr = run_main("dev", "--out", str(tmp_path))
    assert code == 0, stderr
    summary = (tmp_path / plan.SUMMARY_FILE).read_text()
    guardrails = summary.split("### Guardrails per tenant")[1].split("\n## ")[0]
    rows = [line for line in guardrails.splitlines() if line.startswith("| `")]
    assert len(rows) == 3
    for row in rows:
        rules = row.split(" | ")[2].split(", ")
        assert {"own-queue", "device-env", "reserved-keys", "node-name", "guarded-fields", "kai-writes"} <= set(rules), row


def test_every_tenant_shows_the_rules_on_its_syncer_s_pod_deletions(dev_summary):
    deletions = dev_summary.split("Pod deletions by the tenant's syncer:")[1].split("\n## ")[0]
    assert [line for line in deletions.splitlines() if line.startswith("- ")] == [
        f"- `{team}`: `gpu-tenancy-{team}-deletion`: deletion-grace-period" for team in sorted(TEAMS)]


def test_a_registry_list_shows_as_a_rule_of_every_tenant_and_a_policy_inside_each_vcluster(tmp_path, dev_summary):
    config = dev_config()
    config["gpu-tenancy:vcluster"] = {**config.get("gpu-tenancy:vcluster", {}),
                                      "allowedRegistries": ["ghcr.io/acme", "docker.io/library"]}
    code, _, stderr = run_main("dev", "--out", str(tmp_path), config=config)
    assert code == 0, stderr
    guardrails = (tmp_path / plan.SUMMARY_FILE).read_text().split("### Guardrails per tenant")[1].split("\n## ")[0]
    rows = [line for line in guardrails.splitlines() if line.startswith("| `")]
    assert len(rows) == 3 and all("image-registry" in row.split(" | ")[2].split(", ") for row in rows)
    assert (tmp_path / plan.PLAN_FILE).read_text().count("gpu-tenancy-image-registry") >= 3
    assert "image-registry" not in dev_summary  # the committed stacks leave it unset


def test_warnings_and_notes_are_in_the_summary_and_printed_in_full(tmp_path):
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"gpus": 4, "cpu": 200, "memory": "2Ti"}}
    config["gpu-tenancy:gpuOperator"] = {"mode": "install"}
    config["gpu-tenancy:vcluster"]["allowedRegistries"] = ["nvcr.io"]
    code, stdout, stderr = run_main("onprem", "--out", str(tmp_path), config=config)
    assert code == 0, stderr
    document = json.loads((tmp_path / plan.PLAN_FILE).read_text())
    summary = (tmp_path / plan.SUMMARY_FILE).read_text()
    command = "pulumi config set --secret gpu-tenancy:kubeconfig --stack onprem < path/to/kubeconfig"
    assert [w for w in document["warnings"] if command in w] and len(document["notes"]) == 3
    # The nodes of an existing cluster are the site's: the notes name their per-pod process limit and memory reserve.
    assert [n for n in document["notes"] if "podPidsLimit: 16384" in n]
    assert [n for n in document["notes"] if "systemReserved or kubeReserved memory" in n]
    for text in document["warnings"] + document["notes"]:
        assert f"- {text}" in summary and text in stdout


# --- failures -----------------------------------------------------------------------------------


def test_invalid_config_exits_2_names_the_key_and_writes_no_plan(tmp_path):
    config = dev_config()
    config["gpu-tenancy:teams"][1]["resources"]["gpu"]["limit"] = "lots"
    # A plan from an earlier, valid run must not survive next to the error.
    (tmp_path / plan.PLAN_FILE).write_text("{}")
    code, stdout, stderr = run_main("dev", "--out", str(tmp_path), config=config)
    assert code == 2
    assert "teams[1].resources.gpu.limit" in stderr
    assert not (tmp_path / plan.PLAN_FILE).exists() and not (tmp_path / plan.SUMMARY_FILE).exists()
    assert stdout == ""


def test_a_stack_file_yaml_1_1_reads_differently_exits_2_naming_the_key(tmp_path):
    (tmp_path / "Pulumi.site.yaml").write_text((PROJECT_DIR / "Pulumi.dev.yaml").read_text().replace(
        "    - name: team-vision\n", "    - name: team-vision\n      protect: no\n      displayName: 2026-01-01\n"))
    code, stdout, stderr = run_main("site", "--out", str(tmp_path / "out"), stack_dir=tmp_path)
    assert (code, stdout) == (2, "")
    assert "gpu-tenancy:teams[1].protect = 'no'" in stderr and "write false for a boolean" in stderr
    assert "gpu-tenancy:teams[1].displayName = '2026-01-01'" in stderr and "Traceback" not in stderr


def test_unknown_stack_exits_2(tmp_path):
    code, stdout, stderr = run_main("no-such-stack", "--out", str(tmp_path))
    assert code == 2
    assert "Pulumi.no-such-stack.yaml" in stderr and "dev" in stderr
    assert list(tmp_path.iterdir()) == []
    assert stdout == ""


# --- rendering details --------------------------------------------------------------------------


def test_summary_flags_an_overcommitted_queue_and_an_orphan_parent():
    document = {"project": "p", "stack": "s", "outputs": {}, "secretOutputs": [], "warnings": [], "resources": [
        {"urn": f"urn:{name}", "type": QUEUE, "name": name, "custom": True, "read": False, "parent": None,
         "provider": None, "dependencies": [], "options": {},
         "inputs": {"metadata": {"name": name}, "spec": {"parentQueue": parent, "priority": 100, "resources": {
             "gpu": {"quota": quota, "limit": -1, "overQuotaWeight": 1}}}}}
        for name, parent, quota in (("org", None, 1), ("a", "org", 0.6), ("b", "org", 0.6), ("x", "gone", 1))]}
    summary = plan.render_summary(document)
    assert "children's gpu quotas sum to 1.2 of 1 — **over-committed**" in summary
    assert "parent gone is NOT managed by this stack" in summary
    assert summary == plan.render_summary(json.loads(json.dumps(document)))
