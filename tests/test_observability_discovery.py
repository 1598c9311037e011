"""Spec of where the installed Prometheus, Alertmanager and Grafana look for what configures them, and of who on the
host reads every Secret: the monitoring namespace only, so a monitor, rule, alert route or dashboard in a team's
namespace configures nothing, and no service account of the monitoring stack but the Prometheus operator reads the
teams' vCluster credentials.

Checked on the values, then on the real charts rendered with them (skipping without the chart cache): the
Prometheus and Alertmanager resources as the operator reads their selectors, every namespace selector their own
CRDs define, the Grafana pod's sidecars and role, and every monitor and rule of the plan and of every release. Who
reads every Secret of the host is held by tests/test_host_rbac_powers.py, on the same renders."""

from __future__ import annotations

import copy

import pytest

from components import observability_discovery as discovery
from components.observability import stack_values
from components.observability_ksm import COLLECTORS
from config import load_platform
from config.observability import INSTALL_RELEASE
from config.vocabulary import DASHBOARD_LABEL, NAMESPACE_NAME_LABEL
from policy.label_selectors import selector_matches
from tests.conftest import eks_config, real_charts_or_skip, run
from tests.test_observability_alerting import alerting_site, with_receiver_secret
from tools.charts.render import render_plan_releases
from tools.deployability.inputs import helm_kube_version, program_objects, rendered_objects
from tools.plan.document import build_plan

MONITORING = "metrics"
DISCOVERED_KINDS = {"ServiceMonitor": "serviceMonitor", "PodMonitor": "podMonitor", "Probe": "probe",
                    "ScrapeConfig": "scrapeConfig", "PrometheusRule": "rule"}
# Resources of the operator that discover from namespaces of their own: none may be rendered.
OTHER_DISCOVERERS = ("ThanosRuler", "PrometheusAgent")


def site() -> dict:
    config = alerting_site(receiver="slack", slackChannel="#gpu")
    config["observability"]["namespace"] = MONITORING
    return config


def team_namespace() -> str:
    return load_platform(site(), placeholders=["alertReceiver"]).teams[0].namespace


def render(config: dict, stack: str, tmp_path_factory) -> list:
    plan = build_plan(run(config, stack=stack), stack)
    cache = real_charts_or_skip(plan)
    out = tmp_path_factory.mktemp(f"discovery-{stack}")
    summary = render_plan_releases(plan["resources"], cache, out, kube_version=helm_kube_version(plan))
    return rendered_objects(summary, out, plan["resources"]) + program_objects(plan["resources"])


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    return render(with_receiver_secret(site()), "dev", tmp_path_factory)


@pytest.fixture(scope="module")
def eks_objects(tmp_path_factory):
    config = eks_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install"}
    return render(config, "eks", tmp_path_factory)


def namespaces(objects) -> dict[str, dict]:
    """Every namespace of the host the site's objects live in, with the labels the API server gives it."""
    found = {obj.namespace for obj in objects if obj.namespace} | {"kube-system", "default"}
    labels = {obj.name: dict((obj.manifest.get("metadata") or {}).get("labels") or {})
              for obj in objects if obj.kind == "Namespace"}
    return {name: {**labels.get(name, {}), NAMESPACE_NAME_LABEL: name} for name in found}


def discovered(resource: dict, prefix: str, obj: dict, namespace_labels: dict) -> bool:
    """Whether a Prometheus or Alertmanager resource picks ``obj`` up, as the operator decides: a null namespace
    selector is the resource's own namespace, an empty one every namespace; a null object selector nothing."""
    spec = resource["spec"]
    namespace_selector = spec.get(f"{prefix}NamespaceSelector")
    in_namespace = (obj["metadata"]["namespace"] == resource["metadata"]["namespace"] if namespace_selector is None
                    else selector_matches(namespace_selector, namespace_labels))
    selector = spec.get(f"{prefix}Selector")
    return in_namespace and selector is not None and selector_matches(selector, obj["metadata"].get("labels") or {})


def one(objects, kind: str) -> dict:
    [found] = [obj.manifest for obj in objects if obj.kind == kind]
    return found


# --- values (no chart needed) -------------------------------------------------------------------------


def test_the_values_point_every_discovery_and_grafanas_role_at_the_monitoring_namespace():
    values = stack_values(load_platform(site(), placeholders=["alertReceiver"]))
    only = {"matchLabels": {NAMESPACE_NAME_LABEL: MONITORING}}
    prometheus = values["prometheus"]["prometheusSpec"]
    assert {field: prometheus[field] for field in discovery.PROMETHEUS_DISCOVERY} == \
        dict.fromkeys(discovery.PROMETHEUS_DISCOVERY, only)
    alertmanager = values["alertmanager"]["alertmanagerSpec"]
    assert alertmanager["alertmanagerConfigNamespaceSelector"] == only
    # The alerting settings the program merges beside them are kept.
    assert alertmanager["configSecret"] and alertmanager["storage"]
    grafana = values["grafana"]
    assert grafana["rbac"]["namespaced"] is True
    assert {name: grafana["sidecar"][name]["searchNamespace"] for name in discovery.GRAFANA_SIDECARS} == \
        dict.fromkeys(discovery.GRAFANA_SIDECARS, MONITORING)
    assert grafana["sidecar"]["dashboards"]["label"] == DASHBOARD_LABEL[0]
    assert "secrets" not in values["kube-state-metrics"]["collectors"] == list(COLLECTORS)


