"""The CEL cost figures the docs and docstrings give are cel-go's own measure (tests/celgo.py), within the API
server's per-call limit (tests/celgo_cost.py).

Each figure is one rule's cost for one object: the large honest pods, the pod the pod-size and pod-entry-size rules
count at the most (twenty containers at 8,192 list entries, each an env variable reading a resource field, the
request filled to 3 MiB), the ConfigMap or Secret the object-size rule counts at the most (4,096 keys, 1 MiB of
values, a full set of labels and annotations) and the largest Endpoints and EndpointSlice the rules admit.
"""

from __future__ import annotations

import json
from typing import Optional

import pytest

from config.stack_file import PROJECT_DIR
from config.synced_data import SYNCED_METADATA_KEYS, SYNCED_OBJECT_KEYS
from tests import test_pod_entry_sizes as entry_sizes
from tests import test_synced_endpoint_text as endpoint_text
from tests import test_synced_object_sizes as object_sizes
from tests import test_synced_objects_admission as synced
from tests.celgo import celgo, recorded  # noqa: F401 (the session's evaluator)
from tests.celgo_cost import PER_CALL_LIMIT
from tests.conftest import dev_config
from tests.synced_objects_sim import synced_objects_admission_for
from tests.tenant_sim import KAI_SCHEDULER, container, tenant_of, virtual_pod
from tests.test_pod_sizes import service_links
from tests.test_pod_text_attacks import honest_pod

TEAM = "team-nlp"
REQUEST_BYTES = 3 * 2 ** 20  # k8s.io/apiserver pkg/server/config.go MaxRequestBodyBytes


def per_rule(celgo, spec: dict, inputs: list[dict]) -> list[dict[str, int]]:  # noqa: F811
    """Each rule's cost (by the name in the brackets its message starts with) for each of ``inputs``, as the API
    server charges it when the rule runs alone: its own and that of the variables it reads, each evaluated once."""
    texts = [validation.get("message") or validation["messageExpression"] for validation in spec["validations"]]
    rules = [text[text.index("[") + 1:text.index("]")] for text in texts]
    costs = [[outcome["cost"] + outcome["variablesCost"] for result in celgo.judge({**spec, "validations": [each]}, inputs)
              for outcome in result["validations"]] for each in spec["validations"]]
    return [dict(zip(rules, charged)) for charged in zip(*costs)]


def rule_costs(celgo, spec: dict, objects: list[dict], request: dict,  # noqa: F811
               namespace: Optional[dict] = None) -> list[dict[str, int]]:
    return per_rule(celgo, spec, [{"object": obj, "oldObject": None, "request": request, "namespaceObject": namespace}
                                  for obj in objects])


def widest_pod(tenant) -> dict:
    """The pod the size rules count at the most: 8,192 entries in twenty containers, each an env variable whose
    reference lies deepest, and text filling the request."""
    per_container = 401  # with the eight KUBERNETES_* variables vCluster adds to each: 8,180 entries
    reference = {"resourceFieldRef": {"containerName": "c0", "resource": "limits.cpu", "divisor": "1"}}
    containers = [container(f"c{index}") for index in range(20)]
    for index, box in enumerate(containers):
        box["env"] = [{"name": f"E{index}_{entry}", "valueFrom": reference} for entry in range(per_container)]
    host = tenant.host_pod(virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, containers=containers))
    size = len(json.dumps(host, separators=(",", ":")).encode())
    host["spec"]["containers"][0]["env"].append({"name": "PAD", "value": "x" * (REQUEST_BYTES - size - 100)})
    return host


