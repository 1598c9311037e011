"""A pod names a bounded number of ConfigMaps and Secrets (rule ``object-references``).

The node's kubelet opens a list and a watch of its own on the host API server for every object a pod it runs names
(kubernetes pkg/kubelet/util/manager/watch_based_manager.go, read untagged: that repository is not mirrored), whether
the object exists or not. A projected volume takes any number of sources and a container any number of env
references, which vCluster renames into the team's namespace and copies: one pod of thousands of references had a
shared node's kubelet hold thousands of watches on the API server every team shares.

- Attack: a pod naming more objects than the bound through one projected volume, through env references, through
  envFrom sources, and a debug container adding them to a running pod, as vCluster syncs them and KAI mutates them,
  are refused.
- Honest: a fractional pod at the bound (KAI adds its device-list ConfigMap and references), and KAI's updates of a
  pod from before the rule, pass; the seeds' and KAI's documented pods are tests/test_admission_honest.py's.
- Upstream, at every mirrored k8s.io/api tag: nothing bounds a projected volume's sources or a container's env.
"""

from __future__ import annotations

import copy
import re

import pytest

from config.synced_data import HOST_ADDED_REFERENCES, SYNCED_POD_REFERENCES
from tests.conftest import MIRRORED_TAGS, dev_config, git
from tests.test_admission_attacks import on_kai, rules
from tests.tenant_sim import container, kai_bind, kai_group, tenant_of

API = "kubernetes/api"
RULE = "object-references"
CAP = SYNCED_POD_REFERENCES + HOST_ADDED_REFERENCES


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, dev_config(), "team-nlp")


def projected(count: int) -> list[dict]:
    """One projected volume naming ``count`` ConfigMaps that need not exist."""
    sources = [{"configMap": {"name": f"missing-{index}", "optional": True}} for index in range(count)]
    return [{"name": "many", "projected": {"sources": sources}}]


def referencing(count: int, name: str = "main") -> dict:
    """A container taking ``count`` keys, each from a Secret of its own."""
    result = container(name)
    result["env"] = [{"name": f"KEY_{index}", "valueFrom": {"secretKeyRef": {"name": f"s-{index}", "key": "k",
                                                                             "optional": True}}}
                     for index in range(count)]
    return result


def sourced(count: int) -> dict:
    result = container()
    result["envFrom"] = [{"configMapRef": {"name": f"c-{index}", "optional": True}, "prefix": f"C{index}_"}
                         for index in range(count)]
    return result


def test_a_pod_naming_too_many_objects_is_refused(tenant):
    assert RULE in rules(tenant.create(on_kai(tenant, volumes=projected(CAP + 1))))
    assert RULE in rules(tenant.create(on_kai(tenant, volumes=projected(4000))))
    assert RULE in rules(tenant.create(on_kai(tenant, containers=[referencing(CAP + 1)])))
    assert RULE in rules(tenant.create(on_kai(tenant, containers=[sourced(CAP + 1)])))
    # Spread over kinds: half in a projected volume, half by env reference.
    half = CAP // 2 + 1
    assert RULE in rules(tenant.create(on_kai(tenant, containers=[referencing(half)], volumes=projected(half))))


def test_a_debug_container_may_not_add_them(tenant):
    host = kai_bind(kai_group(tenant.host_pod(on_kai(tenant))))
    debugged = copy.deepcopy(host)
    shell = referencing(CAP + 1, "shell")
    del shell["resources"]
    shell["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    debugged["spec"]["ephemeralContainers"] = [shell]
    assert RULE in rules(tenant.update(host, debugged, subresource="ephemeralcontainers"))


def test_a_fractional_pod_at_the_bound_passes_with_what_kai_adds(tenant):
    pod = on_kai(tenant, annotations={"gpu-fraction": "0.5"},
                 containers=[referencing(SYNCED_POD_REFERENCES // 2)], volumes=projected(SYNCED_POD_REFERENCES // 2))
    host = tenant.host_pod(pod)
    added = sum(1 for entry in host["spec"]["containers"][0].get("env", [])
                if "configMapKeyRef" in entry.get("valueFrom", {}))
    assert added > 0 and RULE not in rules(tenant.create(pod))


def test_a_pod_from_before_the_rule_takes_kais_updates(tenant):
    created = tenant.host_pod(on_kai(tenant, volumes=projected(CAP + 50)))
    grouped = kai_group(created)
    assert RULE not in rules(tenant.update(created, grouped) + tenant.update(grouped, kai_bind(grouped)))


def _comment_above(types: str, field: str) -> str:
    return types[:types.index(field)].rsplit("\n\n", 1)[-1]


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_nothing_bounds_projected_sources_or_env_references(tag):
    core = git(API, "show", f"{tag}:core/v1/types.go")
    for field in ("\tSources []VolumeProjection ", "\tEnv []EnvVar ", "\tEnvFrom []EnvFromSource "):
        assert field in core
        assert not re.search(r"maximum|at most|no more than", _comment_above(core, field)), field
