"""Whole-program runs of every committed stack file, through Pulumi's mocks."""

from __future__ import annotations

import json
import re

import pytest

from config import SECRET_KEYS, ConfigError, load_platform
from config.vocabulary import project_config
from tests.conftest import COMMITTED_STACKS, dev_config, run
from tests.generated_sites import GENERATED_SITES, generated_sites, site_config  # noqa: F401 (fixture)
from config.source import OFFLINE_PLACEHOLDER
from config.stack_file import PROJECT_DIR
from config.versions import KAI_CHART, KAI_VERSION
from config.vocabulary import HELM_MAX_HISTORY, RELEASE
from policy.adapters import from_plan
from policy.rules import evaluate
from tools.plan.document import build_plan, render_plan_json
from tools.plan.summary import render_summary
from tools.offline.mockrun import run_program
from tools.offline.recording import REDACTED, ProgramRun

KUBERNETES_PREFIX = "kubernetes:"
HOST_PROVIDER_TYPE = "pulumi:providers:kubernetes"


def test_both_reference_sites_are_committed():
    assert {"dev", "eks"} <= set(COMMITTED_STACKS)


@pytest.fixture(scope="module", params=COMMITTED_STACKS + sorted(GENERATED_SITES))
def stack_run(request, generated_sites):
    return request.param, run(site_config(request.param), stack=request.param)


def test_the_policy_pack_passes_and_the_review_renders(stack_run):
    stack, program = stack_run
    document = json.loads(render_plan_json(build_plan(program, stack)))
    assert [v.message for v in evaluate(from_plan(document)) if v.mandatory] == []
    summary = render_summary(document)
    for team in document["outputs"]["tenants"]:
        assert f"| `{team}` |" in summary.split("### Guardrails per tenant")[1]


def test_a_kai_release_is_pulled_from_its_registry_at_the_pinned_version(stack_run):
    stack, program = stack_run
    config = site_config(stack)
    version = (config.get("gpu-tenancy:kaiScheduler") or {}).get("version", KAI_VERSION)
    release = next(r for r in program.of_type("kubernetes:helm.sh/v3:Release") if r.name.startswith("kai"))
    assert release.inputs["version"] == version
    # KAI's registry, or the site's mirror of the chart (mirrors.charts): an oci:// one names the chart by its path,
    # an https one is the release's repository.
    mirror = ((config.get("gpu-tenancy:mirrors") or {}).get("charts") or {}).get("kai-scheduler", "").rstrip("/")
    if mirror.startswith("oci://"):
        assert release.inputs["chart"] == f"{mirror}/kai-scheduler"
    elif mirror:
        assert (release.inputs["chart"], release.inputs["repositoryOpts"]["repo"]) == ("kai-scheduler", mirror)
    else:
        assert release.inputs["chart"] == KAI_CHART


def test_every_helm_release_keeps_a_bounded_history(stack_run):
    # Each revision is a Secret in the release namespace; pulumi-kubernetes keeps all of them by default.
    _, program = stack_run
    releases = program.of_type(RELEASE)
    assert releases
    assert {r.name: r.inputs.get("maxHistory") for r in releases} == {r.name: HELM_MAX_HISTORY for r in releases}
    assert 1 <= HELM_MAX_HISTORY <= 10


def test_every_kubernetes_resource_uses_the_one_host_provider(stack_run):
    _, program = stack_run
    providers = program.of_type(HOST_PROVIDER_TYPE)
    assert len(providers) == 1, "exactly one explicit Kubernetes provider"
    provider_urn = providers[0].urn
    kubernetes = [r for r in program.resources if r.type.startswith(KUBERNETES_PREFIX)]
    assert kubernetes
    assert {r.provider for r in kubernetes} == {provider_urn}


def test_the_host_provider_is_built_from_a_secret_kubeconfig(stack_run):
    _, program = stack_run
    provider = program.of_type(HOST_PROVIDER_TYPE)[0]
    assert provider.inputs["kubeconfig"] == REDACTED


def test_every_resource_lives_under_a_platform_component(stack_run):
    _, program = stack_run
    components = {r.urn for r in program.resources if r.type.startswith("gpu-tenancy:platform:")}
    for resource in program.resources:
        if resource.type.startswith("gpu-tenancy:platform:"):
            assert resource.type.split(":")[-1][0].isupper()
            continue
        assert resource.parent in components, f"{resource.name} is not parented to a component"


def test_kubeconfigs_are_secret_stack_outputs(stack_run):
    _, program = stack_run
    assert {"hostKubeconfig", "tenantKubeconfigs"} <= program.secret_outputs
    assert program.outputs["hostKubeconfig"] == REDACTED
    serialized = json.dumps([r.to_json() for r in program.resources]) + json.dumps(program.outputs)
    assert "offline-plan-token" not in serialized


