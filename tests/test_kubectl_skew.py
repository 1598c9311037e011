"""The kubectl the platform runs is within kubectl's version skew of the site's API server.

kubectl is supported within one minor version of kube-apiserver. The platform's wait Jobs (KAI's queue webhook
probe, each tenant's kubeconfig wait) and kube-prometheus-stack's CRD upgrade hook run the kubectl config/versions.py
pins (KUBECTL_IMAGES) for the Kubernetes the site states, and the config accepts exactly the minors that table
holds. Each is pinned by digest as well as tag, so a tag pushed again cannot change what runs. Checked on the
table, on the program's Jobs and values for every accepted minor and host kind, on the real chart's hook rendered
for every accepted minor (skipping without the chart cache), and against kubectl's source at every pinned tag: each
has the flags the Jobs pass (skipping without the mirror).
"""

from __future__ import annotations

import re

import pytest
import yaml

from config import load_platform, versions
from config.version_types import SITE_KUBERNETES
from tests import config_spec
from tests.conftest import git, kubectl_source_tag, mirrored_tag, real_charts_or_skip, run, stack_config, upstream_tags
from tests.isolation_spec import prefixed
from tools.charts.cache import chart_cache_dir, find_cached
from tools.charts.render import release_chart_key, render_release
from tools.plan.document import build_plan

KUBECTL = "kubernetes/kubectl"
IMAGE = re.compile(r"^registry\.k8s\.io/kubectl:(?P<tag>v1\.(?P<minor>\d+)\.(?P<patch>\d+))"
                   r"@sha256:(?P<sha>[0-9a-f]{64})$")
ACCEPTED = SITE_KUBERNETES.minors()
KINDS = ("microk8s", "eks", "kubeconfig")
PINNED_TAGS = sorted(set(map(kubectl_source_tag, versions.KUBECTL_IMAGES.values())), key=versions.release_order)


def skew(image: str, server: str) -> int:
    """Minor versions between a kubectl image and an API server ``1.NN``."""
    return abs(int(IMAGE.fullmatch(image)["minor"]) - versions.release_numbers(server)[1])


def site(kind: str, version: str | None, *, observability: bool = True) -> dict:
    """A valid site of ``kind`` stating ``version`` (None: unstated), with kube-prometheus-stack installed."""
    config = config_spec.eks_config() if kind == "eks" else config_spec.dev_config()
    if kind == "kubeconfig":
        config = config_spec.put(config, "cluster", {"kind": "kubeconfig"})
        config["gpuOperator"] = {"mode": "install"}
    config["cluster"].setdefault(kind, {}).pop("kubernetesVersion", None)
    if version is not None and kind == "eks":
        config_spec.eks_without_containerd_cdi(config, version)
    elif version is not None:
        config_spec.put(config, f"cluster.{kind}.kubernetesVersion", version)
    if observability:
        config["observability"] = {"prometheus": "install"}
    return config


def kubectl_images(program) -> dict[str, list[str]]:
    """Every kubectl image the program puts on the site: each Job's containers, and the CRD hook's value."""
    found = {job.name: [container["image"] for field in ("initContainers", "containers")
                        for container in job.inputs["spec"]["template"]["spec"].get(field) or []]
             for job in program.of_type("kubernetes:batch/v1:Job")}
    for release in program.of_type("kubernetes:helm.sh/v3:Release"):
        image = release.inputs["values"].get("crds", {}).get("upgradeJob", {}).get("image", {}).get("kubectl")
        if image:
            digest = f"@sha256:{image['sha']}" if "sha" in image else ""
            found[release.name] = [f"{image['registry']}/{image['repository']}:{image['tag']}{digest}"]
    return found


# --- the table and the accepted range --------------------------------------------------------------


def test_the_table_holds_every_accepted_kubernetes_minor_and_nothing_else():
    assert list(versions.KUBECTL_IMAGES) == ACCEPTED
    assert ACCEPTED[0] == versions.KUBERNETES_MINIMUM_VERSION
    assert ACCEPTED[-1] == versions.KUBERNETES_NEWEST_ACCEPTED_VERSION
    # The newest checked API server is accepted, and so is the next (with a note: tests/test_config_host.py).
    assert versions.KUBERNETES_NEWEST_CHECKED_VERSION in ACCEPTED


@pytest.mark.parametrize("server", ACCEPTED)
def test_each_pinned_kubectl_is_an_exact_release_within_one_minor_of_its_api_server(server):
    image = versions.KUBECTL_IMAGES[server]
    assert IMAGE.fullmatch(image), f"{image}: not an exact registry.k8s.io/kubectl:v1.NN.P@sha256:<digest>"
    assert skew(image, server) <= 1, f"Kubernetes {server} would run {image}"