# --- the real charts ---------------------------------------------------------------------------------


def test_every_namespace_selector_the_crds_define_is_set_to_the_monitoring_namespace_alone(objects):
    crds = {obj.manifest["spec"]["names"]["kind"]: obj.manifest for obj in objects
            if obj.kind == "CustomResourceDefinition" and obj.manifest["spec"]["group"] == "monitoring.coreos.com"}
    hosts = namespaces(objects)
    assert {MONITORING, team_namespace(), "kai-scheduler", "kube-system"} <= set(hosts)
    for kind in ("Prometheus", "Alertmanager"):
        resource = one(objects, kind)
        schema = crds[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        fields = sorted(field for field in schema if field.endswith("NamespaceSelector"))
        assert fields, kind
        for field in fields:
            selected = {name for name, labels in hosts.items() if selector_matches(resource["spec"][field], labels)}
            assert selected == {MONITORING}, (kind, field, selected)
    assert not [obj.describe() for obj in objects if obj.kind in OTHER_DISCOVERERS]


def test_a_teams_monitor_rule_and_alert_route_configure_nothing_the_same_in_the_monitoring_namespace_would(objects):
    """The objects a hostile team would send, were its syncer allowed these kinds: labelled with the release, in its
    own namespace. Each is passed over; moved to the monitoring namespace, each is picked up."""
    hosts = namespaces(objects)
    prometheus, alertmanager = one(objects, "Prometheus"), one(objects, "Alertmanager")
    release, team = {"release": INSTALL_RELEASE}, team_namespace()
    for kind, prefix in {**DISCOVERED_KINDS, "AlertmanagerConfig": "alertmanagerConfig"}.items():
        resource = alertmanager if kind == "AlertmanagerConfig" else prometheus
        tenant = {"kind": kind, "metadata": {"name": "take-over", "namespace": team, "labels": release}}
        assert not discovered(resource, prefix, tenant, hosts[team]), kind
        platform = copy.deepcopy(tenant)
        platform["metadata"]["namespace"] = MONITORING
        assert discovered(resource, prefix, platform, hosts[MONITORING]), kind


def test_every_monitor_and_rule_of_the_plan_and_of_every_release_is_where_prometheus_looks(objects):
    """What the selectors leave out is lost silently (no error, no series): every one the program and the charts
    create must be picked up."""
    hosts = namespaces(objects)
    prometheus = one(objects, "Prometheus")
    monitors = [obj for obj in objects if obj.kind in DISCOVERED_KINDS or obj.kind == "AlertmanagerConfig"]
    assert {"gpu-tenancy-kai-scheduler", "gpu-tenancy-dcgm-exporter", "gpu-tenancy"} <= {obj.name for obj in monitors}
    origins = {obj.origin.split(",")[0].split(":")[0] for obj in monitors}
    assert "program" in origins and any(origin.startswith("chart kube-prometheus-stack") for origin in origins)
    lost = [obj.describe() for obj in monitors
            if obj.kind != "AlertmanagerConfig"
            and not discovered(prometheus, DISCOVERED_KINDS[obj.kind], obj.manifest, hosts[obj.namespace])]
    assert not lost
    assert not [obj.describe() for obj in monitors if obj.namespace != MONITORING]


def test_grafanas_sidecars_and_role_reach_the_monitoring_namespace_only(objects):
    grafana = [obj for obj in objects if obj.kind == "StatefulSet" and obj.name.endswith("-grafana")]
    [statefulset] = [obj.manifest for obj in grafana]
    containers = statefulset["spec"]["template"]["spec"]["containers"]
    sidecars = [container for container in containers if any(env["name"] == "RESOURCE"
                                                             for env in container.get("env", []))]
    assert len(sidecars) >= 2
    for container in sidecars:
        assert {env["name"]: env.get("value") for env in container["env"]}["NAMESPACE"] == MONITORING
    account = statefulset["spec"]["template"]["spec"]["serviceAccountName"]
    bound = [obj.describe() for obj in objects if obj.kind == "ClusterRoleBinding"
             and any(subject.get("name") == account for subject in obj.manifest.get("subjects") or [])]
    assert not bound
    [role] = [obj for obj in objects if obj.kind == "Role" and obj.name == account]
    assert role.namespace == MONITORING
    assert any("secrets" in rule.get("resources", []) for rule in role.manifest["rules"])
