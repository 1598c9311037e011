"""A tenant cannot fill the host's etcd or every node's kube-proxy through what vCluster copies to the host: the
ConfigMaps and Secrets its pods name, the EndpointSlices and Endpoints of its selector-less Services. The tenant
namespace's ResourceQuota counts them, sized as the team's allowance plus the platform's own objects there.

- The platform's objects are read where they come from, at every accepted release: the chart rendered with the
  program's values, the syncer's runtime Secrets and ConfigMap mapping, Helm's history pruning, KAI's ConfigMaps
  for fractional pods.
- Attack: objects a hostile tenant sends, synced as vCluster syncs them (tests/synced_objects_sim.py), go through
  the quota's admission (tests/tenant_namespace.py) on top of the platform's objects: one past the allowance is
  refused.
- Honest: the seeds' workloads and every pod of KAI's docs, run up to the team's promised pod count, with their
  Services, fit with room to spare.
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from components.tenant_quota import resource_quota_hard
from config import load_platform, versions
from config.model import Team
from config.tenant_budget import CHART_SECRETS, KAI_SHARING_CONFIG_MAPS, ROOT_CA_VIRTUAL_NAMESPACES
from ops.sites import platform_of
from tests.config_spec import assert_rejected, put
from tests.config_spec import dev_config as stack_config
from tests.conftest import ACCEPTED_TAGS, ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, dev_config, git, go_function, run
from tests.synced_objects_sim import create_service, host_metadata, host_name, sync_endpoint_slice, sync_endpoints
from tests.tenant_namespace import QuotaAdmission, QuotaRefusal, tenant_objects
from tests.test_admission_honest import SEED_000, SEED_003, kai_doc_pods
from tools.charts.cache import chart_cache_dir
from tools.plan.document import build_plan

VCLUSTER = "loft-sh/vcluster"
KAI = "kai-scheduler/KAI-Scheduler"
HELM = "helm/helm"
TEAM = "team-nlp"
CONFIG_MAPS, SECRETS = "count/configmaps", "count/secrets"
ROOT_CA = "kube-root-ca.crt"
SLICES, SERVICES = "count/endpointslices.discovery.k8s.io", "count/services"
# The host these sims stand for is single-stack: the host makes one slice per Service.
HOST_FAMILIES = 1


# --- the platform's objects, where they come from ---------------------------------------------------


@pytest.mark.parametrize("release", versions.VCLUSTER_RELEASES)
def test_the_chart_renders_the_secrets_and_config_maps_the_budget_pays_for(release):
    config = put(dev_config(), "gpu-tenancy:vcluster.version", release)
    objects, allowances = tenant_objects(build_plan(run(config, stack="dev"), "dev"), chart_cache_dir())
    for namespace in allowances:
        chart = [o for o in objects if o.origin == "chart" and o.namespace == namespace]
        assert sum(o.kind == "Secret" for o in chart) == CHART_SECRETS, namespace
        assert not [o for o in chart if o.kind == "ConfigMap"], namespace


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_syncer_writes_the_runtime_objects_the_budget_pays_for(tag):
    def source(path: str) -> str:
        return git(VCLUSTER, "show", f"{tag}:{path}")

    assert 'return vClusterName + "-certs"' in go_function(source("pkg/certs/ensure.go"), "CertSecretName")
    assert re.search(r'DefaultSecretPrefix\s*=\s*"vc-"', source("pkg/util/kubeconfig/kubeconfig.go"))
    # A virtual namespace's kube-root-ca.crt keeps a shared host name only where its host name would stay
    # kube-root-ca.crt; single-namespace sync names it like any ConfigMap (tests/test_vcluster_sync_real.py runs it):
    # one copy per virtual namespace, which the budget pays for the DNS's and default's namespaces.
    mapper = go_function(source("pkg/mappings/resources/configmaps.go"), "(s *configMapsMapper) VirtualToHost")
    assert re.search(r'pName := s\.Mapper\.VirtualToHost\(.*\)\s*if pName\.Name == "kube-root-ca\.crt" \{', mapper)
    # Token Secrets per pod only where a site asks for them (config/tenant_budget.py pays them then).
    values = yaml.safe_load(source("chart/values.yaml"))
    assert values["sync"]["toHost"]["pods"]["useSecretsForSATokens"] is False
    # One Endpoints per Service: none without a virtual Service of its name, none for a Service with a selector.
    start = go_function(source("pkg/controllers/resources/endpoints/syncer.go"), "(s *endpointsSyncer) ReconcileStart")
    assert re.search(r"if kerrors\.IsNotFound\(err\) \{\s*return true, nil", start)
    assert "} else if svc.Spec.Selector != nil {" in start


@pytest.mark.parametrize("tag", MIRRORED_TAGS[HELM])
def test_helm_keeps_at_most_max_history_release_secrets(tag):
    create = go_function(git(HELM, "show", f"{tag}:pkg/storage/storage.go"), "(s *Storage) Create")
    assert re.search(r"if s\.MaxHistory > 0 \{.*removeLeastRecent\([^,]+, s\.MaxHistory-1\)", create, re.S)


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kais_binder_writes_two_config_maps_for_a_fractional_pod(tag):
    binder = git(KAI, "show", f"{tag}:pkg/binder/plugins/gpusharing/gpu_sharing.go")
    assert binder.count("gpusharingconfigmap.UpsertJobConfigMap(") == KAI_SHARING_CONFIG_MAPS


# --- the host namespace with the platform's objects in it --------------------------------------------


@pytest.fixture(scope="module")
def host(dev_run):
    """(team, its allowance, a function giving a fresh QuotaAdmission holding the platform's objects)."""
    team = next(t for t in platform_of(dev_config(), stack="dev").teams if t.name == TEAM)
    objects, allowances = tenant_objects(build_plan(dev_run, "dev"), chart_cache_dir())
    allowance = allowances[team.namespace]
    here = [o for o in objects if o.namespace == team.namespace]
    [quota] = [o.manifest for o in here if o.kind == "ResourceQuota"]

    def fresh() -> QuotaAdmission:
        admission = QuotaAdmission(quota["spec"]["hard"])
        for obj in here:
            if obj.kind in ("ConfigMap", "Secret", "Service"):
                admission.create(obj.manifest)
        release = team.vcluster_name
        for name in (f"{release}-certs", f"vc-{release}", *(f"sh.helm.release.v1.{release}.v{revision}"
                                                            for revision in range(1, allowance["helmHistory"][0] + 1))):
            admission.create({"kind": "Secret", "metadata": {"name": name}})
        dns_config_maps = {volume["configMap"]["name"] for o in here if o.kind == "Pod"
                           for volume in o.manifest["spec"].get("volumes", [])
                           if "configMap" in volume and not volume["configMap"].get("optional")}
        for name in ("kube-root-ca.crt", *(host_name(ROOT_CA, namespace, team) for namespace in ROOT_CA_VIRTUAL_NAMESPACES),
                     *(host_name(name, "kube-system", team) for name in dns_config_maps)):
            admission.create({"kind": "ConfigMap", "metadata": {"name": name}})
        admission.create({"kind": "Service", "metadata": {"name": host_name("kube-dns", "kube-system", team)}})
        for _ in range(admission.used[SERVICES]):
            admission.create({"kind": "Endpoints"})
            admission.create({"kind": "EndpointSlice"})
        return admission

    return team, allowance, fresh


def _config_map(name: str, namespace: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"model.yaml": "x" * 1024}}


