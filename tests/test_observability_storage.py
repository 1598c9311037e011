"""Spec of what the installed Prometheus and Grafana keep, and for how long: history capped by time and by its
volume, and Grafana's database (the teams' organizations, boards and sign-in settings) on a volume of its own.

Checked on the config, on the real kube-prometheus-stack chart rendered with the program's values (skipping
without the chart cache), and on a real Prometheus reading the size limit the program sets."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from components import observability_rules as rules
from config import load_platform
from tests.conftest import real_charts_or_skip, run
from tests.isolation_spec import prefixed
from tests.local_prometheus import needs_prometheus_and_promtool, running_prometheus
from tests.test_observability_config import issues
from tests.test_observability_rules import site_config
from tools.charts.render import render_plan_releases
from tools.deployability.inputs import helm_kube_version, rendered_objects
from tools.plan.document import build_plan
from tools.plan.lookup import PlanIndex
from tools.plan.summary_site import kept_data, observability_section

GIB = 2 ** 30
UNITS = {"Gi": GIB, "Mi": 2 ** 20, "Ti": 2 ** 40}


def size(quantity: str) -> int:
    """A binary-suffixed Kubernetes quantity in bytes (this test's own reading, not the program's)."""
    number, unit = re.fullmatch(r"([0-9]+)(Gi|Mi|Ti)", quantity).groups()
    return int(number) * UNITS[unit]


# --- config -------------------------------------------------------------------------------------


def test_defaults_keep_ninety_days_capped_below_a_fifty_gib_volume():
    settings = load_platform(site_config()).observability
    assert (settings.retention, settings.storage, settings.grafana_storage) == ("90d", "50Gi", "10Gi")
    # 80% of 50 GiB, in whole MiB: the rest of the volume holds the write-ahead log.
    assert settings.retention_size == f"{50 * 1024 * 8 // 10}MiB"


@pytest.mark.parametrize("storage", ["200Gi", "1Ti", "1536Mi", "75G"])
def test_the_size_limit_follows_the_volume_and_stays_below_it(storage):
    settings = load_platform(site_config(storage=storage)).observability
    limit = int(settings.retention_size.removesuffix("MiB")) * 2 ** 20
    volume = size(storage) if storage[-1] == "i" else 75 * 10 ** 9
    assert 0.79 * volume <= limit <= 0.8 * volume


def test_a_retention_shorter_than_the_usage_window_kai_reads_is_refused():
    found = issues(site_config(retention="3d", timeAwareFairness={"enabled": True, "windowSize": "1w"}))
    message = found["observability.retention"]
    assert "'3d'" in message and "windowSize: 1w" in message and "at least 1w" in message
    # Equal, or fairness off, is fine.
    assert load_platform(site_config(retention="7d", timeAwareFairness={"enabled": True, "windowSize": "1w"}))
    assert load_platform(site_config(retention="3d"))


@pytest.mark.parametrize("key", ["storage", "grafanaStorage"])
def test_a_volume_too_small_for_a_database_is_refused(key):
    message = issues(site_config(**{key: "512Mi"}))[f"observability.{key}"]
    assert "'512Mi'" in message and "1Gi or more" in message


@pytest.mark.parametrize("value", ["90 days", "0", "1.5d", "-1d", "0d", "0h0m"])
def test_a_retention_prometheus_cannot_read_is_refused(value):
    message = issues(site_config(retention=value))["observability.retention"]
    assert repr(value) in message and "90d" in message


@pytest.mark.parametrize("mode", ["external", "off"])
@pytest.mark.parametrize("key,value", [("retention", "30d"), ("storage", "100Gi"), ("grafanaStorage", "5Gi")])
def test_sizes_apply_only_to_what_the_program_installs(mode, key, value):
    extra = {"external": {"releaseLabel": "prometheus"}} if mode == "external" else {}
    message = issues(site_config(prometheus=mode, **extra, **{key: value}))[f"observability.{key}"]
    assert mode in message and f"remove observability.{key}" in message


def test_grafana_storage_without_grafana_is_refused():
    message = issues(site_config(grafana=False, grafanaStorage="5Gi"))["observability.grafanaStorage"]
    assert "grafana is false" in message


# --- protection ------------------------------------------------------------------------------------


def monitoring_namespace(config: dict):
    program = run(prefixed(config), stack="dev")
    [namespace] = [resource for resource in program.of_type("kubernetes:core/v1:Namespace")
                   if resource.inputs["metadata"]["name"] == config["observability"].get("namespace", "monitoring")]
    return namespace


def test_the_namespace_holding_the_history_is_protected_unless_the_site_lifts_it():
    assert monitoring_namespace(site_config()).options.get("protect") is True
    assert not monitoring_namespace(site_config(protect=False)).options.get("protect")
    message = issues(site_config(prometheus="off", protect=True))["observability.protect"]
    assert "remove observability.protect" in message


def test_the_grafana_admin_password_is_protected_with_the_database_it_opens():
    """Grafana takes it only when it creates its database: a new password would lock the program out."""
    for protect in (True, False):
        config = site_config(protect=protect)
        program = run(prefixed(config), stack="dev")
        [password] = program.of_type("random:index/randomPassword:RandomPassword")
        assert bool(password.options.get("protect")) is protect


def test_the_summary_says_whether_the_history_is_protected():
    for protect, words in ((True, "created by this stack, protected"), (False, "**not protected**")):
        config = site_config(protect=protect)
        plan = build_plan(run(prefixed(config), stack="dev"), "dev")
        assert any(line.startswith("- Namespace `monitoring`") and words in line
                   for line in observability_section(PlanIndex(plan)))


# --- the real chart --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The objects of every release of the dev site with observability installed, from the real charts."""
    config = site_config(retention="26w", storage="200Gi", grafanaStorage="20Gi")
    plan = build_plan(run(prefixed(config), stack="dev"), "dev")
    cache = real_charts_or_skip(plan)
    out = tmp_path_factory.mktemp("charts")
    summary = render_plan_releases(plan["resources"], cache, out, kube_version=helm_kube_version(plan))
    return rendered_objects(summary, out, plan["resources"])


