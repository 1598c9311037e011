"""Which GPUs a container that requests ``nvidia.com/gpu`` sees on an EKS node, read link by link from upstream.

The question: an image with ``ENV NVIDIA_VISIBLE_DEVICES=all`` (NVIDIA's CUDA base images) requests one whole GPU on an
AL2023 NVIDIA node, where the program installs the GPU Operator with ``cdi.enabled`` and the AMI's own container
toolkit. Does the container see every GPU of the node? The chain, each link a test below:

1. The operator (from versions.GPU_OPERATOR_CDI_DEVICE_LIST) gives its device plugin the CDI strategies only, with
   or without its own toolkit; before it, ``envvar`` too.
2. With CDI strategies only, the device plugin sets no ``NVIDIA_VISIBLE_DEVICES``; it names the GPU to the kubelet as
   a CDI device, and its CDI spec's common edits set ``NVIDIA_VISIBLE_DEVICES=void``. With ``envvar`` it writes the
   allocated list into that variable.
3. containerd injects CDI devices only with ``enable_cdi``, after the image's and the container's env, and a CDI env
   edit replaces a variable of the same name. Container annotations reach the runtime only when the runtime lists
   them in ``container_annotations``.
4. nodeadm makes the NVIDIA runtime containerd's default, lists no annotations, and turns ``enable_cdi`` on only
   from Kubernetes versions.EKS_CONTAINERD_CDI_VERSION; the AMI installs the toolkit with its default config.
5. The toolkit (default config: mode ``auto``, device lists from env accepted in unprivileged containers) takes the
   device list from the container's env, the last value of a name winning; ``void`` names none, ``all`` every GPU.

So on 1.32 and later the CDI edit turns the image's ``all`` into ``void`` and the container sees its own GPU only;
below 1.32 nothing delivers the GPU but the image's variable: every GPU with a CUDA image, none without.
config/load_operators.py refuses that pair (tested at the end). MicroK8s has the same gap below track 1.33, whose
containerd (1.6) has no CDI at all; the GPU Operator's own toolkit turns it on where containerd has it.
"""

from __future__ import annotations

import re

import pytest
import yaml

from components.admission_devices import VISIBLE_DEVICES as VISIBLE
from config import load_platform, versions
from config.image_volumes import MICROK8S_CONTAINERD
from tests import config_spec
from tests.conftest import CONTAINERD_CRI_V2_TAGS, MIRRORED_TAGS, git, go_function, mirrored_tag
from tests.site_corpus import existing_cluster_lab

OPERATOR = "NVIDIA/gpu-operator"
DEVICE_PLUGIN = "NVIDIA/k8s-device-plugin"
CONTAINERD = "containerd/containerd"
EKS_AMI = "awslabs/amazon-eks-ami"
TOOLKIT = "NVIDIA/nvidia-container-toolkit"
CDI_ONLY = "cdi-annotations,cdi-cri"


def _cdi_only(release: str) -> bool:
    return versions.release_numbers(release) >= versions.release_numbers(versions.GPU_OPERATOR_CDI_DEVICE_LIST)


def _operator_values(release: str) -> dict:
    return yaml.safe_load(git(OPERATOR, "show", f"{mirrored_tag(OPERATOR, release)}:deployments/gpu-operator/values.yaml"))


def _shipped_device_plugin(release: str) -> str:
    return _operator_values(release)["devicePlugin"]["version"].split("-", 1)[0]


def _newest_ami_packages() -> dict[str, dict[str, str]]:
    """The newest release in the AMI repository's CHANGELOG: per Kubernetes minor, the x86_64 NVIDIA AMI's packages."""
    changelog = git(EKS_AMI, "show", f"{mirrored_tag(EKS_AMI, MIRRORED_TAGS[EKS_AMI][-1])}:CHANGELOG.md")
    newest = re.split(r"^# AMI Release v\d+", changelog, flags=re.M)[1]
    packages = {}
    for minor, section in re.findall(r"<summary><b>Kubernetes (1\.\d+)</b></summary>(.*?)</details>", newest, re.S):
        header = re.search(r"<th>Package</th>(.*?)</tr>", section, re.S).group(1)
        assert re.findall(r"<th>([^<]+)</th>", header)[0] == "AL2023_x86_64_NVIDIA", minor
        packages[minor] = dict(re.findall(r'<td>([\w.-]+)</td>\s*<td colspan="\d+">([^<]+)</td>', section))
    return packages


