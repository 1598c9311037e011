"""Every pod field of every Kubernetes a site may run is classified (components/admission_pod_fields.py), and each
class holds against upstream and by attack.

(a) The fields of the pod spec and the objects below it, read from the pod schema of every accepted Kubernetes (the
schemas kubernetes-validate ships, config/versions.py's floor on): a release that adds one turns this red until it is
classified. (b) Each ``rewritten`` field is rewritten by the translator function named, read at every accepted
vCluster tag; claim names are not (claim sync stays off). (c) Each ``pod-security`` field's control is a baseline
check of k8s.io/pod-security-admission at every mirrored Kubernetes that reads that field. (d) Each ``refused`` or
``constrained`` field is refused by the rule named, and each ``pod-security`` one by its control, on a hostile pod
as vCluster syncs it; each ``harmless`` field, set to a real value on an honest pod, is admitted.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from components.admission_pod_fields import (
    CONSTRAINED, HARMLESS, NESTED, POD_FIELDS, POD_SECURITY, REFUSED, REWRITTEN,
)
from config.virtual_cluster import COVERED_TO_HOST_SYNCS
from tests.config_spec import put
from tests.conftest import (
    ACCEPTED_TAGS, ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, dev_config, git, go_function, mirrored_tag, run,
)
from tests.pod_field_examples import EPHEMERAL_REFUSED_BY_API, HARMLESS_EXAMPLES, HOSTILE_EXAMPLES, place
from tests.tenant_sim import KAI_SCHEDULER, Tenant, container, tenant_of, virtual_pod
from tests.test_volume_sources_contract import TRANSLATE, TYPES, VCLUSTER, accepted_kubernetes, go_structs
from tools.deployability.pod_security import violations

POD_SECURITY_REPO = "kubernetes/pod-security-admission"
KAI = "kai-scheduler/KAI-Scheduler"
# The control names of tools/deployability/pod_security.py and the baseline check of k8s.io/pod-security-admission
# (policy/check_<id>.go) that holds each.
POD_SECURITY_CHECKS = {"Host Namespaces": "hostNamespaces", "Privileged Containers": "privileged",
                       "Capabilities": "capabilities_baseline", "Host Ports": "hostPorts", "/proc Mount Type": "procMount",
                       "AppArmor": "appArmorProfile", "SELinux": "seLinuxOptions", "Seccomp": "seccompProfile_baseline",
                       "Sysctls": "sysctls", "HostProcess": "windowsHostProcess"}


def _definitions(folder: str) -> dict:
    return json.loads((Path(folder) / "_definitions.json").read_text())["$defs"]


def _fields(definitions: dict, definition: str) -> dict:
    return definitions.get(f"io.k8s.api.core.v1.{definition}", {}).get("properties", {})


def _verdicts(kind: str):
    return [(definition, field, verdict) for definition, fields in POD_FIELDS.items()
            for field, verdict in fields.items() if verdict.kind == kind]


# --- (a) every field of every accepted Kubernetes ---------------------------------------------------------------


@pytest.mark.parametrize("folder", accepted_kubernetes(), ids=lambda folder: Path(folder).name)
def test_every_pod_field_of_every_accepted_kubernetes_is_classified(folder):
    definitions = _definitions(folder)
    for definition, classified in POD_FIELDS.items():
        new = set(_fields(definitions, definition)) - set(classified)
        assert not new, (
            f"Kubernetes {Path(folder).name} has {definition} fields {sorted(new)} that reach the host as the tenant "
            "writes them: classify each in components/admission_pod_fields.py (refused or constrained by a host rule, "
            "judged by Pod Security, rewritten by vCluster's translator, or harmless with the reason), refuse it in "
            "the host policy if it reaches the node or another team, and give it an example in "
            "tests/pod_field_examples.py")


@pytest.mark.parametrize("folder", accepted_kubernetes(), ids=lambda folder: Path(folder).name)
def test_each_nested_field_holds_the_object_it_is_classified_as(folder):
    definitions = _definitions(folder)
    for definition, field, verdict in _verdicts(NESTED):
        assert verdict.by in POD_FIELDS, f"{definition}.{field}: classify {verdict.by}"
        schema = _fields(definitions, definition).get(field)
        if schema is not None:
            ref = (schema.get("items") or schema).get("$ref", "")
            assert ref.endswith(f".{verdict.by}"), f"{definition}.{field} is {ref}, not {verdict.by}"


def test_no_classified_field_is_unknown_to_every_accepted_kubernetes():
    known: dict[str, set] = {}
    for folder in accepted_kubernetes():
        for definition in POD_FIELDS:
            known.setdefault(definition, set()).update(_fields(_definitions(folder), definition))
    for definition, classified in POD_FIELDS.items():
        assert set(classified) <= known[definition], f"{definition}: {set(classified) - known[definition]}"


# --- (b) what vCluster's translator rewrites --------------------------------------------------------------------


def _translator_source(tag: str) -> str:
    files = git(VCLUSTER, "ls-tree", "--name-only", f"{mirrored_tag(VCLUSTER, tag)}:{TRANSLATE}").split()
    return "".join(git(VCLUSTER, "show", f"{tag}:{TRANSLATE}/{name}") for name in files
                   if name.endswith(".go") and not name.endswith("_test.go"))


def _function(source: str, name: str) -> str:
    """The pod translator's function or method ``name`` (image_translator.go has a Translate of its own)."""
    start = re.search(rf"\nfunc (\(t \*translator\) )?{name}\(", source)
    assert start, f"the translator has no function {name}: read it again"
    return source[start.start():source.index("\n}\n", start.start())]


