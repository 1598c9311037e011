"""The synced objects (not pods) the attack tests build, by kind, for tests/test_vcluster_objects_real.py.

Each entry is ``(kind, virtual object, via, simulation)``: the object the tenant writes in its vCluster, how it
reaches vCluster (``proxy``: a Service CREATE, which vCluster's API proxy serves; ``syncer``: the syncer's
SyncToHost, for a Service the re-creation of a missing host Service), and the function of
``tests/synced_objects_sim.py`` the attack tests build its host copy with. Honest: what the seeds, KAI's documented
workloads, DNS and charts, and the honest-tenant tests write; hostile: one object for each distinct thing the
synced-object attack tests send. EDITS: a tenant's edits of an existing object, carried by the syncer's Sync.
"""

from __future__ import annotations

import copy

from config.synced_data import SYNCED_ENDPOINT_ENTRIES, SYNCED_SERVICE_PORTS, SYNCED_SERVICE_SELECTOR_LABELS
from config.synced_endpoint_bytes import TARGET_REF_BYTES
from tools.offline.mocks import MOCK_CLUSTER_DNS
from tests.synced_objects_sim import (
    MANAGED_BY, NAMESPACE_LABEL, SKIP_TRANSLATE, create_service, host_metadata, sync_claim, sync_endpoint_slice,
    sync_endpoints, sync_secret, sync_service, translated_label, update_claim, update_service, updated,
)
from tests.test_synced_endpoint_text import balancer, controller_slice, long_ref, pod_ref, referenced, selecting
from tests.test_synced_endpoints import database, many_ported, piece
from tests.test_synced_objects_admission import claim, endpoint_slice, endpoints, service

# The Services the corpus's Endpoints and slices belong to: vCluster syncs only a selector-less Service's.
SELECTOR_LESS = ("db",)


def _both_ways(name: str, virtual: dict) -> dict:
    """A Service as the tenant creates it (the API proxy) and as the syncer re-creates it when the host copy is
    missing."""
    return {f"{name} (proxy)": ("Service", virtual, "proxy", create_service),
            f"{name} (syncer)": ("Service", virtual, "syncer", sync_service)}


def _data(kind: str, name: str, **fields) -> dict:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}, **fields}


def _with_metadata(obj: dict, **metadata) -> dict:
    result = copy.deepcopy(obj)
    for key, value in metadata.items():
        result["metadata"][key] = value
    return result


