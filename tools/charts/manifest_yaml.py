"""Rendered manifests read as Helm reads them.

Helm parses what a chart renders with Go YAML (sigs.k8s.io/yaml). PyYAML's safe loader follows YAML
1.1, which gives a plain ``=`` the type "value" (``tag:yaml.org,2002:value``) and then has no
constructor for it: kube-prometheus-stack's CRDs list ``=`` as an enum member (a label matcher
operator), so PyYAML refuses a file Helm installs. Go YAML reads ``=`` as a string, and so does
this loader; every other scalar resolves as with PyYAML's safe loader (Go YAML shares YAML 1.1's
booleans ``yes``/``no``/``on``/``off``).
"""

from __future__ import annotations

from typing import Any, Iterator

import yaml

# Rendered charts hold megabytes of CRDs: libyaml's parser when PyYAML has it.
_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_VALUE_TAG = "tag:yaml.org,2002:value"


class HelmManifestLoader(_BASE):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader without YAML 1.1's ``=`` (value) type."""


HelmManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _VALUE_TAG]
    for first, resolvers in _BASE.yaml_implicit_resolvers.items()
}


def load_manifests(text: str) -> Iterator[Any]:
    """The YAML documents of a rendered file, as Helm reads them (may raise ``yaml.YAMLError``)."""
    return yaml.load_all(text, Loader=HelmManifestLoader)
