"""A team cannot fill the host's datastore through the ConfigMaps and Secrets its vCluster copies (rule
``object-size`` of components/synced_objects_admission.py, config/synced_data.py).

- Attack: a hostile tenant's ConfigMap or Secret one byte past the team's cap, as vCluster's syncer creates it on the
  host and as it copies an update (tests/synced_objects_sim.py ``host_metadata``: the object's data copied whole),
  is refused; so is one with more keys than the policy sums at an affordable CEL cost.
- Measure: bytes as stored. The policy sees a []byte field (Secret ``data``, ConfigMap ``binaryData``) as the API
  server's unstructured form gives it, padded base64 text; a ConfigMap's ``data`` as text, whose multi-byte UTF-8
  characters count for their bytes. Every review is judged by cel-python and CEL C++ alike (tests/tenant_sim.py).
- Honest: objects at the cap, and the Secrets and ConfigMaps ordinary pods name, are admitted; what the platform and
  KAI write in the namespace is not matched; the in-vCluster defaults do not judge sizes.
- Config: the cap's key refuses values that bound nothing or break honest pods; an EKS site whose teams together
  could pass its etcd's documented size gets a warning, another host a review note.
- Summary: each team's worst case and the site's total.
"""

from __future__ import annotations

import base64
import copy

import pytest
from celpy import celtypes

from components.synced_object_sizes import base64_bytes
from config.pod_own_bytes import CONTAINER_OWN_BYTES, POD_OWN_BYTES
from config.synced_data import (
    ENDPOINT_SLICE_BYTES, ENDPOINTS_BYTES, ETCD_DEFAULT_QUOTA, SERVICE_BYTES, SYNCED_OBJECT_KEYS,
    SYNCED_POD_CONDITION_BYTES, worst_case,
)
from config.synced_entry_bytes import CONTAINER_PORT_BYTES, REFERENCE_BYTES, TOLERATION_BYTES
from config import load_platform
from config.vocabulary import NAMESPACE, POD_TEXT_BYTES_ANNOTATION
from tests.config_spec import assert_rejected, put
from tests.config_spec import dev_config as stack_config, eks_config as eks_stack_config
from tests.conftest import dev_config, run
from tests.synced_objects_sim import host_metadata, synced_objects_admission_for
from tests.tenant_sim import KAI_BINDER, platform_of
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

TEAM = "team-nlp"
# The dev stack's default cap (vcluster.resourceQuota.syncedObjectBytes: 512Ki).
CAP = 512 * 2 ** 10
SIZE_RULE = "[object-size]"


class Syncer:
    """The team's syncer writing host copies, reviewed by its synced-objects policy."""

    def __init__(self, program, config: dict, team: str = TEAM):
        self.admission = synced_objects_admission_for(program, team)
        self.team = next(t for t in platform_of(config).teams if t.name == team)
        self.user = f"system:serviceaccount:{self.team.namespace}:vc-{self.team.vcluster_name}"

    def copy(self, obj: dict) -> dict:
        return host_metadata(obj, self.team)

    def create(self, obj: dict, *, user: str = "") -> list[str]:
        return self.admission.review(self.team.namespace, self.copy(obj), user=user or self.user)

    def update(self, old: dict, new: dict) -> list[str]:
        return self.admission.review(self.team.namespace, self.copy(new), operation="UPDATE", old=self.copy(old),
                                     user=self.user)

    def room(self, obj: dict, cap: int = 0) -> int:
        """What of the cap the data of ``obj`` may hold: the rest goes to the host copy's labels and annotations."""
        return (cap or CAP) - metadata_bytes(self.copy(obj))


@pytest.fixture(scope="module")
def nlp(dev_run) -> Syncer:
    return Syncer(dev_run, dev_config())


def config_map(data: dict = None, binary: dict = None, name: str = "settings") -> dict:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    if data is not None:
        obj["data"] = data
    if binary is not None:
        obj["binaryData"] = {key: base64.b64encode(value).decode() for key, value in binary.items()}
    return obj


