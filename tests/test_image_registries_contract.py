"""Contract: how the node reads an image reference, and how vCluster carries one to the host, at every mirrored tag.

The ``image-registry`` rule (components/admission_images.py) and the entries of ``vcluster.allowedRegistries``
(config/image_registries.py) follow github.com/distribution/reference's reading of a reference, and the tests' oracle
(tests/image_reference_sim.py) composes its grammar from the source. A release that changes the default domain, the
official-image prefix, the legacy domain, the host detection or the grammar's composition fails here, as does a
containerd that stops parsing with that package or a vCluster that starts rewriting images or stops syncing their
changes.
"""

from __future__ import annotations

import itertools
import re

import pytest

from config.image_registries import (
    DEFAULT_DOMAIN, DIGEST, HOST, LEGACY_DOMAIN, LOCALHOST, OFFICIAL_PREFIX, PATH_COMPONENT, TAG,
)
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, CONTAINERD_CRI_V2_TAGS, MIRRORED_TAGS, git, mirrored_tag
from tests.image_reference_sim import REFERENCE, grammar_pieces, reference_grammar

CONTAINERD = "containerd/containerd"
VCLUSTER = "loft-sh/vcluster"
TRANSLATE = "pkg/controllers/resources/pods/translate/"
# How each release decides that a reference's first component is a host, and renames Docker Hub's names: the
# statements that carry those rules (whitespace aside). The oracle's registry_of implements exactly these.
HOST_DETECTION = {
    "v0.5.0": ["i := strings.IndexRune(name, '/')",
               "if i == -1 || (!strings.ContainsAny(name[:i], \".:\") && name[:i] != localhost && "
               "strings.ToLower(name[:i]) == name[:i]) { domain, remainder = defaultDomain, name } else "
               "{ domain, remainder = name[:i], name[i+1:] }",
               "if domain == legacyDefaultDomain { domain = defaultDomain }",
               "if domain == defaultDomain && !strings.ContainsRune(remainder, '/') "
               "{ remainder = officialRepoPrefix + remainder }"],
    "v0.6.0": ["maybeDomain, maybeRemoteName, ok := strings.Cut(name, \"/\") if !ok {",
               "return defaultDomain, officialRepoPrefix + name }",
               "case maybeDomain == localhost: domain, remoteName = maybeDomain, maybeRemoteName",
               "case maybeDomain == legacyDefaultDomain: domain, remoteName = defaultDomain, maybeRemoteName",
               "case strings.ContainsAny(maybeDomain, \".:\"):",
               "case strings.ToLower(maybeDomain) != maybeDomain: domain, remoteName = maybeDomain, maybeRemoteName",
               "default: domain, remoteName = defaultDomain, name",
               "if domain == defaultDomain && !strings.ContainsRune(remoteName, '/') "
               "{ remoteName = officialRepoPrefix + remoteName }"],
}
# How regexp.go composes the pieces (tests/image_reference_sim.py reference_grammar composes them the same way).
COMPOSITION = ["domainName = domainNameComponent + anyTimes(`\\.`+domainNameComponent)",
               "host = `(?:` + domainName + `|` + ipv6address + `)`",
               "domainAndPort = host + optionalPort",
               "pathComponent = alphanumeric + anyTimes(separator+alphanumeric)",
               "remoteName = pathComponent + anyTimes(`/`+pathComponent)",
               "namePat = optional(domainAndPort+`/`) + remoteName",
               "referencePat = anchored(capture(namePat), optional(`:`, capture(tag)), optional(`@`, "
               "capture(digestPat)))"]


def flat(source: str) -> str:
    """Go source without comments, its whitespace collapsed."""
    return " ".join(re.sub(r"//[^\n]*", "", source).split())


def test_the_tags_read_are_the_ones_the_detection_is_written_for():
    assert set(HOST_DETECTION) == set(MIRRORED_TAGS[REFERENCE])


