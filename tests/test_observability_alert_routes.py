"""Who is told of what: the routes of the Alertmanager configuration the pinned chart renders with the program's
values, followed by Debian's amtool (``config routes test``).

The platform's receiver hears the program's alerts (or, with ``alerts: all``, the chart's too) from the site's
severity up; a pager hears critical ones only; the alerts that always fire stay in Alertmanager. Alerts about
what a tenant runs in its own host namespace are the team's, which a hostile tenant drives at will: they never
reach the platform's receiver, while the virtual cluster's control plane in that namespace is the platform's and
no tenant object can pass for it.
"""

from __future__ import annotations

import pytest

from components import observability_alerting as alerting
from config import load_platform
from tests.local_alertmanager import needs_amtool
from tests.test_observability_alerting import alerting_site, alertmanager_file, rendered_stack, route_of


@pytest.fixture(scope="module")
def slack_site(tmp_path_factory):
    """The objects the chart renders for a Slack site, and its Alertmanager configuration as a file."""
    objects = rendered_stack(alerting_site(receiver="slack"))
    return objects, alertmanager_file(objects, tmp_path_factory.mktemp("routes"))


def test_the_charts_alerts_that_go_with_the_programs_are_rendered_with_the_programs_values(slack_site):
    objects, _ = slack_site
    rendered = {rule.get("alert") for obj in objects if obj["kind"] == "PrometheusRule"
                for group in obj["spec"]["groups"] for rule in group["rules"]}
    assert set(alerting.MONITORING_BLIND) <= rendered, set(alerting.MONITORING_BLIND) - rendered


@needs_amtool
def test_the_platform_alerts_go_to_the_receiver_and_the_rest_stays_quiet(slack_site):
    _, path = slack_site
    assert route_of(path, "alertname=GpuTenancyTeamStarved", "team=alpha") == alerting.RECEIVER
    assert route_of(path, "alertname=GpuTenancyHistoryTrimmedForSize", "namespace=monitoring") == alerting.RECEIVER
    assert route_of(path, "alertname=GpuTenancyGpuXidNonFatal", "team=alpha", "severity=info") == alerting.RECEIVER
    for labels in (("alertname=KubePodCrashLooping", "namespace=vcluster-alpha"), ("alertname=Watchdog",)):
        assert route_of(path, *labels) == "null"
    # The chart's alerts saying the program's cannot fire (its rules failing, a configuration not loaded) go too.
    for name in alerting.MONITORING_BLIND:
        assert route_of(path, f"alertname={name}", "namespace=monitoring") == alerting.RECEIVER, name


@needs_amtool
def test_a_pager_is_paged_for_critical_alerts_only(tmp_path):
    path = alertmanager_file(rendered_stack(alerting_site(receiver="pagerduty")), tmp_path)
    assert route_of(path, "alertname=GpuTenancyGpuXidError", "severity=critical") == alerting.RECEIVER
    for labels in (("alertname=GpuTenancyTeamStarved", "team=alpha", "severity=warning"),
                   ("alertname=GpuTenancyAllocatedGpuIdle", "team=alpha", "severity=info"),
                   # A tenant's own kernel faulting its GPU (tests/test_observability_xid.py).
                   ("alertname=GpuTenancyGpuXidNonFatal", "team=alpha", "severity=info"),
                   ("alertname=KubePodCrashLooping", "severity=critical")):
        assert route_of(path, *labels) == "null"


@needs_amtool
def test_all_alerts_reach_the_receiver_but_the_ones_that_always_fire_and_the_tenants_own(tmp_path):
    path = alertmanager_file(rendered_stack(alerting_site(receiver="slack", alerts="all")), tmp_path)
    assert route_of(path, "alertname=KubePodCrashLooping", "namespace=kai-scheduler") == alerting.RECEIVER
    assert route_of(path, "alertname=NodeFilesystemAlmostOutOfSpace", "instance=node-1") == alerting.RECEIVER
    assert route_of(path, "alertname=GpuTenancyTeamStarved", "team=alpha") == alerting.RECEIVER
    for name in alerting.ALWAYS_FIRING:
        assert route_of(path, f"alertname={name}") == "null"
    # A tenant's crash-looping pods are its own business, not the platform channel's.
    for team in load_platform(alerting_site(receiver="slack"), placeholders=["alertReceiver"]).teams:
        assert route_of(path, "alertname=KubePodCrashLooping", f"namespace={team.namespace}") == "null"


@needs_amtool
def test_a_tenant_filling_its_own_volume_does_not_page_the_platform(tmp_path):
    """With every alert paged, the chart's KubePersistentVolumeFillingUp (critical) about a claim in a tenant's
    host namespace is the tenant's to drive at will; the same alert about the platform's own Prometheus volume
    pages, and so does a fatal XID on a GPU a tenant's pod holds (it names the pod's namespace)."""
    site = alerting_site(receiver="pagerduty", alerts="all")
    path = alertmanager_file(rendered_stack(site), tmp_path)
    tenant = load_platform(site, placeholders=["alertReceiver"]).teams[0].namespace
    assert route_of(path, "alertname=KubePersistentVolumeFillingUp", f"namespace={tenant}",
                    "severity=critical") == "null"
    assert route_of(path, "alertname=KubePersistentVolumeFillingUp", "namespace=monitoring",
                    "severity=critical") == alerting.RECEIVER
    assert route_of(path, "alertname=GpuTenancyGpuXidError", f"namespace={tenant}",
                    "severity=critical") == alerting.RECEIVER


@needs_amtool
def test_a_tenants_control_plane_is_the_platforms_and_a_tenant_cannot_pass_for_it(tmp_path):
    """The vCluster StatefulSet, its pods and data volumes sit in the tenant's namespace but are the platform's:
    its API server down or its data volume full pages. A tenant's own pod or claim reaches the host as
    <name>-x-<namespace>-x-<vcluster>, or cut to 63 characters with a hash; neither passes for the control plane,
    however the tenant names it (a hashed name crafted to begin like one is 63 characters long)."""
    site = alerting_site(receiver="pagerduty", alerts="all")
    path = alertmanager_file(rendered_stack(site), tmp_path)
    team = load_platform(site, placeholders=["alertReceiver"]).teams[0]
    vcluster, namespace = team.vcluster_name, f"namespace={team.namespace}"
    for labels in ((f"pod={vcluster}-0",), (f"persistentvolumeclaim=data-{vcluster}-0",),
                   (f"statefulset={vcluster}",), (f"pod={vcluster}-etcd-2",)):
        assert route_of(path, "alertname=KubePersistentVolumeFillingUp", namespace, "severity=critical",
                        *labels) == alerting.RECEIVER, labels
    crafted = f"{vcluster}-{'0' * (51 - len(vcluster))}-0123456789"
    assert len(crafted) == 63
    for labels in ((f"pod=train-x-default-x-{vcluster}",), (f"pod={vcluster}-0-x-default-x-{vcluster}",),
                   (f"persistentvolumeclaim=data-{vcluster}-0-x-default-x-{vcluster}",), (f"pod={crafted}",),
                   (f"persistentvolumeclaim=data-{crafted[:58]}",)):
        assert route_of(path, "alertname=KubePersistentVolumeFillingUp", namespace, "severity=critical",
                        *labels) == "null", labels