def secret(data: dict, kind: str = "Opaque", name: str = "credentials") -> dict:
    """As the API server serializes it: each value padded base64 (stringData already merged into data)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": kind, "metadata": {"name": name, "namespace": "default"},
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()}}


def metadata_bytes(obj: dict) -> int:
    """Label and annotation keys and values in bytes, as etcd stores them."""
    metadata = obj["metadata"]
    return sum(len(key.encode()) + len(value.encode()) for field in ("labels", "annotations")
               for key, value in metadata.get(field, {}).items())


def sized(total: int, key: str = "blob") -> bytes:
    """A value that makes ``{key: value}`` hold ``total`` bytes of keys and values."""
    return b"\x00" * (total - len(key))


def refused(messages: list[str]) -> bool:
    return any(message.startswith(SIZE_RULE) for message in messages)


# --- attacks ---------------------------------------------------------------------------------------------


# Every base64 padding (a value of 3n, 3n+1 and 3n+2 bytes) must be measured to the byte.
@pytest.mark.parametrize("slack", [0, 1, 2])
def test_a_secret_one_byte_past_the_cap_is_refused_created_and_updated(nlp, slack):
    key = "k" * (slack + 1)
    room = nlp.room(secret({}))
    assert nlp.create(secret({key: sized(room, key)})) == []
    assert refused(nlp.create(secret({key: sized(room + 1, key)})))
    assert refused(nlp.update(secret({key: b"x"}), secret({key: sized(room + 1, key)})))


def test_a_config_map_one_byte_past_the_cap_is_refused_created_and_updated(nlp):
    room = nlp.room(config_map())
    half = room // 2
    at_cap = config_map({"a": "x" * (room - half - 1)}, {"b": sized(half, "b")})
    past = config_map({"a": "x" * (room - half)}, {"b": sized(half, "b")})
    assert nlp.create(at_cap) == []
    assert refused(nlp.create(past))
    assert refused(nlp.update(at_cap, past))
    assert refused(nlp.create(config_map(binary={"b": sized(room + 1, "b")})))


def test_a_config_maps_text_counts_its_utf8_bytes_not_its_characters(nlp):
    # "é" is one code point, CEL's size() of a string, and two bytes in etcd.
    room = nlp.room(config_map())
    characters = (room - 1) // 2 + 1
    text = config_map({"t": "é" * characters})
    assert len("t" + "é" * characters) <= room < len(("t" + "é" * characters).encode())
    assert refused(nlp.create(text))
    assert nlp.create(config_map({"t": "é" * ((room - 1) // 2)})) == []
    assert nlp.create(config_map({"t": "€" * ((room - 1) // 3)})) == []


def test_keys_count_and_too_many_keys_are_refused(nlp):
    many = {f"k{index}": "" for index in range(SYNCED_OBJECT_KEYS + 1)}
    assert refused(nlp.create(config_map(many)))
    assert refused(nlp.create(secret({key: b"" for key in many})))
    fewer = dict(list(many.items())[:SYNCED_OBJECT_KEYS])
    assert nlp.create(config_map(fewer)) == []
    long_key = "k" * 253
    assert refused(nlp.create(config_map({long_key: "x" * (nlp.room(config_map()) - 252)})))


def test_a_team_with_a_smaller_cap_is_held_to_it():
    config = put(dev_config(), "gpu-tenancy:teams[0].vcluster.resourceQuota.syncedObjectBytes", "64Ki")
    tenant = Syncer(run(config, stack="dev"), config, "team-nlp")
    room = tenant.room(secret({}), 64 * 2 ** 10)
    assert tenant.create(secret({"k": sized(room, "k")})) == []
    assert refused(tenant.create(secret({"k": sized(room + 1, "k")})))


def test_the_measure_counts_bytes_should_the_api_server_pass_them_as_cel_bytes(nlp):
    """The bytes branch of the base64 measure (an API server passing []byte fields as CEL bytes)."""
    for value in (celtypes.BytesType(b"\x00\xff\x10"), celtypes.StringType("AP8Q")):
        assert nlp.admission.evaluate(base64_bytes("value"), {"value": value}) == 3


# --- honest ----------------------------------------------------------------------------------------------

# What pods name, at sizes real ones have: a TLS chain (leaf and two intermediates) with an RSA-4096 key, a pull
# secret for three registries, a service-account token with its CA, a distribution's CA bundle (Debian's
# ca-certificates.crt is about 215 KiB), a model server's config.
PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----\n" + b"A" * 2000 + b"\n-----END CERTIFICATE-----\n"
HONEST = [
    secret({"tls.crt": PEM_CERTIFICATE * 3, "tls.key": b"K" * 3272}, "kubernetes.io/tls", "serving"),
    secret({".dockerconfigjson": b'{"auths": {' + b'"r.example": {"auth": "' + b"a" * 120 + b'"},' * 3 + b"}}"},
           "kubernetes.io/dockerconfigjson", "pull"),
    secret({"token": b"t" * 1100, "ca.crt": PEM_CERTIFICATE, "namespace": b"default"}, name="runner-token"),
    config_map({"ca-certificates.crt": "C" * 215 * 2 ** 10}, name="ca-bundle"),
    config_map({"config.yaml": "model: llama\n" * 200, "kube-root-ca.crt": PEM_CERTIFICATE.decode()}),
]


@pytest.mark.parametrize("obj", HONEST, ids=lambda obj: obj["metadata"]["name"])
def test_what_honest_pods_name_is_admitted(nlp, obj):
    assert nlp.create(obj) == []
    assert nlp.update(obj, copy.deepcopy(obj)) == []


def test_the_platforms_and_kais_objects_in_the_namespace_are_not_matched(nlp):
    namespace = nlp.team.namespace
    # Helm's release Secret and the chart's config are the platform's; they carry no managed-by label.
    helm = {**secret({"release": sized(900 * 2 ** 10)}, "helm.sh/release.v1", f"sh.helm.release.v1.{TEAM}.v1"),
            "metadata": {"name": f"sh.helm.release.v1.{TEAM}.v1", "namespace": namespace}}
    assert not nlp.admission.matches(namespace, helm, user="system:serviceaccount:kube-system:pulumi")
    assert not nlp.admission.matches(namespace, helm, user=nlp.user)
    # KAI's binder writes each fractional pod's ConfigMaps itself, not through the syncer.
    device_list = {**config_map({"data": "x" * (CAP + 1)}), "metadata": {"name": "pod-shared-gpu",
                                                                         "namespace": namespace}}
    assert not nlp.admission.matches(namespace, nlp.copy(config_map({"data": "x" * (CAP + 1)})), user=KAI_BINDER)
    assert not nlp.admission.matches(namespace, device_list, user=KAI_BINDER)


def test_the_in_vcluster_defaults_do_not_judge_sizes(dev_run):
    """A tenant's own Helm release Secrets live inside its vCluster, are never synced and can be near 1 MiB."""
    inside = [r for r in dev_run.resources if "object-size" in str(r.inputs) and "synced-objects" not in str(
        (r.inputs.get("metadata") or {}).get("name", ""))]
    assert inside == []