def honest_objects(team) -> dict:
    """What honest tenants write."""
    objects = {}
    for name, virtual in {
        "cluster-ip": service(selector={"app": "web"}),
        "headless": service("web-headless", selector={"app": "web"}, clusterIP="None"),
        "session-affinity": service(selector={"app": "web"}, type="ClusterIP", sessionAffinity="ClientIP"),
        "kube-dns": service("kube-dns", selector={"k8s-app": "kube-dns"}, ports=[
            {"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "targetPort": 53, "protocol": "TCP"}]),
        "selector-less": service("external-db"),
        "labelled": _with_metadata(service(selector={"app.kubernetes.io/name": "web"}),
                                   labels={"app.kubernetes.io/name": "web", "release": "web"},
                                   annotations={"prometheus.io/scrape": "true"}),
    }.items():
        objects.update(_both_ways(name, virtual))
    objects.update({
        "endpoints": ("Endpoints", endpoints("203.0.113.10", "8.8.8.8"), "syncer", sync_endpoints),
        "endpoints-ported": ("Endpoints", database(3, 2), "syncer", sync_endpoints),
        "endpoint-slice": ("EndpointSlice", endpoint_slice("203.0.113.10"), "syncer", sync_endpoint_slice),
        "controller-slice": ("EndpointSlice", controller_slice(), "syncer", sync_endpoint_slice),
        "claim": ("PersistentVolumeClaim", claim(), "syncer", sync_claim),
        "clone": ("PersistentVolumeClaim", claim("copy", dataSource={"kind": "PersistentVolumeClaim", "name": "data"}),
                  "syncer", sync_claim),
        "config-map": ("ConfigMap", _data("ConfigMap", "x", data={"a": "b"}), "syncer", host_metadata),
        "opaque": ("Secret", _data("Secret", "x", type="Opaque", data={"password": "aHVudGVyMg=="}), "syncer",
                   sync_secret),
        "pull-secret": ("Secret", _data("Secret", "pull", type="kubernetes.io/dockerconfigjson",
                                        data={".dockerconfigjson": "e30="}), "syncer", sync_secret),
    })
    return objects


def hostile_objects(team) -> dict:
    """One object for each distinct thing the synced-object attack tests send."""
    look_alike = {MANAGED_BY: "other-team", NAMESPACE_LABEL: "kube-system", "vcluster.loft.sh/controlled-by": "x",
                  translated_label("release", team): "forged", "release": "r"}
    objects = {}
    ports = [{"port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}]
    for name, virtual in {
        "external-ips": service(selector={"app": "web"}, externalIPs=["10.0.0.10", "1.1.1.1"]),
        "host-dns-address": service("dns", ports=[{"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"}],
                                    clusterIP=MOCK_CLUSTER_DNS, clusterIPs=[MOCK_CLUSTER_DNS], ipFamilies=["IPv4"],
                                    ipFamilyPolicy="SingleStack"),
        "node-port": service(type="NodePort", ports=ports),
        "load-balancer": service(type="LoadBalancer", allocateLoadBalancerNodePorts=False, loadBalancerIP="52.1.2.3"),
        "health-check-port": service(type="LoadBalancer", externalTrafficPolicy="Local", healthCheckNodePort=31999,
                                     ports=ports),
        "external-name": service(type="ExternalName", externalName="metadata.google.internal"),
        "many-ports": many_ported(SYNCED_SERVICE_PORTS + 1),
        "many-selector-labels": selecting(SYNCED_SERVICE_SELECTOR_LABELS + 1),
        "source-ranges": balancer([" 203.0.113.0/24", "0.0.0.0/0"]),
        "look-alike-labels": _with_metadata(service(selector=look_alike), labels=look_alike, annotations={
            "vcluster.loft.sh/object-name": "kube-dns", "vcluster.loft.sh/managed-annotations": "a",
            "vcluster.loft.sh/block-deletion": "false", "field.cattle.io/publicEndpoints": "[]"}),
        "long-name": service("s" * 63, selector={"app": "web"}),
        "owner-references": _with_metadata(service(selector={"app": "web"}), ownerReferences=[
            {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "5b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"}]),
    }.items():
        objects.update(_both_ways(name, virtual))
    foreign = copy.deepcopy(endpoints("203.0.113.10"))
    foreign["subsets"][0]["addresses"][0]["targetRef"] = {**pod_ref("web-0"), "namespace": "kube-system",
                                                           "resourceVersion": "7"}
    not_ready = endpoints("203.0.113.10")
    not_ready["subsets"][0]["notReadyAddresses"] = [{"ip": "10.0.0.7", "nodeName": "gpu-node-1",
                                                     "hostname": "h", "targetRef": pod_ref("web-1")}]
    long_slice = piece(3, 1)
    long_slice["endpoints"][1].update(zone="z" * 200, deprecatedTopology={"example.com/rack": "r1"},
                                      hints={"forNodes": [{"name": "n" * 254}]},
                                      targetRef={**pod_ref("web-0"), "resourceVersion": "9" * 4096})
    no_service = endpoint_slice("203.0.113.10")
    no_service["metadata"]["labels"]["kubernetes.io/service-name"] = "db"
    no_service["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] = "endpointslice-controller.k8s.io"
    objects.update({
        "private-endpoints": ("Endpoints", endpoints("203.0.113.10", "10.1.23.4", "169.254.169.254"), "syncer",
                              sync_endpoints),
        "non-canonical-endpoints": ("Endpoints", endpoints("010.0.0.1", "0x8.8.8.8"), "syncer", sync_endpoints),
        "foreign-pod-endpoints": ("Endpoints", foreign, "syncer", sync_endpoints),
        "not-ready-endpoints": ("Endpoints", not_ready, "syncer", sync_endpoints),
        "long-reference": ("Endpoints", referenced(database(1, 1), long_ref(fieldPath=TARGET_REF_BYTES["fieldPath"]
                                                                                + 1)), "syncer", sync_endpoints),
        "many-endpoints": ("Endpoints", database(SYNCED_ENDPOINT_ENTRIES // 2 + 1, 2), "syncer", sync_endpoints),
        "leader-annotation": ("Endpoints", _with_metadata(endpoints("203.0.113.10"), annotations={
            "control-plane.alpha.kubernetes.io/leader": "{}"}, labels=look_alike), "syncer", sync_endpoints),
        "private-slice": ("EndpointSlice", endpoint_slice("10.1.23.4"), "syncer", sync_endpoint_slice),
        "fqdn-slice": ("EndpointSlice", endpoint_slice("db.example.com", address_type="FQDN"), "syncer",
                       sync_endpoint_slice),
        "ipv6-slice": ("EndpointSlice", endpoint_slice("2001:db8::1", address_type="IPv6"), "syncer",
                       sync_endpoint_slice),
        "long-slice": ("EndpointSlice", long_slice, "syncer", sync_endpoint_slice),
        "ports-only-slice": ("EndpointSlice", piece(0, SYNCED_ENDPOINT_ENTRIES + 1), "syncer", sync_endpoint_slice),
        "controller-labelled-slice": ("EndpointSlice", no_service, "syncer", sync_endpoint_slice),
        "skip-translate-claim": ("PersistentVolumeClaim", claim(annotations={SKIP_TRANSLATE: "true"},
                                                                volumeName="pvc-other-team"), "syncer", sync_claim),
        "volume-name": ("PersistentVolumeClaim", claim(volumeName="pvc-other-team"), "syncer", sync_claim),
        "volume-selector": ("PersistentVolumeClaim", claim(selector={"matchLabels": {"team": "other"}}), "syncer",
                            sync_claim),
        "storage-class": ("PersistentVolumeClaim", claim(storageClassName="io2-fast"), "syncer", sync_claim),
        "attributes-class": ("PersistentVolumeClaim", claim(volumeAttributesClassName="io2-64k-iops"), "syncer",
                             sync_claim),
        "foreign-clone": ("PersistentVolumeClaim", claim(annotations={SKIP_TRANSLATE: "true"}, dataSourceRef={
            "kind": "PersistentVolumeClaim", "name": "data-x-default-x-other", "namespace": "team-other"}),
            "syncer", sync_claim),
        "snapshot-source": ("PersistentVolumeClaim", claim(dataSource={
            "apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "s"}), "syncer", sync_claim),
        "bound-claim-annotations": ("PersistentVolumeClaim", claim(annotations={
            "pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.beta.kubernetes.io/storage-provisioner": "ebs.csi.aws.com",
            "volume.kubernetes.io/selected-node": "gpu-node-of-team-vision"}), "syncer", sync_claim),
        "long-name-config-map": ("ConfigMap", _data("ConfigMap", "c" * 253, data={"a": "b"}), "syncer",
                                 host_metadata),
        "dashboard": ("ConfigMap", _with_metadata(_data("ConfigMap", "d", data={"d.json": "{}"}),
                                                  labels={"grafana_dashboard": "1"},
                                                  annotations={"grafana_folder": "team-vision"}), "syncer",
                      host_metadata),
        "large-config-map": ("ConfigMap", _data("ConfigMap", "big", data={"blob": "x" * 1024 * 1024}), "syncer",
                             host_metadata),
        "snapshot-request": ("ConfigMap", _with_metadata(_data("ConfigMap", "backup", data={"request": "{}"}),
                                                         labels={"vcluster.loft.sh/snapshot-request": ""},
                                                         annotations={"vcluster.loft.sh/force-sync": "true"}),
                             "syncer", host_metadata),
        "service-account-token": ("Secret", _with_metadata(
            _data("Secret", "t", type="kubernetes.io/service-account-token"),
            annotations={"kubernetes.io/service-account.name": f"vc-{team.vcluster_name}"}), "syncer", sync_secret),
        "large-secret": ("Secret", _data("Secret", "big", type="Opaque", data={"blob": "AAAA" * 262144}), "syncer",
                         sync_secret),
        "owned-secret": ("Secret", _with_metadata(_data("Secret", "o", type="Opaque"), labels=look_alike,
                                                  ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                                                    "uid": "5b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"}]),
                         "syncer", sync_secret),
    })
    return objects



def _edited(obj: dict, change) -> dict:
    result = copy.deepcopy(obj)
    change(result)
    return result


def _spec(**fields):
    return lambda obj: obj["spec"].update(fields)


def _metadata(field: str, **entries):
    return lambda obj: obj["metadata"].setdefault(field, {}).update(entries)


def _copied(simulate):
    """The update simulation of a kind whose syncer copies the edited object whole."""
    return lambda host, obj, team: updated(host, simulate(obj, team))


def edits(team) -> dict:
    """A tenant's edits of an existing object, each ``(kind, before, after, simulation)``: what the update attack
    tests send; ``simulation(host, after, team)`` the host object after Sync."""
    web = service(selector={"app": "web"})
    balancer_service = service(type="LoadBalancer", allocateLoadBalancerNodePorts=False)
    node_ports = [{"port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}]
    db_slice = piece(3, 1)
    pending = claim()
    settings = _data("ConfigMap", "settings", data={"a": "b"})
    credentials = _data("Secret", "credentials", type="Opaque", data={"a": "Yg=="})

    def grown_slice(obj):
        obj["endpoints"][1]["zone"] = "z" * 200
        obj["endpoints"][2]["addresses"] = ["10.1.23.4"]

    return {
        "external-ips": ("Service", web, _edited(web, _spec(externalIPs=["10.0.0.10"])), update_service),
        "chosen-node-port": ("Service", balancer_service, _edited(balancer_service, _spec(ports=node_ports)),
                             update_service),
        "node-port-allocation": ("Service", balancer_service,
                                 _edited(balancer_service, _spec(allocateLoadBalancerNodePorts=True)), update_service),
        "health-check-port": ("Service", balancer_service, _edited(balancer_service, _spec(
            externalTrafficPolicy="Local", healthCheckNodePort=31999)), update_service),
        "type": ("Service", web, _edited(web, _spec(type="NodePort")), update_service),
        "source-ranges": ("Service", balancer_service, _edited(balancer_service, _spec(
            loadBalancerSourceRanges=[" 10.0.0.0/8"])), update_service),
        "selector": ("Service", web, _edited(web, _spec(selector={"app": "db", "release": "r"})), update_service),
        "service-labels": ("Service", web, _edited(web, _metadata("labels", release="r", grafana_dashboard="1")),
                           update_service),
        "endpoint-addresses": ("Endpoints", database(2, 1), _edited(database(2, 1), lambda obj: obj["subsets"][0][
            "addresses"].append({"ip": "169.254.169.254", "targetRef": pod_ref("web-0")})), _copied(sync_endpoints)),
        "endpoint-annotations": ("Endpoints", database(2, 1), _edited(database(2, 1), _metadata(
            "annotations", **{"control-plane.alpha.kubernetes.io/leader": "{}", "a": "b"})), _copied(sync_endpoints)),
        "slice-endpoints": ("EndpointSlice", db_slice, _edited(db_slice, grown_slice), _copied(sync_endpoint_slice)),
        "claim-volume-name": ("PersistentVolumeClaim", pending, _edited(pending, _spec(volumeName="pvc-other-team")),
                              update_claim),
        "claim-size": ("PersistentVolumeClaim", pending, _edited(pending, _spec(
            resources={"requests": {"storage": "2Gi"}})), update_claim),
        "claim-attributes-class": ("PersistentVolumeClaim", pending, _edited(pending, _spec(
            volumeAttributesClassName="io2-64k-iops")), update_claim),
        "claim-selected-node": ("PersistentVolumeClaim", pending, _edited(pending, _metadata(
            "annotations", **{"volume.kubernetes.io/selected-node": "gpu-node-of-team-vision"})), update_claim),
        "config-map-data": ("ConfigMap", settings, _edited(settings, lambda obj: obj["data"].update(
            blob="x" * 1024 * 1024)), _copied(host_metadata)),
        "config-map-labels": ("ConfigMap", settings, _edited(settings, _metadata(
            "labels", grafana_dashboard="1", **{"vcluster.loft.sh/snapshot-request": ""})), _copied(host_metadata)),
        "secret-data": ("Secret", credentials, _edited(credentials, lambda obj: obj["data"].update(
            blob="AAAA" * 262144)), _copied(sync_secret)),
        "secret-type": ("Secret", credentials, _edited(credentials, lambda obj: obj.update(
            type="kubernetes.io/dockerconfigjson")), _copied(sync_secret)),
    }