def widest_secret(syncer) -> dict:
    value = b"v" * (2 ** 20 // SYNCED_OBJECT_KEYS)
    obj = object_sizes.secret({f"k{index:05d}": value for index in range(SYNCED_OBJECT_KEYS)})
    def keys(copied: dict) -> int:
        return len(copied["metadata"].get("labels", {})) + len(copied["metadata"].get("annotations", {}))
    annotations = SYNCED_METADATA_KEYS - keys(syncer.copy(obj))
    while True:  # vCluster's own annotations on the copy grow with the tenant's
        obj["metadata"]["annotations"] = {f"a{index}": "x" * 60 for index in range(annotations)}
        if keys(syncer.copy(obj)) <= SYNCED_METADATA_KEYS:
            return syncer.copy(obj)
        annotations -= 1


@pytest.fixture(scope="module")
def measured(celgo, dev_run) -> dict[str, int]:  # noqa: F811 (the fixture above)
    tenant = tenant_of(dev_run, dev_config(), TEAM)
    request = {"operation": "CREATE", "subResource": "", "namespace": tenant.team.namespace,
               "userInfo": {"username": tenant.syncer}}
    sizes = tenant.size_admission
    large, linked, widest = rule_costs(celgo, sizes.spec, [
        tenant.host_pod(honest_pod(tenant)),
        tenant.host_pod(entry_sizes._pod(tenant, container("side", env=service_links(100)))),
        widest_pod(tenant)], request, sizes.namespace(tenant.team.namespace))
    syncer = object_sizes.Syncer(dev_run, dev_config())
    [secret] = rule_costs(celgo, syncer.admission.spec, [widest_secret(syncer)], {**request,
                          "userInfo": {"username": syncer.user}})
    objects = synced.Synced(synced_objects_admission_for(dev_run, TEAM), synced.team_of(dev_config(), TEAM))
    with recorded() as reviews:
        endpoint_text.test_the_largest_objects_the_rules_admit_are_what_the_worst_case_counts(objects)
    by_policy: dict[int, list] = {}
    for review in reviews:
        by_policy.setdefault(id(review.spec), []).append(review)
    largest = [costs for group in by_policy.values()
               for costs in per_rule(celgo, group[0].spec, [review.inputs for review in group])]
    return {"honest pod-size": large["pod-size"], "linked pod-size": linked["pod-size"],
            "widest pod-size": widest["pod-size"], "widest pod-entry-size": widest["pod-entry-size"],
            "widest object-size": secret["object-size"],
            "largest endpoint-text": max(costs["endpoint-text"] for costs in largest),
            "largest endpoint-addresses": max(costs["endpoint-addresses"] for costs in largest)}


def about(cost: int) -> str:
    """A figure as the docs round it: to the hundred below 100,000, to the thousand above."""
    return f"{round(cost, -2 if cost < 100_000 else -3):,}"


SECURITY_MODEL = PROJECT_DIR / "docs" / "security-object-sizes.md"
FIGURES = {
    "honest pod-size": [SECURITY_MODEL, PROJECT_DIR / "components" / "admission_pod_size.py"],
    "linked pod-size": [SECURITY_MODEL, PROJECT_DIR / "components" / "admission_pod_size.py"],
    "widest pod-size": [SECURITY_MODEL, PROJECT_DIR / "components" / "admission_pod_size.py"],
    "widest pod-entry-size": [PROJECT_DIR / "components" / "admission_pod_size.py"],
    "widest object-size": [SECURITY_MODEL, PROJECT_DIR / "components" / "synced_object_sizes.py"],
    "largest endpoint-text": [PROJECT_DIR / "components" / "synced_endpoints.py"],
    "largest endpoint-addresses": [PROJECT_DIR / "components" / "synced_endpoints.py"],
}


def test_every_figure_is_within_the_per_call_limit(measured):
    assert set(measured) == set(FIGURES)
    # Each figure is at least one expression's cost; the size rules' spans their variables, each limited alone.
    assert 1_000 < min(measured.values()) and max(measured.values()) < PER_CALL_LIMIT * 6 // 10, measured


@pytest.mark.parametrize("figure", sorted(FIGURES))
def test_the_docs_give_the_measured_figure(measured, figure):
    for path in FIGURES[figure]:
        assert about(measured[figure]) in path.read_text(), f"{path.name}: {figure} is {measured[figure]:,}"
