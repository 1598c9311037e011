"""The key allowlist stays derived from upstream: KAI's source at every pinned tag, vCluster's chart.

Every label and annotation key KAI reads or writes (tests/kai_keys.py, at each accepted release)
must be classified in components/admission_keys.py, refused keys must be refused by the policy the
program renders, harmless ones admitted, and the pod labels vCluster's NetworkPolicies select on must
be refused on a tenant's pod unless listed with the reason they open nothing. A KAI or vCluster
upgrade that adds a key fails here until someone classifies it.
"""

from __future__ import annotations

import re

import pytest
import yaml

from components.admission import policy_validations
from components.admission_keys import (
    ANNOTATION, GRANTED, HARMLESS, KAI_WRITERS, LABEL, NETWORK_SELECTOR_LABELS, NOT_ON_PODS, REFUSED, RESERVATION_APP,
    RESERVED_DOMAINS, SYNCER_KEYS, UNREAD_RESERVED,
)
from components.admission_metadata import FRACTION_DECIMALS, KAI_PRIORITY_CLASSES, MIN_GPU_FRACTION, MIN_GPU_MEMORY_MIB
from tests.config_spec import put
from tests.conftest import (
    ACCEPTED_TAGS, ACCEPTED_VCLUSTER_TAGS, dev_config, eks_config, git, mirror, mirrored_tag,
    security_model_text,
)
from tests.kai_keys import keys_of, source_at
from tests.tenant_sim import KAI_SCHEDULER, Tenant, platform_of, tenant_of, virtual_pod

KAI = "kai-scheduler/KAI-Scheduler"
VCLUSTER = "loft-sh/vcluster"
CLASSIFIED = {(entry.key, entry.kind) for entry in (*REFUSED, *GRANTED, *HARMLESS, *NOT_ON_PODS)}


