"""Spec of the device-plugin sharing profiles (config/sharing.py) and their content-hashed keys."""

from __future__ import annotations

import re

import pytest
import yaml

from config import load_platform
from config.sharing import EXCLUSIVE, TIME_SLICED, config_map_data, default_key, profile_documents, profile_keys
from tests.config_spec import dev_config, put


def _time_slicing(replicas: int = 4, default_profile: str = EXCLUSIVE):
    config = put(dev_config(), "gpuOperator.timeSlicing", {"replicas": replicas, "defaultProfile": default_profile})
    return load_platform(config).gpu_operator.time_slicing


def test_profile_keys_carry_a_content_hash():
    keys = profile_keys(_time_slicing())
    assert set(keys) == {EXCLUSIVE, TIME_SLICED}
    for name, key in keys.items():
        assert re.fullmatch(rf"{name}-[0-9a-f]{{8}}", key)
    assert set(config_map_data(_time_slicing())) == set(keys.values()) | {EXCLUSIVE, TIME_SLICED}


def test_changing_replicas_changes_only_the_time_sliced_key():
    four, eight = profile_keys(_time_slicing(4)), profile_keys(_time_slicing(8))
    assert four[EXCLUSIVE] == eight[EXCLUSIVE]
    assert four[TIME_SLICED] != eight[TIME_SLICED]
    assert profile_keys(_time_slicing(4)) == four  # stable


def test_time_sliced_document():
    documents = profile_documents(_time_slicing(3))
    assert documents[EXCLUSIVE] == {"version": "v1"}
    sliced = documents[TIME_SLICED]["sharing"]["timeSlicing"]
    assert sliced["renameByDefault"] is False and sliced["failRequestsGreaterThanOne"] is True
    assert sliced["resources"] == [{"name": "nvidia.com/gpu", "replicas": 3}]
    rendered = yaml.safe_load(config_map_data(_time_slicing(3))[profile_keys(_time_slicing(3))[TIME_SLICED]])
    assert rendered == documents[TIME_SLICED]


@pytest.mark.parametrize("profile", [EXCLUSIVE, TIME_SLICED])
def test_default_key_follows_the_default_profile(profile):
    time_slicing = _time_slicing(default_profile=profile)
    assert default_key(time_slicing) == profile_keys(time_slicing)[profile]
    assert default_key(time_slicing).startswith(profile + "-")
