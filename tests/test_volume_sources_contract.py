"""The ``volume-sources`` allowlist (components/admission_volumes.py) is derived from upstream, and stays so.

(a) Every volume kind and projection source of the pod schema of every Kubernetes a site may run (the schemas
kubernetes-validate ships, from config/versions.py's floor on) is allowed or refused here with its reason: a
Kubernetes that adds a kind turns this red until someone classifies it. Each is then sent through both policies.
(b) At every accepted vCluster tag, the kinds ``translateVolumes``/``translateProjectedVolume`` confine to the
tenant's namespace (the object they name is renamed and nothing else of them points anywhere) or rewrite are read
from the translator, and the host allowlist holds only those and the kinds that name nothing outside the pod.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from components.admission_volumes import (
    HOST_PROJECTED_SOURCES, HOST_VOLUME_SOURCES, REWRITTEN_PROJECTED_SOURCES, REWRITTEN_VOLUME_SOURCES,
)
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, dev_config, git, go_function, mirrored_tag
from tests.go_struct_fields import bare, local
from tests.served_objects import accepted_kubernetes
from tests.tenant_sim import KAI_SCHEDULER, Tenant, tenant_of, virtual_pod
from tests.test_virtual_defaults import Inside
from tests.vcluster_volumes import PROJECTED_NAMES, VOLUME_NAMES

VCLUSTER = "loft-sh/vcluster"
TRANSLATE = "pkg/controllers/resources/pods/translate"
TYPES = "vendor/k8s.io/api/core/v1/types.go"

# Volume kinds the host refuses, and why: the kubelet mounts them from the node, with its network address and its
# or the driver's credentials, outside the tenant's namespace and every NetworkPolicy.
REFUSED_VOLUME_SOURCES = {
    "hostPath": "the node's own files (Pod Security baseline refuses it too)",
    "nfs": "any export that trusts the node's address, another team's data included",
    "iscsi": "any target the node reaches; only its CHAP Secret is renamed",
    "rbd": "any Ceph image the node reaches; only its Secret is renamed",
    "cephfs": "any CephFS the node reaches; only its Secret is renamed",
    "glusterfs": "any Gluster volume behind the named Endpoints, which a tenant may point anywhere",
    "fc": "any Fibre Channel LUN zoned to the node",
    "flexVolume": "a driver binary installed on the node, run as root with the tenant's options",
    "csi": "an inline volume of any installed CSI driver, authenticated as the host pod's account or the node",
    "awsElasticBlockStore": "CSI migration hands the volume ID to the EBS CSI driver, which attaches any volume "
                            "its role may",
    "gcePersistentDisk": "CSI migration hands the disk name to the installed driver",
    "azureDisk": "CSI migration hands the disk URI to the installed driver",
    "azureFile": "any share of the named account; only the key's Secret is renamed",
    "cinder": "CSI migration hands the volume ID to the installed driver",
    "vsphereVolume": "CSI migration hands the disk path to the installed driver",
    "portworxVolume": "CSI migration hands the volume ID to the installed driver",
    "photonPersistentDisk": "a disk ID of the node's cloud (the plugin is gone; refused rather than trusted)",
    "quobyte": "any Quobyte registry the node reaches (the plugin is gone; refused rather than trusted)",
    "scaleIO": "any ScaleIO system the node reaches (the plugin is gone); only its Secret is renamed",
    "storageos": "any StorageOS volume the node reaches (the plugin is gone); only its Secret is renamed",
    "flocker": "any Flocker dataset the node reaches (the plugin is gone; refused rather than trusted)",
    "gitRepo": "git runs on the node, as root, on a repository the tenant names (hooks included)",
}
REFUSED_PROJECTED_SOURCES = {
    "clusterTrustBundle": "the host cluster's trust bundles, not the virtual cluster's",
    "podCertificate": "a certificate from a signer of the host cluster, for the host pod",
}
# Kinds that name nothing outside the pod: the syncer passes them as written, and that is safe.
POD_LOCAL_VOLUME_SOURCES = {
    "emptyDir": "scratch space of the pod on the node, counted against its own limits",
    "downwardAPI": "the pod's own fields, which the syncer points at the host pod's copies",
    "image": "an image the pod could run as a container anyway, pulled the way its containers' images are",
}
POD_LOCAL_PROJECTED_SOURCES = {"downwardAPI": POD_LOCAL_VOLUME_SOURCES["downwardAPI"]}
# Fields that only shape how a source is shown in the pod, never where it comes from.
PRESENTATION = {"items", "defaultMode", "optional", "readOnly"}
# Volumes the translator appends itself: /etc/hosts rewriting (hosts.go) adds scratch space; the host path mapper
# (hostpath.go) mirrors a hostPath volume the tenant's pod already has, which the rule refuses.
APPENDED_BESIDE_A_REFUSED_VOLUME = {"hostPath"}


def schema_kinds(folder: str, definition: str) -> set[str]:
    definitions = json.loads((Path(folder) / "_definitions.json").read_text())["$defs"]
    return set(definitions[f"io.k8s.api.core.v1.{definition}"]["properties"]) - {"name"}


@pytest.mark.parametrize("folder", accepted_kubernetes(), ids=lambda folder: Path(folder).name)
def test_every_volume_kind_of_every_accepted_kubernetes_is_classified(folder):
    volume, projected = schema_kinds(folder, "Volume"), schema_kinds(folder, "VolumeProjection")
    allowed = {*HOST_VOLUME_SOURCES, *REWRITTEN_VOLUME_SOURCES, "projected"}
    allowed_projected = {*HOST_PROJECTED_SOURCES, *REWRITTEN_PROJECTED_SOURCES}
    assert volume - allowed - set(REFUSED_VOLUME_SOURCES) == set(), "classify the new kind in this file"
    assert projected - allowed_projected - set(REFUSED_PROJECTED_SOURCES) == set(), "classify the new source"
    assert not allowed & set(REFUSED_VOLUME_SOURCES) and not allowed_projected & set(REFUSED_PROJECTED_SOURCES)


def test_no_classified_kind_is_unknown_to_every_accepted_kubernetes():
    volume = set().union(*(schema_kinds(folder, "Volume") for folder in accepted_kubernetes()))
    projected = set().union(*(schema_kinds(folder, "VolumeProjection") for folder in accepted_kubernetes()))
    assert {*HOST_VOLUME_SOURCES, *REWRITTEN_VOLUME_SOURCES, "projected", *REFUSED_VOLUME_SOURCES} <= volume
    assert {*HOST_PROJECTED_SOURCES, *REWRITTEN_PROJECTED_SOURCES, *REFUSED_PROJECTED_SOURCES} <= projected


@pytest.fixture(scope="module")
def tenant(dev_run) -> Tenant:
    return tenant_of(dev_run, dev_config(), "team-nlp")


def _pod(tenant: Tenant, volume: dict) -> dict:
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, volumes=[volume])


def _verdicts(tenant: Tenant, volumes: dict[str, dict]) -> tuple[dict, dict]:
    """name -> the rules refusing a host pod with that volume exactly, and a virtual pod with it inside."""
    inside, host, virtual = Inside(tenant), {}, {}
    for name, volume in volumes.items():
        synced = tenant.host_pod(_pod(tenant, volume))
        synced["spec"]["volumes"] = [volume]
        host[name] = {m[1:m.index("]")] for m in tenant.create_host(synced)}
        virtual[name] = {m[1:m.index("]")] for m in inside.create(_pod(tenant, volume))[1]}
    return host, virtual


def test_each_kind_is_refused_or_admitted_on_the_host_and_inside_as_classified(tenant):
    kinds = {kind: {"name": "v", kind: {}} for kind in
             (*HOST_VOLUME_SOURCES, *REWRITTEN_VOLUME_SOURCES, *REFUSED_VOLUME_SOURCES)}
    sources = {f"projected/{kind}": {"name": "v", "projected": {"sources": [{kind: {}}]}} for kind in
               (*HOST_PROJECTED_SOURCES, *REWRITTEN_PROJECTED_SOURCES, *REFUSED_PROJECTED_SOURCES)}
    host, virtual = _verdicts(tenant, {**kinds, **sources})
    refused = {*REFUSED_VOLUME_SOURCES, *(f"projected/{kind}" for kind in REFUSED_PROJECTED_SOURCES)}
    rewritten = {*REWRITTEN_VOLUME_SOURCES, *(f"projected/{kind}" for kind in REWRITTEN_PROJECTED_SOURCES)}
    assert {name for name, rules in host.items() if "volume-sources" in rules} == refused | rewritten
    assert {name for name, rules in virtual.items() if "volume-sources" in rules} == refused


# --- (b) what vCluster's translator confines to the tenant's namespace ---------------------------------------------


def go_structs(types: str) -> dict[str, dict[str, tuple[str, str]]]:
    """struct -> Go field -> (JSON name, bare type); an embedded (inline) struct's JSON name is empty. A struct of
    another package embedded (TypeMeta, ObjectMeta) is left out: its fields are not this file's."""
    return {name: {field.go_name: (field.name, bare(field.kind)) for field in fields
                   if not (field.embedded and "." in field.kind)}
            for name, fields in local(types)[0].items()}


