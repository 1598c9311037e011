"""The virtual pods and edits tests/test_vcluster_sync_real.py sends through vCluster's syncer and the simulation:
the honest workloads of tests/test_admission_honest.py, the team's DNS, one hostile pod of each kind the attack tests
send, and a tenant's edits of a running pod."""

from __future__ import annotations

import copy

import yaml

from tests.conftest import ACCEPTED_TAGS
from tests.test_admission_honest import SEED_000, SEED_003, controller_pods, in_queue, kai_doc_pods
from tests.test_admission_volumes import honest_volumes
from tests.tenant_sim import KAI_SCHEDULER, Tenant, container, virtual_pod
from tests.vcluster_volumes import TOKEN_ANNOTATION

KAI = "kai-scheduler/KAI-Scheduler"


def dns_pod(program, tenant: Tenant) -> dict:
    values = program.named(f"tenant-{tenant.team.name}-vcluster").inputs["values"]
    documents = yaml.safe_load_all(values["controlPlane"]["coredns"]["overwriteManifests"])
    template = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "coredns-5d8f9-x2k4p", "namespace": "kube-system", **template["metadata"]},
            "spec": template["spec"]}


def honest_pods(program, tenant: Tenant) -> dict[str, dict]:
    """Name -> virtual pod: KAI's docs at the newest accepted KAI, the seeds, controllers' pods, the team's DNS."""
    pods = {}
    for path, found in kai_doc_pods(ACCEPTED_TAGS[KAI][-1]).items():
        for index, pod in enumerate(found):
            pods[f"kai-docs:{path}#{index}"] = in_queue(copy.deepcopy(pod), tenant)
    for name, seed in (("seed-000", SEED_000), ("seed-003", SEED_003)):
        pods[name] = in_queue({"apiVersion": "v1", "kind": "Pod", **yaml.safe_load(seed)}, tenant)
    pods.update({f"controller:{kind}": pod for kind, pod in controller_pods(tenant).items()})
    pods["dns"] = dns_pod(program, tenant)
    # A gRPC health check names no service: the host policy sees service: null (tests/vcluster_pods.py).
    probed = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER)
    probed["spec"]["containers"][0]["startupProbe"] = {"grpc": {"port": 9000}}
    pods["grpc-probe"] = probed
    return pods


def owned_by(pod: dict, kind: str, api_version: str = "apps/v1") -> dict:
    pod["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": "owner", "uid": "4a1e",
                                           "controller": True}]
    return pod