# --- config ----------------------------------------------------------------------------------------------


# The object cap (rule object-size) and the pod text cap (rule pod-size, tests/test_pod_sizes.py).
CAP_KEYS = ("syncedObjectBytes", "syncedPodTextBytes")


@pytest.mark.parametrize("cap", CAP_KEYS)
@pytest.mark.parametrize("value, fix", [("2Mi", "at most 1Mi"), ("1Mi1", "quantity"), ("32Ki", "at least 64Ki"),
                                        ("100.1Ki", "whole number of bytes")])
def test_the_cap_refuses_values_that_bound_nothing_or_break_honest_pods(cap, value, fix):
    found = assert_rejected(put(stack_config(), f"vcluster.resourceQuota.{cap}", value),
                            f"vcluster.resourceQuota.{cap}", value)
    assert fix in found.problem + found.fix


@pytest.mark.parametrize("cap", CAP_KEYS)
def test_a_teams_cap_is_refused_at_the_teams_key(cap):
    config = put(stack_config(), f"teams[1].vcluster.resourceQuota.{cap}", "4Mi")
    assert_rejected(config, f"teams[1].vcluster.resourceQuota.{cap}", "4Mi", fix="at most 1Mi")


def test_an_eks_site_whose_teams_could_fill_its_etcd_is_warned_of():
    # Two teams of 5,000 ConfigMaps and Secrets at 1Mi: over 9.7 GiB against EKS's 8 GiB. A warning, not an error:
    # a site that ran before the cap existed keeps running.
    config = eks_stack_config()
    for key, value in (("configMaps", 5000), ("secrets", 5000), ("syncedObjectBytes", "1Mi")):
        put(config, f"vcluster.resourceQuota.{key}", value)
    (warning,) = [text for text in load_platform(config).warnings if "syncedObjectBytes" in text]
    assert warning.startswith("vcluster.resourceQuota.syncedObjectBytes:") and "8 GiB" in warning and "Lower" in warning
    put(config, "vcluster.resourceQuota.syncedObjectBytes", "256Ki")
    assert not [text for text in load_platform(config).warnings if "syncedObjectBytes" in text]


def test_a_host_whose_datastore_size_is_unknown_gets_a_note_past_etcds_default():
    config = stack_config()
    assert not [note for note in load_platform(config).notes if "syncedObjectBytes" in note]
    put(config, "vcluster.resourceQuota.configMaps", 2000)
    put(config, "vcluster.resourceQuota.syncedObjectBytes", "1Mi")
    notes = [note for note in load_platform(config).notes if "syncedObjectBytes" in note]
    assert len(notes) == 1 and "microk8s" in notes[0] and f"{ETCD_DEFAULT_QUOTA / 2 ** 30:g} GiB" in notes[0]


# --- summary ---------------------------------------------------------------------------------------------


