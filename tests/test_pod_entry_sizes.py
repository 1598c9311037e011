"""A pod cannot be larger in the host's etcd than the datastore's worst case counts it (rule ``pod-entry-size`` of the
pod policy, components/admission_pod_size.py; config/pod_entry_bytes.py).

- Attack: pods of fixed-length fields alone, built as vCluster syncs them and KAI mutates them (tests/tenant_sim.py),
  near the API server's 3 MiB request and over etcd's 1.5 MiB, with no free text to speak of: 7,500 env variables
  naming a 317-byte annotation key by field reference, 8,000 mounts of one volume with every bounded field at its
  longest, 7,000 downward-API items naming annotations with a mode, host aliases of 253-byte names, pod
  anti-affinity terms and topology spread constraints of 317-byte keys; and a pod one byte past the cap. Each is
  refused.
- Honest: a pod exactly at the cap, the large honest pods of tests/test_pod_sizes.py and tests/test_pod_text_attacks.py
  (a hundred Services' links, twenty volumes of ten items); KAI's docs pods and the seeds' workloads pass the same
  policy (tests/test_admission_honest.py).
- Docs: the security model's table of entries and the team guide's figures are the code's.
"""

from __future__ import annotations

import json
import re

import pytest

from components.pod_text_paths import POD_SPEC, TextPaths
from config.pod_entry_bytes import ENTRY_BYTES, ENV_REFERENCE_BYTES, SYNCED_POD_ENTRY_BYTES
from config.pod_own_bytes import CONTAINER_OWN_BYTES, POD_OWN_BYTES
from config.stack_file import PROJECT_DIR
from config.synced_data import SYNCED_POD_TEXT_ITEMS
from tests.conftest import dev_config
from tests.tenant_sim import KAI_SCHEDULER, container, tenant_of, virtual_pod
from tests.test_pod_sizes import _at, entries, service_links
from tests.test_pod_text_attacks import honest_pod

TEAM = "team-nlp"
CAP = SYNCED_POD_ENTRY_BYTES
ANNOTATION = "a" * 253 + "/" + "k" * 63
MIB = 2 ** 20


def refused_for_entries(messages: list[str]) -> bool:
    return any(message.startswith("[pod-entry-size]") for message in messages)


def stored(node: dict, paths: TextPaths = POD_SPEC) -> int:
    """What the rule counts the entries under ``node`` to store beside their text: a walk of the pod's JSON."""
    total = sum(each * len(_at(node, path) or []) for path, each in paths.entry_bytes.items())
    total += sum(each for path, each in paths.present_bytes.items() if _at(node, path) is not None)
    return total + sum(stored(entry, element) for path, element in paths.objects.items()
                       for entry in _at(node, path) or [])


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, dev_config(), TEAM)


def _pod(tenant, side: dict, **spec) -> dict:
    """A fractional pod of a main container and ``side``: the flood sits in the container holding no GPU, whose env
    the device rules do not walk name by name (past the reference evaluator's iteration budget)."""
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, annotations={"gpu-fraction": "0.5"},
                       containers=[container(), side], **spec)


def _json_bytes(host: dict) -> int:
    return len(json.dumps(host, separators=(",", ":")).encode())


def _assert_flood(tenant, pod: dict, *, least: int) -> None:
    """``pod`` as the host would store it is at least ``least`` bytes of JSON, under the request limit, within the
    list entries rule pod-size allows, and refused for its entries alone."""
    host = tenant.host_pod(pod)
    assert least <= _json_bytes(host) < 3 * MIB
    assert entries(host["spec"]) <= SYNCED_POD_TEXT_ITEMS
    messages = tenant.create(pod)
    assert refused_for_entries(messages)
    assert not any(message.startswith("[pod-size]") for message in messages), messages


# --- attacks ---------------------------------------------------------------------------------------------


def test_eight_thousand_env_field_references_are_refused(tenant):
    """Over 3 MB of JSON (the API server defaults each reference's apiVersion), of which the text pod-size counts is
    the variables' names."""
    main = container("side")
    main["env"] = [{"name": f"A{index}", "valueFrom": {"fieldRef": {
        "apiVersion": "v1", "fieldPath": f"metadata.annotations['{ANNOTATION}']"}}} for index in range(7500)]
    _assert_flood(tenant, _pod(tenant, main), least=3_000_000)


def test_a_mount_flood_is_refused(tenant):
    """One volume of a 63-byte name mounted 8,000 times, read-only, with its propagation and recursion spelled."""
    volume = "v" * 63
    main = container("side")
    main["volumeMounts"] = [{"name": volume, "mountPath": f"/m/{index}", "readOnly": True,
                             "mountPropagation": "HostToContainer", "recursiveReadOnly": "IfPossible"}
                            for index in range(8000)]
    _assert_flood(tenant, _pod(tenant, main, volumes=[{"name": volume, "emptyDir": {}}]), least=MIB)