# --- 1. the operator ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release", versions.GPU_OPERATOR_RELEASES)
def test_the_operator_gives_its_device_plugin_cdi_strategies_only_from_the_cdi_release(release):
    controls = git(OPERATOR, "show", f"{mirrored_tag(OPERATOR, release)}:controllers/object_controls.go")
    strategies = re.findall(r'setContainerEnv\([^,]+, DeviceListStrategyEnvName, "([^"]+)"\)', controls)
    assert strategies == [CDI_ONLY if _cdi_only(release) else "envvar,cdi-annotations"]
    if _cdi_only(release):
        # Set whenever cdi.enabled, whichever toolkit runs: only the hook path depends on the operator's own.
        cdi = go_function(controls, "transformDevicePluginCtrForCDI")
        assert cdi.index(CDI_ONLY) < cdi.index("if config.Toolkit.IsEnabled()")
        assert re.search(r"if config\.CDI\.IsEnabled\(\) \{\s*transformDevicePluginCtrForCDI\(", controls)


# --- 2. the device plugin ----------------------------------------------------------------------------------------

def _shipped_plugins() -> list[str]:
    return sorted({_shipped_device_plugin(release) for release in versions.GPU_OPERATOR_RELEASES},
                  key=versions.release_numbers)


def test_the_device_plugin_of_every_accepted_operator_is_read():
    assert _shipped_plugins() == list(MIRRORED_TAGS[DEVICE_PLUGIN])


@pytest.mark.parametrize("tag", MIRRORED_TAGS[DEVICE_PLUGIN])
def test_with_cdi_strategies_only_the_device_plugin_sets_no_device_list_variable(tag):
    server = git(DEVICE_PLUGIN, "show", f"{mirrored_tag(DEVICE_PLUGIN, tag)}:internal/plugin/server.go")
    assert re.search(rf'deviceListEnvVar\s*=\s*"{VISIBLE}"', server)
    allocate = go_function(server, "(plugin *nvidiaDevicePlugin) getAllocateResponse")
    cdi_only_return = allocate.index("if plugin.deviceListStrategies.AllCDIEnabled() {\n\t\treturn response, nil")
    assert cdi_only_return < allocate.index("plugin.updateResponseForDeviceListEnvVar(response")
    assert "response.Envs[deviceListEnvVar] = strings.Join(deviceIDs" in server


@pytest.mark.parametrize("tag", MIRRORED_TAGS[DEVICE_PLUGIN])
def test_the_device_plugins_cdi_spec_blanks_the_device_list_variable(tag):
    tag = mirrored_tag(DEVICE_PLUGIN, tag)
    nvcdi = "vendor/github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
    files = git(DEVICE_PLUGIN, "ls-tree", "--name-only", tag, f"{nvcdi}/").split()
    source = "\n".join(git(DEVICE_PLUGIN, "show", f"{tag}:{path}") for path in files if path.endswith(".go"))
    common = go_function(source, "(m *wrapper) GetCommonEdits")
    assert 'edits.Env = append(edits.Env, image.EnvVarNvidiaVisibleDevices+"=void")' in common
    # Every spec the plugin writes is a wrapper's: its GetSpec adds the common edits.
    assert re.search(r"w := wrapper\{", source)
    assert "cdilib.GetSpec()" in git(DEVICE_PLUGIN, "show", f"{tag}:internal/cdi/cdi.go")


# --- 3. containerd -----------------------------------------------------------------------------------------------

def _containerd_tags() -> list[str]:
    return list(CONTAINERD_CRI_V2_TAGS)


