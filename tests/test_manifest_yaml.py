"""Rendered manifests are read as Helm (Go YAML) reads them, not as YAML 1.1 does."""

from __future__ import annotations

import pytest
import yaml

from tools.charts.manifest_yaml import load_manifests

# A CRD enum as kube-prometheus-stack's AlertmanagerConfig CRD writes its label matcher operators.
MATCHERS = """\
spec:
  matchType:
    enum:
    - '!='
    - =
    - =~
  enabled: yes
  count: 3
"""


def test_a_plain_equals_sign_is_a_string_as_in_helm():
    with pytest.raises(yaml.constructor.ConstructorError):  # PyYAML's YAML 1.1 "value" type
        yaml.safe_load(MATCHERS)
    [document] = load_manifests(MATCHERS)
    assert document["spec"]["matchType"]["enum"] == ["!=", "=", "=~"]
    # Everything else resolves as before: Go YAML shares YAML 1.1's booleans.
    assert document["spec"]["enabled"] is True and document["spec"]["count"] == 3
