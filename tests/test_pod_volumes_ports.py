"""A pod has a bounded number of volumes and container ports (rules ``volumes``, ``ports``).

The API server bounds neither count, ``pod-size`` counts a volume as one of its 8,192 list entries and a port not at
all, and vCluster copies both as written. kube-state-metrics writes two series for each claim volume of every pod, a
Pending one's too; ports cost the host's etcd, up to the request's size a pod.

- Attack: a pod of more claim volumes (or ephemeral volumes, which reach the host as claims) than the bound, and a pod
  whose containers and init containers list more ports than the bound, as vCluster syncs them and KAI mutates them,
  are refused.
- Honest: a fractional StatefulSet pod at the volume bound, to which vCluster and KAI add their volumes, a pod at the
  port bound, and KAI's updates of a pod from before the rules, pass; the seeds' and KAI's documented pods are
  tests/test_admission_honest.py's.
- Upstream, at every mirrored tag: kube-state-metrics' claim-volume families (on by default) loop over a pod's
  volumes; vCluster adds one volume of its own (the /etc/hosts emptyDir) besides the refused host-path mapper's; KAI's
  webhook adds one ConfigMap volume to a fractional pod; Kubernetes gives ephemeral containers no ports.
"""

from __future__ import annotations

import re

import pytest

from config.stack_file import PROJECT_DIR
from config.synced_data import HOST_ADDED_VOLUMES, SYNCED_POD_PORTS, SYNCED_POD_TEXT_ITEMS, SYNCED_POD_VOLUMES
from config.tenant_budget import namespace_budget
from tests.conftest import ACCEPTED_TAGS, ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, dev_config, git, mirrored_tag
from tests.test_admission_attacks import on_kai, rules
from tests.tenant_sim import container, kai_bind, kai_group, platform_of, tenant_of

KSM = "kubernetes/kube-state-metrics"
VCLUSTER = "loft-sh/vcluster"
KAI = "kai-scheduler/KAI-Scheduler"
API = "kubernetes/api"


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, dev_config(), "team-nlp")


def claims(count: int) -> list[dict]:
    return [{"name": f"v{index}", "persistentVolumeClaim": {"claimName": f"data-{index}"}} for index in range(count)]


def ephemeral(count: int) -> list[dict]:
    template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    return [{"name": f"scratch{index}", "ephemeral": {"volumeClaimTemplate": template}} for index in range(count)]


def ported(count: int, prefix: str = "p", first: int = 1000) -> dict:
    """A container named ``prefix`` listing ``count`` ports from ``first`` on."""
    return {**container(prefix), "ports": [{"name": f"{prefix}{index}", "containerPort": first + index}
                                           for index in range(count)]}


@pytest.mark.parametrize("volumes", [claims, ephemeral])
def test_a_pod_of_too_many_volumes_is_refused(tenant, volumes):
    pod = on_kai(tenant, volumes=volumes(SYNCED_POD_VOLUMES + HOST_ADDED_VOLUMES + 1))
    assert "volumes" in rules(tenant.create(pod))
    assert "volumes" in rules(tenant.create(on_kai(tenant, volumes=volumes(2000))))


def test_a_fractional_statefulset_pod_at_the_bound_passes_with_what_vcluster_and_kai_add(tenant):
    pod = on_kai(tenant, annotations={"gpu-fraction": "0.5"}, subdomain="workers", volumes=claims(SYNCED_POD_VOLUMES))
    host = tenant.host_pod(pod)
    # vCluster's /etc/hosts emptyDir and KAI's device-list ConfigMap.
    assert len(host["spec"]["volumes"]) == SYNCED_POD_VOLUMES + 2
    assert "volumes" not in rules(tenant.create(pod))


def test_a_pod_listing_too_many_ports_is_refused(tenant):
    half = SYNCED_POD_PORTS // 2
    pod = on_kai(tenant, containers=[ported(half), ported(half + 1, "q", 5000)])
    assert "ports" in rules(tenant.create(pod))
    pod["spec"]["initContainers"] = [{**ported(1, "s", 9000), "restartPolicy": "Always"}]
    pod["spec"]["containers"][1] = ported(half, "q", 5000)
    assert "ports" in rules(tenant.create(pod))
    assert "ports" in rules(tenant.create(on_kai(tenant, containers=[ported(5000)])))