def test_the_containerd_of_the_newest_eks_ami_is_read():
    shipped = {packages["containerd"].split("-", 1)[0] for packages in _newest_ami_packages().values()}
    assert {f"v{version}" for version in shipped} <= set(_containerd_tags())


@pytest.mark.parametrize("tag", _containerd_tags())
def test_containerd_injects_cdi_devices_only_when_on_after_the_env_replacing_by_name(tag):
    tag = mirrored_tag(CONTAINERD, tag)
    linux = git(CONTAINERD, "show", f"{tag}:internal/cri/server/container_create_linux.go")
    create = git(CONTAINERD, "show", f"{tag}:internal/cri/server/container_create.go")
    assert re.search(r"if c\.config\.EnableCDI \{\s*specOpts = append\(specOpts, customopts\.WithCDI\("
                     r"config\.Annotations, config\.CDIDevices\)\)", linux)
    # The image's env, then the container's (the pod's and the device plugin's), in one list over the base spec.
    assert re.search(r"env := append\(\[\]string\{\}, imageConfig\.Env\.\.\.\)\s*for _, e := range config\.GetEnvs\(\)",
                     create)
    # The CDI option is a platform option, applied over the spec built with that env.
    assert re.search(r"specOpts, err := c\.platformSpecOpts\(", create)
    assert "containerd.WithSpec(spec, specOpts...)" in create
    # Container annotations reach the OCI spec only through the runtime's container_annotations patterns.
    assert re.search(r"GetPassthroughAnnotations\(config\.Annotations,\s*ociRuntime\.ContainerAnnotations\)", create)
    # A CDI env edit replaces the variable of the same name.
    edits = git(CONTAINERD, "show", f"{tag}:vendor/tags.cncf.io/container-device-interface/pkg/cdi/container-edits.go")
    assert "specgen.AddMultipleProcessEnv(e.Env)" in edits
    generate = git(CONTAINERD, "show", f"{tag}:vendor/github.com/opencontainers/runtime-tools/generate/generate.go")
    add_env = go_function(generate, "(g *Generator) addEnv")
    assert "if idx, ok := g.envMap[key]; ok {" in add_env and "g.Config.Process.Env[idx] = env" in add_env


# --- 4. the EKS AMI ----------------------------------------------------------------------------------------------

def _ami(path: str) -> str:
    return git(EKS_AMI, "show", f"{mirrored_tag(EKS_AMI, MIRRORED_TAGS[EKS_AMI][-1])}:{path}")


def test_nodeadm_turns_containerd_cdi_on_from_the_eks_cdi_version_only():
    config = _ami("nodeadm/internal/containerd/config.go")
    [floor] = re.findall(r'EnableCDI:\s*semver\.Compare\(cfg\.Status\.KubeletVersion, "v(1\.\d+)\.0"\) >= 0', config)
    assert floor == versions.EKS_CONTAINERD_CDI_VERSION
    for template in ("config.template.toml", "config2.template.toml"):
        text = _ami(f"nodeadm/internal/containerd/{template}")
        assert "enable_cdi = {{.EnableCDI}}" in text and "container_annotations" not in text
        assert 'default_runtime_name = "{{.RuntimeName}}"' in text


def test_nodeadm_makes_the_nvidia_runtime_the_default_and_the_ami_keeps_the_toolkits_default_config():
    nvidia = _ami("nodeadm/internal/containerd/runtime_config_nvidia.go")
    assert 'nvidiaRuntimeBinaryPath = "/usr/bin/nvidia-container-runtime"' in nvidia
    assert "opts.RuntimeName = nvidiaRuntimeName" in nvidia
    install = _ami("templates/al2023/provisioners/install-nvidia-driver.sh")
    assert "dnf -y install nvidia-container-toolkit" in install
    assert not re.search(r"nvidia-ctk|nvidia-container-runtime/config\.toml|accept-nvidia", install)


