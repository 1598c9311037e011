"""A team cannot fill the host's datastore through the text of the pods its vCluster copies (rule ``pod-size`` of the
site's pod-size policy, components/admission_pod_size.py; vcluster.resourceQuota.syncedPodTextBytes,
config/synced_data.py).

- Attack: a pod whose host copy (tests/tenant_sim.py: synced by vCluster, mutated by KAI's webhook, what they add
  counted) carries one byte of env, command or args text past the team's cap, in any container kind or exec handler,
  is refused; so are more list entries than the policy sums affordably, and an ephemeral container added
  past the cap. The other counted paths: tests/test_pod_text_attacks.py.
- Honest: a pod at the cap, a training pod with a large JSON config in its env, and KAI's and the syncer's later
  updates of a pod at the cap are admitted. KAI's docs pods and the seeds' workloads pass the same pod policy
  (tests/test_admission_honest.py).
- Config: the cap is per team; values that bound nothing or break honest pods are refused at their key
  (tests/test_synced_object_sizes.py, beside the object cap's).
- Summary: the pods' text counts in each team's worst case.
"""

from __future__ import annotations

import copy

import pytest

from components.admission import policy_validations
from components.pod_text_paths import POD_SPEC, TextPaths
from config.synced_data import SYNCED_POD_TEXT_ITEMS, worst_case
from tests.config_spec import put
from tests.conftest import dev_config, run
from tests.tenant_sim import KAI_SCHEDULER, container, platform_of, tenant_of, virtual_pod

TEAM = "team-nlp"
CAP = 256 * 2 ** 10  # the default vcluster.resourceQuota.syncedPodTextBytes
PAD = "CONFIG"


def refused_for_size(messages: list[str]) -> bool:
    return any(message.startswith("[pod-size]") for message in messages)


def _at(node, path: str):
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def text_bytes(node: dict, paths: TextPaths = POD_SPEC) -> int:
    """The bytes of the strings along ``paths`` under ``node``, as stored (UTF-8): a walk of the pod's JSON, not CEL."""
    total = sum(len(value.encode()) for value in (_at(node, path) for path in paths.strings) if value is not None)
    total += sum(len(text.encode()) for path in paths.string_lists for text in _at(node, path) or [])
    return total + sum(text_bytes(entry, element) for path, element in paths.objects.items()
                       for entry in _at(node, path) or [])


def entries(node: dict, paths: TextPaths = POD_SPEC) -> int:
    """How many list entries the rule counts along ``paths`` under ``node``."""
    total = sum(len(_at(node, path) or []) for path in (*paths.string_lists, *paths.objects))
    return total + sum(entries(entry, element) for path, element in paths.objects.items()
                       for entry in _at(node, path) or [])


def counted(host: dict) -> int:
    """The bytes the rule counts in a host pod."""
    return text_bytes(host["spec"])


@pytest.fixture(scope="module")
def tenant(dev_run):
    return tenant_of(dev_run, dev_config(), TEAM)


def _pod(tenant, *, env: dict = None, **fields) -> dict:
    main = container(env=env)
    main.update(fields)
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, annotations={"gpu-fraction": "0.5"},
                       containers=[main])


def padded(tenant, total: int, **fields) -> dict:
    """A pod whose host copy counts ``total`` bytes: an env value long enough beside ``fields``. What vCluster and
    KAI add does not depend on the value's length, so one measure with an empty value suffices."""
    empty = counted(tenant.host_pod(_pod(tenant, env={PAD: ""}, **fields)))
    pod = _pod(tenant, env={PAD: "c" * (total - empty)}, **fields)
    assert counted(tenant.host_pod(pod)) == total
    return pod


# --- attacks ---------------------------------------------------------------------------------------------


def test_a_pod_one_byte_past_the_cap_is_refused_and_one_at_it_admitted(tenant):
    assert tenant.create(padded(tenant, CAP)) == []
    assert refused_for_size(tenant.create(padded(tenant, CAP + 1)))


@pytest.mark.parametrize("field", ["command", "args", "livenessProbe", "lifecycle", "readinessProbe"])
def test_commands_args_exec_handlers_and_http_headers_count(tenant, field):
    text = ["x" * 1000] * 100
    headers = [{"name": f"X-Note-{index:02d}", "value": "x" * (1000 - len("X-Note-00"))} for index in range(100)]
    value = {"command": text, "args": text, "livenessProbe": {"exec": {"command": text}},
             "lifecycle": {"preStop": {"exec": {"command": text}}},
             "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "httpHeaders": headers}}}[field]
    assert refused_for_size(tenant.create(padded(tenant, CAP + 1, **{field: value})))
    assert tenant.create(padded(tenant, CAP, **{field: value})) == []


def test_every_container_kind_counts(tenant):
    pod = padded(tenant, CAP)
    helper = container("setup", env={"SETUP": "s"})
    helper.pop("resources")
    pod["spec"]["initContainers"] = [helper]
    assert refused_for_size(tenant.create(pod))


def test_text_counts_its_utf8_bytes(tenant):
    pod = padded(tenant, CAP)
    value = pod["spec"]["containers"][0]["env"][0]["value"]
    pod["spec"]["containers"][0]["env"][0]["value"] = "é" + value[2:]
    assert tenant.create(pod) == []
    pod["spec"]["containers"][0]["env"][0]["value"] = "é" + value[1:]
    assert refused_for_size(tenant.create(pod))


def test_more_list_entries_than_the_policy_sums_are_refused(tenant):
    # Strings, not variables: the device rules iterate over variables, past the reference evaluator's iteration budget.
    added = entries(tenant.host_pod(_pod(tenant, args=[]))["spec"])
    pod = _pod(tenant, args=["a"] * (SYNCED_POD_TEXT_ITEMS - added + 1))
    assert counted(tenant.host_pod(pod)) < CAP
    assert refused_for_size(tenant.create(pod))
    pod["spec"]["containers"][0]["args"].pop()
    assert entries(tenant.host_pod(pod)["spec"]) == SYNCED_POD_TEXT_ITEMS
    assert tenant.create(pod) == []


def _debugged(host: dict, value: str) -> dict:
    """``host`` with an ephemeral container added through pods/ephemeralcontainers (the syncer copies it)."""
    updated = copy.deepcopy(host)
    updated["spec"]["ephemeralContainers"] = [{
        "name": "debugger", "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04", "imagePullPolicy": "Always",
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}, {"name": "NOTE", "value": value}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}]
    return updated