@pytest.mark.parametrize("tag", MIRRORED_TAGS[REFERENCE])
def test_the_familiar_name_rules_are_the_ones_the_rule_follows(tag):
    tag = mirrored_tag(REFERENCE, tag)
    normalize = flat(git(REFERENCE, "show", f"{tag}:normalize.go"))
    for name, value in (("legacyDefaultDomain", LEGACY_DOMAIN), ("defaultDomain", DEFAULT_DOMAIN),
                        ("officialRepoPrefix", OFFICIAL_PREFIX + "/")):
        assert f'{name} = "{value}"' in normalize
    assert grammar_pieces(tag)["localhost"] == LOCALHOST
    missing = [statement for statement in HOST_DETECTION[tag] if statement not in normalize]
    assert missing == []
    # The name's path must be lower case (the remote part before a tag), and a bare image ID is refused.
    assert "strings.ToLower(remote) != remote" in normalize and "anchoredIdentifierRegexp.MatchString(s)" in normalize


@pytest.mark.parametrize("tag", MIRRORED_TAGS[REFERENCE])
def test_the_grammar_is_composed_as_the_oracle_composes_it(tag):
    source = flat(git(REFERENCE, "show", f"{mirrored_tag(REFERENCE, tag)}:regexp.go"))
    assert [line for line in COMPOSITION if line not in source] == []


def samples() -> list[str]:
    parts = ["a", "A", "0", "a-b", "a--b", "a_b", "a__b", "a___b", "a.b", "a..b", "-a", "a-", "ab.", "[::1]",
             "[fd00::5]", "[FD00::5]", "[g::1]", "x:5000", "x:", ":5000", "a" * 70, "w.", "_a", "a@b",
             "sha256:" + "f" * 32,
             "sha256:" + "f" * 31, "sha256+b64:" + "0" * 40, "SHA256:" + "F" * 40, "v1.0", "V1_0-x", ".v1", "a/b"]
    return parts + [a + b for a, b in itertools.product(parts, parts)]


@pytest.mark.parametrize("tag", MIRRORED_TAGS[REFERENCE])
def test_the_configs_grammar_is_the_upstream_one_in_lower_case(tag):
    """An entry's host and path, and the tags and digests the rule lets follow, are shaped as the package shapes
    them; the config asks for lower case where the package allows either."""
    upstream = reference_grammar(mirrored_tag(REFERENCE, tag))
    for text in samples():
        assert bool(re.fullmatch(PATH_COMPONENT, text)) == bool(upstream["path_component"].match(text)), text
        assert bool(re.fullmatch(TAG, text)) == bool(upstream["tag"].match(text)), text
        assert bool(re.fullmatch(DIGEST, text)) == bool(upstream["digest"].match(text)), text
        assert bool(re.fullmatch(HOST, text)) == (text == text.lower() and bool(upstream["host"].match(text))), text


@pytest.mark.parametrize("tag", CONTAINERD_CRI_V2_TAGS)
def test_containerd_pulls_the_reference_as_that_package_normalises_it(tag):
    tag = mirrored_tag(CONTAINERD, tag)
    required = re.search(r"github\.com/distribution/reference (v\S+)", git(CONTAINERD, "show", f"{tag}:go.mod"))
    assert required and required.group(1) in MIRRORED_TAGS[REFERENCE]
    pull = git(CONTAINERD, "show", f"{tag}:internal/cri/server/images/image_pull.go")
    assert "distribution.ParseDockerRef(name)" in pull


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_copies_images_unchanged_and_syncs_their_changes(tag):
    tag = mirrored_tag(VCLUSTER, tag)
    translator = flat(git(VCLUSTER, "show", f"{tag}:{TRANSLATE}translator.go"))
    for field in ("Containers", "InitContainers", "EphemeralContainers"):
        assert (f"pPod.Spec.{field}[i].Image = t.imageTranslator.Translate(pPod.Spec.{field}[i].Image)"
                in translator)
    diff = flat(git(VCLUSTER, "show", f"{tag}:{TRANSLATE}diff.go"))
    assert "newContainer.Image = translateImages.Translate(v.Image)" in diff
    for field in ("Containers", "InitContainers"):
        assert f"calcContainerImageDiff(pObj.Spec.{field}, vObj.Spec.{field}," in diff