def test_the_newest_eks_ami_ships_a_toolkit_that_is_read_for_every_site_kubernetes_it_offers():
    packages = _newest_ami_packages()
    site_minors = [minor for minor in packages if versions.release_numbers(minor) >=
                   versions.release_numbers(versions.KUBERNETES_MINIMUM_VERSION)]
    assert versions.KUBERNETES_MINIMUM_VERSION in site_minors
    toolkits = {f"v{packages[minor]['nvidia-container-toolkit'].split('-', 1)[0]}" for minor in site_minors}
    assert toolkits <= set(MIRRORED_TAGS[TOOLKIT])


# --- 5. the toolkit ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tag", MIRRORED_TAGS[TOOLKIT])
def test_the_toolkit_takes_the_device_list_from_the_last_env_value_and_void_names_none(tag):
    tag = mirrored_tag(TOOLKIT, tag)
    # The config package moved to api/config/v1 in v1.19.0.
    [config_path] = [path for path in git(TOOLKIT, "ls-tree", "--name-only", tag, "api/config/v1/config.go",
                                          "internal/config/config.go").split()]
    defaults = go_function(git(TOOLKIT, "show", f"{tag}:{config_path}"), "GetDefault")
    assert "AcceptEnvvarUnprivileged:    true" in defaults and re.search(r'Mode:\s*"auto"', defaults)
    builder = git(TOOLKIT, "show", f"{tag}:internal/config/image/builder.go")
    assert re.search(r"for _, e := range env \{.*?envmap\[parts\[0\]\] = parts\[1\]", builder, re.S)
    image = git(TOOLKIT, "show", f"{tag}:internal/config/image/cuda_image.go")
    assert 'if len(devices) == 0 || requested["void"] {' in image
    devices = git(TOOLKIT, "show", f"{tag}:internal/config/image/devices.go")
    assert 'envvar == "" || envvar == "void"' in devices and re.search(r'case "all"|== "all"', devices)
    # auto: on a node with NVML, legacy mode (the hook) up to 1.17 and jit-cdi from 1.18; both take that list.
    auto = git(TOOLKIT, "show", f"{tag}:internal/info/auto.go")
    if versions.release_numbers(tag) >= (1, 18):
        assert "defaultMode: JitCDIRuntimeMode," in auto
    else:
        assert re.search(r'case info\.PlatformNVML, info\.PlatformWSL:\s*return "legacy"', auto)


# --- the program -------------------------------------------------------------------------------------------------

BELOW = f"1.{versions.release_numbers(versions.EKS_CONTAINERD_CDI_VERSION)[1] - 1}"
ENVVAR_OPERATOR = versions.GPU_OPERATOR_NEWEST_ENVVAR_DEVICE_LIST


def test_an_eks_site_without_containerd_cdi_is_refused_with_a_cdi_only_operator():
    assert _cdi_only(versions.GPU_OPERATOR_VERSION) and not _cdi_only(ENVVAR_OPERATOR)
    site = config_spec.put(config_spec.eks_config(), "cluster.eks.kubernetesVersion", BELOW)
    found = config_spec.assert_rejected(site, "cluster.eks.kubernetesVersion", BELOW,
                                        fix=f"pin gpuOperator.version {ENVVAR_OPERATOR}")
    assert "every GPU of the node" in found.problem and versions.GPU_OPERATOR_VERSION in found.problem
    config_spec.assert_rejected(config_spec.put(site, "gpuOperator.version", versions.GPU_OPERATOR_CDI_DEVICE_LIST),
                                "cluster.eks.kubernetesVersion", BELOW)


@pytest.mark.parametrize("path, value", [
    ("gpuOperator.version", ENVVAR_OPERATOR),
    ("cluster.eks.kubernetesVersion", versions.EKS_CONTAINERD_CDI_VERSION),
    ("gpuOperator.mode", "external"),
])
def test_an_eks_site_whose_gpus_reach_their_containers_is_accepted(path, value):
    site = config_spec.eks_config()
    if path != "cluster.eks.kubernetesVersion":
        site = config_spec.put(site, "cluster.eks.kubernetesVersion", BELOW)
    load_platform(config_spec.put(site, path, value))


# --- the same gap on MicroK8s: the containerd each track bundles ---------------------------------------------------

