"""A site's choice of where a tenant's vCluster keeps its state (config/backing_store.py): refused where the chart or
vCluster would refuse it, and paid for in the tenant's quota where it is taken. The generated site
gen-box-own-store (tests/generated_sites.py) runs the same through the real chart's quota check."""

from __future__ import annotations

import pytest
import yaml

from components.tenant import vcluster_values
from config import load_platform
from config.tenant_budget import control_plane_budget, namespace_budget
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, mirror_chart, mirrored_tag
from tests.config_spec import dev_config, issue, put, rejected
from tools.charts.render import render_release

VCLUSTER = "loft-sh/vcluster"
EMBEDDED_OFF = {"database": {"embedded": {"enabled": False}}}
DEPLOYED_ETCD = {"etcd": {"deploy": {"enabled": True}}}


def with_values(extra: dict, team: int = 0) -> dict:
    return put(dev_config(), f"teams[{team}].vcluster", {"extraValues": {"controlPlane": extra}})


def settings(extra: dict):
    return load_platform(with_values(extra)).teams[0].vcluster


def test_a_second_backing_store_next_to_the_programs_sqlite_is_refused_with_the_fix():
    found = issue(rejected(with_values({"backingStore": DEPLOYED_ETCD})),
                  "teams[0].vcluster.extraValues.controlPlane.backingStore.etcd.deploy.enabled", True)
    assert "one backing store only" in found.problem
    assert "controlPlane.backingStore.database.embedded.enabled to false" in found.fix
    external = with_values({"backingStore": {"etcd": {"external": {"enabled": True, "endpoint": "etcd:2379"}}}})
    issue(rejected(external), "teams[0].vcluster.extraValues.controlPlane.backingStore.etcd.external.enabled", True)
    load_platform(with_values({"backingStore": {**DEPLOYED_ETCD, **EMBEDDED_OFF}}))


@pytest.mark.parametrize("store", [{}, {"backingStore": {**DEPLOYED_ETCD, **EMBEDDED_OFF}}])
def test_several_control_plane_replicas_are_refused(store):
    """On SQLite vCluster refuses them; on any store the chart grants the syncer Lease writes in the host namespace,
    which no host policy checks (tests/test_synced_kinds_contract.py failed for such a site)."""
    found = issue(rejected(with_values({**store, "statefulSet": {"highAvailability": {"replicas": 3}}})),
                  "teams[0].vcluster.extraValues.controlPlane.statefulSet.highAvailability.replicas", 3)
    assert "Leases in the host namespace" in found.problem
    assert "embedded database is not supported with multiple replicas" in found.problem


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_refuses_what_the_rules_refuse(tag):
    """The chart fails on two stores, grants the syncer Leases with several replicas, and vCluster refuses replicas on
    the embedded database, at every accepted tag."""
    tag = mirrored_tag(VCLUSTER, tag)
    assert '"you can only enable one backingStore at the same time"' in git(
        VCLUSTER, "show", f"{tag}:chart/templates/_backingstore.tpl")
    validation = git(VCLUSTER, "show", f"{tag}:pkg/config/validation.go")
    assert "StoreTypeEmbeddedDatabase && vConfig.ControlPlane.StatefulSet.HighAvailability.Replicas > 1" in validation
    assert "embedded database is not supported with multiple replicas" in validation
    role = git(VCLUSTER, "show", f"{tag}:chart/templates/role.yaml")
    leases = role.index('resources: ["leases"]')
    assert "(gt (int .Values.controlPlane.statefulSet.highAvailability.replicas) 1)" in role[leases - 300:leases]
    values = yaml.safe_load(git(VCLUSTER, "show", f"{tag}:chart/values.yaml"))["controlPlane"]
    deploy = values["backingStore"]["etcd"]["deploy"]
    assert values["statefulSet"]["persistence"]["volumeClaim"]["size"] == "5Gi"
    assert deploy["statefulSet"]["persistence"]["volumeClaim"]["size"] == "5Gi"
    assert deploy["statefulSet"]["resources"]["requests"] == {"cpu": "20m", "memory": "150Mi"}


def test_the_quota_pays_for_a_bigger_control_plane_volume():
    plain = control_plane_budget(settings({}))
    bigger = control_plane_budget(settings({"statefulSet": {"persistence": {"volumeClaim": {"size": "10Gi"}}}}))
    assert (plain.storage, bigger.storage) == (5 * 2 ** 30, 10 * 2 ** 30)
    assert (plain.claims, plain.services, bigger.claims) == (1, 3, 1)


