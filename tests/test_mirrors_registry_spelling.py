"""One registry, several spellings: a value a mirrored site writes is held to the mirrors by the registry it reaches,
not by its text (config/mirrors.py ``same_registry``).

distribution/reference keeps a reference's domain as written (only the exact legacy Docker Hub name is renamed), and
containerd looks up a host's hosts.toml directory by that text, then dials https on the host as written. So
``ghcr.io:443/acme`` or ``GHCR.IO/acme`` is pulled from ghcr.io itself although the site's map names ``ghcr.io``:
such a value is refused with its key, the value and the mirror's address; the site's own registry on a port of its
own is still accepted.
"""

from __future__ import annotations

import re

import pytest

from config import load_platform
from config.mirrors import Mirrors, same_registry, split_image
from tests.config_spec import assert_rejected, dev_config, put
from tests.conftest import CONTAINERD_CRI_V2_TAGS, MIRRORED_TAGS, git, mirrored_tag
from tests.image_reference_sim import REFERENCE, registry_of
from tests.test_mirrors import mirror_of
from tests.test_mirrors_default_registry import DEFAULT_REGISTRY, _mirrored_site, with_default_registry

CONTAINERD = "containerd/containerd"


@pytest.mark.parametrize("tag", CONTAINERD_CRI_V2_TAGS)
def test_containerd_finds_a_hosts_settings_by_its_text_and_dials_it_over_https(tag):
    """What same_registry relies on, read from containerd: the hosts.toml directory is the host's text (a port
    becomes ``_port_``), and a host without one is dialed as written, https unless it is localhost; only the exact
    ``docker.io`` becomes Docker Hub's endpoint."""
    tag = mirrored_tag(CONTAINERD, tag)
    hosts = git(CONTAINERD, "show", f"{tag}:core/remotes/docker/config/hosts.go")
    assert re.search(r'func hostDirectory\(host string\) string \{\s*idx := strings\.LastIndex\(host, ":"\)\s*'
                     r'if idx > 0 \{\s*return host\[:idx\] \+ "_" \+ host\[idx\+1:\] \+ "_"', hosts)
    assert 'if host == "docker.io" {' in hosts
    assert re.search(r'\} else \{\s*hosts\[len\(hosts\)-1\]\.host = host\s*if options\.DefaultScheme != "" \{\s*'
                     r'hosts\[len\(hosts\)-1\]\.scheme = options\.DefaultScheme\s*\} else \{\s*'
                     r'hosts\[len\(hosts\)-1\]\.scheme = "https"', hosts)
    paths = git(CONTAINERD, "show", f"{tag}:core/remotes/docker/config/config_unix.go")
    assert "filepath.Join(root, ch)" in paths and "filepath.Join(root, host)" in paths


@pytest.mark.parametrize("tag", MIRRORED_TAGS[REFERENCE])
@pytest.mark.parametrize("written, registry", [
    ("ghcr.io:443/acme/x:1", "ghcr.io"), ("GHCR.IO/acme/x:1", "ghcr.io"), ("ghcr.io:0443/acme/x:1", "ghcr.io"),
    ("docker.io:443/acme/x:1", "docker.io"), ("index.docker.io:443/acme/x:1", "docker.io"),
    ("registry.site.example:5000/x:1", "registry.site.example:5000"), ("ghcr.io:8443/acme/x:1", "ghcr.io:8443"),
    ("[fd00::5]:443/x:1", "[fd00::5]"), ("[fd00::5]:5000/x:1", "[fd00::5]:5000"),
])
def test_the_node_keeps_the_spelling_and_the_check_reads_the_registry(tag, written, registry):
    host = registry_of(written, mirrored_tag(REFERENCE, tag))[0]
    assert host == split_image(written)[0]
    assert same_registry(host) == registry


def mirrored() -> dict:
    return _mirrored_site(dev_config(), "dev")


