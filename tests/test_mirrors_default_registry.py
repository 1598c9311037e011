"""A team's own vCluster ``controlPlane.advanced.defaultImageRegistry`` on a site with ``mirrors.images``
(config/vcluster_images.py).

vCluster puts the value in place of the registry of every image it runs, at every accepted tag: the chart's control
plane, Kubernetes and deployed etcd images (chart/templates/_helper.tpl ``vcluster.image``), the rewrite-hosts init
container (pkg/controllers/resources/pods/translate/translator.go) and CoreDNS (pkg/coredns/coredns.go); the
program's DNS and HAMi-core follow it. So the team needs no mirror of the registries it replaces, what its release
renders is all under it, the host admits exactly those references, and a value vCluster cannot put before a
repository, one on a registry the site mirrors, or one on a public registry it does not, is refused.
"""

from __future__ import annotations

import copy

import pytest

from components.admission_images import platform_images
from config import load_platform, versions
from config.vocabulary import RELEASE as RELEASE_TYPE
from tests.config_spec import assert_rejected, dev_config, eks_config, put, rejected
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, run
from tests.release_renders import rendered
from tests.test_chart_images import _release_images
from tests.test_mirrors import PREFIX, _upstream_references, mirror_of, registries_of

VCLUSTER = "loft-sh/vcluster"
TEAM_REGISTRY = "harbor.corp.example/vcluster-images"
DEFAULT_REGISTRY = "extraValues.controlPlane.advanced.defaultImageRegistry"
DEPLOYED_ETCD = {"database": {"embedded": {"enabled": False}}, "etcd": {"deploy": {"enabled": True}}}


def with_default_registry(config: dict, registry: object, team: int = 0) -> dict:
    return put(config, f"teams[{team}].vcluster.extraValues",
               {"controlPlane": {"advanced": {"defaultImageRegistry": registry}, "backingStore": DEPLOYED_ETCD}})


def test_the_value_replaces_every_images_registry_at_every_accepted_tag():
    """What config/vcluster_images.py relies on, read from vCluster's chart and syncer."""
    for tag in ACCEPTED_VCLUSTER_TAGS:
        helper = git(VCLUSTER, "show", f"{tag}:chart/templates/_helper.tpl")
        assert "{{- if .defaultImageRegistry -}}\n{{ .defaultImageRegistry }}/{{ .repository }}:{{ .tag }}" in helper
        for template in ("statefulset.yaml", "etcd-statefulset.yaml", "_init-containers.tpl"):
            source = git(VCLUSTER, "show", f"{tag}:chart/templates/{template}")
            assert '"vcluster.image"' in source or '"vcluster.controlPlane.image"' in source
        translator = git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/pods/translate/translator.go")
        assert "cmp.Or(\n\t\tctx.Config.ControlPlane.Advanced.DefaultImageRegistry," in translator
        coredns = git(VCLUSTER, "show", f"{tag}:pkg/coredns/coredns.go")
        assert 'strings.TrimSuffix(defaultImageRegistry, "/") + "/" + vars[VarImage]' in coredns


def one_team(config: dict) -> dict:
    config["teams"] = config["teams"][:1]
    return config


def _mirrored_site(config: dict, stack: str) -> dict:
    mirrored = copy.deepcopy(config)
    platform = run(config, stack=stack).program_globals["platform"]
    mirrored["mirrors"] = {"images": {host: mirror_of(host) for host in registries_of(platform)}}
    return mirrored


def test_a_team_with_its_own_registry_needs_no_mirror_of_the_registries_it_replaces():
    config = dev_config()
    for team in range(3):
        with_default_registry(config, TEAM_REGISTRY, team)
    mirrored = _mirrored_site(config, "dev")
    # Only the rewrite-hosts init container came from mirror.gcr.io, and each team's comes from its own registry.
    assert "mirror.gcr.io" not in mirrored["mirrors"]["images"]
    platform = run(mirrored, stack="dev").program_globals["platform"]
    assert all(team.vcluster.mirrors.images for team in platform.teams)
    # One team without it still pulls from every registry, and the error names them.
    put(mirrored, "teams[1].vcluster.extraValues.controlPlane.advanced", {})
    issue = next(issue for issue in rejected(mirrored).issues if issue.key == "mirrors.images")
    assert "mirror.gcr.io (vCluster's rewrite-hosts init container)" in issue.problem
    assert "mirror.gcr.io" in issue.fix