MICROK8S_BELOW = f"1.{versions.release_numbers(versions.MICROK8S_CONTAINERD_CDI_VERSION)[1] - 1}"


@pytest.mark.parametrize("track", sorted(MICROK8S_CONTAINERD, key=versions.release_numbers))
def test_microk8s_bundles_a_containerd_that_injects_cdi_devices_from_the_cdi_track_only(track):
    # config/image_volumes.py's table is read from each track's build script (tests/test_image_volumes.py).
    tag = mirrored_tag(CONTAINERD, MICROK8S_CONTAINERD[track])
    [config] = [path for path in git(CONTAINERD, "ls-tree", "-r", "--name-only", tag, "--", "pkg/cri/config",
                                      "internal/cri/config").split() if path.endswith("/config.go")]
    has_cdi = 'toml:"enable_cdi"' in git(CONTAINERD, "show", f"{tag}:{config}")
    assert has_cdi == (versions.release_numbers(track) >= versions.release_numbers(versions.MICROK8S_CONTAINERD_CDI_VERSION))


def test_the_operators_toolkit_turns_containerd_cdi_on_where_containerd_has_it():
    config = git(TOOLKIT, "show", f"{mirrored_tag(TOOLKIT, MIRRORED_TAGS[TOOLKIT][-1])}:pkg/config/engine/containerd/config.go")
    assert re.search(r'func \(c \*Config\) EnableCDI\(\) \{\s*config := \*c\.Tree\s*'
                     r'config\.SetPath\(\[\]string\{"plugins", c\.CRIRuntimePluginName, "enable_cdi"\}, true\)', config)


def _microk8s(track: str, **changes: object) -> dict:
    site = config_spec.put(config_spec.dev_config(), "cluster.microk8s.kubernetesVersion", track)
    for path, value in changes.items():
        site = config_spec.put(site, path, value)
    return site


@pytest.mark.parametrize("changes, operator_key", [
    ({"gpuOperator.mode": "install"}, "gpuOperator.version"),
    ({"cluster.microk8s.enableNvidiaAddon": True}, "cluster.microk8s.nvidiaAddonOperatorVersion"),
])
def test_a_microk8s_track_without_containerd_cdi_is_refused_with_a_cdi_only_operator(changes, operator_key):
    found = config_spec.assert_rejected(_microk8s(MICROK8S_BELOW, **changes), "cluster.microk8s.kubernetesVersion",
                                        MICROK8S_BELOW, fix=f"pin {operator_key} {ENVVAR_OPERATOR}")
    assert "containerd 1.6" in found.problem and "every GPU of the node" in found.problem
    assert f"Kubernetes {versions.MICROK8S_CONTAINERD_CDI_VERSION} or later" in found.fix


def test_a_microk8s_box_that_does_not_state_its_track_is_refused_with_a_cdi_only_operator():
    # The program assumes the oldest track it supports, whose containerd has no CDI: the site states what it runs.
    site = config_spec.put(config_spec.dev_config(), "gpuOperator.mode", "install")
    del site["cluster"]["microk8s"]["kubernetesVersion"]
    found = config_spec.assert_rejected(site, "cluster.microk8s.kubernetesVersion", fix="microk8s version")
    assert f"assumes {versions.KUBERNETES_MINIMUM_VERSION}" in found.problem and "containerd 1.6" in found.problem
    assert f"pin gpuOperator.version {ENVVAR_OPERATOR}" in found.fix
    load_platform(config_spec.put(site, "gpuOperator.version", ENVVAR_OPERATOR))


@pytest.mark.parametrize("operator_key, enable", [("gpuOperator.version", {"gpuOperator.mode": "install"}), (
    "cluster.microk8s.nvidiaAddonOperatorVersion", {"cluster.microk8s.enableNvidiaAddon": True})])
def test_an_operator_version_with_a_problem_of_its_own_is_reported_at_its_key_only(operator_key, enable):
    error = config_spec.rejected(_microk8s(MICROK8S_BELOW, **enable, **{operator_key: "latest"}))
    assert error.keys == [operator_key]


