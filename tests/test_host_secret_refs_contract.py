"""A tenant's pod cannot name a host Secret: every field of a pod that names a Secret is renamed by the syncer.

The team's host namespace holds the vCluster's admin kubeconfig (``vc-<release>``) and its certificates. A
synced pod would read one of them if it could name it by its host name: the kubelet resolves a pod's Secret
references in the pod's namespace. vCluster's pod translator renames every such reference to the host name of
the tenant's own virtual Secret (``<name>-x-<namespace>-x-<release>``, or a 52-character prefix and a hash), which
no platform object is named like. This test walks the pod types vCluster vendors at every accepted tag,
collects every field that names a Secret, and fails when the translator leaves one unrenamed: a Kubernetes
upgrade that adds a volume type with a Secret reference turns it red.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, mirrored_tag
from tests.go_struct_fields import bare, local

VCLUSTER = "loft-sh/vcluster"
TYPES = "vendor/k8s.io/api/core/v1/types.go"
TRANSLATOR = "pkg/controllers/resources/pods/translate/translator.go"
EPHEMERAL_SYNC = "pkg/controllers/resources/pods/ephemeral_containers.go"
# A field that names a Secret object of the pod's namespace (not ``cephfs.secretFile``, a path on the node).
SECRET_FIELD = re.compile(r"(Secret(Name|Ref|KeyRef)|^ImagePullSecrets)$")
SECRET_TYPES = ("SecretProjection",)


def structs(types: str) -> dict[str, list[tuple[str, str]]]:
    """Each struct of ``types`` with its fields (Go name, bare type); an embedded struct is a field named like it."""
    return {name: [(field.go_name, bare(field.kind)) for field in fields] for name, fields in local(types)[0].items()}


def secret_references(types: str) -> set[tuple[str, str]]:
    """(the field holding it, the field naming the Secret) for every Secret a pod's spec can name."""
    graph, found, seen = structs(types), set(), set()
    pending = [("Spec", "PodSpec")]
    while pending:
        parent, kind = pending.pop()
        if kind in seen:
            continue
        seen.add(kind)
        for name, field_type in graph.get(kind, []):
            if SECRET_FIELD.search(name) or field_type in SECRET_TYPES:
                found.add((parent, name))
            elif field_type in graph:
                # An embedded struct's fields belong to the struct that embeds it.
                pending.append((parent if name == field_type else name, field_type))
    return found


def renamed(translator: str, parent: str, field: str) -> bool:
    """A line of the translator rewrites ``parent.field`` to the host name of a virtual Secret."""
    for line in translator.splitlines():
        plain = re.sub(r"\[\w+\]", "", line)
        if "mappings.Secrets()" in plain and re.search(rf"\b{parent}\.{field}\b", plain, re.IGNORECASE) \
                and re.search(rf"\b{parent}\.{field}(\.Name|\.SecretName)?\s*=", plain, re.IGNORECASE):
            return True
    return False


def test_the_walk_finds_the_secret_references_kubernetes_136_has():
    types = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, 'v0.36.1')}:{TYPES}")
    assert secret_references(types) == {
        ("Spec", "ImagePullSecrets"), ("ValueFrom", "SecretKeyRef"), ("EnvFrom", "SecretRef"),
        ("Secret", "SecretName"), ("Sources", "Secret"), ("ISCSI", "SecretRef"), ("RBD", "SecretRef"),
        ("FlexVolume", "SecretRef"), ("Cinder", "SecretRef"), ("CephFS", "SecretRef"), ("AzureFile", "SecretName"),
        ("ScaleIO", "SecretRef"), ("StorageOS", "SecretRef"), ("CSI", "NodePublishSecretRef")}


def test_a_reference_the_translator_copies_unchanged_is_caught():
    translator = "\tpPod.Spec.Volumes[i].CSI.NodePublishSecretRef.Name = vPod.Spec.Volumes[i].CSI.Name\n"
    assert not renamed(translator, "CSI", "NodePublishSecretRef")
    assert renamed(translator.replace("vPod.Spec.Volumes[i].CSI.Name", "mappings.VirtualToHostName(ctx, n, ns, "
                                      "mappings.Secrets())"), "CSI", "NodePublishSecretRef")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_every_secret_a_synced_pod_names_is_renamed_to_the_tenants_own(tag):
    tag = mirrored_tag(VCLUSTER, tag)
    references = secret_references(git(VCLUSTER, "show", f"{tag}:{TYPES}"))
    translator = git(VCLUSTER, "show", f"{tag}:{TRANSLATOR}")
    assert [f"{parent}.{field}" for parent, field in sorted(references)
            if not renamed(translator, parent, field)] == []
    # Env and envFrom references are renamed in every kind of container, also when `kubectl debug` adds one later.
    for containers in ("Containers", "InitContainers", "EphemeralContainers"):
        assert f"TranslateContainerEnv(ctx, pPod.Spec.{containers}[i].Env, pPod.Spec.{containers}[i].EnvFrom" \
            in translator, containers
    ephemeral = git(VCLUSTER, "show", f"{tag}:{EPHEMERAL_SYNC}")
    assert "TranslateContainerEnv(ctx, ephemeralContainer.Env, ephemeralContainer.EnvFrom" in ephemeral
    # The host pod runs as vCluster's workload account (or a renamed virtual one) without a token of its own.
    assert "pPod.Spec.AutomountServiceAccountToken = &False" in translator
    assert "pPod.Spec.ServiceAccountName = t.serviceAccount" in translator