def _go_name(structs: dict, definition: str, field: str) -> str:
    return next(go for go, (json_name, _) in structs[definition].items() if json_name == field)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_each_rewritten_field_is_rewritten_by_the_translator_function_named(tag):
    source, structs = _translator_source(tag), go_structs(git(VCLUSTER, "show", f"{tag}:{TYPES}"))
    translate = _function(source, "Translate")
    for definition, field, verdict in _verdicts(REWRITTEN):
        go, body = _go_name(structs, definition, field), _function(source, verdict.by)
        assigned = re.search(rf"\.{go}\b[\w.\[\]]* = ", body)
        # A function handing the field to another that rewrites what it is given (translateDownwardAPI).
        handed = re.search(rf"\b(\w+)\([\w.\[\]&]*\.{go}\)", body)
        assert assigned or (handed and " = " in _function(source, handed.group(1))), \
            f"{tag}: {verdict.by} no longer rewrites {definition}.{field}: classify it again"
        called = verdict.by == "Translate" or re.search(rf"[.\s]{verdict.by}\(", translate) or \
            re.search(rf"[.\s]{verdict.by}\(", _function(source, "TranslateContainerEnv"))
        assert called, f"{tag}: Translate no longer calls {verdict.by}"


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_claim_names_reach_the_host_as_the_tenant_wrote_them(tag):
    source = _translator_source(tag)
    claims = _function(source, "translateResourceClaims")
    renames = re.findall(r"if (t\.\w+) && pPod\.Spec\.ResourceClaims\[i\]\.(\w+) != nil", claims)
    assert sorted(renames) == [("t.resourceClaimEnabled", "ResourceClaimName"),
                               ("t.resourceClaimTemplateEnabled", "ResourceClaimTemplateName")], renames
    assert "resourceClaims" not in COVERED_TO_HOST_SYNCS and "resourceClaimTemplates" not in COVERED_TO_HOST_SYNCS
    # Nothing rewrites a container's claims.
    assert not re.search(r"Resources\.Claims", source)


# --- (c) Pod Security's checks ----------------------------------------------------------------------------------


def _pod_security_check(tag: str, check: str) -> str:
    """policy/check_<check>.go at ``tag``, or its ``_baseline`` split (procMount from v0.35.0)."""
    files = git(POD_SECURITY_REPO, "ls-tree", "--name-only", f"{tag}:policy").split()
    name = next(name for name in (f"check_{check}.go", f"check_{check}_baseline.go") if name in files)
    return git(POD_SECURITY_REPO, "show", f"{tag}:policy/{name}")


@pytest.mark.parametrize("tag", MIRRORED_TAGS[POD_SECURITY_REPO])
def test_each_pod_security_field_is_read_by_a_baseline_check(tag):
    tag = mirrored_tag(POD_SECURITY_REPO, tag)
    structs = go_structs(git(VCLUSTER, "show", f"{ACCEPTED_VCLUSTER_TAGS[-1]}:{TYPES}"))
    for definition, field, verdict in _verdicts(POD_SECURITY):
        check = _pod_security_check(tag, POD_SECURITY_CHECKS[verdict.by])
        assert "Level: api.LevelBaseline" in check, f"{tag}: {verdict.by} is no longer a baseline check"
        go = _go_name(structs, definition, field)
        assert re.search(rf"\.{go}\b", check), \
            f"{tag}: check_{POD_SECURITY_CHECKS[verdict.by]}.go no longer reads {definition}.{field} ({go})"


