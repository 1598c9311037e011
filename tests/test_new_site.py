"""ops.new_site: a new site's stack file from an existing stack, with --set changes, secrets
dropped and listed, validated by the config model before anything is written. How a --set is read, and what is
refused with nothing written: tests/test_new_site_refusals.py."""

from __future__ import annotations

import copy
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from config import ConfigError, load_platform
from config.stack_file import read_stack_file
from config.vocabulary import PROJECT_PREFIX, project_config
from ops import new_site
from tools.docs import schema as schema_tool

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    for stack in ("dev", "eks"):
        shutil.copy(REPO / f"Pulumi.{stack}.yaml", tmp_path)
    return tmp_path


def stack_file(project: Path, stack: str) -> dict:
    return read_stack_file(project / f"Pulumi.{stack}.yaml")


def stack_config(project: Path, stack: str) -> dict:
    return stack_file(project, stack)["config"]


def platform_of(config: dict, secrets_set=(), stack: str = "site"):
    return load_platform(project_config(config), secrets_set=set(secrets_set), stack=stack)


def new(project: Path, site: str, source: str, *sets: str) -> int:
    argv = [site, "--from", source, "--project-dir", str(project)]
    for item in sets:
        argv += ["--set", item]
    return new_site.main(argv)


def stack_files(project: Path) -> set[str]:
    return {path.name for path in project.glob("Pulumi.*.yaml")}


# --- clones with changes ----------------------------------------------------------------------


def test_clone_with_quota_change_differs_only_there(project, capsys):
    assert new(project, "lab2", "dev", "teams[0].resources.gpu.quota=0.2") == 0
    text = (project / "Pulumi.lab2.yaml").read_text()
    assert text.startswith("#") and "dev" in text.splitlines()[0]
    written = stack_config(project, "lab2")
    expected = copy.deepcopy(stack_config(project, "dev"))
    expected[PROJECT_PREFIX + "teams"][0]["resources"]["gpu"]["quota"] = 0.2
    assert written == expected
    assert list(written) == list(stack_config(project, "dev"))
    assert isinstance(written[PROJECT_PREFIX + "teams"][0]["resources"]["gpu"]["quota"], float)
    platform = platform_of(written, stack="lab2")
    assert platform.teams[0].resources.gpu.quota == 0.2
    out = capsys.readouterr().out
    assert "gpu-tenancy:teams[0].resources.gpu.quota: 0.33 -> 0.2" in out
    assert "pulumi stack init lab2" in out
    assert "--copy-config-from dev" in out
    assert "python -m tools.plan lab2" in out
    assert "pulumi preview --stack lab2" in out
    assert "--secret" not in out


def test_plain_clone_equals_source(project):
    assert new(project, "eks-copy", "eks") == 0
    assert stack_config(project, "eks-copy") == stack_config(project, "eks")
    platform_of(stack_config(project, "eks-copy"))


def test_append_a_team(project):
    team = "teams[3]={name: team-audio, resources: {gpu: {quota: 0.01, limit: 1}}}"
    assert new(project, "lab-audio", "dev", team) == 0
    teams = stack_config(project, "lab-audio")[PROJECT_PREFIX + "teams"]
    assert len(teams) == 4
    assert teams[3] == {"name": "team-audio", "resources": {"gpu": {"quota": 0.01, "limit": 1}}}
    assert teams[:3] == stack_config(project, "dev")[PROJECT_PREFIX + "teams"]
    assert [t.name for t in platform_of(stack_config(project, "lab-audio")).teams][-1] == "team-audio"


def test_quoted_keys_with_slashes_and_dots(project):
    assert new(project, "eks-b", "eks", "cluster.eks.gpuNodeGroups[0].name=gpu-b",
               'cluster.eks.gpuNodeGroups[0].labels["example.com/tier"]=gold',
               'vcluster.nodeLabels["gpu-tenancy/pool"]=gpu-b',
               'teams[1].vcluster.nodeLabels["example.com/tier"]=gold') == 0
    config = stack_config(project, "eks-b")
    assert config[PROJECT_PREFIX + "vcluster"]["nodeLabels"] == {"gpu-tenancy/pool": "gpu-b"}
    assert config[PROJECT_PREFIX + "teams"][1]["vcluster"] == {"nodeLabels": {"example.com/tier": "gold"}}
    platform = platform_of(config)
    assert platform.teams[1].vcluster.node_labels == {"example.com/tier": "gold"}


