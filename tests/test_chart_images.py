"""Every image the charts put on a site is pinned, hooks included, and the CRD upgrade hooks apply the charts' CRDs.

Each accepted release of each chart is rendered with the program's values (tests/release_renders.py). Every image
reference of every rendered object (pod templates, bare pods, hook Jobs, the Prometheus operator's and the GPU
Operator's custom resources) names its registry and an exact tag or a digest: no ``latest``, no ``main-latest``,
and no placeholder the chart's repository leaves for its release job to stamp (the GPU Operator's appVersion
``main-latest``/``devel-ubi8``, KAI's ``registry/local/kai-scheduler`` and ``0.0.0``). The images the program
chooses for the CRD upgrade hooks are those of config/versions.py, and the images tagged as a release carry that
release's tag. The record Helm keeps of each release, the hooks' included, fits the Secret it is kept in.
"""

from __future__ import annotations

import base64
import bz2
import re
from typing import Any, Iterator

import pytest

from config import versions
from tests.conftest import eks_config
from tests.release_renders import RELEASE_CHARTS, RELEASES, every_release_renders, plan_of, site_with_every_chart
from tests.test_release_records import BUDGET
from tools.charts.cache import chart_cache_dir, chart_contracts
from tools.charts.manifest_yaml import load_manifests
from tools.charts.pins import pinned_chart_key
from tools.charts.release_record import record_size
from tools.charts.render import release_records
from tools.deployability import pod_security
from tools.offline.recording import integral_numbers
from tools.plan.running_site import EVERY_CRD, chart_objects, crd_upgraders

# registry host (a dot or a port, or localhost) / path [:tag] [@sha256:digest]
REFERENCE = re.compile(r"^(?P<registry>(?:[a-z0-9-]+\.)+[a-z0-9-]+(?::\d+)?|localhost(?::\d+)?)/"
                       r"(?P<path>[a-z0-9._/-]+)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[a-f0-9]{64}))?$")
# Tags that move, and the appVersion placeholders the charts' repositories carry until their release job stamps them.
MOVING_OR_PLACEHOLDER = re.compile(r"^(latest|.*-latest|devel(-.*)?|0\.0\.0)$")
KPS = "kube-prometheus-stack"


@pytest.fixture(scope="module")
def every_release():
    return every_release_renders()


def _documents(manifests: dict[str, str]) -> Iterator[tuple[str, dict]]:
    for path, text in manifests.items():
        for document in load_manifests(text):
            if isinstance(document, dict) and document.get("kind"):
                yield path, document


