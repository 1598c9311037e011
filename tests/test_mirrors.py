"""An air-gapped site's mirrors (config/mirrors.py): every image and chart the platform deploys comes from them.

The real charts are rendered with the program's values for the committed sites and for sites with the GPU Operator
and kube-prometheus-stack installed (the floor and the pinned releases), with a mirror for exactly the registries
the program says the site uses: every image of every object (pods, hook jobs, the ClusterPolicy's operands, the
Prometheus and Alertmanager) and every string naming an upstream registry (arguments, environment) must be under
a mirror. A registry the program forgets leaves an image unmirrored, so the test fails.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest
import yaml

from components.admission_images import platform_images
from config import ConfigError, versions
from config.gpu_asks import GpuAsk
from config.image_registries import LEGACY_DOMAIN
from config.mirror_registries import deployed_registries
from config.mirrors import PUBLIC_REGISTRIES as PUBLIC_HOSTS, Mirrors, gpu_operator_repositories, split_image
from tests.config_spec import dev_config, put, rejected
from tests.conftest import MIRRORED_TAGS, eks_config, git, mirrored_tag, run, stack_config
from tests.image_reference_sim import REFERENCE, registry_of
from tools.offline.mockrun import run_program
from tools.offline.recording import ProgramRun
from ops.smoke_objects import gpu_pod, plain_deployment
from tools.charts.cache import CACHE_ENV, chart_cache_dir
from tests.release_renders import RELEASE_CHARTS, RELEASES, rendered, site_with_every_chart
from tests.test_chart_images import _documents, _images, _release_images

PREFIX = "mirror.test"
# A public registry host (Docker Hub's legacy name too) followed by a path: an image reference (or a prefix of one)
# anywhere in a string.
PUBLIC_REGISTRIES = (*PUBLIC_HOSTS, LEGACY_DOMAIN)
UPSTREAM = re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, PUBLIC_REGISTRIES)) + r")/[\w.-]+")
# A whole image reference with its tag (and digest, if pinned by one), as an argument names one.
NAMED_IMAGE = re.compile(UPSTREAM.pattern + r"(?:/[\w.-]+)*:[\w.-]+(?:@sha256:[0-9a-f]{64})?")
CHARTS = ("gpu-operator", "kai-scheduler", "vcluster", "kube-prometheus-stack")


def mirror_of(host: str) -> str:
    return f"{PREFIX}/{host.replace('.', '-').replace(':', '-')}"


def test_an_image_keeps_its_path_and_tag_under_its_registrys_mirror():
    mirrors = Mirrors(images={"nvcr.io": "harbor.corp.example/nvcr", "docker.io": "harbor.corp.example/hub"})
    assert mirrors.image("nvcr.io/nvidia/gpu-operator:v26.7.0") == "harbor.corp.example/nvcr/nvidia/gpu-operator:v26.7.0"
    # Docker Hub's familiar names, as the runtime reads them: the host, and library/ for an official image.
    assert mirrors.image("coredns/coredns:1.14.2") == "harbor.corp.example/hub/coredns/coredns:1.14.2"
    assert mirrors.image("busybox:1.38.0") == "harbor.corp.example/hub/library/busybox:1.38.0"
    assert mirrors.image("quay.io/prometheus/prometheus:v3.14.0") == "quay.io/prometheus/prometheus:v3.14.0"
    assert mirrors.registry("ghcr.io/kai-scheduler/kai-scheduler") == "ghcr.io/kai-scheduler/kai-scheduler"
    assert mirrors.registry("nvcr.io/nvidia/k8s") == "harbor.corp.example/nvcr/nvidia/k8s"
    assert split_image("localhost:5000/x:1") == ("localhost:5000", "x:1")
    # Docker Hub's legacy name is Docker Hub's.
    assert mirrors.image("index.docker.io/busybox:1.38.0") == "harbor.corp.example/hub/library/busybox:1.38.0"
    assert mirrors.image("docker.io/coredns/coredns:1.14.2") == "harbor.corp.example/hub/coredns/coredns:1.14.2"


@pytest.mark.parametrize("tag", MIRRORED_TAGS[REFERENCE])
def test_an_image_is_on_the_registry_the_node_pulls_it_from(tag):
    """split_image's host is distribution/reference's (the oracle of tests/image_reference_sim.py, read from its
    source at each mirrored tag) for every reference the node accepts."""
    hosts = ["", "docker.io/", "index.docker.io/", "ghcr.io/", "ghcr.io:443/", "Acme/", "localhost/", "localhost:5000/",
             "[fd00::5]:5000/", "10.0.3.4:8080/", "acme/", "registry.local/a/"]
    references = [host + path for host in hosts for path in ("busybox:1.38.0", "library/nginx", "nvidia/cuda:12.9",
                                                             "a/b/c@sha256:" + "d" * 64)]
    read = {reference: registry_of(reference, mirrored_tag(REFERENCE, tag)) for reference in references}
    assert sum(found is not None for found in read.values()) > len(references) // 2
    assert {reference: split_image(reference)[0] for reference, found in read.items() if found} == \
        {reference: found[0] for reference, found in read.items() if found}


@pytest.mark.parametrize("path, value, problem", [
    ("mirrors.images", {"https://nvcr.io": "harbor.corp/nvcr"}, "registry host"),
    ("mirrors.images", {"nvcr.io/nvidia": "harbor.corp/nvcr"}, "registry host"),
    ("mirrors.images", {"nvcr.io": "https://harbor.corp/nvcr"}, "scheme"),
    ("mirrors.images", {"nvcr.io": "harbor.corp/nvcr:v1"}, "tag"),
    ("mirrors.images", {"nvcr.io": "harbor/nvcr"}, "no dot"),
    ("mirrors.images", {}, "non-empty"),
    ("mirrors.charts", {"grafana": "https://charts.corp"}, "not a chart the program installs"),
    ("mirrors.charts", {"vcluster": "http://charts.corp"}, "https://"),
    ("mirrors.charts", {"vcluster": "charts.corp/loft"}, "https://"),
])
def test_a_bad_mirror_is_refused_naming_the_key_the_value_and_a_fix(path, value, problem):
    issues = rejected(put(dev_config(), path, value)).issues
    issue = next(issue for issue in issues if issue.key.startswith(path))
    assert problem in issue.problem and issue.fix


def registries_of(platform) -> dict[str, list[str]]:
    return deployed_registries(platform.cluster, platform.gpu_operator.mode, platform.observability.prometheus,
                               platform.teams)


def test_a_registry_the_site_uses_without_a_mirror_is_an_error_listing_every_missing_one():
    config = put(dev_config(), "mirrors.images", {"nvcr.io": "harbor.corp.example/nvcr"})
    issue = next(issue for issue in rejected(config).issues if issue.key == "mirrors.images")
    platform = run(stack_config("dev"), stack="dev").program_globals["platform"]
    missing = sorted(set(registries_of(platform)) - {"nvcr.io"})
    assert missing and all(host in issue.problem and host in issue.fix for host in missing)


def test_a_missing_mirror_is_reported_with_the_sites_other_problems_before_anything_is_registered():
    config = put(dev_config(), "mirrors.images", {"nvcr.io": "harbor.corp.example/nvcr"})
    config = put(config, "organization.resources.gpu.quota", 0.5)
    record = ProgramRun()
    with pytest.raises(ConfigError) as raised:
        run_program(config, stack="dev", record=record)
    assert {"mirrors.images", "organization.resources.gpu.quota"} <= set(raised.value.keys)
    assert record.resources == []


def _with_mirrors(config: dict, stack: str) -> dict:
    platform = run(config, stack=stack).program_globals["platform"]
    mirrored = dict(config)
    mirrored["gpu-tenancy:mirrors"] = {"images": {host: mirror_of(host) for host in registries_of(platform)}}
    return mirrored


# Where GPU Operator releases up to v25.10.1 name the kata manager's artifacts (nvcr.io images its DaemonSet pulls
# when it runs) in the ClusterPolicy: the chart's kataManager.config, not a value the program mirrors.
KATA_ARTIFACTS = re.compile(r"^\.spec\.kataManager\.config\.runtimeClasses\[\d+\]\.artifacts\.url$")


def _upstream_references_pulled(document: dict):
    """The upstream references of a rendered object that something pulls: all of them, but the kata manager's
    artifacts while it is off (the operator deploys it only when on, test_the_kata_managers_artifacts_...)."""
    kata_off = document.get("kind") == "ClusterPolicy" and \
        (document.get("spec", {}).get("kataManager") or {}).get("enabled") is False
    for where, reference in _upstream_references(document):
        if not (kata_off and KATA_ARTIFACTS.match(where)):
            yield where, reference


def _strings(node, where: str = ""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _strings(value, f"{where}[{index}]")
    elif isinstance(node, str):
        yield where, node


def _upstream_references(node):
    for where, text in _strings(node):
        for match in UPSTREAM.finditer(text):
            yield where, match.group(0)


TEAM_REGISTRY = "registry.team.example:5000/vcluster"


def eks_with_team_registries() -> dict:
    """The EKS site with a memory-capped team, every team's vCluster pulling from the site's own registry
    (controlPlane.advanced.defaultImageRegistry)."""
    config = stack_config("eks")
    config["gpu-tenancy:cluster"]["eks"]["kubernetesVersion"] = "1.35"
    config["gpu-tenancy:vcluster"]["extraValues"] = {"controlPlane": {"advanced": {
        "defaultImageRegistry": TEAM_REGISTRY}}}
    config["gpu-tenancy:teams"][0]["isolation"] = {"tier": "memory-capped"}
    return config


SITES = {
    "dev": lambda: stack_config("dev"),
    "eks": lambda: stack_config("eks"),
    "eks-team-registries": eks_with_team_registries,
    "every-chart-floor": lambda: site_with_every_chart(0),
    "every-chart-pinned": lambda: site_with_every_chart(max(map(len, RELEASES.values()))),
}


@pytest.mark.parametrize("site", SITES)
def test_with_a_mirror_for_every_registry_the_site_uses_every_image_it_deploys_is_mirrored(site, tmp_path):
    stack = "dev" if site == "dev" else "eks"
    config = _with_mirrors(SITES[site](), stack)
    manifests = rendered(config, tmp_path, stack)
    images = [(where, image) for where, image in _release_images(manifests)]
    assert images
    # A mirror's, or the site's own registry a team's vCluster pulls from (defaultImageRegistry).
    unmirrored = [(where, image) for where, image in images if not image.startswith((PREFIX + "/", TEAM_REGISTRY + "/"))]
    assert not unmirrored, "\n".join(f"{where}: {image}" for where, image in unmirrored)
    # Arguments and environment that name images (the Prometheus operator's config reloader and Thanos), and every
    # other string; the CRDs' schemas (defaults of objects the program never creates) aside.
    named = [(f"{path}: {document['kind']}{where}", reference) for path, document in _documents(manifests)
             if document["kind"] != "CustomResourceDefinition"
             for where, reference in _upstream_references_pulled(document)]
    assert not named, "\n".join(f"{where}: {reference}" for where, reference in named)
    # The program's own objects: its Jobs, query proxies, DNS and the admission rules that name images.
    program = run(config, stack=stack)
    own = [(f"{resource.type} {resource.name}{where}", reference) for resource in program.resources
           if resource.type != "kubernetes:helm.sh/v3:Release"
           for where, reference in _upstream_references(resource.inputs)]
    assert not own, "\n".join(f"{where}: {reference}" for where, reference in own)


@pytest.mark.parametrize("release", versions.GPU_OPERATOR_RELEASES)
def test_the_kata_managers_artifacts_are_the_only_upstream_names_of_a_mirrored_gpu_operator(release, tmp_path):
    """Every accepted GPU Operator release, mirrored: its images are all under the mirror and its ClusterPolicy
    names nvcr.io only for the kata manager's artifacts, which the operator pulls only with the kata manager on
    (controllers/state_manager.go at the release's tag: its state is deployed only then) and the program leaves
    off."""
    config = eks_config()
    config["gpu-tenancy:teams"] = config["gpu-tenancy:teams"][:1]
    config["gpu-tenancy:gpuOperator"]["version"] = release
    manifests = rendered(_with_mirrors(config, "eks"), tmp_path, "eks")
    operator = {path: text for path, text in manifests.items() if path.startswith("gpu-operator/")}
    unmirrored = [image for _, image in _release_images(operator) if not image.startswith(PREFIX + "/")]
    assert operator and not unmirrored
    [policy] = [document for _, document in _documents(operator) if document["kind"] == "ClusterPolicy"]
    named = list(_upstream_references(policy))
    assert all(KATA_ARTIFACTS.match(where) and reference.startswith("nvcr.io/") for where, reference in named)
    if named:
        assert policy["spec"]["kataManager"]["enabled"] is False
        assert "return n.sandboxEnabled && clusterPolicySpec.KataManager.IsEnabled()" in git(
            "NVIDIA/gpu-operator", "show", f"{release}:controllers/state_manager.go")


def test_the_smoke_pods_take_their_images_from_the_sites_mirrors_and_the_admission_rules_admit_them():
    config = _with_mirrors(stack_config("dev"), "dev")
    program = run(config, stack="dev")
    mirrors = Mirrors(images=program.outputs["imageMirrors"])
    images = {gpu_pod("smoke-gpu", "default", "q", GpuAsk(fraction="0.5"), mirrors)["spec"]["containers"][0]["image"],
              plain_deployment("smoke-web", "default", mirrors)["spec"]["template"]["spec"]["containers"][0]["image"]}
    assert all(image.startswith(PREFIX + "/") for image in images)
    for team in program.program_globals["platform"].teams:
        assert images <= set(platform_images(team))
    assert "imageMirrors" not in run(stack_config("dev"), stack="dev").outputs


def test_without_mirrors_the_releases_render_as_with_an_empty_mirror_map(tmp_path):
    """No mirrors and ``mirrors: {}`` are the same site: nothing of the renders moves (golden plans hold the
    rest)."""
    config = site_with_every_chart(0)
    plain = rendered(config, tmp_path / "plain", "eks")
    config["gpu-tenancy:mirrors"] = {}
    assert rendered(config, tmp_path / "empty", "eks") == plain


def test_a_chart_repository_override_reaches_each_helm_release():
    config = site_with_every_chart(0)
    config["gpu-tenancy:mirrors"] = {"charts": {
        "gpu-operator": "https://charts.mirror.test/nvidia",
        "vcluster": "https://charts.mirror.test/loft/",
        "kai-scheduler": "oci://mirror.test/ghcr-io/kai-scheduler/kai-scheduler",
        "kube-prometheus-stack": "oci://mirror.test/prometheus-community"}}
    releases = {release.inputs["name"]: release.inputs
                for release in run(config, stack="eks").of_type("kubernetes:helm.sh/v3:Release")}
    by_chart = {RELEASE_CHARTS.get(name, name): inputs for name, inputs in releases.items()}
    assert set(by_chart) == set(CHARTS)
    assert by_chart["gpu-operator"]["chart"] == "gpu-operator"
    assert by_chart["gpu-operator"]["repositoryOpts"]["repo"] == "https://charts.mirror.test/nvidia"
    assert by_chart["vcluster"]["chart"] == "vcluster"
    assert by_chart["vcluster"]["repositoryOpts"]["repo"] == "https://charts.mirror.test/loft"
    assert by_chart["kai-scheduler"]["chart"] == "oci://mirror.test/ghcr-io/kai-scheduler/kai-scheduler/kai-scheduler"
    assert by_chart["kube-prometheus-stack"]["chart"] == "oci://mirror.test/prometheus-community/kube-prometheus-stack"
    for name in ("kai-scheduler", "kube-prometheus-stack"):
        assert not (by_chart[name].get("repositoryOpts") or {}).get("repo")


def _chart_values(chart: str, release: str) -> dict:
    """values.yaml of the chart with each subchart's under its name, from the chart cache (a skip without it)."""
    archive = chart_cache_dir() / f"{chart}-{release}.tgz"
    if not archive.exists():
        pytest.skip(f"the chart cache {chart_cache_dir()} (${CACHE_ENV}) lacks {archive.name}: run `python -m tools.charts pull`")
    values: dict = {}
    with tarfile.open(archive) as charts:
        for name in sorted(charts.getnames(), key=len):
            parts = name.split("/")
            if parts[-1] != "values.yaml":
                continue
            node = values
            for step in [parts[index + 1] for index, part in enumerate(parts[:-2]) if part == "charts"]:
                node = node.setdefault(step, {})
            node.update(yaml.safe_load(charts.extractfile(name)) or {})
    return values


def _image_values(node, leaf: str, where: str = ""):
    if isinstance(node, dict):
        if isinstance(node.get(leaf), str) and node[leaf]:
            yield where.lstrip("."), node[leaf]
        for key, value in node.items():
            if isinstance(value, dict):
                yield from _image_values(value, leaf, f"{where}.{key}")


@pytest.mark.parametrize("release", versions.GPU_OPERATOR_RELEASES)
def test_the_gpu_operator_repository_table_is_every_image_repository_of_the_chart(release):
    assert gpu_operator_repositories(release) == dict(_image_values(_chart_values("gpu-operator", release),
                                                                    "repository"))


@pytest.mark.parametrize("release", versions.KUBE_PROMETHEUS_STACK_RELEASES)
def test_the_kube_prometheus_stack_registry_table_is_every_image_registry_of_the_chart(release):
    found = {path: registry for path, registry in _image_values(_chart_values("kube-prometheus-stack", release),
                                                                "registry")
             if not path.startswith("crds.upgradeJob.")}  # the program's own images
    assert versions.KUBE_PROMETHEUS_STACK_IMAGE_REGISTRIES == found


DOCS = Path(__file__).resolve().parent.parent / "docs" / "operations-versions.md"
LIST = re.compile(r"<!-- mirror-images -->\n(.*?)<!-- /mirror-images -->", re.S)


def _service_images(node):
    """The images of the services KAI's operator starts, as its kai-config names them (repository, name, tag)."""
    if isinstance(node, dict):
        if all(isinstance(node.get(key), str) for key in ("repository", "name", "tag")):
            yield f"{node['repository']}/{node['name']}:{node['tag']}"
        for value in node.values():
            yield from _service_images(value)
    elif isinstance(node, list):
        for value in node:
            yield from _service_images(value)


def pinned_images(tmp_path: Path) -> str:
    """The docs' list: every image the pinned charts' releases name (objects, ClusterPolicy operands, KAI's
    services, arguments),
    chart by chart, rendered for a site with every chart installed."""
    manifests = rendered(site_with_every_chart(max(map(len, RELEASES.values()))), tmp_path, "eks")
    by_chart: dict[str, set[str]] = {}
    for path, document in _documents(manifests):
        chart = RELEASE_CHARTS.get(path.split("/")[0], path.split("/")[0])
        if document["kind"] == "CustomResourceDefinition":
            continue
        found = {image for _, image in _images(document, "")}
        found |= {match.group(0) for where, text in _strings(document) if not KATA_ARTIFACTS.match(where)
                  for match in NAMED_IMAGE.finditer(text)}
        # KAI's kai-config travels as YAML text to the hook that applies it.
        found |= {image for _, text in _strings(document) if "repository:" in text
                  for embedded in yaml.safe_load_all(text) for image in _service_images(embedded)}
        by_chart.setdefault(chart, set()).update(found)
    return "".join(f"| {chart} | " + "<br>".join(f"`{image}`" for image in sorted(images)) + " |\n"
                   for chart, images in sorted(by_chart.items()))


def test_the_operations_guide_lists_every_image_of_the_pinned_charts(tmp_path):
    listed = LIST.search(DOCS.read_text())
    assert listed, "docs/operations-versions.md has no <!-- mirror-images --> list"
    expected = "| Chart | Images at the pinned release |\n| --- | --- |\n" + pinned_images(tmp_path)
    assert listed.group(1) == expected, f"replace the list in docs/operations-versions.md with:\n{expected}"