def test_namespaced_path_and_region(project):
    assert new(project, "eks-eu", "eks", "cluster.eks.region=eu-west-1", "aws:region=eu-west-1",
               "organization.name=ai-org") == 0
    config = stack_config(project, "eks-eu")
    assert config["aws:region"] == "eu-west-1"
    assert list(config)[-1] == "aws:region"
    assert "gpu-tenancy:aws:region" not in config
    assert config[PROJECT_PREFIX + "cluster"]["eks"]["region"] == "eu-west-1"
    platform = platform_of(config)
    assert platform.cluster.eks.region == "eu-west-1"
    assert platform.organization.name == "ai-org"


def test_explicit_project_namespace_is_the_same_key(project):
    assert new(project, "lab5", "dev", "gpu-tenancy:kaiScheduler.gpuSharing=false") == 0
    config = stack_config(project, "lab5")
    assert config[PROJECT_PREFIX + "kaiScheduler"]["gpuSharing"] is False
    assert len(config) == len(stack_config(project, "dev"))


# --- secrets ----------------------------------------------------------------------------------


SECRET_STACK = """\
encryptionsalt: v1:salt
config:
  aws:region: us-east-2
  gpu-tenancy:cluster:
    kind: microk8s
    microk8s:
      host: 10.0.0.5
      gpus: 1
      kubernetesVersion: "1.36"
  gpu-tenancy:organization:
    name: ml-org
    resources:
      gpu: {quota: 1, limit: -1}
  gpu-tenancy:sshPrivateKey: {secure: v1:abc}
  gpu-tenancy:teams:
    - name: team-nlp
      resources:
        gpu: {quota: 0.5, limit: 1}
  aws:assumeRoles:
    - roleArn: arn:aws:iam::000000000000:role/lab
      externalId: {secure: v1:def}
"""


def test_secrets_are_dropped_and_listed(project, capsys):
    (project / "Pulumi.lab.yaml").write_text(SECRET_STACK)
    assert new(project, "lab-b", "lab", "teams[0].resources.gpu.quota=0.25") == 0
    text = (project / "Pulumi.lab-b.yaml").read_text()
    assert "secure" not in text and "v1:" not in text
    document = stack_file(project, "lab-b")
    assert "encryptionsalt" not in document
    config = document["config"]
    assert list(config) == ["aws:region", *(PROJECT_PREFIX + key for key in ("cluster", "organization", "teams")),
                            "aws:assumeRoles"]
    assert config["aws:assumeRoles"] == [{"roleArn": "arn:aws:iam::000000000000:role/lab"}]
    out = capsys.readouterr().out
    assert "pulumi config set --secret gpu-tenancy:sshPrivateKey" in out
    assert "pulumi config set --secret --path 'aws:assumeRoles[0].externalId'" in out
    assert out.index("pulumi stack init lab-b") < out.index("pulumi config set --secret")
    # The site validates once the SSH key is set again, and needs it.
    platform_of(config, secrets_set={"sshPrivateKey"})
    with pytest.raises(ConfigError) as error:
        platform_of(config)
    assert "sshPrivateKey" in error.value.keys


def test_a_secret_the_source_never_had_is_listed_with_its_command(project, capsys):
    assert new(project, "lab-ssh", "dev", "cluster.microk8s.host=10.0.0.9") == 0
    out = capsys.readouterr().out
    assert "pulumi config set --secret gpu-tenancy:sshPrivateKey --stack lab-ssh < ~/.ssh/id_ed25519" in out
    assert "sshPrivateKey" not in (project / "Pulumi.lab-ssh.yaml").read_text()
    # The file alone is what `pulumi up` would see: the key is still required there.
    with pytest.raises(ConfigError) as raised:
        platform_of(stack_config(project, "lab-ssh"))
    assert raised.value.keys == ["sshPrivateKey"]


# --- any host kind from any stack -------------------------------------------------------------


def test_switching_to_kubeconfig_drops_the_old_kind_and_lists_the_kubeconfig_secret(project, capsys):
    assert new(project, "onprem", "dev", "cluster.kind=kubeconfig", "gpuOperator.mode=install",
               "cluster.kubeconfig.gpus=4") == 0
    out = capsys.readouterr().out
    cluster = stack_config(project, "onprem")[PROJECT_PREFIX + "cluster"]
    assert cluster == {"kind": "kubeconfig", "kubeconfig": {"gpus": 4}}
    assert 'gpu-tenancy:cluster.microk8s: {gpus: 1, kubernetesVersion: "1.36"} -> (removed' in out
    assert "pulumi config set --secret gpu-tenancy:kubeconfig --stack onprem < path/to/kubeconfig" in out
    assert "pulumi up --stack onprem" in out and "GitHub-hosted runners, which must reach" in out
    assert platform_of(stack_config(project, "onprem"), {"kubeconfig"}).cluster.kubeconfig.gpus == 4


