"""tools.deployability's pod-security rule: a pod the ``attack`` chart renders into a namespace is judged by the
Pod Security level the namespace enforces, control by control (the upstream check itself is read by
tests/test_deployability_pod_security_contract.py); and the tenant DNS pods vCluster puts on the host, as the
check models them from the chart values, the overwritten manifests and the program's own release.
The other rules and the sites: tests/test_deployability.py.
"""

from __future__ import annotations

import pytest

from tools.charts.render import RELEASE_TYPE
from tools.deployability import pod_security
from tools.deployability.inputs import Release, vcluster_dns_pods
from tests.test_deployability import (  # noqa: F401 (attack_cache, sites: fixtures)
    attack, attack_cache, errors, namespace, sites,
)


PRIVILEGED = {"containers": [{"name": "c", "image": "x", "securityContext": {"privileged": True}}]}
RESTRICTED_OK = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "c", "image": "x", "securityContext": {
                     "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}


def test_a_privileged_pod_in_a_baseline_namespace_is_found(attack_cache, tmp_path, sites):
    objects = attack(attack_cache, tmp_path, {"workload": {"enabled": True, "podSpec": PRIVILEGED}})
    [finding] = errors(objects + [namespace("apps", "baseline")], sites["eks"], "pod-security")
    assert '"Privileged Containers"' in finding.message and "enforces baseline" in finding.message
    assert not errors(objects + [namespace("apps", "privileged")], sites["eks"], "pod-security")
    assert not errors(objects + [namespace("apps")], sites["eks"], "pod-security"), "no label: privileged"


@pytest.mark.parametrize("spec, level, controls", [
    ({"hostNetwork": True, "containers": [{"name": "c"}]}, "baseline", {"Host Namespaces"}),
    ({"volumes": [{"name": "h", "hostPath": {"path": "/"}}], "containers": [{"name": "c"}]}, "baseline",
     {"HostPath Volumes"}),
    ({"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}, "baseline",
     {"Capabilities"}),
    ({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]}, "baseline", {"Host Ports"}),
    ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [{"name": "c"}]}, "baseline",
     {"Seccomp"}),
    ({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}, "containers": [{"name": "c"}]},
     "baseline", {"Sysctls"}),
    (RESTRICTED_OK, "restricted", set()),
    ({**RESTRICTED_OK, "volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}]}, "restricted",
     {"Volume Types"}),
    ({**RESTRICTED_OK, "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}, "restricted",
     {"Running as Non-root"}),
    ({"containers": [{"name": "c"}]}, "restricted",
     {"Privilege Escalation", "Running as Non-root", "Seccomp", "Capabilities"}),
    ({**RESTRICTED_OK, "initContainers": [{"name": "i", "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["NET_RAW"]}, "runAsUser": 0}}]},
     "restricted", {"Capabilities", "Running as Non-root user"}),
    (PRIVILEGED, "privileged", set()),
])
def test_pod_security_controls(spec, level, controls):
    assert {v.control for v in pod_security.violations(spec, level)} == controls


def test_vclusters_default_coredns_model_follows_the_values():
    values = {"sync": {"fromHost": {"nodes": {"enabled": True, "selector": {"labels": {"pool": "gpu"}}}},
                       "toHost": {"pods": {"enforceTolerations": ["nvidia.com/gpu:NoSchedule", "team=a:NoExecute"]}}}}
    [pod] = vcluster_dns_pods(Release("t", "vcluster-t", "vcluster", "0.36.1", values))
    spec = pod.manifest["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "pool": "gpu"}
    assert {"key": "team", "operator": "Equal", "value": "a", "effect": "NoExecute"} in spec["tolerations"]
    assert pod.manifest["metadata"]["labels"]["vcluster.loft.sh/managed-by"] == "t"
    assert not pod_security.violations(spec, "baseline")
    assert {v.control for v in pod_security.violations(spec, "restricted")} == {"Seccomp"}
    hardened = {**values, "controlPlane": {"coredns": {"security": {
        "podSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}}}}
    [pod] = vcluster_dns_pods(Release("t", "vcluster-t", "vcluster", "0.36.1", hardened))
    assert not pod_security.violations(pod.manifest["spec"], "restricted")
    assert vcluster_dns_pods(Release("t", "n", "vcluster", "0.36.1", {"controlPlane": {"coredns": {"embedded": True}}})) == []


def test_overwritten_coredns_manifests_are_what_lands_on_the_host():
    manifests = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system}
spec:
  selector: {matchLabels: {k8s-app: vcluster-kube-dns}}
  template:
    metadata: {labels: {k8s-app: vcluster-kube-dns, kai.scheduler/queue: team-a}}
    spec:
      schedulerName: kai-scheduler
      hostNetwork: true
      containers: [{name: coredns, image: coredns}]
"""
    values = {"controlPlane": {"coredns": {"overwriteManifests": manifests}},
              "sync": {"toHost": {"pods": {"enforceTolerations": ["nvidia.com/gpu:NoSchedule"]}}}}
    [pod] = vcluster_dns_pods(Release("t", "vcluster-t", "vcluster", "0.36.1", values))
    assert pod.manifest["spec"]["schedulerName"] == "kai-scheduler"
    assert pod.manifest["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
    assert {v.control for v in pod_security.violations(pod.manifest["spec"], "baseline")} == {"Host Namespaces"}
    assert pod.manifest["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                    "effect": "NoSchedule"}]


def test_the_programs_own_tenant_dns_is_what_the_check_sees(dev_run):
    release = next(r for r in dev_run.of_type(RELEASE_TYPE) if r.inputs["chart"] == "vcluster")
    pods = vcluster_dns_pods(Release(release.inputs["name"], release.inputs["namespace"], "vcluster",
                                     release.inputs["version"], release.inputs["values"]))
    assert pods and all("overwriteManifests" in pod.origin for pod in pods)
    for level in pod_security.LEVELS:
        assert not pod_security.violations(pods[0].manifest["spec"], level), level