def _images(node: Any, where: str) -> Iterator[tuple[str, str]]:
    """(where, reference) of every image a rendered object names: a container's ``image``, a Prometheus or
    Alertmanager's ``spec.image``, and a GPU Operator component's ``repository``/``image``/``version`` (its
    vGPU manager, off, names no image of its own: a site that turns it on names its driver image)."""
    if isinstance(node, dict):
        if isinstance(node.get("image"), str):
            if "repository" in node:  # a GPU Operator component
                version = str(node.get("version") or "")
                separator = "@" if version.startswith("sha256:") else ":"
                yield where, f"{node['repository']}/{node['image']}" + (separator + version if version else "")
            elif node.get("enabled") is not False:  # not a GPU Operator component off whose image the site names
                yield where, node["image"]
        for key, value in node.items():
            yield from _images(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _images(value, f"{where}[{index}]")


def _release_images(manifests: dict[str, str]) -> list[tuple[str, str]]:
    return [(f"{path}: {document['kind']} {document['metadata'].get('name')}{where}", image)
            for path, document in _documents(manifests) for where, image in _images(document, "")]


def _tag(image: str) -> str:
    return REFERENCE.match(image)["tag"]


@pytest.mark.parametrize("chart", RELEASES)
def test_every_image_of_every_accepted_release_names_its_registry_and_an_exact_tag(chart, every_release):
    for release, manifests in every_release[chart].items():
        found = _release_images(manifests)
        assert found, f"{chart} {release} renders no image"
        unpinned = [(where, image) for where, image in found if not REFERENCE.match(image)
                    or not (REFERENCE.match(image)["tag"] or REFERENCE.match(image)["digest"])
                    or MOVING_OR_PLACEHOLDER.match(REFERENCE.match(image)["tag"] or "")]
        assert not unpinned, f"{chart} {release}: " + "\n".join(f"{where}: {image}" for where, image in unpinned)


def _hook_job(manifests: dict[str, str], name_part: str) -> dict:
    [job] = [document for _, document in _documents(manifests) if document["kind"] == "Job"
             and name_part in document["metadata"]["name"]
             and "pre-upgrade" in document["metadata"].get("annotations", {}).get("helm.sh/hook", "")]
    return job


def _pod_images(job: dict) -> list[str]:
    spec = job["spec"]["template"]["spec"]
    return [container["image"] for field in ("initContainers", "containers") for container in spec.get(field) or []]


@pytest.mark.parametrize("release", versions.GPU_OPERATOR_RELEASES)
def test_the_gpu_operators_crd_hook_and_its_own_images_are_the_releases(release, every_release):
    manifests = every_release[versions.GPU_OPERATOR_CHART][release]
    assert _pod_images(_hook_job(manifests, "upgrade-crd")) == [f"nvcr.io/nvidia/gpu-operator:{release}"]
    own = [(where, image) for where, image in _release_images(manifests) if "/gpu-operator" in image.split(":")[0]]
    assert own and all(_tag(image) == release for _, image in own), own


@pytest.mark.parametrize("release", versions.KAI_RELEASES)
def test_kais_crd_hook_and_every_kai_image_are_the_releases_as_published(release, every_release):
    manifests = every_release["kai-scheduler"][release]
    assert _pod_images(_hook_job(manifests, "crd-upgrader")) == [
        f"{versions.KAI_IMAGE_REGISTRY}/crd-upgrader:{release}"]
    images = {image for _, image in _release_images(manifests)}
    assert images and all(image.startswith(f"{versions.KAI_IMAGE_REGISTRY}/") and _tag(image) == release
                          for image in images), images


def _kps_hook(manifests: dict[str, str]) -> dict[str, dict]:
    """kube-prometheus-stack's CRD upgrade hook objects, by kind."""
    return {document["kind"]: document for path, document in _documents(manifests)
            if "/charts/crds/templates/upgrade/" in path}


@pytest.mark.parametrize("release", versions.KUBE_PROMETHEUS_STACK_RELEASES)
def test_kube_prometheus_stacks_crd_hook_applies_the_charts_own_crds_with_pinned_images(release, every_release):
    manifests = every_release[KPS][release]
    hook = _kps_hook(manifests)
    assert set(hook) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Job"}
    for document in hook.values():
        assert set(document["metadata"]["annotations"]["helm.sh/hook"].split(",")) == {
            "pre-install", "pre-upgrade", "pre-rollback"}
    job = hook["Job"]
    pod = job["spec"]["template"]["spec"]
    # The kubectl pinned for the Kubernetes the rendered site (the EKS stack) states.
    stated = eks_config()["gpu-tenancy:cluster"]["eks"]["kubernetesVersion"]
    assert _pod_images(job) == [versions.CRD_UPGRADE_UNPACK_IMAGE, versions.KUBECTL_IMAGES[stated]]
    # The unpacking image is the one the chart's Grafana already runs (config/versions.py says so).
    grafana = {image for where, image in _release_images(manifests) if "StatefulSet" in where and "grafana" in where}
    assert versions.CRD_UPGRADE_UNPACK_IMAGE in grafana
    [kubectl] = pod["containers"]
    assert kubectl["command"] == ["kubectl"]
    assert kubectl["args"] == ["apply", "--server-side", "--force-conflicts", "--filename", "/tmp/crds.yaml"]
    # What it applies: the ConfigMap's compressed CRDs, which are exactly the chart's crds/ files.
    packed = load_manifests(bz2.decompress(base64.b64decode(hook["ConfigMap"]["binaryData"]["crds.bz2"])).decode())
    applied = {crd["metadata"]["name"]: crd for crd in packed if crd}
    crd_files = {document["metadata"]["name"]: document for path, document in _documents(manifests)
                 if "/crds/crds/" in path}
    assert applied.keys() == crd_files.keys() and len(applied) >= 10
    assert all(applied[name]["spec"] == crd_files[name]["spec"] for name in applied)
    assert {volume["configMap"]["name"] for volume in pod["volumes"] if "configMap" in volume} == {
        hook["ConfigMap"]["metadata"]["name"]}
    # Allowed to write those CRDs only, and run as the account bound to that role.
    written = crd_upgraders(chart_objects(manifests).values(), KPS)
    assert EVERY_CRD not in written and written == set(applied)
    assert pod["serviceAccountName"] == hook["ServiceAccount"]["metadata"]["name"]
    # Runs wherever the stack runs: restricted Pod Security, requests and limits on each container.
    assert pod_security.violations(pod, "restricted", {}, versions.KUBERNETES_MINIMUM_VERSION) == []
    for container in pod["initContainers"] + pod["containers"]:
        assert container["resources"]["requests"] and container["resources"]["limits"], container["name"]


# A chart's own CRDs (its crds/ directory, or a subchart's): Helm installs them, and keeps them out of the release.
CRD_FILE = re.compile(r"^[^/]+/(charts/[^/]+/)*crds/")


def test_the_record_of_every_accepted_release_of_every_chart_fits_the_secret(every_release):
    """Helm keeps each release in a Secret of at most 1 MiB (tests/test_release_records.py). kube-prometheus-stack's
    CRD upgrade hook carries the compressed CRDs in a ConfigMap, about 270 KB of its record, on every release."""
    measured = {}
    for index in range(max(map(len, RELEASES.values()))):
        plan = plan_of(site_with_every_chart(index), "eks")
        released = {inputs["name"]: inputs for _, inputs in release_records(plan["resources"])}
        for name, inputs in released.items():
            chart = RELEASE_CHARTS.get(name, name)
            if (chart, inputs["version"]) in measured:
                continue
            manifests = {path.split("/", 1)[1]: text for path, text in every_release[chart][inputs["version"]].items()
                         if not CRD_FILE.match(path.split("/", 1)[1])}
            archive = chart_contracts(pinned_chart_key(chart, inputs["version"]), chart_cache_dir()).path
            measured[chart, inputs["version"]] = record_size(archive, name, inputs["namespace"],
                                                             integral_numbers(inputs["values"]), manifests).total
    assert {(chart, release) for chart, releases in RELEASES.items() for release in releases} == set(measured)
    assert {key: size for key, size in measured.items() if size >= BUDGET} == {}
