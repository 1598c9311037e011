"""The program's YAML writer (components/yaml_text.py): libyaml where it writes PyYAML's text, PyYAML elsewhere,
the same text either way; and each tenant's in-vCluster defaults take the fast path."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.tenant_dns import corefile
from components.virtual_defaults import virtual_defaults_values, virtual_manifests
from components.yaml_text import written_by_libyaml, yaml_documents
from ops.sites import platform_of
from tests.conftest import dev_config, eks_config
from tools.offline.mocks import fake_kubeconfig, fake_tenant_kubeconfig

WIDE = 1_000_000
# What libyaml and PyYAML agree on: printable ASCII, tabs and newlines (with YAML's indicators and quotes
# made likely), non-empty keys, and any number, boolean or null.
AGREED_TEXT = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)
                      | st.sampled_from(["\n", "\t", " ", "'", '"', ":", "#", "-", "&", "*", "!"]))


def documents(text, keys):
    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text)
    tree = st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)), max_leaves=24)
    return st.lists(st.dictionaries(keys, tree, min_size=1, max_size=4) | st.lists(tree, min_size=1, max_size=3),
                    min_size=1, max_size=3)


@settings(max_examples=300)
@given(documents(AGREED_TEXT | st.text(alphabet="ab \n'\"", min_size=100, max_size=400), AGREED_TEXT.filter(bool)),
       st.sampled_from([40, 80, WIDE]))
def test_libyaml_writes_pyyamls_text_on_what_they_agree_on(written, width):
    if width == WIDE:
        assert written_by_libyaml(written, width)
    assert yaml_documents(written, sort_keys=False, width=width) == \
        yaml.safe_dump_all(written, sort_keys=False, width=width)


@settings(max_examples=300)
@given(documents(st.text(), st.text()), st.sampled_from([None, WIDE]))
def test_any_other_document_is_written_as_pyyaml_writes_it(written, width):
    assert yaml_documents(written, sort_keys=False, width=width) == \
        yaml.safe_dump_all(written, sort_keys=False, width=width)


@pytest.mark.parametrize("document, width", [
    ({"": None}, WIDE),  # libyaml writes an empty key without the "? " PyYAML gives it
    ({"key": "0\x1f\x1f\x1f\u0100\U00010000" * 8}, 80),  # libyaml wraps the escapes at another column
    ({"Corefile": corefile("10.96.0.10")}, 80),  # a long double-quoted string: wrapped at other columns
    ({"nan": float("nan")}, WIDE),
])
def test_documents_libyaml_writes_differently_take_pyyaml(document, width):
    assert not written_by_libyaml([document], width)
    assert yaml_documents([document], width=width) == yaml.safe_dump_all([document], width=width)


@pytest.mark.parametrize("stack, config", [("dev", dev_config), ("eks", eks_config)])
def test_each_tenants_in_vcluster_defaults_take_libyaml(stack, config):
    # PyYAML's wheels (requirements.txt) ship libyaml; without it a large site runs seconds slower.
    assert yaml.__with_libyaml__
    for team in platform_of(config(), stack=stack).teams:
        manifests = virtual_manifests(team)
        assert written_by_libyaml(manifests, WIDE), team.name
        text = virtual_defaults_values(team)["experimental"]["deploy"]["vcluster"]["manifests"]
        assert text == yaml.safe_dump_all(manifests, sort_keys=False, width=WIDE)


@pytest.mark.parametrize("name", ["team-nlp", "a-team-with-a-long-name-" + "x" * 40])
def test_the_offline_mocks_kubeconfigs_are_the_text_pyyaml_writes(name):
    # The mocks write them with a width no line reaches, so libyaml writes them; a kubeconfig's long values (a
    # certificate in base64) have no space to fold at, so PyYAML at its own width writes the same text.
    tenant = fake_tenant_kubeconfig(name, "https://localhost:8443")
    assert max(map(len, tenant.splitlines())) > 80  # past PyYAML's width: the case the width matters for
    for text in (tenant, fake_kubeconfig(name, "https://10.0.0.1")):
        assert text == yaml.safe_dump(yaml.safe_load(text), sort_keys=False)
