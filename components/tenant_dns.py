"""The CoreDNS a tenant's vCluster runs inside itself, written so that its pods go through KAI.

vCluster deploys CoreDNS as ordinary pods in the virtual ``kube-system``, which the syncer copies to
the host like any tenant pod. The host admission policy sends every synced pod through KAI in the
team's queue, with no exemption a tenant could reuse, so the DNS pods must carry the scheduler and
queue label too. vCluster's values can add pod labels but not a scheduler name (open-source vCluster
has no pod patches), so the program supplies the whole manifest set through
``controlPlane.coredns.overwriteManifests``. It keeps what vCluster relies on: the ``coredns``
ConfigMap with its ``NodeHosts`` key (vCluster's node-hosts controller writes it), the
``k8s-app: vcluster-kube-dns`` label (vCluster's DNS network policy selects it) and the ``kube-dns``
Service, listening on 1053 as vCluster's own policies expect.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from typing import Optional

import yaml

from components.admission import QUEUE_LABEL, VISIBLE_DEVICES
from components.kai import SCHEDULER_NAME
from config import versions
from config.model import Team

DNS_APP_LABEL = {"k8s-app": "vcluster-kube-dns"}
DNS_PORT = 1053
# vCluster's default when network policies are on: the node's resolvers first, then a public one,
# because the tenant's egress policy blocks private resolver addresses.
FALLBACK_RESOLVER = "8.8.8.8"
NON_ROOT_ID = 65532


def corefile(network_policy: bool) -> str:
    upstream = f"forward . /etc/resolv.conf {FALLBACK_RESOLVER} {{\n        policy sequential\n    }}" \
        if network_policy else "forward . /etc/resolv.conf"
    return "\n".join([
        f".:{DNS_PORT} {{",
        "    errors",
        "    health",
        "    ready",
        "    kubernetes cluster.local in-addr.arpa ip6.arpa {",
        "        pods insecure",
        "        fallthrough in-addr.arpa ip6.arpa",
        "    }",
        "    hosts /etc/coredns/NodeHosts {",
        "        ttl 60",
        "        reload 15s",
        "        fallthrough",
        "    }",
        "    prometheus :9153",
        f"    {upstream}",
        "    cache 30",
        "    loop",
        "    reload",
        "    loadbalance",
        "}",
        "import /etc/coredns/custom/*.server",
    ])


def coredns_objects(team: Team) -> list[dict]:
    """The virtual cluster's DNS objects (applied inside the vCluster by its control plane)."""
    namespace = "kube-system"
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": namespace}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
                       "verbs": ["list", "watch"]},
                      {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "system:coredns"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
               "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": namespace}]}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns", "namespace": namespace},
              "data": {"Corefile": corefile(team.vcluster.network_policy), "NodeHosts": ""}}
    container = {
        "name": "coredns",
        "image": versions.COREDNS_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "args": ["-conf", "/etc/coredns/Corefile"],
        # KAI's webhook writes this too; stating it keeps the pod GPU-less even if the webhook is skipped.
        "env": [{"name": VISIBLE_DEVICES, "value": "void"}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "170Mi"}},
        "ports": [{"name": "dns", "containerPort": DNS_PORT, "protocol": "UDP"},
                  {"name": "dns-tcp", "containerPort": DNS_PORT, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": 9153, "protocol": "TCP"}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "runAsUser": NON_ROOT_ID, "runAsGroup": NON_ROOT_ID,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
        "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}, "initialDelaySeconds": 60,
                          "periodSeconds": 10, "failureThreshold": 3},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
        "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": True},
                         {"name": "custom-config-volume", "mountPath": "/etc/coredns/custom", "readOnly": True}],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": namespace, "labels": dict(DNS_APP_LABEL)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(DNS_APP_LABEL)},
            "template": {
                "metadata": {"labels": {**DNS_APP_LABEL, QUEUE_LABEL: team.queue_name}},
                "spec": {
                    "schedulerName": SCHEDULER_NAME,
                    "serviceAccountName": "coredns",
                    "dnsPolicy": "Default",
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        {"name": "config-volume", "configMap": {"name": "coredns", "items": [
                            {"key": "Corefile", "path": "Corefile"}, {"key": "NodeHosts", "path": "NodeHosts"}]}},
                        {"name": "custom-config-volume", "configMap": {"name": "coredns-custom", "optional": True}},
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": namespace,
                     "labels": {**DNS_APP_LABEL, "kubernetes.io/cluster-service": "true",
                                "kubernetes.io/name": "CoreDNS"}},
        "spec": {"type": "ClusterIP", "selector": dict(DNS_APP_LABEL), "ports": [
            {"name": "dns", "port": 53, "targetPort": DNS_PORT, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "targetPort": DNS_PORT, "protocol": "TCP"},
            {"name": "metrics", "port": 9153, "protocol": "TCP"}]},
    }
    return [account, role, binding, config, deployment, service]


# --- the manifests as YAML, written once ----------------------------------------------------------
# Dumping these objects was a sixth of a large site's run, once per tenant, although teams' objects
# differ only in the team's name. The YAML is written once for a stand-in name, and each team's name
# is put in its place; where the name would be quoted in YAML or the stand-in is not a whole value,
# the team's objects are dumped as they are. Either way the text is what dumping them gives.
_NAME_STAND_IN = "gpu-tenancy-dns-name-stand-in"
_WHOLE_VALUE = re.compile(rf"(?:: |- ){_NAME_STAND_IN}\n")


def coredns_manifests(team: Team) -> str:
    template = _yaml_stream(json.dumps(coredns_objects(dataclasses.replace(team, name=_NAME_STAND_IN))))
    name = _plain_scalar(team.name)
    if name is None or len(_WHOLE_VALUE.findall(template)) != template.count(_NAME_STAND_IN):
        return _dump(coredns_objects(team))
    return template.replace(_NAME_STAND_IN, name)


@functools.lru_cache(maxsize=16)
def _yaml_stream(objects_json: str) -> str:
    return _dump(json.loads(objects_json))


def _dump(objects: list[dict]) -> str:
    return "---\n".join(yaml.safe_dump(document, sort_keys=False) for document in objects)


def _plain_scalar(text: str) -> Optional[str]:
    """``text`` when YAML writes it unquoted, as it writes a plain string; else None."""
    return text if yaml.safe_dump(text) == f"{text}\n...\n" else None
