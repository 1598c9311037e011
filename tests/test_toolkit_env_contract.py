"""The NVIDIA Container Toolkit's container variables, read from its source at every release an accepted GPU Operator ships.

The toolkit builds a container's devices from the container's whole environment, the image's ENV included
(``internal/config/image``). components/admission_devices.py guards the variables that add devices
(``NVIDIA_VISIBLE_DEVICES``, the feature variables of ``[device-features]``) and lists every other one with why it
needs no rule; a release that reads one more fails here, and so does one that changes how the guarded ones are read.
"""

from __future__ import annotations

import re

import pytest
import yaml

from components.admission_devices import TOOLKIT_FEATURES, TOOLKIT_UNGUARDED, VISIBLE_DEVICES
from config import versions
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag

TOOLKIT = "NVIDIA/nvidia-container-toolkit"
OPERATOR = "NVIDIA/gpu-operator"
# Where the toolkit reads a container's variables: the runtime, its hook and the libraries both use.
READERS = ("internal", "pkg", "cmd/nvidia-container-runtime", "cmd/nvidia-container-runtime-hook")
IMEX_CHANNELS = "NVIDIA_IMEX_CHANNELS"
FEATURE_SWITCHES = sorted(set(TOOLKIT_FEATURES) - {IMEX_CHANNELS})


def _shipped_toolkit(release: str) -> str:
    values = yaml.safe_load(git(OPERATOR, "show", f"{mirrored_tag(OPERATOR, release)}:deployments/gpu-operator/values.yaml"))
    return values["toolkit"]["version"].split("-", 1)[0]


def _sources(tag: str) -> str:
    files = git(TOOLKIT, "ls-tree", "-r", "--name-only", tag, "--", *READERS).split()
    return "\n".join(git(TOOLKIT, "show", f"{tag}:{path}") for path in files
                     if path.endswith(".go") and not path.endswith("_test.go"))


def _classified(name: str) -> bool:
    known = {VISIBLE_DEVICES, *TOOLKIT_FEATURES, *TOOLKIT_UNGUARDED}
    return name in known or any(key.endswith("*") and name.startswith(key[:-1]) for key in known)


def test_the_toolkit_of_every_accepted_gpu_operator_release_is_read():
    shipped = {_shipped_toolkit(release) for release in versions.GPU_OPERATOR_RELEASES}
    assert shipped == set(MIRRORED_TAGS[TOOLKIT])


@pytest.mark.parametrize("tag", MIRRORED_TAGS[TOOLKIT])
def test_every_variable_the_toolkit_reads_from_a_container_is_classified(tag):
    source = _sources(mirrored_tag(TOOLKIT, tag))
    named = set(re.findall(r'"(NVIDIA_[A-Z0-9_]+|CUDA_VERSION)"', source))
    assert {VISIBLE_DEVICES, *TOOLKIT_FEATURES} <= named
    assert sorted(name for name in named if not _classified(name)) == []


@pytest.mark.parametrize("tag", MIRRORED_TAGS[TOOLKIT])
def test_each_feature_is_on_only_for_the_exact_value_enabled_and_only_with_a_device(tag):
    modifiers = git(TOOLKIT, "show", f"{mirrored_tag(TOOLKIT, tag)}:internal/modifier/gated.go")
    sources = _sources(tag)
    # Each switch compared to "enabled" and nothing else, so "disabled" keeps it off.
    switches = set(re.findall(r'Getenv\("(NVIDIA_[A-Z]+)"\) == "enabled"', sources))
    assert switches == set(FEATURE_SWITCHES)
    assert not re.search(r'Getenv\("NVIDIA_(GDS|MOFED|GDRCOPY|NVSWITCH)"\) != ', sources)
    # A container without a device list (KAI's void in every container without a GPU) gets none of them.
    assert "No modification required; no devices requested" in modifiers
    assert all(TOOLKIT_FEATURES[name] == "disabled" for name in FEATURE_SWITCHES)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[TOOLKIT])
def test_an_imex_channel_list_of_void_names_no_channel(tag):
    tag = mirrored_tag(TOOLKIT, tag)
    envvars = git(TOOLKIT, "show", f"{tag}:internal/config/image/envvars.go")
    devices = git(TOOLKIT, "show", f"{tag}:internal/config/image/devices.go")
    assert re.search(rf'EnvVarNvidiaImexChannels\s*=\s*"{IMEX_CHANNELS}"', envvars)
    assert 'envvar == "" || envvar == "void"' in devices and TOOLKIT_FEATURES[IMEX_CHANNELS] == "void"