@pytest.mark.parametrize("server", ACCEPTED)
def test_each_pinned_kubectl_carries_a_digest_and_its_tag_names_the_minor_the_table_runs(server):
    """The table runs each minor's own kubectl, except 1.30 (1.31's: 1.30's cannot `wait --for=create`) and the
    newest accepted (the newest kubectl released); the tag a digest is pinned with says which release it is."""
    pinned = IMAGE.fullmatch(versions.KUBECTL_IMAGES[server])
    assert pinned, f"{versions.KUBECTL_IMAGES[server]}: not pinned by tag and sha256 digest"
    minor = versions.release_numbers(server)[1]
    expected = {"1.30": 31, versions.KUBERNETES_NEWEST_ACCEPTED_VERSION: minor - 1}.get(server, minor)
    assert int(pinned["minor"]) == expected, f"Kubernetes {server} runs {pinned['tag']}"


def test_a_kubectl_release_is_pinned_with_one_digest():
    digests: dict[str, set[str]] = {}
    for image in versions.KUBECTL_IMAGES.values():
        pinned = IMAGE.fullmatch(image)
        digests.setdefault(pinned["tag"], set()).add(pinned["sha"])
    assert all(len(found) == 1 for found in digests.values()), digests


@pytest.mark.parametrize("server", (ACCEPTED[0], versions.KUBERNETES_NEWEST_CHECKED_VERSION))
def test_the_crd_hook_takes_the_pins_repository_tag_and_digest_as_the_chart_reads_them(server):
    """The chart's hook names ``<registry>/<repository>:<tag>@sha256:<sha>``: each value is its own part."""
    [values] = [release.inputs["values"]["crds"]["upgradeJob"]["image"]["kubectl"]
                for release in run(prefixed(site("eks", server)), stack="test").of_type("kubernetes:helm.sh/v3:Release")
                if release.name == "observability-release"]
    pinned = IMAGE.fullmatch(versions.KUBECTL_IMAGES[server])
    assert values == {"registry": "registry.k8s.io", "repository": "kubectl", "tag": pinned["tag"],
                      "sha": pinned["sha"]}


