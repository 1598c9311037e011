"""Rule ``pod-size`` counts every free-text path of a pod spec (components/pod_text_paths.py), by attack.

- Attack: for each kind of path the rule counts beyond env, commands and args (images, working directories, mount,
  item and probe paths, profiles, node affinity values, DNS options, sysctl values, ...), a pod whose host copy
  (tests/tenant_sim.py: synced by vCluster, mutated by KAI) carries one byte past the team's cap there is refused
  by it, and one at the cap is not; so is a later update that grows an image.
- Honest: a large honest pod (three containers with mounts and probes, twenty volumes with items, long node
  affinity) is admitted; KAI's docs pods and the seeds' workloads pass the same policy
  (tests/test_admission_honest.py).
"""

from __future__ import annotations

import copy

import pytest

from config.synced_data import SYNCED_POD_TEXT_ITEMS
from tests.conftest import dev_config
from tests.tenant_sim import KAI_SCHEDULER, container, tenant_of, virtual_pod
from tests.test_pod_sizes import CAP, counted, entries, refused_for_size

TEAM = "team-nlp"


def _main(pod: dict) -> dict:
    return pod["spec"]["containers"][0]


def _volume(pod: dict, volume: dict, mount: str = "") -> None:
    pod["spec"].setdefault("volumes", []).append(volume)
    if mount:
        _main(pod).setdefault("volumeMounts", []).append({"name": volume["name"], "mountPath": mount})


def _node_values(pod: dict, text: str) -> None:
    pod["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": [text]}]}}]}}


# Where a tenant puts the padding: each writes ``text`` into one counted path of a virtual pod.
PLACEMENTS = {
    "image": lambda pod, text: _main(pod).update(image=f"nvcr.io/nvidia/cuda-{text}:12.4.0"),
    "workingDir": lambda pod, text: _main(pod).update(workingDir=f"/{text}"),
    "terminationMessagePath": lambda pod, text: _main(pod).update(terminationMessagePath=f"/tmp/{text}"),
    "envFrom.prefix": lambda pod, text: _main(pod).update(
        envFrom=[{"prefix": f"P{text}", "configMapRef": {"name": "settings"}}]),
    "env.valueFrom.resourceFieldRef": lambda pod, text: _main(pod).update(env=[{"name": "LIMIT", "valueFrom": {
        "resourceFieldRef": {"containerName": text, "resource": "limits.cpu"}}}]),
    "volumeMounts.mountPath": lambda pod, text: _volume(pod, {"name": "scratch", "emptyDir": {}}, f"/{text}"),
    "volumeMounts.subPath": lambda pod, text: (_volume(pod, {"name": "scratch", "emptyDir": {}}, "/scratch"),
                                               _main(pod)["volumeMounts"][0].update(subPath=text)),
    "httpGet.path": lambda pod, text: _main(pod).update(
        readinessProbe={"httpGet": {"path": f"/{text}", "port": 8080}}),
    "grpc.service": lambda pod, text: _main(pod).update(livenessProbe={"grpc": {"port": 9000, "service": text}}),
    "capabilities.drop": lambda pod, text: _main(pod).update(securityContext={"capabilities": {"drop": [text]}}),
    "seLinuxOptions.level": lambda pod, text: pod["spec"].update(securityContext={"seLinuxOptions": {"level": text}}),
    "seccompProfile.localhostProfile": lambda pod, text: _main(pod).update(securityContext={
        "seccompProfile": {"type": "Localhost", "localhostProfile": f"profiles/{text}.json"}}),
    "sysctls.value": lambda pod, text: pod["spec"].update(securityContext={"sysctls": [
        {"name": "net.ipv4.ip_local_port_range", "value": text}]}),
    "configMap.items.path": lambda pod, text: _volume(pod, {"name": "cfg", "configMap": {
        "name": "settings", "items": [{"key": "config.json", "path": text}]}}, "/etc/app"),
    "downwardAPI.items.path": lambda pod, text: _volume(pod, {"name": "info", "downwardAPI": {
        "items": [{"path": text, "fieldRef": {"fieldPath": "metadata.name"}}]}}, "/etc/info"),
    "projected.secret.items.key": lambda pod, text: _volume(pod, {"name": "keys", "projected": {"sources": [
        {"secret": {"name": "keys", "items": [{"key": text, "path": "key"}]}}]}}, "/etc/keys"),
    "image.reference": lambda pod, text: _volume(pod, {"name": "lib", "image": {
        "reference": f"nvcr.io/nvidia/lib-{text}:1"}}, "/opt/lib"),
    "nodeAffinity.values": _node_values,
    "dnsConfig.options": lambda pod, text: pod["spec"].update(dnsConfig={"options": [{"name": "ndots",
                                                                                       "value": text}]}),
    "hostnameOverride": lambda pod, text: pod["spec"].update(hostnameOverride=text),
}


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, dev_config(), TEAM)


