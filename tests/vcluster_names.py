"""How vCluster 0.36.1 names a tenant's objects and label keys on the host (pkg/util/translate, pkg/mappings).

Four label keys are renamed ``vcluster.loft.sh/label-<release>-x-<sha256(key)[:10]>`` (``TRANSLATED_LABELS``);
every other key passes as written. An object of the tenant's namespace becomes ``<name>-x-<namespace>-x-<release>``,
hashed above 63 characters, ``kube-root-ca.crt`` included: the configmaps mapper's special name for it
(``vcluster-kube-root-ca.crt-x-<release>``) applies only where the host name would stay ``kube-root-ca.crt``, which
single-namespace sync never gives (tests/test_vcluster_sync_real.py runs the mapper).
"""

from __future__ import annotations

import hashlib

TRANSLATED_LABELS = ("release", "vcluster.loft.sh/namespace", "vcluster.loft.sh/managed-by",
                     "vcluster.loft.sh/controlled-by")


def safe_concat_name(*parts: str) -> str:
    """vCluster's SafeConcatName: joined with '-', hashed above 63 characters."""
    full = "-".join(parts)
    if len(full) <= 63:
        return full
    return (full[:52] + "-" + hashlib.sha256(full.encode()).hexdigest()[:10]).replace(".-", "-")


def translated_label(prefix: str, release: str, key: str) -> str:
    return safe_concat_name(prefix, release, "x", hashlib.sha256(key.encode()).hexdigest()[:10])


def host_label_key(key: str, release: str) -> str:
    return translated_label("vcluster.loft.sh/label", release, key) if key in TRANSLATED_LABELS else key


def host_object_name(name: str, namespace: str, release: str) -> str:
    """The host name of an object of the tenant's namespace (mappings.VirtualToHostName)."""
    return safe_concat_name(name, "x", namespace, "x", release)