# --- (d) attacks and honest pods --------------------------------------------------------------------------------


def guarded(config: dict) -> dict:
    """A site that sets every rule a site may choose: allowed registries and pulls on start."""
    return put(put(config, "gpu-tenancy:vcluster.alwaysPullImages", True),
               "gpu-tenancy:vcluster.allowedRegistries", ["nvcr.io"])


@pytest.fixture(scope="module")
def tenant() -> Tenant:
    return tenant_of(run(guarded(dev_config()), stack="dev-guarded"), guarded(dev_config()), "team-vision")


def honest_pod(tenant: Tenant) -> dict:
    main = {**container(), "imagePullPolicy": "Always"}
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, containers=[main])


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def _refusals(tenant: Tenant, key: str, examples: dict) -> tuple[set[str], set[str]]:
    """The rules refusing, and the Pod Security controls violated by, an honest pod with ``key``'s example."""
    definition = key.split(".")[0]
    if definition == "EphemeralContainer":
        host = tenant.host_pod(honest_pod(tenant))
        debugged = place(copy.deepcopy(host), key, examples[key])
        messages = tenant.update(host, debugged, subresource="ephemeralcontainers")
        spec = debugged["spec"]
    else:
        pod = place(honest_pod(tenant), key, examples[key])
        messages, spec = tenant.create(pod), tenant.host_pod(pod)["spec"]
    controls = {v.control for v in violations(spec, tenant.team.vcluster.pod_security)}
    return rules(messages), controls


def _classified(kinds: tuple[str, ...]) -> list[str]:
    keys = [f"{definition}.{field}" for kind in kinds for definition, field, _ in _verdicts(kind)]
    return [key for key in keys if not (key.startswith("EphemeralContainer.") and
                                        key.split(".")[1] in EPHEMERAL_REFUSED_BY_API)]


def test_every_field_has_an_example():
    assert set(_classified((REFUSED, CONSTRAINED, POD_SECURITY))) <= set(HOSTILE_EXAMPLES)
    assert set(_classified((HARMLESS,))) <= set(HARMLESS_EXAMPLES)


@pytest.mark.parametrize("key", _classified((REFUSED, CONSTRAINED, POD_SECURITY)))
def test_each_refused_or_constrained_field_is_refused_as_vcluster_syncs_it(tenant, key):
    definition, field = key.split(".")
    verdict = POD_FIELDS[definition][field]
    refused_by, controls = _refusals(tenant, key, HOSTILE_EXAMPLES)
    if verdict.kind == POD_SECURITY:
        assert tenant.team.vcluster.pod_security == "baseline"
        assert verdict.by in controls, f"{key}: Pod Security {controls}"
    else:
        assert verdict.by in refused_by, f"{key}: refused by {refused_by}"


@pytest.mark.parametrize("key", _classified((HARMLESS,)))
def test_each_harmless_field_is_admitted_on_an_honest_pod(tenant, key):
    assert _refusals(tenant, key, HARMLESS_EXAMPLES) == (set(), set()), key


def test_an_old_pod_keeps_its_host_controller_fields_but_none_is_added_or_changed(tenant):
    host = tenant.host_pod(honest_pod(tenant))
    added = copy.deepcopy(host)
    added["spec"]["evictionResponders"] = HOSTILE_EXAMPLES["PodSpec.evictionResponders"]
    assert "host-controllers" in rules(tenant.update(host, added))
    # A pod created before the rule keeps its updates while the fields stay as they were.
    old = copy.deepcopy(host)
    old["spec"]["workloadRef"] = HOSTILE_EXAMPLES["PodSpec.workloadRef"]
    assert tenant.update(old, copy.deepcopy(old)) == []
    changed = copy.deepcopy(old)
    changed["spec"]["workloadRef"]["podGroup"] = "other-teams-workers"
    assert "host-controllers" in rules(tenant.update(old, changed))


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_evicts_with_the_pods_own_grace_period(tag):
    """[grace-period] exists because KAI's evictor deletes a pod without a grace period of its own."""
    evictor = git(KAI, "show", f"{mirrored_tag(KAI, tag)}:pkg/scheduler/cache/evictor/default_evictor.go")
    evict = go_function(evictor, "(de *defaultEvictor) Evict")
    deletes = re.findall(r"\.Delete\(.*?DeleteOptions\{([^}]*)\}\)", evict, re.DOTALL)
    assert deletes == [""], f"KAI {tag} evicts with {deletes}: see whether [grace-period] is still needed"