def test_the_worst_case_counts_every_list_a_rule_bounds_by_count_at_its_cap():
    team = next(t for t in platform_of(dev_config()).teams if t.name == TEAM)
    # 25 pods, each with 67 tolerations (64 of its own, the GPU taint's vCluster enforces, the API server's two), 256
    # container ports and 264 ConfigMap and Secret references, its other lists' entries at 128 KiB and 65 containers'
    # and its own fields at their largest, beside its text and conditions; 23 Services of 100 ports, 32 selector
    # labels, 64 source ranges and the rest of their spec, 23 Endpoints and 86 EndpointSlices of 1,000 entries.
    pod = 256 * 2 ** 10 + SYNCED_POD_CONDITION_BYTES + 67 * TOLERATION_BYTES + 256 * CONTAINER_PORT_BYTES + \
        264 * REFERENCE_BYTES + 128 * 2 ** 10 + 65 * CONTAINER_OWN_BYTES + POD_OWN_BYTES
    assert worst_case(team.vcluster) == (96 + 54) * 512 * 2 ** 10 + 178 * 64 * 2 ** 10 + 25 * pod + \
        23 * (SERVICE_BYTES + ENDPOINTS_BYTES) + 86 * ENDPOINT_SLICE_BYTES
    # A toleration vCluster enforces on every pod is one more each pod may carry.
    enforced = put(dev_config(), "gpu-tenancy:teams[0].vcluster.enforceTolerations",
                   [*team.vcluster.enforce_tolerations, "example.com/dedicated=ml:NoSchedule"])
    more = next(t for t in platform_of(enforced).teams if t.name == TEAM)
    assert worst_case(more.vcluster) - worst_case(team.vcluster) == 25 * TOLERATION_BYTES


def test_the_summary_shows_each_teams_worst_case_and_the_sites_total(dev_run):
    summary = render_summary(build_plan(dev_run, "dev"))
    section = summary[summary.index("## Host datastore"):]
    # 96 ConfigMaps and 54 Secrets (the namespace's quota), each at 512Ki: 75.0 MiB; 25 pods, 23 Services, 23
    # Endpoints, 21 claims and 86 EndpointSlices with 64Ki of labels and annotations: 11.1 MiB; the 25 pods with 256Ki
    # of containers' text, 16Ki of status conditions and 391 KiB of tolerations, ports, references, other list
    # entries and containers' and own fields each: 16.2 MiB; the 23 Services' specs, their lists at their caps, 61 KiB
    # each: 1.4 MiB; 23 Endpoints and 86 EndpointSlices of 1,000 entries at their caps, 1.7 and 1.6 MiB each:
    # 179.1 MiB; three teams: 848.3 MiB.
    assert "| `team-nlp` | 96 | 54 | `512Ki` | 178 | `64Ki` | 25 | `256Ki` | `16Ki` | 400,232 B | 62,418 B | " \
        "1,803,000 B | 1,701,440 B | 282.8 MiB |" in section
    assert "Site total: **848.3 MiB**" in section
    team = next(t for t in platform_of(dev_config()).teams if t.name == TEAM)
    assert f"{worst_case(team.vcluster) / 2 ** 20:,.1f} MiB" == "282.8 MiB"
    assert "cannot read this microk8s host's datastore limit" in section


def _datastore_row(summary: str, team: str) -> list[str]:
    section = summary[summary.index("## Host datastore"):]
    return next(line for line in section.splitlines() if line.startswith(f"| `{team}` |")).split(" | ")


def test_the_summary_reads_each_teams_pod_text_cap_where_the_site_policy_reads_it():
    """The pod text cap is the one the site's pod-size policy enforces: the team namespace's annotation. A team with
    128Ki shows it beside a team with the default; a namespace stating none admits no synced pod, so its pods hold
    no text in the worst case."""
    config = put(dev_config(), "gpu-tenancy:teams[1].vcluster.resourceQuota.syncedPodTextBytes", "128Ki")
    plan = build_plan(run(config, stack="dev"), "dev")
    teams = {team.name: team for team in platform_of(config).teams}
    small, default = list(teams)[1], list(teams)[0]
    rows = {name: _datastore_row(render_summary(plan), name) for name in (small, default)}
    assert rows[small][7] == "`128Ki`" and rows[default][7] == "`256Ki`"
    for name, row in rows.items():
        assert row[-1] == f"{worst_case(teams[name].vcluster) / 2 ** 20:,.1f} MiB |"
    for resource in plan["resources"]:
        if resource["type"] == NAMESPACE and resource["inputs"]["metadata"]["name"] == teams[small].namespace:
            del resource["inputs"]["metadata"]["annotations"][POD_TEXT_BYTES_ANNOTATION]
    assert _datastore_row(render_summary(plan), small)[7] == "`0`"
