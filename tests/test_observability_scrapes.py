"""Spec: the installed Prometheus reads nothing a tenant writes.

A tenant controls what its pods expose. Were any of them scraped, it could publish ``kai_queue_allocated_gpus``
for another team's queue (that team's bill), a second ``gpu_tenancy_team_info`` for a namespace (every per-team
join fails, for every team), or a fatal XID (a page). So every scrape the installed stack runs must stay in the
platform's namespaces: checked on the real kube-prometheus-stack chart rendered with the program's values (skipping
without the chart cache) and on the program's own monitors. vCluster cannot write monitors into a team's namespace
(config/virtual_cluster.py refuses ``sync.toHost.customResources``). A site's own Prometheus (``external``) is told
the same in a plan note (tests/test_observability_config.py).
"""

from __future__ import annotations

import pytest

from config import load_platform
from tests.config_spec import dev_config, eks_config
from tests.conftest import run
from tests.isolation_spec import prefixed
from tests.test_observability_control_plane import installed, rendered

MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
# The Prometheus operator's kinds that become scrape jobs.
SCRAPE_KINDS = ("ServiceMonitor", "PodMonitor", "Probe", "ScrapeConfig")


def scraped_namespaces(monitor: dict) -> set[str]:
    """The namespaces a monitor's targets are looked for in; "*" for all of them (the operator's reading of
    ``namespaceSelector``: absent or empty is the monitor's own namespace)."""
    selector = monitor["spec"].get("namespaceSelector") or {}
    if selector.get("any"):
        return {"*"}
    return set(selector.get("matchNames") or [monitor["metadata"].get("namespace") or "monitoring"])


@pytest.mark.parametrize("site", [dev_config, eks_config])
def test_the_installed_chart_scrapes_only_platform_namespaces(site):
    config = installed(site())
    teams = {team.namespace for team in load_platform(config, placeholders=["kubeconfig", "sshPrivateKey"]).teams}
    objects = rendered(config)
    monitors = [obj for obj in objects if obj["kind"] in SCRAPE_KINDS]
    assert monitors, "the chart's monitors were rendered"
    for monitor in monitors:
        reached = scraped_namespaces(monitor)
        assert "*" not in reached and not reached & teams, (monitor["metadata"]["name"], reached)
    assert not [obj for obj in objects if obj["kind"] in ("PodMonitor", "Probe", "ScrapeConfig")]
    [prometheus] = [obj["spec"] for obj in objects if obj["kind"] == "Prometheus"]
    # No hand-written scrape jobs (annotation-based pod scraping is one), and no way to push series in.
    assert not prometheus.get("additionalScrapeConfigs")
    assert not prometheus.get("enableRemoteWriteReceiver") and not prometheus.get("enableOTLPReceiver")


def test_the_programs_monitors_reach_kai_and_the_gpu_operator_only():
    config = installed(dev_config())
    platform = load_platform(config, placeholders=["kubeconfig", "sshPrivateKey"])
    monitors = run(prefixed(config), stack="dev").of_type(MONITOR)
    reached = {namespace for monitor in monitors for namespace in scraped_namespaces(monitor.inputs)}
    assert reached == {platform.kai_scheduler.namespace, platform.gpu_operator.namespace}
