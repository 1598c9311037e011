"""Names Helm and vCluster read as text (config/key_types.py READ_AS_TEXT_BY_HELM).

The vCluster chart writes the release's name and namespace unquoted into its manifests, and Helm reads them with
go-yaml v2's YAML 1.1 resolver (through sigs.k8s.io/yaml); vCluster reads the manifests the program writes for inside
the tenant the same way. A name that resolver reads as anything but a string breaks the install, so the config refuses
it at every key that takes a DNS-1123 label. The resolver is read here at the versions Helm uses, and compared with the
rule by a re-implementation of it built from what was read."""

from __future__ import annotations

import datetime
import re

import pytest
from hypothesis import given, strategies as st

from config import ConfigError, load_platform
from config.key_types import READ_AS_TEXT_BY_HELM
from tests.config_spec import dev_config, put
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, git, mirrored_tag

HELM, SIGS_YAML, GO_YAML, VCLUSTER = "helm/helm", "kubernetes-sigs/yaml", "yaml/go-yaml", "loft-sh/vcluster"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
REFUSED = ["y", "yes", "n", "no", "true", "false", "on", "off", "null", "123", "0777", "089", "1e3", "7e-2", "0x1f",
           "0o17", "0b101", "2024-1-5", "2024-01-05"]
TEXT = ["team-yes", "yes-team", "y1", "nlp", "7b-models", "on-call", "0o18", "0b102", "1e", "e3", "2024-1", "2024-1-5x"]


def refused(issues, key: str, value: str) -> bool:
    return any(issue.key == key and issue.value == value for issue in issues)


def issues_of(config: dict) -> list:
    with pytest.raises(ConfigError) as error:
        load_platform(config)
    return error.value.issues


@pytest.mark.parametrize("value", REFUSED)
def test_a_team_name_yaml_reads_as_no_string_is_refused_once(value):
    issues = issues_of(put(dev_config(), "teams[0].name", value))
    [issue] = [issue for issue in issues if issue.key.startswith("teams[0]")]
    assert issue.key == "teams[0].name" and issue.value == value
    assert "go-yaml v2" in issue.problem and "team-yes" in issue.fix


@pytest.mark.parametrize("key", ["vclusterName", "namespace"])
@pytest.mark.parametrize("value", ["yes", "off", "null", "1e3", "2024-1-5"])
def test_a_release_name_or_namespace_yaml_reads_as_no_string_is_refused(key, value):
    assert refused(issues_of(put(dev_config(), f"teams[0].{key}", value)), f"teams[0].{key}", value)


@pytest.mark.parametrize("key, value", [("gpuOperator.namespace", "yes"), ("organization.name", "null"),
                                        ("observability.namespace", "2024-1-5")])
def test_every_name_key_refuses_them(key, value):
    config = put(dev_config(), key, value)
    if key.startswith("observability"):
        put(config, "observability.prometheus", "install")
    assert refused(issues_of(config), key, value)


@pytest.mark.parametrize("value", TEXT)
def test_names_yaml_reads_as_text_are_accepted(value):
    config = put(dev_config(), "teams[0].name", value)
    put(config, "teams[0].vclusterName", f"vc-{value}")
    put(config, "teams[0].namespace", value)
    team = load_platform(config).teams[0]
    assert (team.name, team.namespace) == (value, value)


# --- the resolver, read upstream -------------------------------------------------------------------


def resolver_sources() -> dict[str, str]:
    """go-yaml v2's resolve.go as each mirrored Helm release builds it: the go.yaml.in/yaml/v2 its go.mod requires,
    else the copy sigs.k8s.io/yaml carries (goyaml.v2, up to sigs.k8s.io/yaml v1.4)."""
    sources = {}
    for tag in MIRRORED_TAGS[HELM]:
        module = git(HELM, "show", f"{mirrored_tag(HELM, tag)}:go.mod")
        go_yaml = re.search(r"go\.yaml\.in/yaml/v2 (v\S+)", module)
        if go_yaml:
            sources[tag] = git(GO_YAML, "show", f"{mirrored_tag(GO_YAML, go_yaml.group(1))}:resolve.go")
            continue
        sigs = re.search(r"sigs\.k8s\.io/yaml (v\S+)", module).group(1)
        assert 'sigs.k8s.io/yaml/goyaml.v2"' in git(SIGS_YAML, "show", f"{mirrored_tag(SIGS_YAML, sigs)}:yaml.go")
        sources[tag] = git(SIGS_YAML, "show", f"{sigs}:goyaml.v2/resolve.go")
    return sources


