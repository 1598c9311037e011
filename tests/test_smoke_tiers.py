"""ops.smoke on a site with every isolation tier: each team's GPU pod asks in its tier's terms (config/gpu_asks.py),
so the team's host policies admit it, and the host-refusal pod breaks the own-queue rule and nothing else.

The pods judged are the ones the smoke test sends to fake API servers (tests/fake_site.py), recorded on the way.
Each goes through the vCluster's shipped mutating policies and rules (tests/test_virtual_defaults.py ``Inside``), the
sync, the host's webhooks (KAI's, and its hamicore plugin) and both host policies of the team
(tests/isolation_sim.py).
"""

from __future__ import annotations

import copy

import pytest
import yaml

from config.vocabulary import SEED_GPU_FRACTION
from ops import smoke
from ops.smoke_kube import Kube
from ops.smoke_team import Settings
from tests.apiserver_pods import limit_ranger
from tests.conftest import dev_config, run
from tools.plan.document import build_plan
from tools.plan.summary import render_summary
from tests.fake_site import FakeSite
from tests.isolation_sim import isolation_tenant_of
from tests.isolation_spec import isolation_config, prefixed
from tests.tenant_sim import tenant_of
from tests.test_virtual_defaults import Inside

FAST = Settings(timeout=1.5, refusal_timeout=1.5, poll=0.05)


def with_endpoints(config: dict) -> dict:
    """``config`` as a stack file holds it, each team with an endpoint: the summary lists its smoke pod."""
    config["vcluster"]["access"] = {"exposure": "loadBalancer", "domain": "vc.example.com"}
    return prefixed(config)


def tiers_config() -> dict:
    """The isolation site (two mig teams, a memory-capped and an exclusive one) with a shared team beside them."""
    config = isolation_config()
    config["teams"].append({"name": "team-web", "resources": {"gpu": {"quota": 1, "limit": 2}},
                            "isolation": {"tier": "shared", "nodePool": "l40s"}})
    return with_endpoints(config)


def single_config() -> dict:
    """A mig team under the single strategy, where each slice is advertised as a plain nvidia.com/gpu."""
    config = isolation_config()
    config["gpuOperator"]["migStrategy"] = "single"
    config["cluster"]["eks"]["gpuNodeGroups"][0]["migConfig"] = "all-1g.10gb"
    config["teams"] = [team for team in config["teams"] if team["name"] == "team-llm"]
    return with_endpoints(config)


def always_pull_config() -> dict:
    """The dev site with vcluster.alwaysPullImages: the host asks every synced pod to pull its images always."""
    config = dev_config()
    config["gpu-tenancy:vcluster"]["alwaysPullImages"] = True
    return config


# (site, team) -> what its smoke GPU pod asks for.
ASKS = {
    ("tiers", "team-llm"): "nvidia.com/mig-1g.10gb: 1",
    ("tiers", "team-vision"): "nvidia.com/mig-3g.40gb: 1",
    ("tiers", "team-nlp"): f"gpu-fraction: {SEED_GPU_FRACTION}",  # memory-capped
    ("tiers", "team-train"): "nvidia.com/gpu: 1",  # exclusive
    ("tiers", "team-web"): f"gpu-fraction: {SEED_GPU_FRACTION}",  # shared, on a site with a MIG-split pool
    ("single", "team-llm"): "nvidia.com/gpu: 1, nodeSelector gpu-tenancy/pool: h100",
    ("dev", "team-nlp"): f"gpu-fraction: {SEED_GPU_FRACTION}",  # shared, no tier policy
    ("pull", "team-nlp"): f"gpu-fraction: {SEED_GPU_FRACTION}",  # [image-pull-policy] on the host
}
CONFIGS = {"tiers": tiers_config, "single": single_config, "dev": dev_config, "pull": always_pull_config}


@pytest.fixture(scope="module")
def sites() -> dict:
    return {name: (config := make(), run(config, stack=f"smoke-{name}")) for name, make in CONFIGS.items()}