def test_each_team_is_exported_with_namespace_queue_and_connect_command(stack_run):
    stack, program = stack_run
    # The names as the loader derives them (a long team name's vCluster name is cut to 52 characters),
    # not re-derived here: a site with such a name is as valid as one that spells its names out.
    teams = load_platform(project_config(site_config(stack)), placeholders=SECRET_KEYS).teams
    exported = program.outputs["tenants"]
    assert sorted(exported) == sorted(team.name for team in teams)
    for team in teams:
        entry = exported[team.name]
        assert entry["namespace"] == team.namespace
        assert entry["queue"] == team.name
        assert entry["connectCommand"] == f"vcluster connect {team.vcluster_name} --namespace {team.namespace}"


def test_every_team_has_a_leaf_queue_under_the_org_queue_and_a_tenant(stack_run):
    stack, program = stack_run
    config = site_config(stack)
    org = config["gpu-tenancy:organization"]["name"]
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in program.of_type(
        "kubernetes:scheduling.run.ai/v2:Queue")}
    teams = [team["name"] for team in config["gpu-tenancy:teams"]]
    assert set(queues) == {org, *teams}
    assert "parentQueue" not in queues[org]
    assert all(queues[team]["parentQueue"] == org for team in teams)
    tenants = program.of_type("gpu-tenancy:platform:TenantCluster")
    assert sorted(t.name for t in tenants) == sorted(f"tenant-{team}" for team in teams)


def test_two_runs_register_identical_resources(stack_run):
    stack, program = stack_run
    again = run(site_config(stack), stack=stack)
    assert [r.to_json() for r in again.resources] == [r.to_json() for r in program.resources]
    assert again.outputs == program.outputs


def test_invalid_config_registers_nothing():
    config = dev_config()
    config["gpu-tenancy:teams"][0]["resources"]["gpu"]["limit"] = 0.1
    with pytest.raises(ConfigError) as error:
        run(config)
    assert "teams[0].resources.gpu.limit" in str(error.value)
    record = ProgramRun()
    with pytest.raises(ConfigError):
        run_program(config, stack="test", record=record)
    assert record.resources == []


def test_unknown_top_level_key_stops_the_program_with_a_hint():
    config = dev_config()
    config["gpu-tenancy:organisation"] = config.pop("gpu-tenancy:organization")
    with pytest.raises(ConfigError) as error:
        run(config)
    assert "gpu-tenancy:organisation" in str(error.value)
    assert "did you mean 'organization'" in str(error.value)


def test_capacity_and_sharing_warnings_reach_the_pulumi_log():
    config = dev_config()
    # The box's one card, time-sliced 4 ways, is 4 GPUs to KAI: a quota of 5 cannot be met.
    config["gpu-tenancy:organization"]["resources"]["gpu"]["quota"] = 5
    config["gpu-tenancy:gpuOperator"]["timeSlicing"]["defaultProfile"] = "time-sliced"
    program = run(config)
    assert any("at most 4 GPU(s) as KAI counts them (1 card(s)" in warning for warning in program.warnings)
    assert any("time-sliced" in warning and "gpuSharing" in warning for warning in program.warnings)


# --- the seed-000 site, exactly ----------------------------------------------------------------


def test_dev_stack_is_the_seed_000_platform(dev_run):
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in dev_run.of_type(
        "kubernetes:scheduling.run.ai/v2:Queue")}
    assert queues["ml-org"]["resources"]["gpu"] == {"quota": 1, "limit": -1, "overQuotaWeight": 1}
    for team in ("team-nlp", "team-vision", "team-recommender"):
        assert queues[team]["parentQueue"] == "ml-org"
        assert queues[team]["priority"] == 100
        assert queues[team]["resources"]["gpu"] == {"quota": 0.33, "limit": 1, "overQuotaWeight": 1}
    releases = {r.inputs["name"]: r.inputs for r in dev_run.of_type("kubernetes:helm.sh/v3:Release")}
    assert set(releases) == {"kai-scheduler", "team-nlp", "team-vision", "team-recommender"}
    assert releases["kai-scheduler"]["chart"] == "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
    assert releases["kai-scheduler"]["version"] == "v0.16.4"
    assert releases["kai-scheduler"]["values"]["global"]["gpuSharing"] is True
    for team in ("team-nlp", "team-vision", "team-recommender"):
        assert releases[team]["namespace"] == f"vcluster-{team}"
        assert releases[team]["values"]["experimental"]["syncSettings"]["setOwner"] is False
        assert releases[team]["values"]["sync"]["fromHost"]["nodes"]["selector"] == {"all": True}
    assert dev_run.outputs["hostKind"] == "microk8s"
    assert dev_run.warnings == []


