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

from components.admission_devices import BLANK_VISIBLE_DEVICES, TOOLKIT_FEATURES, TOOLKIT_UNGUARDED, VISIBLE_DEVICES
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


def _list_of(devices_go: str, kind: str) -> str:
    """The body of ``kind``'s List method in the toolkit's devices.go."""
    return re.search(rf"func \(\w+ {kind}\) List\(\) \[\]string \{{(.*?)\n\}}", devices_go, re.S).group(1)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[TOOLKIT])
def test_none_is_a_device_request_and_void_is_none_so_only_void_is_blank(tag):
    """``none`` is read as a request for no GPU: a list of one empty id, which passes the feature gate's "no devices
    requested" test, so the features a container's env turns on are added to it; ``void`` is an empty list. Before
    v1.18.2 the jit-cdi mode also turned that empty id into a request for every device of the node's spec."""
    tag = mirrored_tag(TOOLKIT, tag)
    devices = git(TOOLKIT, "show", f"{tag}:internal/config/image/devices.go")
    assert re.search(r'envvar == "none"\s*\{\s*return none\{\}', devices)
    assert 'return []string{""}' in _list_of(devices, "none") and "return nil" in _list_of(devices, "void")
    gated = git(TOOLKIT, "show", f"{tag}:internal/modifier/gated.go")
    assert re.search(r"devices := .*VisibleDevices\w*\(\); len\(devices\) == 0", gated)
    assert BLANK_VISIBLE_DEVICES == "void"


def test_the_toolkits_that_turn_none_into_every_device_are_among_those_read():
    """v1.18.0 and v1.18.1 send the empty id of ``none`` to CDI unchanged (their cdi.go has no "none" name for it),
    where an empty request means all devices; later releases name it."""
    cdi = {tag: git(TOOLKIT, "show", f"{mirrored_tag(TOOLKIT, tag)}:internal/modifier/cdi.go")
           for tag in MIRRORED_TAGS[TOOLKIT]}
    unguarded = [tag for tag, source in cdi.items() if 'name = "none"' not in source]
    assert {"v1.18.0", "v1.18.1"} <= set(unguarded)
    assert not {"v1.19.0", "v1.19.1", "v1.20.0"} & set(unguarded)
