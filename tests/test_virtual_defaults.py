"""The defaults inside each vCluster (components/virtual_defaults.py): honest charts run unmodified.

The MutatingAdmissionPolicy's apply configuration is evaluated with cel-python and merged into pods as the
API server merges an apply configuration (maps key by key, scalars replaced); the in-vCluster copy of the
host's pod rules runs through tenant_sim's ``Admission``; the result goes through vCluster's sync, KAI's
webhook and the host policy (tests/tenant_sim.py). The shipped manifests are checked against
Kubernetes 1.36's schemas, the version vCluster 0.36.1 runs inside.
"""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from components.admission_devices import TOOLKIT_FEATURES
from components.virtual_defaults import FIXED_REQUESTS_NAME, RULES_NAME
from config.vocabulary import QUEUE_LABEL
from tests.config_spec import put
from tests.conftest import dev_config, eks_config
from tests.isolation_spec import isolation_config, prefixed
from tests.tenant_sim import (
    Admission, KAI_SCHEDULER, Tenant, container, platform_of, tenant_of, virtual_pod,
)
from tests.apiserver_pods import pull_policy_defaults
from tests.virtual_sim import VIRTUAL_KUBERNETES, Mutation, apply_configuration, manifests, named


class Inside:
    """A team's virtual API server, as far as the shipped policies go."""

    USER = "kubernetes-admin"

    def __init__(self, tenant: Tenant):
        self.tenant = tenant
        objects = manifests(tenant.team)
        self.mutations = [Mutation(policy["spec"], named(objects, "MutatingAdmissionPolicyBinding",
                                                         policy["metadata"]["name"])["spec"])
                          for policy in objects if policy["kind"] == "MutatingAdmissionPolicy"]
        rules = named(objects, "ValidatingAdmissionPolicy", RULES_NAME)
        binding = named(objects, "ValidatingAdmissionPolicyBinding", RULES_NAME)
        self.rules = Admission(rules["spec"], binding["spec"])
        self.resizes = Admission(named(objects, "ValidatingAdmissionPolicy", FIXED_REQUESTS_NAME)["spec"],
                                 named(objects, "ValidatingAdmissionPolicyBinding", FIXED_REQUESTS_NAME)["spec"])

    @staticmethod
    def defaulted(pod: dict) -> dict:
        """The pod as admission gets it: the API server defaults schedulerName and pull policies first."""
        pod = pull_policy_defaults(pod)
        pod["spec"].setdefault("schedulerName", "default-scheduler")
        return pod

    def mutate(self, pod: dict) -> dict:
        """The pod after every mutating policy, applied to the defaulted pod."""
        pod = self.defaulted(pod)
        for mutation in self.mutations:
            pod = mutation.mutate(pod["metadata"]["namespace"], pod, self.USER)
        return pod

    def create(self, pod: dict) -> tuple[dict, list[str]]:
        mutated = self.mutate(pod)
        return mutated, self.rules.review(pod["metadata"]["namespace"], mutated, user=self.USER)


@pytest.fixture(scope="module", params=["dev", "eks"])
def inside(request, dev_run, eks_run) -> Inside:
    if request.param == "dev":
        return Inside(tenant_of(dev_run, dev_config(), "team-nlp"))
    return Inside(tenant_of(eks_run, eks_config(), "team-legal"))