@pytest.mark.parametrize("changes", [
    {"gpuOperator.mode": "install", "gpuOperator.version": ENVVAR_OPERATOR},
    {"cluster.microk8s.enableNvidiaAddon": True, "cluster.microk8s.nvidiaAddonOperatorVersion": ENVVAR_OPERATOR},
    {"gpuOperator.mode": "microk8s-addon"},  # enabled by hand: its version is not the config's
    {"gpuOperator.mode": "external"},
])
def test_a_microk8s_site_whose_gpus_reach_their_containers_is_accepted(changes):
    load_platform(_microk8s(MICROK8S_BELOW, **changes))
    load_platform(_microk8s(versions.MICROK8S_CONTAINERD_CDI_VERSION, **{
        key: value for key, value in changes.items() if not key.endswith("OperatorVersion") and key != "gpuOperator.version"}))


def _existing_cluster(**changes: object) -> dict:
    site = config_spec.put(existing_cluster_lab(), "gpuOperator", {"mode": "install"})
    for path, value in changes.items():
        site = config_spec.put(site, path, value)
    return site


def _cdi_warnings(site: dict) -> list[str]:
    return [warning for warning in load_platform(site, placeholders={"kubeconfig"}).warnings if "CDI only" in warning]


def test_an_existing_cluster_with_a_cdi_only_operator_is_warned_that_its_containerd_must_inject_cdi():
    # Its nodes' containerd is not in the config: the site is told what the operator relies on and how to check it.
    [warning] = _cdi_warnings(_existing_cluster())
    assert "1.7 or later with CDI on" in warning and "every GPU of the node" in warning
    assert "operator's toolkit turns on" in warning and f"pin gpuOperator.version {ENVVAR_OPERATOR}" in warning
    [own_toolkit] = _cdi_warnings(_existing_cluster(**{"gpuOperator.toolkitEnabled": False}))
    assert "the nodes' own toolkit setup must turn on" in own_toolkit


@pytest.mark.parametrize("path, value", [("gpuOperator.version", ENVVAR_OPERATOR), ("gpuOperator.mode", "external")])
def test_an_existing_cluster_whose_operator_sets_the_device_list_itself_or_is_its_own_is_not_warned(path, value):
    assert _cdi_warnings(_existing_cluster(**{path: value})) == []


def test_a_microk8s_addon_enabled_by_hand_on_a_track_without_cdi_is_warned_to_be_older_than_the_cdi_operator():
    # The addon's operator version is the box's, not the config's: the site is told what it must be.
    [warning] = _cdi_warnings(_microk8s(MICROK8S_BELOW))
    assert f"older than {versions.GPU_OPERATOR_CDI_DEVICE_LIST}" in warning and "microk8s version" in warning
    assert _cdi_warnings(_microk8s(versions.MICROK8S_CONTAINERD_CDI_VERSION)) == []
    assert config_spec.dev_config()["gpuOperator"]["mode"] == "microk8s-addon"


def test_the_pinned_envvar_operator_makes_the_nvidia_runtime_the_default_so_honest_pods_get_their_gpu():
    # The fix the CDI refusals give: with that operator on a containerd without CDI, the device plugin's list in
    # NVIDIA_VISIBLE_DEVICES reaches the NVIDIA runtime, which its toolkit makes containerd's default.
    toolkit = _operator_values(ENVVAR_OPERATOR)["toolkit"]["version"].split("-", 1)[0]
    runtime = git(TOOLKIT, "show", f"{mirrored_tag(TOOLKIT, toolkit)}:tools/container/runtime/runtime.go")
    assert re.search(r"defaultSetAsDefault\s*=\s*true", runtime)
    assert re.search(r'EnvVars:\s*\[\]string\{"NVIDIA_RUNTIME_SET_AS_DEFAULT", "CONTAINERD_SET_AS_DEFAULT"', runtime)
    controls = git(OPERATOR, "show", f"{mirrored_tag(OPERATOR, ENVVAR_OPERATOR)}:controllers/object_controls.go")
    assert "SET_AS_DEFAULT" not in controls  # the operator leaves the toolkit's default alone