def test_a_set_that_writes_the_sources_own_value_is_not_shown_as_a_change(project, capsys):
    # The docs' onprem example sets the runner dev already has (the kind switch would drop it otherwise).
    assert new(project, "onprem", "dev", "cluster.kind=kubeconfig", "gpuOperator.mode=install",
               "ci.runner=[self-hosted, gpu-lab]") == 0
    out = capsys.readouterr().out
    assert "gpu-tenancy:ci.runner: [self-hosted, gpu-lab] (unchanged: dev has it too)" in out
    # The kind, the mode and the dropped microk8s block changed; the runner did not.
    assert "from stack dev (3 change(s), 1 unchanged)." in out
    assert new(project, "same", "dev", "ci.runner=[self-hosted, gpu-lab]") == 0
    assert "from stack dev (0 change(s), 1 unchanged)." in capsys.readouterr().out
    assert "gpu-tenancy:cluster.kind: microk8s -> kubeconfig" in out and "->  [self-hosted" not in out


def test_an_eks_site_from_the_microk8s_stack(project, capsys):
    assert new(project, "cloud", "dev", "cluster.kind=eks", "cluster.eks.region=eu-west-1",
               "cluster.eks.gpuNodeGroups=[{name: gpu, instanceTypes: [g5.xlarge], maxSize: 1}]",
               "gpuOperator.mode=install") == 0
    out = capsys.readouterr().out
    platform = platform_of(stack_config(project, "cloud"))
    assert platform.cluster.kind == "eks" and "microk8s" not in stack_config(project, "cloud")[PROJECT_PREFIX + "cluster"]
    assert "AWS credentials for eu-west-1" in out
    assert "gpu-tenancy:kubeconfig" not in out and "sshPrivateKey" not in out
    assert "python -m tools.plan cloud --render-charts --fail-on-findings" in out
    # The lab box's runner reached the box, not the cloud: it goes with the kind, and the output says so.
    assert PROJECT_PREFIX + "ci" not in stack_config(project, "cloud")
    assert "(removed: the runner that reached the source's host)" in out


def test_an_eks_site_reached_inside_its_vpc_only_is_told_it_needs_a_self_hosted_runner_there(project, capsys):
    # A trial site was told "GitHub-hosted runners" while its own plan said pulumi up must run in the VPC.
    assert new(project, "private", "eks", "cluster.eks.apiEndpoint={publicAccess: false}") == 0
    captured = capsys.readouterr()
    assert "GitHub-hosted runners, with AWS" not in captured.out
    assert "answers inside the VPC only" in captured.out and "ci.runner" in captured.out
    assert "ci.runner is not set" in captured.err
    assert new(project, "private-ci", "private", "ci.runner=[self-hosted, vpc]") == 0
    captured = capsys.readouterr()
    assert "self-hosted runner labelled self-hosted, vpc" in captured.out and "ci.runner is not set" not in captured.err


def test_a_remote_microk8s_site_from_the_eks_stack_on_a_self_hosted_runner(project, capsys):
    assert new(project, "lab", "eks", "cluster.kind=microk8s", "cluster.microk8s.host=192.0.2.10",
               'cluster.microk8s.kubernetesVersion="1.35"', "vcluster.nodeLabels={}",
               "ci.runner=[self-hosted, gpu-lab]") == 0
    out = capsys.readouterr().out
    config = stack_config(project, "lab")
    assert set(config[PROJECT_PREFIX + "cluster"]) == {"kind", "microk8s"}
    assert "self-hosted runner labelled self-hosted, gpu-lab" in out
    assert "gpu-tenancy:sshPrivateKey --stack lab < ~/.ssh/id_ed25519" in out
    assert platform_of(config, {"sshPrivateKey"}).ci.runner == ("self-hosted", "gpu-lab")


def test_a_block_written_by_set_survives_the_kind_switch(project):
    assert new(project, "cloud2", "dev", "cluster.eks={region: us-west-2, gpuNodeGroups: [{name: gpu, "
               "instanceTypes: [g4dn.xlarge]}]}", "cluster.kind=eks", "gpuOperator.mode=install") == 0
    assert stack_config(project, "cloud2")[PROJECT_PREFIX + "cluster"]["eks"]["region"] == "us-west-2"