def test_a_pod_at_the_port_bound_passes(tenant):
    half = SYNCED_POD_PORTS // 2
    assert "ports" not in rules(tenant.create(on_kai(tenant, containers=[ported(half), ported(half, "q", 5000)])))


def test_a_pod_from_before_the_rules_takes_kais_updates(tenant):
    created = tenant.host_pod(on_kai(tenant, containers=[ported(SYNCED_POD_PORTS + 1)], volumes=claims(200)))
    grouped = kai_group(created)
    refused = rules(tenant.update(created, grouped) + tenant.update(grouped, kai_bind(grouped)))
    assert not refused & {"volumes", "ports"}


@pytest.mark.parametrize("tag", MIRRORED_TAGS[KSM])
def test_kube_state_metrics_writes_two_series_per_claim_volume(tag):
    pod = git(KSM, "show", f"{tag}:internal/store/pod.go")
    for family in ("kube_pod_spec_volumes_persistentvolumeclaims_info",
                   "kube_pod_spec_volumes_persistentvolumeclaims_readonly"):
        start = pod.rindex("\nfunc ", 0, pod.index(f'"{family}"'))
        block = pod[start:pod.index("\nfunc ", start + 1)]
        assert "NewFamilyGeneratorWithStability" in block and "OptIn" not in block, family
        assert "for _, v := range p.Spec.Volumes" in block and "v.PersistentVolumeClaim != nil" in block, family


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_adds_one_volume_of_its_own(tag):
    found = git(VCLUSTER, "grep", "-n", r"Spec.Volumes = append(", mirrored_tag(VCLUSTER, tag), "--",
                "pkg/controllers/resources/pods")
    files = sorted(line.split(":")[1] for line in found.splitlines())
    # hostpath.go is the host-path mapper, which the config refuses (docs/security-synced-objects.md).
    assert files == ["pkg/controllers/resources/pods/translate/hostpath.go",
                     "pkg/controllers/resources/pods/translate/hosts.go"]
    hosts = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/controllers/resources/pods/translate/hosts.go")
    assert hosts.count("Spec.Volumes = append(") == 1 and "EmptyDir: &corev1.EmptyDirVolumeSource{}" in hosts


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kais_webhook_adds_one_configmap_volume_to_a_fractional_pod(tag):
    webhook = git(KAI, "show", f"{tag}:pkg/admission/webhook/v1alpha2/gpusharing/gpu_sharing.go")
    assert webhook.count("common.SetConfigMapVolume(") == 1
    volumes = git(KAI, "show", f"{tag}:pkg/binder/common/volumes.go")
    assert re.search(r"podSpec\.Volumes = append\(podSpec\.Volumes, volume\)", volumes)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_ephemeral_containers_have_no_ports_and_nothing_bounds_the_counts(tag):
    core = git(API, "show", f"{tag}:core/v1/types.go")
    assert "Ports are not allowed for ephemeral containers." in core
    for field in ("\tVolumes []Volume ", "\tPorts []ContainerPort "):
        comment = core[:core.index(field)].rsplit("\n\n", 1)[-1]
        assert not re.search(r"maximum|at most|no more than", comment), field


def test_the_security_model_gives_the_claim_series_a_dev_team_held_before_the_rule():
    """kube-state-metrics' two series per claim volume, a pod of pod-size's entries of claims, times the dev stack's
    pods (docs/security-pressure.md, metrics table)."""
    model = " ".join((PROJECT_DIR / "docs" / "security-pressure.md").read_text().split())
    pods = namespace_budget(next(t for t in platform_of(dev_config()).teams if t.name == "team-nlp").vcluster).pods
    per_pod = 2 * SYNCED_POD_TEXT_ITEMS
    assert (f"a pod of {SYNCED_POD_TEXT_ITEMS:,} claims held {per_pod:,} series, a team of the `dev` stack "
            f"({pods} pods) {per_pod * pods:,} |") in model