def test_kubectl_images_are_released_tags_of_kubectl():
    """registry.k8s.io/kubectl:v1.NN.P is built from Kubernetes v1.NN.P, whose kubectl is tagged v0.NN.P."""
    released = set(upstream_tags(KUBECTL))
    assert set(PINNED_TAGS) <= released, set(PINNED_TAGS) - released
    assert all("-" not in tag for tag in PINNED_TAGS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_kubernetes_past_the_table_is_refused_before_anything_is_registered(kind):
    newest = versions.KUBERNETES_NEWEST_ACCEPTED_VERSION
    past = f"1.{versions.release_numbers(newest)[1] + 1}"
    key = f"cluster.{kind}.kubernetesVersion"
    found = config_spec.assert_rejected(site(kind, past), key, past, fix=f"state {newest} or older")
    assert "kubectl" in found.problem and "one minor version" in found.problem
    secrets = ("kubeconfig",) if kind == "kubeconfig" else ()
    assert load_platform(site(kind, newest), secrets_set=secrets).cluster.kubectl_image == \
        versions.KUBECTL_IMAGES[newest]


# --- what the program runs -----------------------------------------------------------------------


@pytest.mark.parametrize("server", ACCEPTED)
def test_every_kubectl_job_and_the_crd_hook_run_a_kubectl_within_skew_of_the_stated_kubernetes(server):
    """On EKS the stated version is the cluster's own (cluster.eks.kubernetesVersion). A single pin fails here:
    v1.33.0 is three minors off 1.30 and 1.36."""
    found = kubectl_images(run(prefixed(site("eks", server)), stack="test"))
    # KAI's probe (a wait and a dry-run), each team's kubeconfig wait, and the hook.
    assert "kai-queue-webhook-probe" in found and "observability-release" in found
    assert len([name for name in found if name.endswith("-kubeconfig-wait")]) == len(config_spec.eks_config()["teams"])
    off = {name: images for name, images in found.items() if any(skew(image, server) > 1 for image in images)}
    assert not off, f"Kubernetes {server}: {off}"
    assert {image for images in found.values() for image in images} == {versions.KUBECTL_IMAGES[server]}


@pytest.mark.parametrize("kind", KINDS)
def test_each_host_kind_runs_the_kubectl_of_the_version_it_states(kind):
    for server in (ACCEPTED[0], versions.KUBERNETES_NEWEST_CHECKED_VERSION):
        found = kubectl_images(run(prefixed(site(kind, server)), stack="test"))
        assert {image for images in found.values() for image in images} == {versions.KUBECTL_IMAGES[server]}, kind


@pytest.mark.parametrize("kind", ("microk8s", "kubeconfig"))
def test_an_unstated_version_runs_the_kubectl_of_the_oldest_accepted(kind):
    found = kubectl_images(run(prefixed(site(kind, None)), stack="test"))
    assert {image for images in found.values() for image in images} == {
        versions.KUBECTL_IMAGES[versions.KUBERNETES_MINIMUM_VERSION]}


@pytest.mark.parametrize("stack", ("dev", "eks"))
def test_the_committed_sites_run_the_kubectl_of_their_stated_kubernetes(stack):
    config = stack_config(stack)
    cluster = config["gpu-tenancy:cluster"]
    stated = cluster[cluster["kind"]]["kubernetesVersion"]
    found = kubectl_images(run(config, stack=stack))
    assert found and {image for images in found.values() for image in images} == {versions.KUBECTL_IMAGES[stated]}
    assert all(skew(image, stated) <= 1 for images in found.values() for image in images)


@pytest.mark.parametrize("server", ACCEPTED)
def test_the_rendered_crd_hook_runs_a_kubectl_within_skew(server):
    """The real chart, rendered for the site's Kubernetes (the chart's own default would be a kubectl tagged as
    that version), runs the pinned kubectl."""
    program = run(prefixed(site("eks", server)), stack="test")
    real_charts_or_skip(build_plan(program, "test"))
    [release] = [resource for resource in program.of_type("kubernetes:helm.sh/v3:Release")
                 if resource.name == "observability-release"]
    chart, _ = find_cached(release_chart_key(release.inputs), chart_cache_dir())
    manifests = render_release(chart, release.inputs["name"], release.inputs["namespace"], release.inputs["values"],
                               kube_version=f"v{server}.0", include_crds=False)
    [job] = [document for path, text in manifests.items() if "/charts/crds/templates/upgrade/" in path
             for document in yaml.safe_load_all(text) if document and document["kind"] == "Job"]
    [kubectl] = job["spec"]["template"]["spec"]["containers"]
    assert kubectl["args"][:3] == ["apply", "--server-side", "--force-conflicts"]
    assert kubectl["image"] == versions.KUBECTL_IMAGES[server] and skew(kubectl["image"], server) <= 1


# --- kubectl's source at each pinned tag -----------------------------------------------------------


def _wait_handles_create(tag: str) -> bool:
    return 'lowercaseCond == "create"' in git(KUBECTL, "show", f"{tag}:pkg/cmd/wait/wait.go")


@pytest.mark.parametrize("tag", PINNED_TAGS)
def test_every_pinned_kubectl_has_the_flags_the_jobs_pass(tag):
    tag = mirrored_tag(KUBECTL, tag)
    # kubectl wait --for=create (components/kubectl_job.py wait_for_create_args).
    assert _wait_handles_create(tag)
    helpers = git(KUBECTL, "show", f"{tag}:pkg/cmd/util/helpers.go")
    # kubectl create --dry-run=server (components/kai.py's probe).
    assert "cmdutil.AddDryRunFlag(cmd)" in git(KUBECTL, "show", f"{tag}:pkg/cmd/create/create.go")
    strategy = helpers[helpers.index("\nfunc GetDryRunStrategy("):]
    assert 'case "server":' in strategy[:strategy.index("\n}\n")]
    # kubectl apply --server-side --force-conflicts (the CRD upgrade hook).
    assert "cmdutil.AddServerSideApplyFlags(cmd)" in git(KUBECTL, "show", f"{tag}:pkg/cmd/apply/apply.go")
    flags = helpers[helpers.index("\nfunc AddServerSideApplyFlags("):]
    flags = flags[:flags.index("\n}\n")]
    assert 'Bool("server-side"' in flags and 'Bool("force-conflicts"' in flags


def test_kubernetes_1_30_runs_the_1_31_kubectl_because_1_30s_cannot_wait_for_create():
    newest_1_30 = max((tag for tag in upstream_tags(KUBECTL) if re.fullmatch(r"v0\.30\.\d+", tag)),
                      key=versions.release_order)
    assert not _wait_handles_create(mirrored_tag(KUBECTL, newest_1_30))
    assert IMAGE.fullmatch(versions.KUBECTL_IMAGES["1.30"])["minor"] == "31"