def tenant_in(sites: dict, site: str, team: str):
    config, program = sites[site]
    return tenant_of(program, config, team) if site in ("dev", "pull") else isolation_tenant_of(program, config, team)


def fake_site(sites: dict, site: str) -> FakeSite:
    """The site's teams behind fake API servers, their vClusters running the shipped mutating policies (a
    memory-capped team's fraction gets HAMi-core there)."""
    fake = FakeSite([tenant_in(sites, site, team) for name, team in ASKS if name == site])
    for vcluster in fake.vclusters.values():
        vcluster.mutate_inside = Inside(vcluster.tenant).mutate
    return fake


def outputs_of(fake: FakeSite, program) -> dict:
    """The fake site's servers with its teams as the program exports them (each one's tier among them)."""
    outputs = fake.outputs
    outputs["tenants"] = {team: program.outputs["tenants"][team] for team in outputs["tenants"]}
    return outputs


def recording(sent: list):
    """ops.smoke's connection, recording each pod it sends."""
    class Recorded(Kube):
        def create_pod(self, namespace: str, pod: dict, dry_run: bool = False) -> dict:
            sent.append(copy.deepcopy(pod))
            return super().create_pod(namespace, pod, dry_run=dry_run)
    return Recorded


def unexposed(outputs: dict) -> dict:
    """Every team's kubeconfig as vCluster exports it without an endpoint: the smoke test skips to host-refusal."""
    kubeconfigs = {}
    for team, text in outputs["tenantKubeconfigs"].items():
        kubeconfig = yaml.safe_load(text)
        kubeconfig["clusters"][0]["cluster"]["server"] = "https://localhost:8443"
        kubeconfigs[team] = yaml.safe_dump(kubeconfig)
    return {**outputs, "tenantKubeconfigs": kubeconfigs}


@pytest.fixture(scope="module")
def sent(sites) -> dict:
    """(site, team) -> the GPU pod the smoke test created in the team's vCluster and the host-refusal pod it sent to
    the host; the latter from a run without endpoints, which reaches host-refusal whatever failed before."""
    pods: dict = {}
    for site in CONFIGS:
        fake = fake_site(sites, site)
        try:
            outputs = outputs_of(fake, sites[site][1])
            by_queue = {info["queue"]: team for team, info in outputs["tenants"].items()}
            by_namespace = {info["namespace"]: team for team, info in outputs["tenants"].items()}
            for given in (outputs, unexposed(outputs)):
                found: list = []
                smoke.run_site(given, given["hostKubeconfig"], FAST, connect=recording(found))
                for pod in found:
                    metadata = pod["metadata"]
                    if metadata["name"] == "smoke-gpu":
                        team = by_queue[metadata["labels"]["kai.scheduler/queue"]]
                    elif metadata["name"].startswith("smoke-host-refusal-x-"):
                        team = by_namespace[metadata["namespace"]]
                    else:
                        continue  # the pod in another queue inside the vCluster: not the host's to judge
                    pods.setdefault((site, team), {})[metadata["name"].split("-x-")[0]] = pod
        finally:
            fake.close()
    return pods


def asked(pod: dict) -> str:
    """What a pod asks for a GPU, in the words of config/gpu_asks.py's GpuAsk.describe."""
    fraction = (pod["metadata"].get("annotations") or {}).get("gpu-fraction")
    if fraction is not None:
        return f"gpu-fraction: {fraction}"
    limits = {key: value for container in pod["spec"]["containers"]
              for key, value in ((container.get("resources") or {}).get("limits") or {}).items()}
    pool = (pod["spec"].get("nodeSelector") or {}).get("gpu-tenancy/pool")
    return ", ".join(f"{key}: {value}" for key, value in limits.items()) + (
        f", nodeSelector gpu-tenancy/pool: {pool}" if pool else "")


def rule_names(messages: list[str]) -> list[str]:
    return [message[:message.index("]") + 1] for message in messages]