@pytest.mark.parametrize("registry, upstream", [
    ("ghcr.io:443/acme", "ghcr.io"), ("ghcr.io:0443/acme", "ghcr.io"), ("docker.io:443/acme", "docker.io"),
])
def test_a_default_registry_on_a_mirrored_registry_behind_its_default_port_is_refused(registry, upstream):
    config = with_default_registry(mirrored(), registry)
    assert upstream in config["mirrors"]["images"]
    found = assert_rejected(config, f"teams[0].vcluster.{DEFAULT_REGISTRY}", registry,
                            fix=f"{mirror_of(upstream)}/acme")
    assert "past the mirror" in found.problem and f"the registry {upstream}, written another way" in found.problem


@pytest.mark.parametrize("image, upstream, mirrored_image", [
    ("ghcr.io:443/loft-sh/vcluster-oss:0.36.1", "ghcr.io", "loft-sh/vcluster-oss:0.36.1"),
    ("GHCR.IO/loft-sh/vcluster-oss:0.36.1", "ghcr.io", "loft-sh/vcluster-oss:0.36.1"),
    ("docker.io:443/fluent/fluent-bit:3.2", "docker.io", "fluent/fluent-bit:3.2"),
])
def test_a_teams_image_on_a_mirrored_registry_spelt_another_way_is_refused(image, upstream, mirrored_image):
    extra = {"controlPlane": {"statefulSet": {"sidecarContainers": [{"name": "logs", "image": image}]}}}
    config = put(mirrored(), "teams[0].vcluster.extraValues", extra)
    found = assert_rejected(config, "teams[0].vcluster.extraValues.controlPlane.statefulSet.sidecarContainers[0].image",
                            image, fix=f"{mirror_of(upstream)}/{mirrored_image}")
    assert "past the mirror" in found.problem


def test_a_public_registry_nobody_mirrors_is_refused_in_any_spelling():
    config = with_default_registry(mirrored(), "quay.io:443/acme")
    assert "quay.io" not in config["mirrors"]["images"]
    found = assert_rejected(config, f"teams[0].vcluster.{DEFAULT_REGISTRY}", "quay.io:443/acme",
                            fix="add a mirror of quay.io")
    assert "a public registry" in found.problem


@pytest.mark.parametrize("registry", ["registry.site.example:5000/platform", "registry.site.example:443/platform",
                                      "ghcr.io:8443/acme"])
def test_the_sites_own_registry_on_any_port_is_accepted(registry):
    """A port other than 443 is another server: the site's own registry (or a mirror) may listen there."""
    assert load_platform(with_default_registry(mirrored(), registry)).teams
    extra = {"controlPlane": {"statefulSet": {"sidecarContainers": [{"name": "logs", "image": f"{registry}/x:1"}]}}}
    assert load_platform(put(mirrored(), "teams[0].vcluster.extraValues", extra)).teams


@pytest.mark.parametrize("upstream", ["ghcr.io:443", "docker.io:443"])
def test_a_mirror_keyed_by_another_spelling_is_refused(upstream):
    found = assert_rejected(put(dev_config(), "mirrors.images", {upstream: "harbor.corp.example/x"}),
                            f"mirrors.images.{upstream}", "harbor.corp.example/x",
                            fix=f"write {upstream.removesuffix(':443')}")
    assert "written another way" in found.problem


def test_an_image_written_another_way_maps_to_its_registrys_mirror():
    mirrors = Mirrors(images={"ghcr.io": "harbor.corp.example/ghcr", "docker.io": "harbor.corp.example/hub"})
    assert mirrors.image("ghcr.io:443/acme/x:1") == "harbor.corp.example/ghcr/acme/x:1"
    assert mirrors.image("docker.io:443/busybox:1.38.0") == "harbor.corp.example/hub/library/busybox:1.38.0"
    assert mirrors.registry("GHCR.IO/loft-sh") == "harbor.corp.example/ghcr/loft-sh"
    assert mirrors.image("ghcr.io:8443/acme/x:1") == "ghcr.io:8443/acme/x:1"
