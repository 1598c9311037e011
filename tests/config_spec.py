"""Helpers of the config specs: the committed dev stack as raw config, paths into it, and checks that a
rejection names its key, the bad value and a fix."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from config import ConfigError, load_platform, versions
from config.errors import MISSING
from config.stack_file import read_stack_file
from config.vocabulary import project_config

DEV_STACK = Path(__file__).resolve().parent.parent / "Pulumi.dev.yaml"
_DEV = project_config(read_stack_file(DEV_STACK)["config"])


def dev_config() -> dict:
    """The committed dev stack: MicroK8s, one GPU, three teams of 0.33 under ml-org (quota 1)."""
    return copy.deepcopy(_DEV)


def default_pods_dev_config() -> dict:
    """The dev stack with its teams at the default pod count (100 a team) rather than the stack's 23."""
    return drop(dev_config(), "vcluster.resourceQuota.pods")


def eks_config() -> dict:
    """A valid EKS stack: one g4dn.xlarge GPU node group, GPU operator installed by Helm."""
    config = dev_config()
    config["cluster"] = {"kind": "eks", "eks": {"region": "us-east-2", "gpuNodeGroups": [
        {"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1}]}}
    config["gpuOperator"] = {"mode": "install", "timeSlicing": {"replicas": 2, "defaultProfile": "exclusive"}}
    return config


def eks_without_containerd_cdi(config: dict, version: str) -> dict:
    """``config``, an EKS site, stating Kubernetes ``version``, with a GPU Operator its nodes deliver GPUs with."""
    put(config, "cluster.eks.kubernetesVersion", version)
    if versions.release_numbers(version) < versions.release_numbers(versions.EKS_CONTAINERD_CDI_VERSION):
        put(config, "gpuOperator.version", versions.GPU_OPERATOR_NEWEST_ENVVAR_DEVICE_LIST)
    return config


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def put(config: dict, path: str, value: object) -> dict:
    """Set ``teams[1].resources.gpu.limit``-style paths, creating missing maps on the way."""
    steps = [name or int(index) for name, index in _STEP.findall(path)]
    node = config
    for step in steps[:-1]:
        node = node[step] if isinstance(step, int) else node.setdefault(step, {})
    node[steps[-1]] = value
    return config


def drop(config: dict, path: str) -> dict:
    *parent, last = path.split(".")
    node = config
    for step in parent:
        node = node[step]
    del node[last]
    return config


def rejected(config: dict, *, secrets=()) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_platform(config, secrets_set=set(secrets))
    return info.value


def issue(error: ConfigError, key: str, value: object = MISSING):
    """The issue at ``key``; checks that its message names the value and a fix."""
    matches = [found for found in error.issues if found.key == key]
    assert matches, f"no issue at {key!r}; got {error.keys}"
    found = matches[0]
    assert found.value == value
    assert found.problem and found.fix
    text = str(found)
    assert text.startswith(f"gpu-tenancy:{key} = ")
    assert ("<not set>" if value is MISSING else "null" if value is None else repr(value)[:60]) in text
    assert "Fix: " + found.fix in text and text in str(error)
    return found


def assert_rejected(config: dict, key: str, value: object = MISSING, *, fix: str = "", secrets=()):
    found = issue(rejected(config, secrets=secrets), key, value)
    assert fix in found.fix
    return found
