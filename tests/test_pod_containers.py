"""A pod has a bounded number of containers, init and ephemeral ones included (rule ``containers``).

The API server does not bound a pod's containers, ``pod-size`` counts a bare one as one of its 8,192 list entries,
and with zero requests and a one-byte ephemeral-storage limit each, a team's quota holds thousands. The kubelet and
runtime of a node other teams share start every one, and kube-state-metrics writes series of each container's
requests and limits (from the spec: a Pending pod's too) and status into the shared Prometheus.

- Attack: a pod past the bound, and a debug container added to a pod at or past it, are refused.
- Honest: the seeds' and KAI's pods (tests/test_admission_honest.py), a pod with sidecars, init steps and a debug
  shell, and KAI's updates of a pod from before the rule, pass.

One tenant only: a review of a pod of sixty-odd containers takes seconds in the two CEL implementations, and the
rule names no team.
"""

from __future__ import annotations

import copy

import pytest

from config.synced_data import HOST_ADDED_CONTAINERS, SYNCED_POD_CONTAINERS
from tests.conftest import MIRRORED_TAGS, dev_config, git
from tests.test_admission_attacks import on_kai, rules
from tests.tenant_sim import container, kai_bind, kai_group, tenant_of

KSM = "kubernetes/kube-state-metrics"
CAP = SYNCED_POD_CONTAINERS + HOST_ADDED_CONTAINERS


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, dev_config(), "team-nlp")


def bare(count: int, prefix: str = "c") -> list[dict]:
    """Containers a quota holds thousands of: nothing requested, a byte of disk."""
    return [{"name": f"{prefix}{index}", "image": "busybox:1.36",
             "resources": {"requests": {"cpu": "0", "memory": "0"}, "limits": {"ephemeral-storage": "1"}}}
            for index in range(count)]


def debugged(host: dict) -> dict:
    shell = {"name": "shell", "image": "busybox:1.36", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}
    result = copy.deepcopy(host)
    result["spec"]["ephemeralContainers"] = [*result["spec"].get("ephemeralContainers", []), shell]
    return result


def test_a_pod_past_the_bound_is_refused_and_one_at_it_passes(tenant):
    pod = on_kai(tenant, containers=bare(2))
    pod["spec"]["initContainers"] = bare(CAP - 1, "init")
    assert "containers" in rules(tenant.create(pod))
    pod["spec"]["initContainers"] = pod["spec"]["initContainers"][:-1]
    assert "containers" not in rules(tenant.create(pod))


def test_a_pod_from_before_the_rule_takes_kais_updates_but_no_debug_container(tenant):
    created = tenant.host_pod(on_kai(tenant, containers=bare(CAP + 1)))
    grouped = kai_group(created)
    bound = kai_bind(grouped)
    assert "containers" not in rules(tenant.update(created, grouped) + tenant.update(grouped, bound))
    assert "containers" in rules(tenant.update(bound, debugged(bound), subresource="ephemeralcontainers"))


def test_a_pod_with_sidecars_init_steps_and_a_debug_shell_passes(tenant):
    pod = on_kai(tenant, containers=[container(), *bare(3, "sidecar")])
    pod["spec"]["initContainers"] = bare(2, "init")
    assert "containers" not in rules(tenant.create(pod))
    host = tenant.host_pod(pod)
    assert "containers" not in rules(tenant.update(host, debugged(host), subresource="ephemeralcontainers"))


@pytest.mark.parametrize("tag", MIRRORED_TAGS[KSM])
def test_kube_state_metrics_writes_series_for_every_container_of_a_pending_pod(tag):
    pod = git(KSM, "show", f"{tag}:internal/store/pod.go")
    for family in ("kube_pod_container_resource_requests", "kube_pod_container_resource_limits"):
        block = pod[pod.index(f'"{family}"'):][:800]
        assert "for _, c := range p.Spec.Containers" in block, family