def test_eks_stack_installs_the_operator_on_an_eks_gpu_node_group(eks_run):
    cluster = eks_run.of_type("eks:index:Cluster")
    assert len(cluster) == 1
    groups = {g.name: g.inputs for g in eks_run.of_type("eks:index:ManagedNodeGroup")}
    assert groups["host-gpu-gpu"]["instanceTypes"] == ["g4dn.xlarge"]
    releases = {r.inputs["name"]: r.inputs for r in eks_run.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["gpu-operator"]["values"]["driver"]["enabled"] is False
    assert releases["gpu-operator"]["values"]["toolkit"]["enabled"] is False
    assert releases["rag-legal"]["namespace"] == "team-legal"
    # The committed stack sizes its two teams' quotas to what one g4dn.xlarge gives them: no warning (at the default
    # 16 cores and 64Gi a team they would guarantee 32 cores and 128Gi there, tests/test_cpu_memory_capacity.py).
    assert eks_run.warnings == []


def test_every_kubeconfig_and_key_output_is_a_pulumi_secret():
    from tools.offline.sdk_internals import wait_for

    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "gpu-box.lab"
    config["gpu-tenancy:sshPrivateKey"] = {"secure": "v1:encrypted"}
    program = run(config)
    live = program.program_globals
    outputs = [live["host"].kubeconfig] + [tenant.kubeconfig for tenant in live["tenants"].values()]
    assert all(wait_for(output.is_secret()) for output in outputs)
    assert wait_for(live["secrets"].get_secret("sshPrivateKey").is_secret())


# --- secrets: placeholders offline, required for real ----------------------------------------


def _kubeconfig_site() -> dict:
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"gpus": 1, "apiServerPort": 6443}}
    config["gpu-tenancy:gpuOperator"] = {"mode": "install"}
    return config


def _ssh_site() -> dict:
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "192.0.2.10"
    return config


@pytest.mark.parametrize("config, secret, command", [
    (_kubeconfig_site, "kubeconfig", "pulumi config set --secret gpu-tenancy:kubeconfig --stack site "
                                     "< path/to/kubeconfig"),
    (_ssh_site, "sshPrivateKey", "pulumi config set --secret gpu-tenancy:sshPrivateKey --stack site "
                                 "< ~/.ssh/id_ed25519"),
], ids=["kubeconfig", "ssh"])
def test_an_offline_plan_stands_in_for_an_unset_secret_with_one_warning(config, secret, command):
    program = run(config(), stack="site")
    about = [warning for warning in program.warnings if f"gpu-tenancy:{secret}" in warning]
    assert len(about) == 1 and command in about[0]
    assert OFFLINE_PLACEHOLDER not in json.dumps([r.to_json() for r in program.resources])
    assert OFFLINE_PLACEHOLDER not in json.dumps(program.outputs) + " ".join(program.warnings)
    assert program.of_type(HOST_PROVIDER_TYPE)[0].inputs["kubeconfig"] == REDACTED


@pytest.mark.parametrize("config, secret", [(_kubeconfig_site, "kubeconfig"), (_ssh_site, "sshPrivateKey")],
                         ids=["kubeconfig", "ssh"])
def test_without_the_offline_placeholder_an_unset_secret_stops_the_program(config, secret):
    # What `pulumi up` sees: the stack file alone, no placeholder.
    record = ProgramRun()
    with pytest.raises(ConfigError) as raised:
        run_program(config(), stack="site", record=record, secret_placeholders=False)
    assert raised.value.keys == [secret]
    assert "pulumi config set --secret" in str(raised.value)
    assert record.resources == []


def test_a_set_secret_gives_no_placeholder_warning():
    config = _kubeconfig_site()
    config["gpu-tenancy:kubeconfig"] = {"secure": "v1:abc"}
    assert not [warning for warning in run(config).warnings if "kubeconfig is not set" in warning]


# --- config namespaces ------------------------------------------------------------------------


def test_a_misspelt_namespace_stops_the_program_naming_the_right_one():
    config = dev_config()
    config["gpu-tenency:kaiScheduler"] = config.pop("gpu-tenancy:kaiScheduler")
    with pytest.raises(ConfigError) as raised:
        run(config)
    assert raised.value.keys == ["gpu-tenency:kaiScheduler"]
    assert "did you mean 'gpu-tenancy:kaiScheduler'?" in str(raised.value)


def test_provider_and_pulumi_namespaces_are_accepted():
    config = dev_config()
    config.update({"aws:region": "eu-west-1", "kubernetes:enableServerSideApply": True,
                   "pulumi:disable-default-providers": ["kubernetes"]})
    assert run(config).of_type(HOST_PROVIDER_TYPE)


def test_every_stack_output_the_program_can_export_is_documented_after_the_first_up():
    # The docs named two "other outputs" while the program exported five more, some only on some sites.
    exported = set(re.findall(r'pulumi\.export\("([A-Za-z]+)"', (PROJECT_DIR / "__main__.py").read_text()))
    guide = (PROJECT_DIR / "docs" / "operations-first-up.md").read_text()
    section = guide.split("## After the first `pulumi up`", 1)[1].split("\n## ", 1)[0]
    assert exported and not {name for name in exported if f"`{name}`" not in section and f" {name} " not in section}