def test_an_ephemeral_container_added_past_the_cap_is_refused(tenant):
    host = tenant.host_pod(padded(tenant, CAP - 2 ** 10))
    assert tenant.create_host(host) == []
    room = 2 ** 10 - (counted(_debugged(host, "")) - counted(host))
    assert tenant.update(host, _debugged(host, "n" * room), subresource="ephemeralcontainers") == []
    assert refused_for_size(tenant.update(host, _debugged(host, "n" * (room + 1)),
                                          subresource="ephemeralcontainers"))


# --- honest ----------------------------------------------------------------------------------------------


def test_a_training_pod_with_a_large_json_config_in_its_env_is_admitted(tenant):
    """A DeepSpeed-style config of about 100 KiB in one variable (far above a real one's few KiB), a launcher's
    command line and the variables a distributed job sets."""
    config = "{" + ", ".join(f'"option_{index}": {{"value": {index}, "enabled": true}}' for index in range(2400)) + "}"
    assert 90 * 2 ** 10 < len(config) < 128 * 2 ** 10
    env = {"DS_CONFIG": config, "MASTER_ADDR": "trainer-0.trainer", "MASTER_PORT": "29500", "WORLD_SIZE": "8",
           **{f"NCCL_SETTING_{index}": "1" for index in range(200)}}
    pod = _pod(tenant, env=env, command=["torchrun", "--nproc-per-node=1", "train.py"],
               args=[f"--flag-{index}=value" for index in range(300)])
    assert tenant.create(pod) == []


def service_links(services: int) -> dict:
    """The variables vCluster writes into each container of a pod for a namespace of ``services`` Services with an
    http and a metrics port each, in the kubelet's format (translator.go ServicesToEnvironmentVariables)."""
    links = {}
    for index in range(services):
        name, address = f"INFERENCE_BACKEND_{index:03d}", f"10.96.{index // 250}.{index % 250 + 1}"
        links.update({f"{name}_SERVICE_HOST": address, f"{name}_SERVICE_PORT": "8080", f"{name}_PORT":
                      f"tcp://{address}:8080"})
        for port_name, port in (("HTTP", 8080), ("METRICS", 9090)):
            prefix = f"{name}_PORT_{port}_TCP"
            links.update({f"{name}_SERVICE_PORT_{port_name}": str(port), prefix: f"tcp://{address}:{port}",
                          f"{prefix}_PROTO": "tcp", f"{prefix}_PORT": str(port), f"{prefix}_ADDR": address})
    return links


def test_a_pod_in_a_namespace_of_a_hundred_services_is_admitted(tenant):
    """Service links are on by default: vCluster then writes each Service's variables into every container."""
    links = service_links(100)
    pod = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, annotations={"gpu-fraction": "0.5"},
                      containers=[container(name, env=links) for name in ("main", "sidecar", "exporter")])
    assert 3 * len(links) > 3000 and counted(tenant.host_pod(pod)) > 128 * 2 ** 10
    assert tenant.create(pod) == []


def test_kai_and_the_syncer_keep_updating_a_pod_at_the_cap(tenant):
    def edit(pod: dict) -> None:
        pod["metadata"]["labels"]["app"] = "tuner"
    assert tenant.run_and_edit(padded(tenant, CAP), edit) == []


def test_only_the_sites_pod_size_policy_judges_pod_sizes(tenant):
    """The virtual pod lacks the variables KAI and vCluster add, and the team's own policy leaves the sizes to the
    policy all teams share: only that one judges them, on the host."""
    def rules(validations):
        return [v for v in validations if v.get("message", "").startswith(("[pod-size]", "[pod-entry-size]"))]
    assert len(rules(tenant.size_admission.spec["validations"])) == 2
    assert not rules(policy_validations(tenant.team)) and not rules(policy_validations(tenant.team, before_sync=True))


# --- config ----------------------------------------------------------------------------------------------


def test_the_cap_is_per_team():
    config = put(dev_config(), "gpu-tenancy:teams[0].vcluster.resourceQuota.syncedPodTextBytes", "512Ki")
    program = run(config, stack="pod-text")
    large, small = tenant_of(program, config, "team-nlp"), tenant_of(program, config, "team-vision")
    assert large.team.vcluster.resource_quota.synced_pod_text_bytes == "512Ki"
    pod = padded(large, CAP + 1)
    assert large.create(pod) == []
    assert refused_for_size(small.create(pod))
    assert refused_for_size(large.create(padded(large, 2 * CAP + 1)))


def test_the_worst_case_counts_every_pod_at_the_cap():
    team = next(t for t in platform_of(dev_config()).teams if t.name == TEAM)
    raised = put(dev_config(), "gpu-tenancy:teams[0].vcluster.resourceQuota.syncedPodTextBytes", "512Ki")
    larger = next(t for t in platform_of(raised).teams if t.name == TEAM)
    # The namespace's quota allows 25 pods (the dev stack's 23 a team, its control plane and its DNS).
    assert worst_case(larger.vcluster) - worst_case(team.vcluster) == 25 * 256 * 2 ** 10