def test_the_quota_pays_for_a_deployed_etcd_and_its_replicas_as_the_chart_renders_them(tmp_path):
    extra = {"backingStore": {**EMBEDDED_OFF, "etcd": {"deploy": {"enabled": True, "statefulSet": {
                 "highAvailability": {"replicas": 3}, "persistence": {"volumeClaim": {"size": "8Gi"}}}}}}}
    config = with_values(extra)
    platform = load_platform(config)
    team = platform.teams[0]
    budget = control_plane_budget(team.vcluster)
    chart = mirror_chart(VCLUSTER, mirrored_tag(VCLUSTER, "v0.36.1"), "chart", tmp_path)
    rendered = render_release(chart, team.vcluster_name, team.namespace,
                              vcluster_values(team, "10.152.183.10"))
    objects = [doc for text in rendered.values() for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
    workloads = {o["kind"] + "/" + o["metadata"]["name"]: o for o in objects
                 if o["kind"] in ("StatefulSet", "Deployment")}
    assert sorted(workloads) == [f"Deployment/{team.vcluster_name}", f"StatefulSet/{team.vcluster_name}-etcd"]
    pods = sum(w["spec"].get("replicas", 1) for w in workloads.values())
    claims = [(w["spec"]["replicas"], t["spec"]["resources"]["requests"]["storage"])
              for w in workloads.values() for t in w["spec"].get("volumeClaimTemplates", [])]
    services = [o for o in objects if o["kind"] == "Service"]
    # The synced kube-dns Service is the vCluster's, not the chart's.
    assert (budget.pods, budget.claims, budget.storage) == (pods, 3, 3 * 8 * 2 ** 30) and claims == [(3, "8Gi")]
    assert budget.services == len(services) + 1
    assert namespace_budget(team.vcluster).pods == team.vcluster.resource_quota.pods + pods + 1


@pytest.mark.parametrize("extra, path", [
    ({"backingStore": {"etcd": {"deploy": {"enabled": "true"}}}}, "backingStore.etcd.deploy.enabled"),
    ({"statefulSet": {"highAvailability": {"replicas": "3"}}}, "statefulSet.highAvailability.replicas"),
    ({"backingStore": {**EMBEDDED_OFF, "etcd": {"deploy": {"enabled": True, "statefulSet": {
        "highAvailability": {"replicas": 0}}}}}}, "backingStore.etcd.deploy.statefulSet.highAvailability.replicas"),
    ({"statefulSet": {"highAvailability": {"replicas": 0}}}, "statefulSet.highAvailability.replicas"),
    ({"statefulSet": {"persistence": {"volumeClaim": {"size": "lots"}}}}, "statefulSet.persistence.volumeClaim.size"),
    ({"backingStore": {**EMBEDDED_OFF, "etcd": {"deploy": {"enabled": True, "statefulSet": {
        "resources": {"requests": {"memory": "a lot"}}}}}}},
     "backingStore.etcd.deploy.statefulSet.resources.requests.memory"),
])
def test_a_value_the_quota_is_computed_from_must_be_what_the_chart_takes(extra, path):
    """Otherwise the program would size the namespace's quota from a guess (or stop with a traceback)."""
    found = issue(rejected(with_values(extra)), f"teams[0].vcluster.extraValues.controlPlane.{path}",
                  extra_value(extra, path))
    assert found.fix


def extra_value(extra: dict, path: str):
    for key in path.split("."):
        extra = extra[key]
    return extra


def test_a_vcluster_name_too_long_for_its_deployed_etcd_is_refused():
    """The chart names etcd's StatefulSet <name>-etcd and its Service <name>-etcd-headless: at 52 characters, the
    longest name a team may have otherwise, the first makes no pods and the API server refuses the second."""
    config = put(with_values({"backingStore": {**DEPLOYED_ETCD, **EMBEDDED_OFF}}), "teams[0].vclusterName", "v" * 52)
    found = issue(rejected(config), "teams[0].vclusterName", "v" * 52)
    assert "at most 47 characters" in found.fix
    load_platform(put(config, "teams[0].vclusterName", "v" * 47))


def claim_template(name: str, size: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                 "resources": {"requests": {"storage": size}}}}