def grafana_objects(objects):
    return [obj for obj in objects if obj.manifest.get("metadata", {}).get("labels", {}).get(
        "app.kubernetes.io/name") == "grafana"]


def test_grafana_keeps_its_database_on_a_claim_of_the_site_storage_class(rendered):
    grafana = grafana_objects(rendered)
    kinds = {obj.kind for obj in grafana}
    assert "StatefulSet" in kinds and "Deployment" not in kinds
    statefulset = next(obj.manifest for obj in grafana if obj.kind == "StatefulSet")
    [claim] = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert claim["spec"]["storageClassName"] == "microk8s-hostpath"
    pod = statefulset["spec"]["template"]["spec"]
    [server] = [c for c in pod["containers"] if c["name"] == "grafana"]
    data_path = next(e["value"] for e in server["env"] if e["name"] == "GF_PATHS_DATA")
    # The database (grafana.db under paths.data) is on the claim, not on an emptyDir of the same name.
    assert any(m["name"] == claim["metadata"]["name"] and m["mountPath"].rstrip("/") == data_path.rstrip("/")
               for m in server["volumeMounts"])
    assert not any(v["name"] == claim["metadata"]["name"] for v in pod.get("volumes", []))
    assert statefulset["spec"]["replicas"] == 1


def test_prometheus_history_is_capped_by_time_and_below_its_volume(rendered):
    [prometheus] = [obj.manifest for obj in rendered if obj.kind == "Prometheus"]
    [crd] = [obj.manifest for obj in rendered
             if obj.kind == "CustomResourceDefinition" and obj.name == "prometheuses.monitoring.coreos.com"]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    spec = prometheus["spec"]
    assert spec["retention"] == "26w" and re.fullmatch(schema["retention"]["pattern"], spec["retention"])
    assert re.search(schema["retentionSize"]["pattern"], spec["retentionSize"])
    claim = spec["storage"]["volumeClaimTemplate"]["spec"]
    volume = size(claim["resources"]["requests"]["storage"])
    assert volume == 200 * GIB and claim["storageClassName"] == "microk8s-hostpath"
    limit = int(spec["retentionSize"].removesuffix("MiB")) * 2 ** 20
    assert 0.75 * volume <= limit <= 0.8 * volume