def _pod(tenant, place, text: str) -> dict:
    pod = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, annotations={"gpu-fraction": "0.5"},
                      containers=[container()])
    place(pod, text)
    return pod


def padded(tenant, place, total: int) -> dict:
    """A pod whose host copy counts ``total`` bytes, all the padding in the path ``place`` writes."""
    base = counted(tenant.host_pod(_pod(tenant, place, "x"))) - 1
    pod = _pod(tenant, place, "x" * (total - base))
    assert counted(tenant.host_pod(pod)) == total
    return pod


@pytest.mark.parametrize("path", PLACEMENTS)
def test_a_pod_padded_past_the_cap_in_any_counted_path_is_refused(tenant, path):
    assert refused_for_size(tenant.create(padded(tenant, PLACEMENTS[path], CAP + 1)))
    assert not refused_for_size(tenant.create(padded(tenant, PLACEMENTS[path], CAP)))


def test_an_image_grown_past_the_cap_by_a_later_update_is_refused(tenant):
    """The API server lets an update change a container's image; the syncer copies it to the host."""
    host = tenant.host_pod(padded(tenant, PLACEMENTS["workingDir"], CAP - 2 ** 10))
    assert tenant.create_host(host) == []
    grown = copy.deepcopy(host)
    _main(grown)["image"] = _main(host)["image"].replace("cuda:", "cuda-" + "x" * 2 ** 10 + ":")
    assert refused_for_size(tenant.update(host, grown))
    same = copy.deepcopy(host)
    same["metadata"]["labels"]["app"] = "tuner"
    assert not refused_for_size(tenant.update(host, same))


def honest_pod(tenant) -> dict:
    """Three containers with mounts and probes, twenty ConfigMap, Secret and projected volumes of ten items each, a
    required and a preferred node affinity of fifty zones, DNS options and a sysctl."""
    volumes = [{"name": f"config-{index}", "configMap": {"name": f"settings-{index}", "items": [
        {"key": f"part-{item}.yaml", "path": f"conf.d/part-{item}.yaml"} for item in range(10)]}} for index in range(10)]
    volumes += [{"name": f"certs-{index}", "projected": {"sources": [{"secret": {"name": f"tls-{index}", "items": [
        {"key": f"cert-{item}.pem", "path": f"tls/cert-{item}.pem"} for item in range(10)]}}]}} for index in range(10)]
    mounts = [{"name": volume["name"], "mountPath": f"/etc/app/{volume['name']}", "readOnly": True}
              for volume in volumes]
    containers = []
    for name in ("trainer", "sidecar", "exporter"):
        main = container(name, env={"MODEL": "llama-3-8b", "DATA": "/data"})
        main.update(volumeMounts=mounts, workingDir="/workspace", command=["python", "-m", f"{name}.serve"],
                    readinessProbe={"httpGet": {"path": "/health/ready", "port": 8080}},
                    livenessProbe={"exec": {"command": ["cat", "/tmp/healthy"]}})
        containers.append(main)
    zones = [f"us-east-2-zone-{index:02d}" for index in range(50)]
    requirement = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": zones}
    return virtual_pod(
        queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, annotations={"gpu-fraction": "0.5"},
        containers=containers, volumes=volumes,
        affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                requirement]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": {
                "matchExpressions": [requirement]}}]}},
        dnsConfig={"options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]},
        securityContext={"sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]})


def test_a_large_honest_pod_is_admitted(tenant):
    pod = honest_pod(tenant)
    host = tenant.host_pod(pod)
    assert 8 * 2 ** 10 < counted(host) < CAP and 400 < entries(host["spec"]) < SYNCED_POD_TEXT_ITEMS
    assert tenant.create(pod) == []


def test_a_projected_volume_without_sources_is_admitted(tenant):
    """An empty list reaches the host policy as null (ProjectedVolumeSource.Sources has no omitempty, and etcd's
    protobuf keeps no empty list): the size rule takes it as none (components/admission_pod_size.py
    NULL_LISTS_WHEN_UNSET), where reading it would fail the rule."""
    pod = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER)
    _volume(pod, {"name": "empty", "projected": {"sources": None}}, "/empty")
    assert tenant.host_pod(pod)["spec"]["volumes"][-1]["projected"]["sources"] is None
    assert tenant.create(pod) == []
