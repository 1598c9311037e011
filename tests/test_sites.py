"""ops.sites: the CI matrix comes from the committed stack files, whatever sites they hold."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from config import ConfigError
from config.stack_file import read_stack_file, stack_names
from ops import sites
from ops.sites import platform_of

ROOT = Path(__file__).resolve().parent.parent


def write_site(project: Path, site: str, source: str, **changes) -> None:
    """A copy of a committed stack with some top-level gpu-tenancy keys replaced."""
    document = read_stack_file(ROOT / f"Pulumi.{source}.yaml")
    for key, value in changes.items():
        document["config"][f"gpu-tenancy:{key}"] = value
    (project / f"Pulumi.{site}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    for path in ROOT.glob("Pulumi.*.yaml"):
        shutil.copy(path, tmp_path)
    return tmp_path


def committed_stack_names(root: Path) -> list[str]:
    """The stacks whose file git tracks in ``root`` (every stack file outside a checkout): a site just written
    by ops.new_site is not one until it is committed."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "--", "Pulumi.*.yaml"],
                            capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        return stack_names(root)
    return sorted(path.removeprefix("Pulumi.").removesuffix(".yaml") for path in listed.stdout.split())


def test_one_entry_per_committed_stack_with_its_cloud_and_runner():
    entries = {entry["stack"]: entry for entry in sites.matrix(ROOT)["include"]}
    assert sorted(entries) == committed_stack_names(ROOT)
    for stack, entry in entries.items():
        cluster = read_stack_file(ROOT / f"Pulumi.{stack}.yaml")["config"]["gpu-tenancy:cluster"]
        assert entry["kind"] == cluster["kind"]
        assert entry["cloud"] == ("aws" if cluster["kind"] == "eks" else "none")
        assert entry["region"] == (cluster["eks"]["region"] if cluster["kind"] == "eks" else "")
        assert entry["runner"] and all(isinstance(label, str) for label in entry["runner"])


def test_new_sites_bring_their_region_and_self_hosted_runner(project, capsys):
    eks = read_stack_file(project / "Pulumi.eks.yaml")["config"]["gpu-tenancy:cluster"]
    eks["eks"]["region"] = "eu-west-1"
    write_site(project, "eu", "eks", cluster=eks)
    write_site(project, "onprem", "dev", cluster={"kind": "kubeconfig"}, gpuOperator={"mode": "install"},
               ci={"runner": ["self-hosted", "gpu-lab"]})
    assert sites.main(["matrix", "--project-dir", str(project)]) == 0
    entries = {entry["stack"]: entry for entry in json.loads(capsys.readouterr().out)["include"]}
    assert entries["eu"] == {"stack": "eu", "kind": "eks", "cloud": "aws", "region": "eu-west-1",
                             "runner": ["ubuntu-latest"]}
    # The kubeconfig secret is not set in a fresh file: the matrix does not need it.
    assert entries["onprem"] == {"stack": "onprem", "kind": "kubeconfig", "cloud": "none", "region": "",
                                 "runner": ["self-hosted", "gpu-lab"]}


@pytest.mark.parametrize("runner", [[], "", 5, [""], [1]])
def test_a_bad_runner_is_a_config_error_naming_ci_runner(runner):
    config = read_stack_file(ROOT / "Pulumi.dev.yaml")["config"]
    config["gpu-tenancy:ci"] = {"runner": runner}
    with pytest.raises(ConfigError) as raised:
        platform_of(config, "dev")
    assert raised.value.keys == ["ci.runner"]


def test_an_invalid_stack_fails_the_matrix_naming_stack_and_key(project, capsys):
    write_site(project, "broken", "dev", ci={"runers": ["self-hosted"]})
    assert sites.main(["matrix", "--project-dir", str(project)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "stack broken" in captured.err and "gpu-tenancy:ci.runers" in captured.err
    assert "did you mean 'runner'?" in captured.err


def test_a_value_encrypted_under_a_key_the_program_reads_in_plain_text_fails_the_matrix_as_it_fails_pulumi_up(
        project, capsys):
    # The vCluster release's values would carry the decrypted token, into the state and every preview's diff.
    write_site(project, "token", "dev", vcluster={"extraValues": {"sync": {"token": {"secure": "v1:c2VjcmV0"}}}})
    assert sites.main(["matrix", "--project-dir", str(project)]) == 2
    captured = capsys.readouterr()
    assert "stack token:" in captured.err and "gpu-tenancy:vcluster = '<encrypted>'" in captured.err
    assert "v1:c2VjcmV0" not in captured.err


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True)


def test_only_stack_files_git_tracks_are_sites(project, capsys):
    _git(project, "init", "-q")
    _git(project, "add", "Pulumi.dev.yaml", "Pulumi.eks.yaml")
    write_site(project, "draft", "dev")
    assert sites.main(["matrix", "--project-dir", str(project)]) == 0
    captured = capsys.readouterr()
    assert sorted(entry["stack"] for entry in json.loads(captured.out)["include"]) == ["dev", "eks"]
    assert "Pulumi.draft.yaml is not tracked by git" in captured.err
    _git(project, "add", "Pulumi.draft.yaml")
    assert "draft" in [site.stack for site in sites.sites(project)]


def test_outside_a_git_checkout_every_stack_file_counts(project):
    write_site(project, "draft", "dev")
    assert sites.tracked_stacks(project) == (sorted([*stack_names(ROOT), "draft"]), [])


def test_every_broken_stack_file_is_reported_not_only_the_first(project, capsys):
    write_site(project, "a-broken", "dev", kaiScheduler={"version": "latest"})
    write_site(project, "b-broken", "dev", teams=[])
    (project / "Pulumi.c-broken.yaml").write_text("config: [not, a, map]\n")
    assert sites.main(["matrix", "--project-dir", str(project)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    for stack, problem in (("a-broken", "kaiScheduler.version"), ("b-broken", "no teams are defined"),
                           ("c-broken", "not a Pulumi stack file")):
        assert f"stack {stack}:" in captured.err and problem in captured.err


@pytest.mark.parametrize("cluster, ci, warned", [
    ({"kind": "microk8s"}, {}, True),
    ({"kind": "microk8s"}, {"runner": ["self-hosted", "gpu-lab"]}, False),
    ({"kind": "microk8s", "microk8s": {"host": "192.0.2.10"}}, {}, False)])
def test_a_box_set_up_where_pulumi_runs_is_warned_when_ci_would_deploy_it_from_a_github_hosted_runner(cluster, ci,
                                                                                                      warned):
    # A trial noticed the committed lab box went to ubuntu-latest, whose deploy job would run `sudo snap ...` there.
    config = read_stack_file(ROOT / "Pulumi.dev.yaml")["config"]
    config["gpu-tenancy:cluster"] = {**cluster, "microk8s": {**config["gpu-tenancy:cluster"]["microk8s"],
                                                             **cluster.get("microk8s", {})}}
    config["gpu-tenancy:ci"] = ci
    warnings = [w for w in platform_of(config, "dev").warnings
                if w.startswith("cluster.microk8s.host is not set")]
    assert bool(warnings) == warned
    if warned:
        assert "ci.runner" in warnings[0] and "self-hosted runner on the GPU box" in warnings[0]