def _field(structs: dict, struct: str, go_name: str) -> tuple[tuple[str, ...], str]:
    """(JSON path, type) of Go field ``go_name`` of ``struct``, looked up through embedded structs."""
    fields = structs[struct]
    if go_name in fields:
        json_name, kind = fields[go_name]
        return ((json_name,) if json_name else ()), kind
    for json_name, kind in fields.values():
        if not json_name and kind in structs:
            try:
                return _field(structs, kind, go_name)
            except KeyError:
                continue
    raise KeyError(f"{struct}.{go_name}")


def json_path(structs: dict, struct: str, go_path: str) -> tuple[str, ...]:
    path: tuple[str, ...] = ()
    for go_name in go_path.split("."):
        step, struct = _field(structs, struct, go_name)
        path += step
    return path


def json_fields(structs: dict, struct: str) -> set[str]:
    """Every JSON field of ``struct``, embedded structs' included."""
    names = set()
    for json_name, kind in structs[struct].values():
        names |= {json_name} if json_name else json_fields(structs, kind)
    return names


class Translator:
    """What translateVolumes and translateProjectedVolume do to each kind, at one vCluster tag, in JSON names."""

    def __init__(self, tag: str):
        source = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:{TRANSLATE}/translator.go")
        self.structs = go_structs(git(VCLUSTER, "show", f"{tag}:{TYPES}"))
        volumes = go_function(source, "(t *translator) translateVolumes")
        projected = go_function(source, "(t *translator) translateProjectedVolume")
        self.renamed = self._renamed(volumes, r"pPod\.Spec\.Volumes\[i\]", "Volume")
        self.renamed_projected = self._renamed(projected, r"projectedVolume\.Sources\[i\]", "VolumeProjection")
        self.replaced, self.replacements = self._replaced(volumes, r"pPod\.Spec\.Volumes\[i\]", "Volume")
        self.replaced_projected, self.projected_replacements = self._replaced(
            projected, r"projectedVolume\.Sources\[i\]", "VolumeProjection")

    def _renamed(self, body: str, item: str, struct: str) -> dict[str, tuple[str, ...]]:
        """kind -> the path of the name the syncer renames to a host name of the tenant's namespace."""
        found = {}
        for go_path in re.findall(rf"{item}\.([\w.]+) = mappings\.VirtualToHostName\(", body):
            kind, *path = json_path(self.structs, struct, go_path)
            found[kind] = tuple(path)
        return found

    def _replaced(self, body: str, item: str, struct: str) -> tuple[set[str], set[str]]:
        """(kinds the syncer removes, kinds it writes in their place)."""
        removed = {json_path(self.structs, struct, name)[0] for name in re.findall(rf"{item}\.(\w+) = nil", body)}
        added = {json_path(self.structs, struct, name)[0] for name in re.findall(rf"{item}\.(\w+) = &corev1\.", body)}
        return removed, added

    def source_fields(self, struct: str, kind: str) -> set[str]:
        return json_fields(self.structs, _field(self.structs, struct, self._go_name(struct, kind))[1])

    def _go_name(self, struct: str, kind: str) -> str:
        names = {json_name: go for go, (json_name, _) in self.structs["VolumeSource" if struct == "Volume"
                                                                       else struct].items()}
        return names[kind]

    def confined(self, struct: str, renamed: dict[str, tuple[str, ...]]) -> set[str]:
        """Kinds whose one reference the syncer renames into the namespace and whose other fields only present it."""
        return {kind for kind, path in renamed.items()
                if self.source_fields(struct, kind) - {path[0]} <= PRESENTATION}


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_host_allows_only_kinds_the_syncer_confines_to_the_namespace_or_that_name_nothing(tag):
    translator = Translator(tag)
    confined = translator.confined("Volume", translator.renamed)
    confined_projected = translator.confined("VolumeProjection", translator.renamed_projected)
    assert confined and confined_projected, "the translator renames no object: read it again"
    # Pod-local kinds name nothing the syncer would have to rename.
    assert not set(POD_LOCAL_VOLUME_SOURCES) & set(translator.renamed)
    assert not set(POD_LOCAL_PROJECTED_SOURCES) & set(translator.renamed_projected)
    assert set(HOST_VOLUME_SOURCES) <= confined | set(POD_LOCAL_VOLUME_SOURCES)
    assert set(HOST_PROJECTED_SOURCES) <= confined_projected | set(POD_LOCAL_PROJECTED_SOURCES)
    # A kind of which the syncer renames only a credential or an Endpoints still mounts from outside: refused.
    assert set(translator.renamed) - confined <= set(REFUSED_VOLUME_SOURCES)
    assert set(translator.renamed) - confined, "the translator renames no credential: read it again"


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_only_a_virtual_pod_may_carry_what_the_syncer_rewrites_into_allowed_kinds(tag):
    translator = Translator(tag)
    assert set(REWRITTEN_VOLUME_SOURCES) == translator.replaced
    assert set(REWRITTEN_PROJECTED_SOURCES) == translator.replaced_projected
    assert translator.replacements <= set(HOST_VOLUME_SOURCES)
    assert translator.projected_replacements <= set(HOST_PROJECTED_SOURCES)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_volumes_the_translator_adds_itself_are_allowed_or_beside_a_refused_one(tag):
    files = git(VCLUSTER, "ls-tree", "--name-only", f"{mirrored_tag(VCLUSTER, tag)}:{TRANSLATE}").split()
    source = "".join(git(VCLUSTER, "show", f"{tag}:{TRANSLATE}/{name}") for name in files
                     if name.endswith(".go") and not name.endswith("_test.go"))
    go_kinds = re.findall(r"Volumes = append\([^)]*?corev1\.Volume\{.*?VolumeSource: corev1\.VolumeSource\{\s*(\w+):",
                          source, re.DOTALL)
    structs = go_structs(git(VCLUSTER, "show", f"{tag}:{TYPES}"))
    kinds = {json_path(structs, "Volume", kind)[0] for kind in go_kinds}
    assert kinds, "the translator adds no volume: read it again"
    assert kinds <= set(HOST_VOLUME_SOURCES) | APPENDED_BESIDE_A_REFUSED_VOLUME
    assert APPENDED_BESIDE_A_REFUSED_VOLUME <= set(REFUSED_VOLUME_SOURCES)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_simulator_renames_what_the_translator_renames(tag):
    translator = Translator(tag)
    assert VOLUME_NAMES == translator.renamed
    assert PROJECTED_NAMES == translator.renamed_projected