def hostile_pods(program, tenant: Tenant) -> dict[str, dict]:
    """Name -> virtual pod: what the attack tests send, one of each way a pod's host copy could differ."""
    team, queue = tenant.team, tenant.team.queue_name
    release = team.vcluster_name
    on_kai = dict(queue=queue, scheduler=KAI_SCHEDULER)
    field = lambda path: {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}  # noqa: E731
    return {
        "vcluster-labels": virtual_pod(labels={
            "vcluster.loft.sh/managed-by": "other", "vcluster.loft.sh/namespace": "kube-system", "release": "x",
            "vcluster.loft.sh/controlled-by": "y", f"vcluster.loft.sh/label-{release}-x-0123456789": "z",
            f"vcluster.loft.sh/ns-label-{release}-x-0123456789": "w", "vcluster.loft.sh/paused": "true"}, **on_kai),
        "vcluster-annotations": virtual_pod(annotations={
            "vcluster.loft.sh/object-name": "coredns", "vcluster.loft.sh/object-namespace": "kube-system",
            "vcluster.loft.sh/object-uid": "1", "vcluster.loft.sh/object-kind": "/v1, Kind=Secret",
            "vcluster.loft.sh/object-host-name": "x", "vcluster.loft.sh/object-host-namespace": "kube-system",
            "vcluster.loft.sh/name": "coredns", "vcluster.loft.sh/namespace": "kube-system",
            "vcluster.loft.sh/uid": "1", "vcluster.loft.sh/labels": 'k8s-app="kube-dns"',
            "vcluster.loft.sh/service-account-name": "coredns", "vcluster.loft.sh/managed-annotations": "a",
            "vcluster.loft.sh/managed-labels": "b", "vcluster.loft.sh/owner-references": "[]",
            "vcluster.loft.sh/owner-set-kind": "DaemonSet", "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
            f"{TOKEN_ANNOTATION}abcdefgh": "forged", "vcluster.loft.sh/skip-translate": "true"}, **on_kai),
        "kai-keys": virtual_pod(labels={"kai.scheduler/queue": "team-other", "kai.scheduler/node-pool": "pool",
                                        "runai-gpu-group": "g", "project": "team-other", "priorityClassName": "build"},
                                annotations={"gpu-fraction": "0.5", "pod-group-name": "pg-other",
                                             "received-resource-type": "Regular", "runai/shared-gpu-configmap": "c"},
                                scheduler=KAI_SCHEDULER),
        "subdomain": virtual_pod("db-0", hostname="db-0", subdomain="db", **on_kai),
        "long-dotted-name": virtual_pod("a." * 40 + "b", **on_kai),
        "env-references": virtual_pod(containers=[container(env_entries=[
            {"name": "POD", "valueFrom": field("metadata.name")},
            {"name": "NS", "valueFrom": field("metadata.namespace")},
            {"name": "UID", "valueFrom": field("metadata.uid")},
            {"name": "LABELS", "valueFrom": field("metadata.labels")},
            {"name": "QUEUE", "valueFrom": field("metadata.labels['kai.scheduler/queue']")},
            {"name": "RELEASE", "valueFrom": field("metadata.labels['release']")},
            {"name": "FRACTION", "valueFrom": field("metadata.annotations['gpu-fraction']")},
            {"name": "SA", "valueFrom": field("spec.serviceAccountName")},
            {"name": "NODE", "valueFrom": field("spec.nodeName")},
            {"name": "IP", "valueFrom": field("status.podIP")},
            {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "a"}}},
            {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "hub-token", "key": "t"}}},
            {"name": "KUBERNETES_SERVICE_HOST", "value": "10.0.0.1"}],
            env_from=[{"configMapRef": {"name": "settings"}}, {"prefix": "S_", "secretRef": {"name": "hub-token"}}])],
            **on_kai),
        "service-links": virtual_pod(enableServiceLinks=True, **on_kai),
        "volumes": virtual_pod(volumes=[*honest_volumes(),
                                        {"name": "root-ca", "configMap": {"name": "kube-root-ca.crt"}},
                                        {"name": "label", "downwardAPI": {"items": [
                                            {"path": "queue", **field("metadata.labels['kai.scheduler/queue']")},
                                            {"path": "uid", **field("metadata.uid")},
                                            {"path": "cpu", "resourceFieldRef": {"containerName": "main",
                                                                                 "resource": "limits.cpu"}}]}},
                                        {"name": "token", "projected": {"sources": [{"serviceAccountToken": {
                                            "audience": "vault", "expirationSeconds": 600, "path": "vault"}}]}}],
                               serviceAccountName="trainer", **on_kai),
        "host-aliases": virtual_pod(hostAliases=[{"ip": "10.0.0.1", "hostnames": ["kubernetes", "metadata.internal"]}],
                                    **on_kai),
        "scheduling": virtual_pod(
            tolerations=[{"operator": "Exists"},
                         {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
            nodeSelector={"kubernetes.io/hostname": "gpu-node-1", "nvidia.com/gpu.present": "true"},
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}},
                      "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                          {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname",
                           "namespaces": ["other"]},
                          {"labelSelector": {"matchLabels": {"release": "x"}}, "topologyKey": "zone"}]},
                      "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                          "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                              "namespaceSelector": {"matchLabels": {"team": "a"}},
                                              "topologyKey": "zone"}}]}},
            topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                        "labelSelector": {"matchLabels": {"app": "web"}}}], **on_kai),
        "default-scheduler": virtual_pod(queue=queue, scheduler="default-scheduler"),
        "priority": virtual_pod(priorityClassName="system-node-critical", priority=2000001000, **on_kai),
        "runtime-class": virtual_pod(runtimeClassName="nvidia", **on_kai),
        "ephemeral-container": virtual_pod(ephemeralContainers=[{"name": "debug", "image": "busybox",
                                                                  "targetContainerName": "main"}], **on_kai),
        "daemonset-owner": owned_by(virtual_pod("agent-x2k4p", **on_kai), "DaemonSet"),
        "deployment-owner": owned_by(virtual_pod("web-x2k4p", **on_kai), "Deployment"),
        "job-owner": owned_by(virtual_pod("train-x2k4p", **on_kai), "Job", "batch/v1"),
        "service-account": virtual_pod(serviceAccountName="trainer", serviceAccount="legacy", **on_kai),
        "image-pull-secrets": virtual_pod(imagePullSecrets=[{"name": "registry"}], **on_kai),
        "dns-none": virtual_pod(dnsPolicy="None", dnsConfig={"nameservers": ["10.0.0.10"], "searches": ["x"]},
                                **on_kai),
        "dns-cluster-first": virtual_pod(dnsPolicy="ClusterFirst", dnsConfig={
            "nameservers": ["10.0.0.10"], "options": [{"name": "ndots"}]}, **on_kai),
        "host-network": virtual_pod(hostNetwork=True, dnsPolicy="ClusterFirst", **on_kai),
        "node-name": virtual_pod(nodeName="gpu-node-1", **on_kai),
        "pod-resources": virtual_pod(resources={"limits": {"cpu": "1", "memory": "1Gi"}}, **on_kai),
        "resource-claims": virtual_pod(resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}], **on_kai),
        "security-context": virtual_pod(securityContext={"runAsUser": 0, "sysctls": [{"name": "kernel.shm_rmid_forced",
                                                                                      "value": "1"}]},
                                        hostPID=True, hostIPC=True, shareProcessNamespace=True, **on_kai),
    }


def _edit(labels: dict = None, annotations: dict = None, drop: tuple = (), **spec):
    """A tenant's edit of its running pod's virtual copy: keys set, keys in ``drop`` removed, spec fields set."""
    def edit(pod: dict) -> None:
        metadata = pod["metadata"]
        metadata.setdefault("labels", {}).update(labels or {})
        metadata.setdefault("annotations", {}).update(annotations or {})
        for key in drop:
            metadata["labels"].pop(key, None)
            metadata["annotations"].pop(key, None)
        pod["spec"].update(spec)
    return edit


EDITS = {
    "honest": _edit({"app": "web"}, {"owner": "alice"}),
    "other-queue": _edit({"kai.scheduler/queue": "team-other"}),
    "no-queue": _edit(drop=("kai.scheduler/queue",)),
    "fraction": _edit(annotations={"gpu-fraction": "0.9", "gpu-memory": "80000"}),
    "vcluster-keys": _edit({"vcluster.loft.sh/managed-by": "other", "release": "x"},
                           {"vcluster.loft.sh/object-name": "coredns", "vcluster.loft.sh/labels": "forged",
                            "vcluster.loft.sh/managed-annotations": "gpu-fraction"}),
    "tolerations": _edit(tolerations=[{"operator": "Exists"}]),
    "image": _edit(containers=[{**container(), "image": "busybox"}]),
}
