"""The record Helm keeps of each release the program installs fits the Secret the API server stores it in.

Helm 3 keeps every revision of a release as a Secret: the release (its chart's own files, the values, the rendered
manifest and hooks) as JSON, gzipped and base64'd, refused by the API server past 1 MiB (tools/charts/release_record.py).
A release whose record outgrows that cannot be installed or upgraded. Each record here is built from the pinned chart
rendered with the values the program gives it: for every release of the committed sites, and of a site of 300 teams
(the config sets no limit on teams) with kube-prometheus-stack installed and every team's alerts routed to its own
receiver. Whatever grows with the teams stays out of the releases: Alertmanager's routes and receivers are a Secret
of the program's (components/observability_alerting.py), so the kube-prometheus-stack record is the same for one
team as for 300.
"""

from __future__ import annotations

import copy
import math

import pytest

from config.observability import INSTALL_RELEASE
from tests.conftest import dev_config, eks_config, real_charts_or_skip
from tests.release_renders import plan_of
from tools.charts.release_record import SECRET_LIMIT, record_parts, release_record_sizes
from tools.charts.render import release_records
from tools.deployability.inputs import helm_kube_version

# Left under the limit for what the measure leaves out (the release's info and notes, a few hundred bytes) and for Go's
# compressor, whose best compression differs from zlib's by a few per cent.
MARGIN = 0.10
BUDGET = int((1 - MARGIN) * SECRET_LIMIT)
MANY_TEAMS = 300
TEAM_WORDS = ("nlp", "vision", "recommender", "legal", "support", "search", "ranking", "speech", "fraud", "risk",
              "pricing", "ads", "robotics", "genomics", "chemistry", "maps", "translate", "safety", "infra", "research")


def team_name(index: int) -> str:
    """Distinct names that do not repeat one pattern (gzip would fold ``team-000``...``team-299`` into little)."""
    first, second = TEAM_WORDS[index % len(TEAM_WORDS)], TEAM_WORDS[(7 * index + 3) % len(TEAM_WORDS)]
    return f"{first}-{second}-{(index * 2654435761) % 65536:04x}"


def site_with_alerting_teams(teams: int) -> dict:
    """The EKS site with ``teams`` teams sharing its GPU, kube-prometheus-stack installed, alerts of the site and of
    every team (their own namespaces' too) sent to Slack, and the heartbeat on."""
    config = eks_config()
    share = math.floor(10_000 / teams) / 10_000
    config["gpu-tenancy:teams"] = [
        {"name": team_name(index), "displayName": f"Team {team_name(index)}",
         "resources": {"gpu": {"quota": share, "limit": 1, "overQuotaWeight": 1}},
         "alerting": {"receiver": "slack", "slackChannel": f"#{team_name(index)}-gpu-alerts", "alerts": "all"}}
        for index in range(teams)]
    config["gpu-tenancy:observability"] = {"prometheus": "install",
                                           "alerting": {"receiver": "slack", "alerts": "all", "heartbeat": True}}
    for secret in ("teamAlertReceivers", "alertReceiver", "alertHeartbeat"):
        config[f"gpu-tenancy:{secret}"] = {"secure": f"v1:{secret}"}
    return config


def record_sizes(config: dict, stack: str) -> tuple[dict, dict]:
    """(the plan, release name -> the size of its record) of ``config``."""
    plan = plan_of(config, stack)
    cache = real_charts_or_skip(plan)
    return plan, release_record_sizes(plan["resources"], cache, helm_kube_version(plan))


def over_budget(sizes: dict) -> dict:
    return {release: size.total for release, size in sizes.items() if size.total >= BUDGET}


@pytest.fixture(scope="module")
def many_teams():
    return record_sizes(site_with_alerting_teams(MANY_TEAMS), "eks")


@pytest.mark.parametrize("stack", ["dev", "eks"])
def test_every_release_of_a_committed_site_fits_the_secret(stack):
    plan, sizes = record_sizes(dev_config() if stack == "dev" else eks_config(), stack)
    assert sorted(sizes) == sorted(inputs["name"] for _, inputs in release_records(plan["resources"]))
    assert len(sizes) >= 3  # KAI and a vCluster per team (and the GPU Operator on EKS)
    assert over_budget(sizes) == {}


def test_every_release_of_a_site_of_300_teams_with_alerting_fits_the_secret(many_teams):
    plan, sizes = many_teams
    assert {INSTALL_RELEASE, "kai-scheduler", "gpu-operator"} <= set(sizes) and len(sizes) == MANY_TEAMS + 3
    assert over_budget(sizes) == {}


def test_the_monitoring_release_carries_nothing_per_team(many_teams):
    """Each team with a receiver once added some 280 bytes to the kube-prometheus-stack record (its route and
    receiver, in the values and again in the Secret the chart rendered from them): a site of about 1,350 teams
    could not have installed it."""
    plan, sizes = many_teams
    [values] = [inputs["values"] for _, inputs in release_records(plan["resources"])
                if inputs["name"] == INSTALL_RELEASE]
    text = str(values)
    assert [team_name(index) for index in range(MANY_TEAMS) if team_name(index) in text] == []
    _, one = record_sizes(site_with_alerting_teams(1), "eks")
    assert sizes[INSTALL_RELEASE] == one[INSTALL_RELEASE]


def test_a_site_of_many_teams_would_not_fit_with_its_routes_in_the_values(many_teams):
    """What the test above guards against, measured: the 300 teams' routes and receivers set back in the chart's
    ``alertmanager.config`` make the record grow by about 280 bytes a team."""
    plan, sizes = many_teams
    inside = copy.deepcopy(plan)
    [release] = [resource for resource in inside["resources"] if resource["inputs"].get("name") == INSTALL_RELEASE]
    [component] = [resource for resource in inside["resources"]
                   if (resource.get("outputs") or {}).get("alertmanagerConfiguration")]
    manager = release["inputs"]["values"]["alertmanager"]
    for key in ("useExistingSecret", "configSecret"):
        manager["alertmanagerSpec"].pop(key)
    manager["config"] = component["outputs"]["alertmanagerConfiguration"]
    grown = release_record_sizes([release], real_charts_or_skip(inside), helm_kube_version(inside))[INSTALL_RELEASE]
    per_team = (grown.total - sizes[INSTALL_RELEASE].total) / MANY_TEAMS
    assert 150 < per_team < 600, per_team
    assert sizes[INSTALL_RELEASE].total + 1500 * per_team > SECRET_LIMIT


def test_the_record_takes_hooks_apart_from_the_manifest_as_helm_does():
    rendered = {"c/templates/a.yaml": "---\n# a comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
                                      "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  annotations:\n"
                                      "    helm.sh/hook: pre-install,pre-upgrade\n    helm.sh/hook-weight: \"-5\"\n",
                "c/templates/empty.yaml": "\n---\n"}
    manifest, hooks = record_parts(rendered)
    assert manifest == "---\n# Source: c/templates/a.yaml\n# a comment\napiVersion: v1\nkind: ConfigMap\n" \
                       "metadata:\n  name: a\n"
    [hook] = hooks
    assert (hook["name"], hook["kind"], hook["path"], hook["events"], hook["weight"]) == (
        "j", "Job", "c/templates/a.yaml", ["pre-install", "pre-upgrade"], -5)