@pytest.mark.parametrize("site, team", ASKS)
def test_each_teams_smoke_gpu_pod_asks_in_its_tiers_terms_and_the_host_admits_it(sites, sent, site, team):
    tenant = tenant_in(sites, site, team)
    pod = sent[(site, team)]["smoke-gpu"]
    assert asked(pod) == ASKS[(site, team)]
    virtual, refused_inside = Inside(tenant).create(pod)
    assert refused_inside == []
    assert tenant.create(virtual) == []


@pytest.mark.parametrize("site, team", ASKS)
def test_each_teams_host_refusal_pod_breaks_the_own_queue_rule_alone(sites, sent, site, team):
    """The API server reports one refusal, the first it finds (policies in no set order): any other rule the pod
    broke could be the one the step reads."""
    tenant = tenant_in(sites, site, team)
    pod = sent[(site, team)]["smoke-host-refusal"]
    assert asked(pod) == ASKS[(site, team)]

    def refusals(sent_pod: dict) -> list[str]:
        # What the dry run meets on the host: LimitRanger, the host's webhooks, then both policies of the team.
        host = tenant.host_webhooks(limit_ranger(copy.deepcopy(sent_pod), tenant.team.vcluster))
        return tenant.create_host(host, user=tenant.syncer)
    assert rule_names(refusals(pod)) == ["[own-queue]"], refusals(pod)
    # In the team's own queue the same pod is admitted: the queue is all that is wrong with it.
    own = copy.deepcopy(pod)
    own["metadata"]["labels"]["kai.scheduler/queue"] = tenant.team.queue_name
    assert refusals(own) == []


def test_the_smoke_test_passes_for_every_tier(sites):
    fake = fake_site(sites, "tiers")
    try:
        outputs = outputs_of(fake, sites["tiers"][1])
        reports = {report.team: report for report in smoke.run_site(outputs, outputs["hostKubeconfig"], FAST)}
    finally:
        fake.close()
    assert set(reports) == {team for site, team in ASKS if site == "tiers"}
    for team, report in reports.items():
        assert report.ok, report.table()
        steps = {step.name: step for step in report.steps}
        assert steps["gpu-pod"].detail == f"created with {ASKS[('tiers', team)]}"
        assert "denied request: [own-queue]" in steps["host-refusal"].detail


def test_a_site_whose_outputs_predate_the_isolation_export_asks_a_fraction_of_every_team(sites):
    fake = fake_site(sites, "tiers")
    try:
        outputs = fake.outputs
        for tenant in outputs["tenants"].values():
            del tenant["isolation"]
        reports = {report.team: report for report in smoke.run_site(outputs, outputs["hostKubeconfig"], FAST)}
    finally:
        fake.close()
    assert {step.detail for report in reports.values() for step in report.steps if step.name == "gpu-pod"} == {
        f"created with gpu-fraction: {SEED_GPU_FRACTION}"}
    # The shared and memory-capped teams pass as before; the others' tier policies refuse the fraction.
    assert {team for team, report in reports.items() if report.ok} == {"team-web", "team-nlp"}


@pytest.mark.parametrize("site, team", [key for key in ASKS if key[0] not in ("dev", "pull")])  # endpoints only
def test_the_plan_summary_names_the_pod_each_teams_smoke_test_sends(sites, site, team):
    summary = render_summary(build_plan(sites[site][1], f"smoke-{site}"))
    section = summary[summary.index("### Access per tenant"):]
    row = next(line for line in section.splitlines() if line.startswith(f"| `{team}`"))
    assert f"GPU pod (`{ASKS[(site, team)]}`, nvidia-smi)" in row


def test_a_team_without_an_endpoint_is_told_the_host_still_judges_its_refusal(sites):
    # ops.smoke still sends such a team's host-refusal pod (a dry run as its syncer); the row said only "skipped".
    summary = render_summary(build_plan(sites["dev"][1], "smoke-dev"))
    section = summary[summary.index("### Access per tenant"):]
    row = next(line for line in section.splitlines() if line.startswith("| `team-nlp`"))
    assert "inside the vCluster skipped: no endpoint" in row
    assert "on the host, as the team's syncer (dry run), a pod in queue `team-" in row and "must be refused" in row
