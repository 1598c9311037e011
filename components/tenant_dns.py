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

Two things differ from vCluster's default on purpose:

- **Non-preemptible.** A pod vCluster syncs has no owner on the host, so KAI would give it its default,
  preemptible priority (``train``) and any higher-priority pod of the team could evict its DNS. The pod
  carries KAI's ``priorityClassName`` label with KAI's ``inference`` class (value 125; KAI treats 100
  and above as non-preemptible, running it only within the queue's quota, where the DNS is counted:
  config/tenant_budget.py) and, for KAI releases that separate the two, the explicit preemptibility label.
- **The host's DNS path.** It forwards to the host cluster's DNS Service (as vCluster does with
  ``networking.advanced.fallbackHostCluster``) rather than to the node's resolvers: the tenant's
  NetworkPolicy lets the tenant DNS reach the host's DNS pods (and a node-local cache a site states), while the tenant egress policy
  blocks the private ranges where node, VPC and corporate resolvers answer. The host DNS then resolves
  cluster, VPC and corporate names as it does for the host's own pods.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from typing import Optional

import yaml

from components.admission import PULL_ALWAYS, QUEUE_LABEL
from components.admission_devices import VISIBLE_DEVICES
from components.kai import SCHEDULER_NAME
from config.model import Team
from config.vcluster_images import coredns_image
from config.tenant_budget import DNS_LIMITS, DNS_REPLICAS, DNS_REQUESTS

DNS_APP_LABEL = {"k8s-app": "vcluster-kube-dns"}
DNS_PORT = 1053
NON_ROOT_ID = 65532
# KAI's podgrouper reads these pod labels (pkg/podgrouper/podgrouper/plugins/constants/constants.go);
# "inference" is one of the PriorityClasses KAI's chart installs (templates/priorityclasses/).
PRIORITY_LABEL = "priorityClassName"
PRIORITY_CLASS = "inference"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
NON_PREEMPTIBLE = "non-preemptible"


def dns_pod_labels(team: Team) -> dict[str, str]:
    """Every label the program puts on the tenant DNS pod template (vCluster adds its own on the host)."""
    return {**DNS_APP_LABEL, QUEUE_LABEL: team.queue_name, PRIORITY_LABEL: PRIORITY_CLASS,
            PREEMPTIBILITY_LABEL: NON_PREEMPTIBLE}


def corefile(host_dns: str) -> str:
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
        f"    forward . {host_dns}",
        "    cache 30",
        "    loop",
        "    reload",
        "    loadbalance",
        "}",
        "import /etc/coredns/custom/*.server",
    ])


def coredns_objects(team: Team, host_dns: str) -> list[dict]:
    """The virtual cluster's DNS objects (applied inside the vCluster by its control plane); ``host_dns``
    is the host cluster DNS Service's IP."""
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
              "data": {"Corefile": corefile(host_dns), "NodeHosts": ""}}
    container = {
        "name": "coredns",
        "image": coredns_image(team.vcluster),
        # The host refuses the team's pods without Always on such a site ([image-pull-policy]).
        "imagePullPolicy": PULL_ALWAYS if team.vcluster.always_pull_images else "IfNotPresent",
        "args": ["-conf", "/etc/coredns/Corefile"],
        # KAI's webhook writes this too; stating it keeps the pod GPU-less even if the webhook is skipped.
        "env": [{"name": VISIBLE_DEVICES, "value": "void"}],
        "resources": {"requests": dict(DNS_REQUESTS), "limits": dict(DNS_LIMITS)},
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
            "replicas": DNS_REPLICAS,
            "selector": {"matchLabels": dict(DNS_APP_LABEL)},
            "template": {
                "metadata": {"labels": dns_pod_labels(team)},
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
# PyYAML's pure-Python emitter took ~1.7 s of CPU for 300 tenants, once per tenant, although a site's
# teams' objects differ only in the team's name (the image and host DNS are the site's). The YAML is
# written once for a stand-in name, and each team's name is put in its place; where the name would be quoted in YAML or the stand-in is not a whole value,
# the team's objects are dumped as they are. Either way the text is what dumping them gives.
_NAME_STAND_IN = "gpu-tenancy-dns-name-stand-in"
_WHOLE_VALUE = re.compile(rf"(?:: |- ){_NAME_STAND_IN}\n")


def coredns_manifests(team: Team, host_dns: str) -> str:
    stand_in = dataclasses.replace(team, name=_NAME_STAND_IN)
    template = _yaml_stream(json.dumps(coredns_objects(stand_in, host_dns)))
    name = _plain_scalar(team.name)
    if name is None or len(_WHOLE_VALUE.findall(template)) != template.count(_NAME_STAND_IN):
        return _dump(coredns_objects(team, host_dns))
    return template.replace(_NAME_STAND_IN, name)


@functools.lru_cache(maxsize=16)
def _yaml_stream(objects_json: str) -> str:
    return _dump(json.loads(objects_json))


def _dump(objects: list[dict]) -> str:
    return "---\n".join(yaml.safe_dump(document, sort_keys=False) for document in objects)


def _plain_scalar(text: str) -> Optional[str]:
    """``text`` when YAML writes it unquoted, as it writes a plain string; else None."""
    return text if yaml.safe_dump(text) == f"{text}\n...\n" else None