@pytest.mark.parametrize("release", versions.VCLUSTER_RELEASES)
def test_everything_the_teams_vcluster_runs_comes_from_its_registry_and_the_host_admits_exactly_that(release, tmp_path):
    config = put(one_team(eks_config()), "vcluster.version", release)
    mirrored = _mirrored_site(with_default_registry(config, TEAM_REGISTRY), "eks")
    program = run(mirrored, stack="eks")
    team = program.program_globals["platform"].teams[0]
    manifests = {path: text for path, text in rendered(mirrored, tmp_path, "eks").items()
                 if path.startswith(f"{team.vcluster_name}/")}
    images = sorted({image for _, image in _release_images(manifests)})
    assert images == sorted({f"{TEAM_REGISTRY}/loft-sh/vcluster-pro:{release}",
                             f"{TEAM_REGISTRY}/loft-sh/kubernetes:{versions.VCLUSTER_VIRTUAL_KUBERNETES[release]}",
                             f"{TEAM_REGISTRY}/etcd:3.6.8-0"})
    # The synced pods the platform puts into the team's vCluster: its DNS and vCluster's init container under the
    # team's registry, the smoke test's workloads under the site's mirrors; the host admits exactly these.
    assert set(platform_images(team)) == {
        f"{TEAM_REGISTRY}/{versions.COREDNS_IMAGES['1.36']}",
        f"{TEAM_REGISTRY}/{versions.REWRITE_HOSTS_IMAGE['repository']}:{versions.REWRITE_HOSTS_IMAGE['tag']}",
        f"{mirror_of('docker.io')}/{versions.SMOKE_CUDA_IMAGE}", f"{PREFIX}/registry-k8s-io/pause:3.10"}
    # The program's own objects (a release's chart reference is mirrors.charts' business).
    own = [(resource.name, reference) for resource in program.resources if resource.type != RELEASE_TYPE
           for _, reference in _upstream_references(resource.inputs)]
    assert not own


def test_a_deployed_etcd_comes_from_the_mirror_of_its_registry(tmp_path):
    config = put(one_team(eks_config()), "teams[0].vcluster.extraValues", {"controlPlane": {"backingStore": DEPLOYED_ETCD}})
    mirrored = _mirrored_site(config, "eks")
    images = [image for _, image in _release_images(rendered(mirrored, tmp_path, "eks"))]
    assert f"{mirror_of('registry.k8s.io')}/etcd:3.6.8-0" in images
    assert all(image.startswith(PREFIX + "/") for image in images)
    platform = run(mirrored, stack="eks").program_globals["platform"]
    assert "team team-nlp's deployed etcd" in registries_of(platform)["registry.k8s.io"]


@pytest.mark.parametrize("registry, problem, fix", [
    ("harbor.corp.example/vcluster/", "empty path component", "harbor.corp.example/vcluster"),
    ("https://harbor.corp.example", "names a scheme", "harbor.corp.example"),
    ("Harbor.corp.example", "upper-case", "harbor.corp.example"),
    (5000, "not a registry", "host[/path]"),
])
def test_a_value_vcluster_cannot_put_before_a_repository_is_refused(registry, problem, fix):
    found = assert_rejected(with_default_registry(dev_config(), registry), f"teams[0].vcluster.{DEFAULT_REGISTRY}",
                            registry, fix=fix)
    assert problem in found.problem and "before every image's repository" in found.problem


@pytest.mark.parametrize("registry", ["quay.io/acme", "nvcr.io/acme", "public.ecr.aws/acme",
                                      "registry-1.docker.io/acme"])
def test_a_value_on_a_public_registry_the_site_does_not_mirror_is_refused(registry):
    host = registry.split("/")[0]
    mirrored = _mirrored_site(dev_config(), "dev")
    assert host not in mirrored["mirrors"]["images"]
    found = assert_rejected(with_default_registry(mirrored, registry), f"teams[0].vcluster.{DEFAULT_REGISTRY}",
                            registry, fix=f"add a mirror of {host} to mirrors.images")
    assert "a public registry" in found.problem and "remove it" in found.fix
    # A site without mirrors pulls from where it says.
    assert load_platform(with_default_registry(dev_config(), registry))


def test_a_value_on_a_registry_the_site_mirrors_is_refused_with_the_mirrors_address():
    config = with_default_registry(_mirrored_site(dev_config(), "dev"), "ghcr.io/acme")
    found = assert_rejected(config, f"teams[0].vcluster.{DEFAULT_REGISTRY}", "ghcr.io/acme",
                            fix=f"{mirror_of('ghcr.io')}/acme")
    assert "past the mirror" in found.problem
    # The stack's own value is named once, at the stack's key.
    stacked = put(_mirrored_site(dev_config(), "dev"), f"vcluster.{DEFAULT_REGISTRY}", "docker.io/acme")
    assert [issue.key for issue in rejected(stacked).issues] == [f"vcluster.{DEFAULT_REGISTRY}"]