def rendered_workloads(team, tmp_path) -> dict:
    chart = mirror_chart(VCLUSTER, mirrored_tag(VCLUSTER, "v0.36.1"), "chart", tmp_path)
    rendered = render_release(chart, team.vcluster_name, team.namespace, vcluster_values(team, "10.152.183.10"))
    objects = [doc for text in rendered.values() for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
    return {o["kind"] + "/" + o["metadata"]["name"]: o for o in objects if o["kind"] in ("StatefulSet", "Deployment")}


@pytest.mark.parametrize("extra", [
    {"statefulSet": {"persistence": {"volumeClaimTemplates": [claim_template("data", "5Gi"),
                                                              claim_template("scratch", "20Gi")]}}},
    {"backingStore": {**EMBEDDED_OFF, "etcd": {"deploy": {"enabled": True, "statefulSet": {
        "highAvailability": {"replicas": 3},
        "persistence": {"volumeClaimTemplates": [claim_template("data", "12Gi"), claim_template("wal", "2Gi")]}}}}}},
])
def test_the_quota_pays_for_a_sites_own_claim_templates_as_the_chart_renders_them(extra, tmp_path):
    """The chart renders a site's volumeClaimTemplates instead of its own data claim: every claim of them is paid for
    (the control plane's quota left out all but one 5Gi claim, and the deployability check found 120Gi in 105Gi)."""
    team = load_platform(with_values(extra)).teams[0]
    budget = control_plane_budget(team.vcluster)
    sizes = [(w["spec"].get("replicas", 1), t["spec"]["resources"]["requests"]["storage"])
             for w in rendered_workloads(team, tmp_path).values() for t in w["spec"].get("volumeClaimTemplates", [])]
    gib = {"5Gi": 5, "20Gi": 20, "12Gi": 12, "2Gi": 2}
    assert budget.claims == sum(replicas for replicas, _ in sizes)
    assert budget.storage == sum(replicas * gib[size] * 2 ** 30 for replicas, size in sizes)
    assert len(sizes) >= 2


@pytest.mark.parametrize("extra, path", [
    ({"statefulSet": {"persistence": {"volumeClaimTemplates": [claim_template("scratch", "20Gi")]}}},
     "statefulSet.persistence.volumeClaimTemplates"),
    ({"backingStore": {**EMBEDDED_OFF, "etcd": {"deploy": {"enabled": True, "statefulSet": {
        "persistence": {"volumeClaimTemplates": [claim_template("wal", "2Gi")]}}}}}},
     "backingStore.etcd.deploy.statefulSet.persistence.volumeClaimTemplates"),
])
def test_claim_templates_without_the_data_volume_the_pod_mounts_are_refused(extra, path, tmp_path):
    """The chart's list replaces its own data claim, and the syncer (etcd) mounts a volume data: the pod would have
    none, and the API server refuses the StatefulSet."""
    found = issue(rejected(with_values(extra)), f"teams[0].vcluster.extraValues.controlPlane.{path}",
                  extra_value(extra, path))
    assert "template named data" in found.fix
    mount = next(m for w in rendered_workloads(load_platform(dev_config()).teams[0], tmp_path).values()
                 for c in w["spec"]["template"]["spec"]["containers"] for m in c.get("volumeMounts", []))
    assert mount["name"] == "data"


def test_a_data_volume_the_site_gives_stands_in_for_the_data_template():
    extra = {"statefulSet": {"persistence": {"volumeClaimTemplates": [claim_template("scratch", "20Gi")],
                                             "dataVolume": [{"name": "data", "emptyDir": {}}]}}}
    assert control_plane_budget(settings(extra)).storage == 20 * 2 ** 30


@pytest.mark.parametrize("template", [{"metadata": {"name": "data"}}, {"spec": {"resources": {"requests": {
    "storage": "5Gi"}}}}, claim_template("data", "plenty")])
def test_a_claim_template_without_a_name_or_a_size_is_refused(template):
    extra = {"statefulSet": {"persistence": {"volumeClaimTemplates": [template]}}}
    found = issue(rejected(with_values(extra)),
                  "teams[0].vcluster.extraValues.controlPlane.statefulSet.persistence.volumeClaimTemplates[0]", template)
    assert "spec.resources.requests.storage" in found.problem
