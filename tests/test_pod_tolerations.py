"""A pod carries a bounded number of tolerations (rule ``tolerations``).

The API server bounds each toleration (a qualified key, a label value, an effect) but not how many a pod has, the
``pod-size`` rule counts none, and an update may add tolerations to a running pod, which vCluster carries to the host
pod (``pods/translate/diff.go`` ``calcSpecDiff``, at every accepted release). A team could so grow each of its host
pods to the request's size, past the datastore bound the plan states, into the host's etcd and the memory of every
controller that watches pods (KAI, kube-state-metrics, the syncers), and before kube-state-metrics' denylist
(components/observability_ksm.py) a series per toleration into the shared Prometheus.

- Attack: a pod created with hundreds of tolerations, and a running pod the tenant gives more, as the syncer copies
  them, are refused.
- Honest: the seeds' and KAI's pods (tests/test_admission_honest.py), a pod tolerating a few taints, one adding a
  toleration while running, and KAI's updates of a pod from before the rule, pass.
"""

from __future__ import annotations

import re

import pytest

from config.synced_data import HOST_DEFAULT_TOLERATIONS, SYNCED_POD_TOLERATIONS
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, go_function, mirrored_tag
from tests.test_admission_attacks import mixed_run, on_kai, rules, tenant  # noqa: F401 (fixtures)
from tests.tenant_sim import container, kai_bind, kai_group

VCLUSTER = "loft-sh/vcluster"


def tolerating(count: int, prefix: str = "example.com/t") -> list[dict]:
    return [{"key": f"{prefix}{index}", "operator": "Exists", "effect": "NoSchedule"} for index in range(count)]


def cap(tenant) -> int:
    return SYNCED_POD_TOLERATIONS + len(tenant.team.vcluster.enforce_tolerations) + HOST_DEFAULT_TOLERATIONS


def test_a_pod_created_with_hundreds_of_tolerations_is_refused(tenant):
    pod = on_kai(tenant, containers=[container()])
    pod["spec"]["tolerations"] = tolerating(200)
    assert "tolerations" in rules(tenant.create(pod))
    # At the bound, counted on the host pod (vCluster's enforced tolerations included), and one past it.
    own = cap(tenant) - len(tenant.team.vcluster.enforce_tolerations)
    pod["spec"]["tolerations"] = tolerating(own)
    assert len(tenant.host_pod(pod)["spec"]["tolerations"]) == cap(tenant)
    assert "tolerations" not in rules(tenant.create(pod))
    pod["spec"]["tolerations"] = tolerating(own + 1)
    assert "tolerations" in rules(tenant.create(pod))


def test_a_running_pod_given_more_tolerations_is_refused(tenant):
    pod = on_kai(tenant, containers=[container()])
    pod["spec"]["tolerations"] = tolerating(2)

    def grow(virtual: dict) -> None:
        virtual["spec"]["tolerations"] = virtual["spec"]["tolerations"] + tolerating(200, "example.com/more")

    assert "tolerations" in rules(tenant.run_and_edit(pod, grow))


def test_a_pod_tolerating_a_few_taints_and_adding_one_later_passes(tenant):
    pod = on_kai(tenant, containers=[container()])
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
                                  {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
                                   "effect": "NoSchedule"}]
    assert "tolerations" not in rules(tenant.create(pod))

    def add_one(virtual: dict) -> None:
        virtual["spec"]["tolerations"] = virtual["spec"]["tolerations"] + [
            {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]

    assert "tolerations" not in rules(tenant.run_and_edit(pod, add_one))


def test_a_pod_from_before_the_rule_still_takes_kais_updates(tenant):
    pod = on_kai(tenant, containers=[container()])
    pod["spec"]["tolerations"] = tolerating(100)
    created = tenant.host_pod(pod)
    grouped = kai_group(created)
    assert "tolerations" not in rules(tenant.update(created, grouped) + tenant.update(grouped, kai_bind(grouped)))


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_carries_the_tolerations_a_tenant_adds_to_a_running_pod(tag):
    source = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/controllers/resources/pods/translate/diff.go")
    diff = go_function(source, "(t *translator) calcSpecDiff")
    assert re.search(r"newTolerations := append\(\[\]corev1\.Toleration\{\}, vObj\.Spec\.Tolerations\.\.\.\)", diff)
    assert "pObj.Spec.Tolerations = newTolerations" in diff