def deployment_pod() -> dict:
    """A plain nginx Deployment's pod, as the ReplicaSet controller creates it."""
    pod = virtual_pod("web-7d9f8b6c5-x2x4q", "shop", labels={"app": "web", "pod-template-hash": "7d9f8b6c5"},
                      containers=[{"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}])
    pod["metadata"]["generateName"] = "web-7d9f8b6c5-"
    return pod


def job_pod() -> dict:
    return virtual_pod("train-abcde", "ml", labels={"job-name": "train", "batch.kubernetes.io/job-name": "train",
                                                    "batch.kubernetes.io/controller-uid": "0d5e"},
                       annotations={"gpu-fraction": "0.5"}, restartPolicy="Never", containers=[container("trainer")])


HONEST = {
    "deployment": deployment_pod,
    "job-with-a-fraction": job_pod,
    "other-scheduler": lambda: virtual_pod("batch", scheduler="volcano", labels={"app": "batch"}),
    "other-queue-label": lambda: virtual_pod("q", queue="default-queue"),
    "whole-gpu": lambda: virtual_pod("gpu", containers=[container(gpus="1")]),
}


def without_device_features(pod: dict) -> dict:
    stripped = copy.deepcopy(pod)
    for entry in stripped["spec"]["containers"]:
        entry["env"] = [e for e in entry.get("env", []) if e["name"] not in TOOLKIT_FEATURES]
        if not entry["env"]:
            del entry["env"]
    return stripped


@pytest.mark.parametrize("kind", HONEST)
def test_every_pod_gets_kai_and_the_teams_queue_and_keeps_its_own_labels(inside, kind):
    pod = pull_policy_defaults(HONEST[kind]())
    mutated = inside.mutate(pod)
    assert mutated["spec"]["schedulerName"] == KAI_SCHEDULER
    assert mutated["metadata"]["labels"] == {**pod["metadata"]["labels"], QUEUE_LABEL: inside.tenant.team.queue_name}
    # GPU containers also get the toolkit's device features switched off; nothing else changes.
    assert {k: v for k, v in without_device_features(mutated)["spec"].items() if k != "schedulerName"} == \
        {k: v for k, v in pod["spec"].items() if k != "schedulerName"}
    gpu_containers = {"job-with-a-fraction": "trainer", "whole-gpu": "main"}
    for entry in mutated["spec"]["containers"]:
        features = {e["name"]: e["value"] for e in entry.get("env", []) if e["name"] in TOOLKIT_FEATURES}
        assert features == (TOOLKIT_FEATURES if gpu_containers.get(kind) == entry["name"] else {})
    # The policy runs again when another mutation follows (reinvocation): nothing changes the second time.
    assert inside.mutate(mutated) == mutated


@pytest.mark.parametrize("kind", HONEST)
def test_an_unmodified_pod_ends_up_admitted_by_the_host_in_the_teams_queue(inside, kind):
    pod = HONEST[kind]()
    # Without the defaults the host refuses it: the test can fail.
    assert any(message.startswith("[own-queue]") for message in inside.tenant.create(pod))
    mutated, refused = inside.create(pod)
    assert refused == []
    host = inside.tenant.host_pod(mutated)
    assert inside.tenant.create(mutated) == []
    assert host["spec"]["schedulerName"] == KAI_SCHEDULER
    assert host["metadata"]["labels"][QUEUE_LABEL] == inside.tenant.team.queue_name


BAD = {
    "node-name": dict(nodeName="gpu-node-1"),
    "pod-group": dict(annotations={"pod-group-name": "pg-of-team-vision"}),
    "cdi-devices": dict(annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}),
    "nvidia-runtime-without-gpu": dict(runtimeClassName="nvidia"),
}


@pytest.mark.parametrize("kind", BAD)
def test_a_pod_the_host_refuses_is_refused_at_create_with_the_hosts_message(inside, kind):
    pod = virtual_pod("bad", **BAD[kind])
    mutated, refused = inside.create(pod)
    host = inside.tenant.create(mutated)
    assert refused, f"{kind} was admitted inside but the host says {host}"
    assert set(refused) <= set(host)


# Pods the host refuses, each with the rule that refuses it there.
REFUSED_BY = {
    "gpu-env-from": dict(containers=[container(gpus="1", env_from=[{"prefix": "NVIDIA_",
                                                                    "configMapRef": {"name": "gpus"}}])]),
    "pod-resources": dict(resources={"requests": {"cpu": "32", "memory": "128Gi"}}),
    "granted-values": dict(annotations={"gpu-fraction": "0.054"}),
    "probe-host": dict(containers=[{**container(), "readinessProbe": {"tcpSocket": {"host": "10.0.12.7", "port": 22}}}]),
    "resource-claims": dict(resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpus"}]),
    "host-controllers": dict(workloadRef={"name": "training", "podGroup": "workers"}),
    "grace-period": dict(terminationGracePeriodSeconds=86400),
}


@pytest.mark.parametrize("rule", REFUSED_BY)
def test_the_host_rule_refuses_the_same_pod_inside(inside, rule):
    mutated, refused = inside.create(virtual_pod("bad", **REFUSED_BY[rule]))
    assert {message[1:message.index("]")] for message in refused} == {rule}
    assert set(refused) <= set(inside.tenant.create(mutated))


def test_a_resize_of_requests_is_refused_inside_with_the_hosts_message(inside):
    # The host refuses the syncer's pods/resize (fixed-requests), after which the syncer stops updating the pod.
    model = container("model")
    model["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
    pod, refused = inside.create(virtual_pod(containers=[model]))
    assert refused == []
    grown, roomier = copy.deepcopy(pod), copy.deepcopy(pod)
    grown["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "15"
    roomier["spec"]["containers"][0]["resources"]["limits"]["memory"] = "4Gi"
    namespace = pod["metadata"]["namespace"]
    messages = inside.resizes.review(namespace, grown, operation="UPDATE", subresource="resize", old=pod,
                                     user=inside.USER)
    assert [message[1:message.index("]")] for message in messages] == ["fixed-requests"]
    assert inside.resizes.review(namespace, roomier, operation="UPDATE", subresource="resize", old=pod,
                                 user=inside.USER) == []
    # A plain update is not this policy's: the API server keeps resources immutable there.
    assert inside.resizes.review(namespace, grown, operation="UPDATE", old=pod, user=inside.USER) == []


def test_the_shipped_manifests_are_valid_kubernetes_1_36_objects():
    # Every team gets its queue, the device features switched off, its limits raised to requests above the host's
    # default limits, the host's pod rules and its resize rule.
    sites = ((dev_config(), "team-nlp", 10), (eks_config(), "team-legal", 10),
             (prefixed(isolation_config()), "team-nlp", 12),  # a memory-capped team also gets HAMi-core loaded
             # and every team its pulls, on a site that has them pull on every start
             (put(prefixed(isolation_config()), "gpu-tenancy:vcluster.alwaysPullImages", True), "team-nlp", 14))
    for config, team, count in sites:
        settings = next(t for t in platform_of(config).teams if t.name == team)
        objects = manifests(settings)
        assert len(objects) == count
        assert {obj["kind"] for obj in objects} == {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
                                                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
        for obj in objects:
            assert obj["apiVersion"] == "admissionregistration.k8s.io/v1"
            kubernetes_validate.validate(obj, VIRTUAL_KUBERNETES, strict=True)
        # The validator is strict: a field 1.36 does not know fails.
        broken = copy.deepcopy(objects[0])
        broken["spec"]["mutations"][0]["applyConfig"] = broken["spec"]["mutations"][0].pop("applyConfiguration")
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, VIRTUAL_KUBERNETES, strict=True)


def env_of(*pairs: str) -> list[dict]:
    return [{"name": name, "value": value} for name, value in (pair.split("=") for pair in pairs)]


# A container's env as the tenant wrote it (B twice) and an apply configuration's env for it: structured-merge-diff
# (typed/merge.go visitListItems) keeps the live-only A first, places the new D where the patch has it, the shared
# C and B in the patch's order, and makes the duplicated B the patch's one item.
LIVE_ENV, PATCH_ENV = env_of("A=1", "B=1", "C=1", "B=2"), env_of("D=0", "C=0", "B=0")
MERGED_ENV = env_of("A=1", "D=0", "C=0", "B=0")


def test_a_list_map_merges_in_structured_merge_diffs_order_and_a_duplicated_key_becomes_the_patchs_item():
    live = {"spec": {"containers": [{"name": "main", "image": "cuda", "env": LIVE_ENV}]}}
    patch = {"spec": {"containers": [{"name": "main", "env": PATCH_ENV}]}}
    assert apply_configuration(live, patch)["spec"]["containers"] == [
        {"name": "main", "image": "cuda", "env": MERGED_ENV}]
    # Items the patch holds in the live list's order merge in place; a new container comes last.
    assert apply_configuration(live, {"spec": {"containers": [{"name": "sidecar"}]}})["spec"]["containers"] == [
        *live["spec"]["containers"], {"name": "sidecar"}]