def test_a_downward_item_flood_with_modes_is_refused(tenant):
    """A projected volume of 7,000 downward-API items, each naming an annotation, with a mode."""
    items = [{"path": f"a/{index}", "mode": 0o644, "fieldRef": {
        "apiVersion": "v1", "fieldPath": f"metadata.annotations['{ANNOTATION}']"}} for index in range(7000)]
    volume = {"name": "info", "projected": {"sources": [{"downwardAPI": {"items": items}}]}}
    main = container("side")
    main["volumeMounts"] = [{"name": "info", "mountPath": "/etc/info"}]
    _assert_flood(tenant, _pod(tenant, main, volumes=[volume]), least=2 * MIB)


def test_host_aliases_of_long_names_are_refused(tenant):
    """A thousand aliases of ten 253-byte names each: no list rule pod-size walks, 2.5 MB of /etc/hosts."""
    names = [".".join(["h" * 63] * 3 + ["x" * 60 + f"{index:01d}"]) for index in range(10)]
    assert all(len(name) == 253 for name in names)
    aliases = [{"ip": f"10.{index // 250}.{index % 250}.1", "hostnames": names} for index in range(1000)]
    _assert_flood(tenant, _pod(tenant, container("side"), hostAliases=aliases), least=2 * MIB)


def test_pod_anti_affinity_terms_and_spread_constraints_are_refused(tenant):
    """1,000 anti-affinity terms and 1,000 spread constraints, each with a 317-byte topology key and a label of a
    317-byte key: lists of no text, a copy of over a MiB."""
    key = "t" * 253 + "/" + "k" * 63
    selector = {"matchLabels": {key: "v" * 63}}
    terms = [{"topologyKey": key, "labelSelector": selector} for _ in range(1000)]
    spread = [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}
              for _ in range(1000)]
    pod = _pod(tenant, container("side"), affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": terms}}, topologySpreadConstraints=spread)
    _assert_flood(tenant, pod, least=MIB)


def at_cap(tenant, total: int) -> dict:
    """A pod whose host copy the rule counts at ``total`` bytes: mounts of 167, then items of 15 and args of 4."""
    main = container("side")
    main["volumeMounts"], main["args"] = [], []
    items = []
    pod = _pod(tenant, main, volumes=[{"name": "cfg", "configMap": {"name": "settings", "items": items}}])
    missing = total - stored(tenant.host_pod(pod)["spec"])
    mount, item, arg = 167, 15, 4
    mounts = (missing - 3 * item) // mount
    rest = missing - mounts * mount
    extra = next(count for count in range(4) if (rest - count * item) % arg == 0)
    main["volumeMounts"] += [{"name": "cfg", "mountPath": f"/etc/app/{index}"} for index in range(mounts)]
    items += [{"key": "k", "path": f"p{index}"} for index in range(extra)]
    main["args"] += ["a"] * ((rest - extra * item) // arg)
    assert stored(tenant.host_pod(pod)["spec"]) == total
    return pod


def test_a_pod_at_the_cap_is_admitted_and_one_byte_past_it_refused(tenant):
    assert tenant.create(at_cap(tenant, CAP)) == []
    assert refused_for_entries(tenant.create(at_cap(tenant, CAP + 1)))


# --- honest ----------------------------------------------------------------------------------------------


def test_the_largest_honest_pods_store_far_less_than_the_cap(tenant):
    """Twenty volumes of ten items in three containers, and a hundred Services' links in one."""
    large = tenant.host_pod(honest_pod(tenant))
    linked = tenant.host_pod(_pod(tenant, container("side", env=service_links(100))))
    for host in (large, linked):
        assert 4 * 2 ** 10 < stored(host["spec"]) < CAP // 2
        assert tenant.create_host(host) == []


# --- docs ------------------------------------------------------------------------------------------------


def _sizes_section() -> str:
    text = (PROJECT_DIR / "docs" / "security-object-sizes.md").read_text()
    return text[text.index("\n## Sizes\n"):]


def test_the_security_model_shows_what_the_code_counts_and_no_stale_figure():
    section = _sizes_section()
    table = dict(re.findall(r"^\| `([\w.]+)`(?: \(where set\))? \| ([\d,]+) \|$", section, re.M))
    assert {holder: int(value.replace(",", "")) for holder, value in table.items()} == \
        {**ENTRY_BYTES, "EnvVar.valueFrom": ENV_REFERENCE_BYTES}
    flat = " ".join(section.split())
    assert f"passes {CAP // 2 ** 10} KiB (`SYNCED_POD_ENTRY_BYTES`, rule `pod-entry-size`)" in flat
    assert f"at most {CONTAINER_OWN_BYTES:,} bytes a container of any kind and {POD_OWN_BYTES:,} for the spec" in flat
    # A team's counts are its quota's, shown by the plan's summary: the section quotes none.
    assert re.findall(r"\bdev (?:counts|teams?|pods?|stack's)\b", section) == []


def test_the_team_guide_states_the_cap_and_entries_the_code_counts():
    guide = " ".join((PROJECT_DIR / "docs" / "team-guide.md").read_text().split())
    env = ENTRY_BYTES["Container.env"]
    assert (f"store at most {CAP // 2 ** 10} KiB beside that text, each counted at its largest (`[pod-entry-size]`: a "
            f"variable of a value {env} bytes, one naming a field or a key {env + ENV_REFERENCE_BYTES}, a mount "
            f"{ENTRY_BYTES['Container.volumeMounts']}, a volume {ENTRY_BYTES['PodSpec.volumes']})") in guide