def test_prometheus_scrapes_its_own_metrics_in_its_namespace(rendered):
    """What the size alert reads: the chart's self-monitor, in the namespace the alert filters on."""
    [monitor] = [obj for obj in rendered
                 if obj.kind == "ServiceMonitor" and obj.name == "kube-prometheus-stack-prometheus"]
    assert monitor.namespace == load_platform(site_config()).observability.namespace
    assert monitor.manifest["spec"]["endpoints"]


# --- the size alert ------------------------------------------------------------------------------


def size_alerts(config: dict) -> list[dict]:
    return [rule for rule in rules.alert_rules(load_platform(config))
            if rule["alert"] == "GpuTenancyHistoryTrimmedForSize"]


def test_only_the_installed_prometheus_gets_the_size_alert():
    [alert] = size_alerts(site_config(namespace="metrics", storage="200Gi", retention="26w"))
    assert alert["expr"] == f'increase({rules.SIZE_RETENTIONS}{{namespace="metrics"}}[1h]) > 0'
    assert "163840MiB" in alert["annotations"]["description"] and "26w" in alert["annotations"]["description"]
    assert not size_alerts(site_config(prometheus="external", external={"releaseLabel": "prometheus"}))


# --- a real Prometheus -----------------------------------------------------------------------------


@needs_prometheus_and_promtool
def test_a_real_prometheus_reads_the_size_limit_as_the_program_means_it(tmp_path):
    """The operator passes ``retentionSize`` and ``retention`` to Prometheus' ``--storage.tsdb.retention.*`` flags."""
    settings = load_platform(site_config(storage="200Gi", retention="26w")).observability
    flags = (f"--storage.tsdb.retention.size={settings.retention_size}",
             f"--storage.tsdb.retention.time={settings.retention}")
    with running_prometheus(tmp_path, "global:\n  scrape_interval: 1m\nscrape_configs: []\n", flags=flags) as url:
        with urllib.request.urlopen(f"{url}/api/v1/status/runtimeinfo", timeout=10) as response:
            retention = json.load(response)["data"]["storageRetention"]
    # Prometheus shows what it enforces, e.g. "26w or 160GiB".
    duration, limit = retention.split(" or ")
    assert duration == "26w"
    number, unit = re.fullmatch(r"([0-9.]+)([KMGT]iB)", limit).groups()
    assert float(number) * {"KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": GIB, "TiB": 2 ** 40}[unit] == 160 * GIB


# --- the review summary ----------------------------------------------------------------------------


def test_the_summary_shows_what_the_release_keeps_and_where():
    config = site_config(retention="26w", storage="200Gi", grafanaStorage="20Gi")
    plan = build_plan(run(prefixed(config), stack="dev"), "dev")
    lines = observability_section(PlanIndex(plan))
    assert ("- Prometheus keeps `26w` of history, at most `163840MiB` (`retentionSize`), on a `200Gi` volume "
            "(class `microk8s-hostpath`)") in lines
    assert any(line.startswith("- Grafana's database") and "`20Gi` volume" in line for line in lines)


def test_the_summary_warns_of_values_that_keep_nothing():
    """Read from the release's values, so a change that drops the volumes shows in review."""
    lines = kept_data({"prometheus": {"prometheusSpec": {"retention": "90d"}}, "grafana": {"enabled": True}})
    assert "**with no size limit**" in lines[0] and "**on an emptyDir**" in lines[0]
    assert "**an emptyDir, erased whenever its pod restarts**" in lines[1]
    assert len(kept_data({"prometheus": {"prometheusSpec": {}}, "grafana": {"enabled": False}})) == 1


@needs_prometheus_and_promtool
def test_a_real_prometheus_counts_what_it_deletes_for_size(tmp_path):
    """The counter the size alert reads is one Prometheus exports about itself."""
    with running_prometheus(tmp_path, "global:\n  scrape_interval: 1m\nscrape_configs: []\n",
                            flags=("--storage.tsdb.retention.size=1GiB",)) as url:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
            exported = response.read().decode()
    assert re.search(rf"^{rules.SIZE_RETENTIONS} 0$", exported, re.MULTILINE)