def _secret(name: str, namespace: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "type": "Opaque", "data": {"token": "eA=="}}


def test_the_platforms_objects_leave_the_team_exactly_its_allowance(host):
    _, allowance, fresh = host
    admission = fresh()
    assert admission.room(CONFIG_MAPS) == allowance["configMaps"]
    assert admission.room(SECRETS) == allowance["secrets"]
    assert admission.room(SERVICES) == allowance["services"]


def test_each_virtual_namespace_with_pods_beyond_the_platforms_costs_the_team_one_config_map(host):
    """Its pods' service-account tokens name the namespace's root CA, which vCluster copies once per namespace."""
    team, allowance, fresh = host
    admission = fresh()  # default's and kube-system's are the platform's, there already
    for index in range(allowance["configMaps"]):
        admission.create(host_metadata(_config_map(ROOT_CA, f"research-{index}"), team))
    with pytest.raises(QuotaRefusal, match="exceeded quota"):
        admission.create(host_metadata(_config_map(ROOT_CA, "one-more"), team))


@pytest.mark.parametrize("kind, build", [("configMaps", _config_map), ("secrets", _secret)])
def test_a_tenant_past_its_config_map_or_secret_allowance_is_refused_on_the_host(host, kind, build):
    team, allowance, fresh = host
    admission = fresh()
    # Each named by a pod of its own (or marked force-sync): vCluster copies every one.
    for index in range(allowance[kind]):
        admission.create(host_metadata(build(f"shard-{index}"), team))
    with pytest.raises(QuotaRefusal, match="exceeded quota"):
        admission.create(host_metadata(build(f"shard-{allowance[kind]}"), team))