class GoYamlV2:
    """go-yaml v2's resolution of a plain scalar, for DNS-1123 labels, from the parts of its source read above."""

    def __init__(self, source: str):
        table = source[source.index("resolveMapList = []struct"):source.index("m := resolveMap")]
        self.words = {word for word in re.findall(r'"([^"]*)"', table)}
        self.hinted = set(re.search(r'for _, c := range "([^"]+)" \{\s*t\[int\(c\)\] = \'M\'', source).group(1))
        self.float = re.compile(re.search(r"yamlStyleFloat = regexp\.MustCompile\(`([^`]+)`\)", source).group(1))
        formats = source[source.index("allowedTimestampFormats = []string{"):source.index("func parseTimestamp")]
        self.date_formats = re.findall(r'"([0-9-]+)"', formats)
        assert "strconv.ParseInt(plain, 0, 64)" in source and 'strings.HasPrefix(plain, "0b")' in source

    def reads_as_text(self, label: str) -> bool:
        if label[0] in self.hinted:
            return label not in self.words
        if not label[0].isdigit():
            return True
        return not (self._date(label) or self._integer(label) or self.float.fullmatch(label))

    def _date(self, label: str) -> bool:
        assert self.date_formats == ["2006-1-2"], "a new date-only layout: widen READ_AS_TEXT_BY_HELM's date pattern"
        found = re.fullmatch(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})", label)
        if not found:
            return False
        try:
            datetime.date(*map(int, found.groups()))
        except ValueError:
            return False
        return True

    @staticmethod
    def _integer(label: str) -> bool:
        # strconv.ParseInt(s, 0, 64), then ParseUint: a 0x, 0o or 0b prefix, a leading 0 for octal, else decimal.
        for prefix, digits, base in (("0x", "0-9a-f", 16), ("0o", "0-7", 8), ("0b", "01", 2)):
            if label.startswith(prefix):
                return re.fullmatch(f"[{digits}]+", label[2:]) is not None and int(label[2:], base) < 2 ** 64
        if label.startswith("0") and len(label) > 1:
            return re.fullmatch("[0-7]+", label) is not None and int(label, 8) < 2 ** 64
        return re.fullmatch("[0-9]+", label) is not None and int(label) < 2 ** 64


@pytest.fixture(scope="module")
def resolvers() -> dict[str, GoYamlV2]:
    return {tag: GoYamlV2(source) for tag, source in resolver_sources().items()}


def test_every_boolean_and_null_word_of_the_resolver_that_is_a_name_is_refused(resolvers):
    for tag, resolver in resolvers.items():
        names = {word for word in resolver.words if DNS_LABEL.fullmatch(word)}
        assert names == {"y", "yes", "n", "no", "true", "false", "on", "off", "null"}, tag
        assert not [word for word in names if READ_AS_TEXT_BY_HELM.passes(word)], tag


@given(st.one_of(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True),
                 st.sampled_from(REFUSED + TEXT),
                 st.from_regex(r"[0-9]{1,5}(e-?[0-9]{1,3})?|0[xob][0-9a-f]{1,4}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}",
                               fullmatch=True)))
def test_the_rule_refuses_every_name_the_resolver_reads_as_no_string(resolvers, label):
    for tag, resolver in resolvers.items():
        if not resolver.reads_as_text(label):
            assert not READ_AS_TEXT_BY_HELM.passes(label), (tag, label)
        elif not READ_AS_TEXT_BY_HELM.passes(label):
            # Refused though read as text: only a date-shaped label that is no date, or an integer past 64 bits.
            assert re.fullmatch(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}|[0-9]{20,}|0[xob][0-9a-f]{17,}", label), (tag, label)


def test_the_vcluster_chart_writes_the_release_s_name_and_namespace_unquoted():
    """Why the release's name and namespace need the rule: whole values the chart does not quote."""
    tag = mirrored_tag(VCLUSTER, ACCEPTED_VCLUSTER_TAGS[-1])
    found = git(VCLUSTER, "grep", "-h", "-E", r"^\s+(name|namespace): \{\{ \.Release\.(Name|Namespace) \}\}\s*$",
                tag, "--", "chart/templates")
    assert "namespace: {{ .Release.Namespace }}" in found and "name: {{ .Release.Name }}" in found