def unclassified(keys: set[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(keys - CLASSIFIED)


@pytest.fixture(scope="module")
def kai_keys() -> dict[str, set[tuple[str, str]]]:
    return {tag: keys_of(source_at(mirror(KAI), tag)) for tag in ACCEPTED_TAGS[KAI]}


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_every_kai_key_at_every_tag_is_classified(kai_keys, tag):
    assert unclassified(kai_keys[tag]) == [], (
        f"KAI {tag} reads or writes pod keys components/admission_keys.py does not classify: add each to REFUSED "
        "(and make sure the policy refuses it), or to HARMLESS or NOT_ON_PODS with the upstream reason")


def test_a_key_kai_starts_reading_fails_the_contract():
    files = source_at(mirror(KAI), ACCEPTED_TAGS[KAI][0])
    assert unclassified(keys_of(files)) == []
    files["pkg/scheduler/api/pod_info/gang_override.go"] = (
        'package pod_info\n\nconst GangSizeOverride = "gang-size-override"\n\n'
        'func gangSize(pi *PodInfo) string {\n\treturn pi.Pod.Annotations[GangSizeOverride]\n}\n')
    files["pkg/podgrouper/podgrouper/plugins/constants/more.go"] = 'package constants\n\nconst Burst = "kai.scheduler/burst"\n'
    files["pkg/podgrouper/podgrouper/plugins/defaultgrouper/burst.go"] = (
        'package defaultgrouper\n\nfunc burst(pod *v1.Pod) bool {\n\treturn pod.Labels[constants.Burst] == "true"\n}\n')
    assert unclassified(keys_of(files)) == [("gang-size-override", ANNOTATION), ("kai.scheduler/burst", LABEL)]


def test_keys_listed_as_unread_stay_unread_and_grants_are_kais_own(kai_keys):
    everything = set().union(*kai_keys.values())
    assert not {(entry.key, entry.kind) for entry in UNREAD_RESERVED} & everything
    assert {(entry.key, entry.kind) for entry in GRANTED} <= everything


@pytest.fixture(scope="module", params=["dev", "eks"])
def tenant(request, dev_run, eks_run) -> Tenant:
    program, config = (dev_run, dev_config()) if request.param == "dev" else (eks_run, eks_config())
    return tenant_of(program, config, platform_of(config).teams[0].name)


def _pod_with(tenant: Tenant, key: str, kind: str, value: str = "1") -> dict:
    key = key.replace("*", "a100-80gb") if key.endswith("*") else key
    metadata = {"labels": {key: value}} if kind == LABEL else {"annotations": {key: value}}
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, **metadata)


@pytest.mark.parametrize("entry", REFUSED, ids=lambda entry: f"{entry.kind}:{entry.key}")
def test_every_refused_kai_key_is_refused_for_a_tenant(tenant, entry):
    assert tenant.create(_pod_with(tenant, entry.key, entry.kind)) != []


@pytest.mark.parametrize("entry", HARMLESS + UNREAD_RESERVED, ids=lambda entry: f"{entry.kind}:{entry.key}")
def test_every_harmless_key_is_admitted(tenant, entry):
    assert tenant.create(_pod_with(tenant, entry.key, entry.kind, "worker")) == []


def test_kais_writers_priority_classes_and_reservation_label_are_the_charts(dev_run):
    for tag in ACCEPTED_TAGS[KAI]:
        bindings = git(KAI, "grep", "-h", "-A2", "kind: ServiceAccount", tag, "--", "deployments/kai-scheduler/templates/rbac")
        accounts = set(re.findall(r"name: ([\w-]+)", bindings))
        assert set(KAI_WRITERS) <= accounts, tag
        classes = git(KAI, "grep", "-h", "^  name:", tag, "--", "deployments/kai-scheduler/templates/priorityclasses")
        assert set(re.findall(r"name: ([\w-]+)", classes)) == set(KAI_PRIORITY_CLASSES), tag
        values = yaml.safe_load(git(KAI, "show", f"{tag}:deployments/kai-scheduler/values.yaml"))
        assert values["global"]["resourceReservation"]["appLabel"] == RESERVATION_APP, tag
    kai = next(r for r in dev_run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kai-scheduler")
    assert "resourceReservation" not in kai.inputs["values"].get("global", {})


# --- vCluster's NetworkPolicy selectors ---------------------------------------------------------------


def network_selector_labels(template: str) -> set[tuple[str, str]]:
    """(key, value) of every podSelector.matchLabels entry; '{{ .Release.Name ... }}' becomes RELEASE."""
    found, state, depth = set(), None, 0
    for line in template.splitlines():
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        if stripped.endswith("podSelector:"):
            state = "pod"
        elif stripped == "matchLabels:" and state == "pod":
            state, depth = "labels", indent
        elif state == "labels" and indent > depth and (match := re.match(r"^([\w./-]+):\s*(.+)$", stripped)):
            value = "RELEASE" if ".Release.Name" in match.group(2) else match.group(2).strip("'\"")
            found.add((match.group(1), value))
        elif stripped:
            state = None
    return found


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_no_tenant_pod_wears_a_label_vclusters_network_policies_select(tenant, tag):
    selectors = network_selector_labels(git(VCLUSTER, "show", f"{tag}:chart/templates/networkpolicy.yaml"))
    assert {("k8s-app", "vcluster-kube-dns"), ("app", "loft"), ("release", "RELEASE")} <= selectors
    for key, value in sorted(selectors):
        value = tenant.team.vcluster_name if value == "RELEASE" else value
        if (key, value if value != tenant.team.vcluster_name else "RELEASE") in NETWORK_SELECTOR_LABELS:
            continue
        host = tenant.host_pod(virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER))
        host["metadata"]["labels"][key] = value
        assert tenant.create_host(host) != [], f"a tenant pod labelled {key}={value} is admitted"


def test_the_security_model_names_every_rule_reserved_space_grant_and_range():
    text = security_model_text()
    # With every opt-in rule of the pod policy on.
    team = platform_of(put(dev_config(), "gpu-tenancy:vcluster.alwaysPullImages", True)).teams[0]
    names = {re.match(r"'?\[([\w-]+)\]", v.get("message") or v["messageExpression"]).group(1)
             for v in policy_validations(team)}
    missing = [name for name in sorted(names) if f"`{name}`" not in text]
    missing += [domain for domain in RESERVED_DOMAINS if f"`{domain}`" not in text]
    missing += [entry.key for entry in GRANTED if f"`{entry.key}`" not in text]
    missing += [str(value) for value in (MIN_GPU_FRACTION, MIN_GPU_MEMORY_MIB, *KAI_PRIORITY_CLASSES)
                if f"`{value}`" not in text]
    assert missing == [], "the security model (docs/security-*.md) does not name these"


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_every_pod_key_of_vclusters_syncer_is_allowed_or_renamed(tag):
    source = git(VCLUSTER, "grep", "-h", "-o", "-E", r'"vcluster\.loft\.sh/[a-z0-9._-]*"', tag, "--",
                 ":(exclude)*_test.go", "pkg/controllers/resources/pods", "pkg/util/translate")
    keys = {key.strip('"') for key in source.split()}
    assert {"vcluster.loft.sh/object-name", "vcluster.loft.sh/managed-by"} <= keys
    # Label prefixes (label-, ns-label-), keys it renames, and a marker for multi-namespace mode this
    # platform does not run.
    renamed = {"vcluster.loft.sh/label", "vcluster.loft.sh/ns-label", "vcluster.loft.sh/controlled-by",
               "vcluster.loft.sh/skip-backsync"}
    allowed = SYNCER_KEYS[LABEL] + SYNCER_KEYS[ANNOTATION]
    assert sorted(key for key in keys - renamed if not any(
        key == pattern or (pattern.endswith("*") and key.startswith(pattern[:-1])) or key + "*" == pattern
        for pattern in allowed)) == []


# --- what KAI charges a queue for a pod, and what vCluster hands the kubelet -----------------------------------

POD_INFO = "pkg/scheduler/api/pod_info"
POD_TRANSLATOR = "pkg/controllers/resources/pods/translate/translator.go"
GPU_REQUIREMENT = "pkg/scheduler/api/resource_info/gpu_resource_requirment.go"


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_charges_a_pod_for_its_containers_and_not_its_pod_level_resources(tag):
    # [pod-resources] exists because a queue is charged for the containers' requests (and overhead) only; the
    # day KAI counts spec.resources here, the rule may be revisited.
    tag = mirrored_tag(KAI, tag)
    paths = [path for path in git(KAI, "ls-tree", "--name-only", f"{tag}:{POD_INFO}").split()
             if path.endswith(".go") and not path.endswith("_test.go")]
    source = "\n".join(git(KAI, "show", f"{tag}:{POD_INFO}/{path}") for path in paths)
    assert "container.Resources.Requests" in source and "pod.Spec.Overhead" in source, tag
    assert not re.search(r"Spec\.Resources\b|PodLevelResources|PodRequests\(", source), (
        f"KAI {tag} reads pod-level resources in {POD_INFO}: see whether [pod-resources] is still needed")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_copies_pod_level_resources_to_the_host(tag):
    # The host pod starts as a copy of the virtual pod; spec.resources is dropped only for a host older than 1.34
    # (where pod-level resources turned beta and on by default), so on a newer host the kubelet reserves it.
    source = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:{POD_TRANSLATOR}")
    assert re.search(r"pPod := translate\.HostMetadata\(vPod,", source), tag
    lines = source.splitlines()
    writes = [index for index, line in enumerate(lines) if re.search(r"Spec\.Resources\s*=", line)]
    assert [lines[index].strip() for index in writes] == ["pPod.Spec.Resources = nil"], tag
    guard = lines[writes[0] - 1]
    threshold = re.search(r"LessThan\((?:utilversion\.MustParseSemantic\(\"([\d.]+)\"\)|(\w+))\)", guard)
    assert threshold, f"{tag}: {guard.strip()}"
    version = threshold.group(1) or re.search(
        rf"{threshold.group(2)}\s*=\s*utilversion\.MustParseSemantic\(\"([\d.]+)\"\)", source).group(1)
    assert version == "1.34.0", tag


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_charges_a_fraction_in_the_hundredths_the_policy_admits(tag):
    # [granted-values] admits a gpu-fraction with no more decimals than the scheduler keeps when it charges the
    # queue; a finer one would be rounded, and the pod charged other than it asked for (0.054 as 0.05).
    source = git(KAI, "show", f"{mirrored_tag(KAI, tag)}:{GPU_REQUIREMENT}")
    factor = re.search(r"gpuPortionsAsDecimalsRoundingFactor\s*=\s*(\d+)", source)
    assert factor and int(factor.group(1)) == 10 ** FRACTION_DECIMALS, tag
    assert re.search(r"math\.Round\(portion \* gpuPortionsAsDecimalsRoundingFactor\)", source), tag


NODE_INFO = "pkg/scheduler/api/node_info/node_info.go"
GPU_VALIDATOR = "pkg/binder/plugins/gpusharing/gpu-request/gpu_request_validator.go"


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_charges_a_mig_pod_for_its_slices_alone(tag):
    # [gpu-kinds] exists because a running MIG pod's accepted GPUs are its slices only (whole GPUs beside them are
    # charged to neither the queue nor the node), a fraction overwrites a pod's slices, and KAI's webhook refuses a
    # fraction only beside nvidia.com/gpu. The day one of these changes, the rule may be revisited.
    tag = mirrored_tag(KAI, tag)
    node_info = git(KAI, "show", f"{tag}:{NODE_INFO}")
    accepted = re.search(r"if pi\.IsMigCandidate\(\) \{(.*?)\} else", node_info, re.S)
    assert accepted and "NewGpuResourceRequirementWithMig(pi.GpuRequirement.MigResources())" in accepted.group(1), tag
    pod_info = git(KAI, "show", f"{tag}:{POD_INFO}/pod_info.go")
    assert "pi.GpuRequirement = *resource_info.NewGpuResourceRequirementWithGpus(gpuFraction, 0)" in pod_info, tag
    validator = git(KAI, "show", f"{tag}:{GPU_VALIDATOR}")
    assert "constants.NvidiaGpuResource" in validator and not re.search(r"mig", validator, re.I), tag

