"""Objects vCluster applies inside a tenant's virtual cluster (``experimental.deploy.vcluster.manifests``).

The chart takes one multi-document YAML string. Several parts of the program ship objects there, so
each appends its documents to what the values already hold instead of replacing the string.
"""

from __future__ import annotations

from typing import Sequence

import yaml

from config.merge import deep_merge


def with_vcluster_manifests(values: dict, documents: Sequence[dict]) -> dict:
    """``values`` with ``documents`` appended to the manifests vCluster applies in the virtual cluster."""
    if not documents:
        return values
    existing = (((values.get("experimental") or {}).get("deploy") or {}).get("vcluster") or {}).get("manifests") or ""
    added = yaml.safe_dump_all(list(documents), sort_keys=False)
    joined = f"{existing.rstrip()}\n---\n{added}" if existing.strip() else added
    return deep_merge(values, {"experimental": {"deploy": {"vcluster": {"manifests": joined}}}})
