"""``as_served`` (tests/served_objects.py) is the real round trip: each honest host object the simulations build,
decoded into its Go type and converted back by the API server's own code (tests/apiserver_vap.py ``served``, the
plugin harness built inside vCluster v0.36.1's tree, k8s.io/apimachinery v0.36.0 vendored), equals the model's.

Needs Go and the vCluster mirror (tests/go_toolchain.py); skips naming what is missing.
"""

from __future__ import annotations

import pytest

from tests.apiserver_vap import harness, served
from tests.conftest import ACCEPTED_TAGS, stack_config
from tests.kai_pods import WebhookRefusal
from tests.served_objects import as_served
from tests.synced_objects_corpus import honest_objects
from tests.tenant_sim import tenant_of
from tests.test_admission_honest import KAI, controller_pods, in_queue, kai_doc_pods


@pytest.fixture(scope="module")
def tenant(dev_run):
    harness()  # the skip naming what is missing, before any object is built
    return tenant_of(dev_run, stack_config("dev"), "team-nlp")


def _mismatches(objects: dict[str, dict]) -> dict:
    real = served(list(objects.values()))
    return {name: {"real": go, "model": model} for (name, obj), go in zip(objects.items(), real)
            if (model := as_served(obj["kind"], obj)) != go}


def test_the_honest_synced_objects_are_served_as_modelled(tenant):
    objects = {name: simulate(virtual, tenant.team)
               for name, (_, virtual, _, simulate) in honest_objects(tenant.team).items()}
    assert len(objects) > 10
    assert _mismatches(objects) == {}


def test_the_honest_host_pods_are_served_as_modelled(tenant):
    pods = {}
    for path, found in kai_doc_pods(ACCEPTED_TAGS[KAI][-1]).items():
        for index, pod in enumerate(found):
            try:
                pods[f"{path}#{index}"] = tenant.host_pod(in_queue(pod, tenant))
            except WebhookRefusal:
                continue
    pods.update({f"controller {kind}": tenant.host_pod(pod) for kind, pod in controller_pods(tenant).items()})
    assert len(pods) > 10
    assert _mismatches(pods) == {}
