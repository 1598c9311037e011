"""Attacks through the NVIDIA Container Toolkit's device features: a container holding any GPU asks the runtime for more.

With a device list in the container, the toolkit (v1.17.0 to v1.20.0 in its legacy mode and in jit-cdi, what
``auto`` resolves to from v1.18.0) adds the node's RDMA devices for ``NVIDIA_MOFED=enabled`` (``/dev/infiniband``:
traffic past every NetworkPolicy), GPUDirect Storage's for ``NVIDIA_GDS``, GDRCopy's for ``NVIDIA_GDRCOPY``, the
NVSwitch fabric's for ``NVIDIA_NVSWITCH`` and the IMEX channels ``NVIDIA_IMEX_CHANNELS`` names (GPU memory other
processes export). It reads them from the whole environment, the image's ENV included, which no admission policy
sees; so the host asks every container holding a GPU to switch them off in its own env (``[device-features]``), and
the vCluster's default adds that to new pods. Each attack is sent by a tenant that deleted that default
(``defaults=False``), built as vCluster syncs it and KAI's webhook mutates it (tests/tenant_sim.py).
"""

from __future__ import annotations

import pytest

from components.admission_devices import TOOLKIT_FEATURES
from tests.tenant_sim import Tenant, container
# The attack tests' tenants (dev, eks and a privileged team of a mixed stack) and their pod builders.
from tests.test_admission_attacks import mixed_run, on_kai, rules, tenant  # noqa: F401 (fixtures)

SWITCHED_OFF = [{"name": name, "value": value} for name, value in TOOLKIT_FEATURES.items()]


def gpu_pods(tenant: Tenant, entries: list) -> dict[str, dict]:
    """The same env in each way a container holds a GPU."""
    return {
        "whole-gpu": on_kai(tenant, containers=[container("model", gpus="1", env_entries=entries)]),
        "fraction": on_kai(tenant, annotations={"gpu-fraction": "0.5"},
                           containers=[container("model", env_entries=entries)]),
        "gpu-memory-in-a-named-sidecar": on_kai(
            tenant, annotations={"gpu-memory": "4096", "gpu-fraction-container-name": "tokenizer"},
            containers=[container("model"), container("tokenizer", env_entries=entries)]),
        "mig-init-container": on_kai(tenant, containers=[container()], initContainers=[
            container("warmup", mig="nvidia.com/mig-1g.10gb", env_entries=entries)]),
    }


ATTACKS = {
    # The image's ENV NVIDIA_MOFED=enabled (or any feature) stands when the pod says nothing.
    "nothing-said": [],
    "rdma": [{"name": "NVIDIA_MOFED", "value": "enabled"}],
    "imex-channel-0": [*SWITCHED_OFF[:4], {"name": "NVIDIA_IMEX_CHANNELS", "value": "0"}],
    "one-feature-left-to-the-image": SWITCHED_OFF[1:],
    "a-later-duplicate-wins": [*SWITCHED_OFF, {"name": "NVIDIA_NVSWITCH", "value": "enabled"}],
    "from-a-configmap": [*SWITCHED_OFF[:1], {"name": "NVIDIA_MOFED", "valueFrom": {"configMapKeyRef": {
        "name": "features", "key": "rdma"}}}, *SWITCHED_OFF[2:]],
    "gds-enabled": [{"name": "NVIDIA_GDS", "value": "enabled"}, *SWITCHED_OFF[1:]],
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_gpu_container_that_leaves_a_device_feature_on_is_refused(tenant, attack):
    for kind, pod in gpu_pods(tenant, ATTACKS[attack]).items():
        assert "device-features" in rules(tenant.create(pod, defaults=False)), kind


def test_a_gpu_container_that_switches_every_feature_off_is_admitted(tenant):
    for kind, pod in gpu_pods(tenant, SWITCHED_OFF).items():
        assert tenant.create(pod, defaults=False) == [], kind


def test_containers_without_a_gpu_need_nothing(tenant):
    # KAI writes NVIDIA_VISIBLE_DEVICES=void into them, and without a device the toolkit adds no feature.
    pods = [on_kai(tenant), on_kai(tenant, containers=[container("model", gpus="1", env_entries=SWITCHED_OFF),
                                                      container("sidecar")])]
    assert [tenant.create(pod, defaults=False) for pod in pods] == [[], []]


@pytest.mark.parametrize("attack", ["nothing-said", "rdma", "gds-enabled", "from-a-configmap"])
def test_the_vclusters_default_switches_a_tenants_own_features_off(tenant, attack):
    for kind, pod in gpu_pods(tenant, ATTACKS[attack]).items():
        messages = tenant.create(pod)
        # A reference merged with the default's literal is an invalid env entry: the pod is not created at all.
        assert messages == [] if attack != "from-a-configmap" else messages, kind
        if messages:
            continue
        host = tenant.host_pod(pod)
        holding = [c for c in host["spec"]["containers"] + host["spec"].get("initContainers", [])
                   if c["name"] in ("model", "tokenizer", "warmup")]
        for entry in (e for c in holding for e in c.get("env", []) if e["name"] in TOOLKIT_FEATURES):
            assert entry.get("value") == TOOLKIT_FEATURES[entry["name"]], (kind, entry)