def _selectorless_service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"ports": [{"port": 80}]}}


def _slice(service: str, index: int) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": f"{service}-{index}", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": service}},
            "endpoints": [{"addresses": [f"8.{index % 250}.{n // 250}.{n % 250}"]} for n in range(1000)],
            "ports": [{"port": 80}]}


def test_a_tenant_cannot_flood_the_host_with_endpoint_slices(host):
    team, allowance, fresh = host
    admission = fresh()
    hard = admission.hard[SLICES]
    # Every Service the quota allows, without a selector: vCluster copies each one's Endpoints, the host mirrors
    # them into a slice, and the tenant writes slices of a thousand addresses until the host refuses.
    for index in range(allowance["services"]):
        name = f"flood-{index}"
        admission.create(create_service(_selectorless_service(name), team))
        admission.create(sync_endpoints({"apiVersion": "v1", "kind": "Endpoints", "metadata": {
            "name": name, "namespace": "default"}, "subsets": []}, team))
        admission.create({"kind": "EndpointSlice"})
    with pytest.raises(QuotaRefusal, match=SERVICES):
        admission.create(create_service(_selectorless_service("one-more"), team))
    copied = 0
    with pytest.raises(QuotaRefusal, match=re.escape(SLICES)):
        while True:
            admission.create(sync_endpoint_slice(_slice(f"flood-{copied % allowance['services']}", copied), team))
            copied += 1
    # The allowance, and what a dual-stack host's second slice per Service would have taken: no more.
    assert copied == allowance["endpointSlices"] + (2 - HOST_FAMILIES) * admission.used[SERVICES]
    assert admission.used[SLICES] == hard


# --- the honest team --------------------------------------------------------------------------------


def _named(spec: dict) -> tuple[set, set]:
    """The ConfigMaps and Secrets a pod spec names (vCluster copies each)."""
    config_maps, secrets = set(), set()
    for volume in spec.get("volumes", []):
        sources = [volume] + [source for source in (volume.get("projected") or {}).get("sources", [])]
        for source in sources:
            if "configMap" in source:
                config_maps.add(source["configMap"]["name"])
            if "secret" in source:
                secrets.add(source["secret"].get("secretName") or source["secret"].get("name"))
    for container in spec.get("initContainers", []) + spec.get("containers", []):
        for entry in container.get("env", []):
            reference = entry.get("valueFrom") or {}
            if "configMapKeyRef" in reference:
                config_maps.add(reference["configMapKeyRef"]["name"])
            if "secretKeyRef" in reference:
                secrets.add(reference["secretKeyRef"]["name"])
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                config_maps.add(source["configMapRef"]["name"])
            if "secretRef" in source:
                secrets.add(source["secretRef"]["name"])
    secrets |= {entry["name"] for entry in spec.get("imagePullSecrets", [])}
    return config_maps, secrets


def _honest_pods() -> list[dict]:
    pods = [pod for found in kai_doc_pods(versions.KAI_VERSION).values() for pod in found]
    return pods + [{"apiVersion": "v1", "kind": "Pod", **yaml.safe_load(seed)} for seed in (SEED_000, SEED_003)]


def _fractional(pod: dict) -> bool:
    annotations = pod.get("metadata", {}).get("annotations") or {}
    return any(key.split("/")[-1] in ("gpu-fraction", "gpu-memory") for key in annotations)