def test_null_removes_the_key_or_item_as_pulumi_config_rm_does(project, capsys):
    """The program reads a null as not set, but the stack-file schema refuses one: a site written with
    ``cluster.microk8s=null`` once failed its own schema test while every plan of it passed."""
    assert new(project, "onprem2", "dev", "cluster.kind=kubeconfig", "cluster.microk8s=null",
               "gpuOperator.mode=install", "teams[1]=null", "vcluster.nodeLabels=~") == 0
    out = capsys.readouterr().out
    written = stack_file(project, "onprem2")
    config = written["config"]
    assert config[PROJECT_PREFIX + "cluster"] == {"kind": "kubeconfig"}
    assert [team["name"] for team in config[PROJECT_PREFIX + "teams"]] == ["team-nlp", "team-recommender"]
    assert 'gpu-tenancy:cluster.microk8s: {gpus: 1, kubernetesVersion: "1.36"} -> (removed)' in out
    assert "gpu-tenancy:vcluster.nodeLabels: (not set) -> (removed)" in out
    schema = jsonschema.Draft202012Validator(json.loads(schema_tool.SCHEMA_FILE.read_text()))
    assert [error.message for error in schema.iter_errors(written)] == []


def test_a_value_encrypted_under_a_plain_project_key_is_refused_as_pulumi_up_refuses_it(project, capsys):
    # The program would read it as plain config: the token would reach the vCluster release's values in plain text.
    source = SECRET_STACK.replace("  aws:assumeRoles:", "  gpu-tenancy:vcluster:\n    extraValues:\n      sync:\n"
                                                        "        token: {secure: v1:def}\n  aws:assumeRoles:")
    (project / "Pulumi.lab.yaml").write_text(source)
    assert new(project, "lab-c", "lab") == 2
    err = capsys.readouterr().err
    assert "gpu-tenancy:vcluster = '<encrypted>'" in err and "without --secret" in err and "v1:def" not in err
    assert not (project / "Pulumi.lab-c.yaml").exists()
    # Unless the new site writes that value itself.
    assert new(project, "lab-c", "lab", "vcluster.extraValues={}") == 0


def test_a_misspelt_namespace_names_the_right_one(project, capsys):
    assert new(project, "typo", "dev", "gpu-tenency:kaiScheduler.gpuSharing=false") == 2
    assert "did you mean 'gpu-tenancy:kaiScheduler'?" in capsys.readouterr().err
    assert not (project / "Pulumi.typo.yaml").exists()


def test_secrets_cannot_be_set_in_plain_text(project, capsys):
    assert new(project, "lab-x", "dev", "sshPrivateKey=-----BEGIN") == 2
    assert "--secret" in capsys.readouterr().err


@pytest.mark.parametrize("assignment", ["sshPrivateKey=ssh-key-95e0aa", "gpu-tenancy:alertReceiver=ssh-key-95e0aa",
                                        # Not YAML either: refused as a secret before its text is parsed.
                                        "kubeconfig={users: [{token: ssh-key-95e0aa: x}]}"])
def test_a_secret_given_in_plain_text_is_not_repeated(project, capsys, assignment):
    assert new(project, "lab-x", "dev", assignment) == 2
    err = capsys.readouterr().err
    assert "--secret" in err and "ssh-key-95e0aa" not in err
    assert new(project, "lab-x", "dev", "vcluster.extraValues={token: {secure: v1:abc}}") == 2
    assert not (project / "Pulumi.lab-x.yaml").exists()


# --- what --set writes where nothing was ------------------------------------------------------


def test_missing_maps_and_lists_are_created(project):
    assert new(project, "lab-new", "dev", "teams[0].vcluster.enforceTolerations[0]=nvidia.com/gpu:NoSchedule",
               "aws:tags.team=ml") == 0
    config = stack_config(project, "lab-new")
    assert config[PROJECT_PREFIX + "teams"][0]["vcluster"] == {"enforceTolerations": ["nvidia.com/gpu:NoSchedule"]}
    assert config["aws:tags"] == {"team": "ml"}
    platform_of(config)


def test_command_line(project):
    result = subprocess.run(
        [sys.executable, "-m", "ops.new_site", "cli-site", "--from", "dev", "--project-dir", str(project),
         "--set", "kaiScheduler.gpuSharing=false"],
        cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "pulumi preview --stack cli-site" in result.stdout
    assert stack_config(project, "cli-site")[PROJECT_PREFIX + "kaiScheduler"]["gpuSharing"] is False


def test_every_example_of_the_help_writes_its_site(project, capsys):
    # One example once selected a pool only EKS has, from the MicroK8s stack: it wrote nothing.
    examples = [line.strip() for line in new_site._parser().epilog.splitlines() if "ops.new_site" in line]
    assert len(examples) >= 3
    for example in examples:
        argv = shlex.split(example.removeprefix("python -m ops.new_site "))
        assert new_site.main([*argv, "--project-dir", str(project)]) == 0, (example, capsys.readouterr().err)
        assert f"Pulumi.{argv[0]}.yaml" in stack_files(project)