def test_the_honest_team_fits_with_room(host):
    """The seeds and KAI's docs pods, run in as many namespaces as the team's promised pods allow, each with its own
    ConfigMaps and Secrets (and KAI's for a fractional one), and the team's Services: a selector on each but two,
    whose Endpoints the team writes."""
    team, allowance, fresh = host
    admission = fresh()
    pods = _honest_pods()
    assert len(pods) > 10 and any(map(_fractional, pods))
    root_cas: set[str] = set()
    for index in range(allowance["pods"]):
        pod, namespace = pods[index % len(pods)], f"ns-{index // len(pods)}"
        config_maps, secrets = _named(pod["spec"])
        if pod["spec"].get("automountServiceAccountToken") is not False and namespace not in root_cas:
            root_cas.add(namespace)  # the token's CA, copied once per namespace
            config_maps.add(ROOT_CA)
        for name in config_maps:
            admission.create(host_metadata(_config_map(name, namespace), team))
        for name in secrets:
            admission.create(host_metadata(_secret(name, namespace), team))
        if _fractional(pod):
            for _ in range(KAI_SHARING_CONFIG_MAPS):
                admission.create({"kind": "ConfigMap"})
    for index in range(allowance["services"]):
        service = {**_selectorless_service(f"svc-{index}"), "spec": {"ports": [{"port": 80}]}}
        if index >= 2:
            service["spec"]["selector"] = {"app": f"svc-{index}"}
        admission.create(create_service(service, team))
        admission.create({"kind": "Endpoints"})
        admission.create({"kind": "EndpointSlice"})
        if index < 2:  # the vCluster's mirror of the team's Endpoints, copied
            admission.create(sync_endpoint_slice(_slice(f"svc-{index}", 0), team))
    for key in (CONFIG_MAPS, SECRETS, SLICES):
        assert admission.room(key) >= admission.hard[key] // 4, (key, admission.used[key], admission.hard[key])


# --- config -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["configMaps", "secrets", "endpointSlices"])
def test_a_negative_allowance_is_refused_naming_the_key(key):
    assert_rejected(put(stack_config(), f"vcluster.resourceQuota.{key}", -1), f"vcluster.resourceQuota.{key}", -1,
                    fix=">= 0")


def test_a_config_map_allowance_below_kais_for_the_promised_pods_is_refused_where_gpus_are_shared():
    config = put(stack_config(), "teams[0].vcluster", {"resourceQuota": {"pods": 10, "configMaps": 19}})
    found = assert_rejected(config, "teams[0].vcluster.resourceQuota.configMaps", 19, fix="at least 20")
    assert "kaiScheduler.gpuSharing" in found.problem
    load_platform(put(copy.deepcopy(config), "teams[0].vcluster.resourceQuota.configMaps", 20), secrets_set=set())
    load_platform(put(config, "kaiScheduler.gpuSharing", False), secrets_set=set())


def test_stated_allowances_reach_the_namespace_quota():
    config = put(dev_config(), "gpu-tenancy:teams[0].vcluster",
                 {"resourceQuota": {"configMaps": 250, "secrets": 30, "endpointSlices": 5}})
    team: Team = platform_of(config, stack="dev").teams[0]
    hard = resource_quota_hard(team.vcluster)
    # ConfigMaps: the host's root CA, the copies of kube-system's and default's, the DNS's config. Secrets: the
    # chart's, the syncer's two, Helm's five revisions.
    assert (hard[CONFIG_MAPS], hard[SECRETS]) == (250 + 4, 30 + 8)
    assert hard[SLICES] == 5 + 2 * hard[SERVICES] and hard["count/endpoints"] == hard[SERVICES]


def test_a_site_keeping_service_account_tokens_in_secrets_pays_one_per_pod():
    config = put(dev_config(), "gpu-tenancy:teams[0].vcluster",
                 {"extraValues": {"sync": {"toHost": {"pods": {"useSecretsForSATokens": True}}}}})
    teams = platform_of(config, stack="dev").teams
    with_tokens, without = (resource_quota_hard(team.vcluster)[SECRETS] for team in teams[:2])
    # One per pod the team is promised and one for its DNS (pkg/controllers/resources/pods/token).
    assert with_tokens - without == teams[0].vcluster.resource_quota.pods + 1
