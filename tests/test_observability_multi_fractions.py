"""Fractions of several GPUs (``gpu-fraction-num-devices`` 2 to 8) are charged as held GPUs: promtool on the
platform's real rule file, and the upstream facts the method relies on read at the mirrored tags.

The attack: KAI names a multi-device pod's GPU groups in label keys only, so the shared-GPU chain never reached
it, and a tenant that spread its shares over two devices held GPUs that no held or used figure charged.

The story, one sample a minute, on the three-team site of tests/test_observability_rules.py:
- alpha's pod ``spread`` runs with ``gpu-fraction: 0.5`` on 2 devices: 1 GPU held. Its pod ``one`` asks for
  ``0.25`` on 1 device: an ordinary share, charged through its GPU group (none here), never by this rule.
- beta's pod ``wide`` runs with ``gpu-memory: 12288`` on 4 devices of node-2, whose GPUs have 24576 MiB (DCGM on
  the reservation pod ``res-b`` there): 4 x 0.5 = 2 GPUs held. A reservation pod on node-1 has bigger GPUs.
- gamma's pod ``prep`` is Pending while its init container ``warm``, which ``gpu-fraction-container-name`` names,
  runs with 0.5 on 3 devices: 1.5 GPUs held. Its pod ``queued`` (0.5 on 2) is Pending with nothing running: 0.
- a pod in a namespace no team owns runs 0.5 on 2 devices: charged to no team.
"""

from __future__ import annotations

import re

import yaml

from components import observability_init_gpus as init_gpus
from components import observability_multi_fractions as multi_fractions
from components import observability_rules as rules
from components import observability_shares as shares
from components import observability_xid as xid
from components.admission_metadata import NUM_DEVICES_PATTERN
from config import load_platform
from tests.conftest import ACCEPTED_TAGS, MIRRORED_TAGS, git, go_function
from tests.test_observability_rules import needs_promtool, promtool, site_config

KAI = "kai-scheduler/KAI-Scheduler"
KSM = "kubernetes/kube-state-metrics"
RESERVATION = shares.RESERVATION_NAMESPACE
FLAT = "1+0x180"


def _ids(namespace: str, pod: str) -> str:
    return f'namespace="{namespace}",pod="{pod}",uid="uid-{pod}"'


def _pod(namespace: str, pod: str, node: str, phase: str, **annotations: str) -> list[dict]:
    """kube-state-metrics' series of one pod: its allowlisted annotations (names as v2.19.1 and v2.20.0 give them),
    its phase and its node."""
    exported = "".join(f',{shares.ksm_label_name("annotation", key.replace("_", "-"))}="{value}"'
                       for key, value in annotations.items())
    return [{"series": f"kube_pod_annotations{{{_ids(namespace, pod)}{exported}}}", "values": FLAT},
            {"series": f'kube_pod_status_phase{{{_ids(namespace, pod)},phase="{phase}"}}', "values": FLAT},
            {"series": f'{multi_fractions.POD_INFO}{{{_ids(namespace, pod)},node="{node}",host_ip="10.0.0.1",'
                       f'pod_ip="10.1.0.1",created_by_kind="",created_by_name="",priority_class="",'
                       f'host_network="false"}}', "values": FLAT}]


def _reservation(pod: str, node: str, uuid: str, framebuffer: tuple[int, int, int]) -> list[dict]:
    """A KAI reservation pod on a node, and DCGM's framebuffer fields of the GPU it holds (MiB)."""
    series = _pod(RESERVATION, pod, node, "Running")
    for field, value in zip(("USED", "FREE", "RESERVED"), framebuffer):
        series.append({"series": f'DCGM_FI_DEV_FB_{field}{{UUID="{uuid}",gpu="0",Hostname="{node}",'
                                 f'namespace="{RESERVATION}",pod="{pod}",container="resource-reservation"}}',
                       "values": f"{value}+0x180"})
    return series


def story_series() -> list[dict]:
    return [
        *_pod("vcluster-alpha", "spread", "node-1", "Running", gpu_fraction="0.5", gpu_fraction_num_devices="2"),
        *_pod("vcluster-alpha", "one", "node-1", "Running", gpu_fraction="0.25", gpu_fraction_num_devices="1"),
        *_pod("vcluster-beta", "wide", "node-2", "Running", gpu_memory="12288", gpu_fraction_num_devices="4"),
        *_reservation("res-a", "node-1", "GPU-a", (1000, 80000, 920)),
        *_reservation("res-b", "node-2", "GPU-b", (1000, 23000, 576)),
        *_pod("vcluster-gamma", "prep", "node-1", "Pending", gpu_fraction="0.5", gpu_fraction_num_devices="3",
              gpu_fraction_container_name="warm"),
        {"series": f'kube_pod_init_container_status_running{{{_ids("vcluster-gamma", "prep")},container="warm"}}',
         "values": FLAT},
        *_pod("vcluster-gamma", "queued", "node-1", "Pending", gpu_fraction="0.5", gpu_fraction_num_devices="2"),
        *_pod("vcluster-nobody", "hoard", "node-1", "Running", gpu_fraction="0.5", gpu_fraction_num_devices="2"),
    ]


def _samples(expr: str, at: str, values: dict[str, float]) -> dict:
    return {"expr": expr, "eval_time": at,
            "exp_samples": [{"labels": f"{expr}{{{labels}}}", "value": value} for labels, value in values.items()]}


def story_tests() -> list[dict]:
    """The story's promtool tests, run on the platform's rule file by test_observability_rules.py's test of every
    rule (the same file this module would write)."""
    held = {'team="alpha"': 1, 'team="beta"': 2, 'team="gamma"': 1.5}
    pods = {'namespace="vcluster-alpha",pod="spread"': 1, 'namespace="vcluster-beta",pod="wide"': 2,
            'namespace="vcluster-gamma",pod="prep"': 1.5, 'namespace="vcluster-nobody",pod="hoard"': 1}
    return [{"interval": "1m", "input_series": story_series(), "promql_expr_test": [
        _samples(multi_fractions.MULTI_FRACTION_GPUS, "10m", pods),
        _samples(rules.HELD, "10m", held),
        _samples(rules.HELD_HOURS, "60m", held),
        # The report's sum (ops.usage: one sample a minute), minutes 0 to 180: 181 samples of each.
        {"expr": f"sum_over_time(({rules.held_gpus()})[3h:1m]) / 60", "eval_time": "180m", "exp_samples": [
            {"labels": f"{{{labels}}}", "value": value * 181 / 60} for labels, value in held.items()]},
        # Their busy time is no pod's to know: never used, so no team looks idle by them.
        {"expr": rules.USED, "eval_time": "10m", "exp_samples": []},
    ], "alert_rule_test": [{"alertname": "GpuTenancyAllocatedGpuIdle", "eval_time": "70m", "exp_alerts": []}]}]


def _write(tmp_path, groups: list[dict], tests: list[dict]) -> None:
    groups = [{**group, "rules": [{key: value for key, value in rule.items() if key != "annotations"}
                                  for rule in group["rules"]]} for group in groups]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    document = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(document, sort_keys=False))


@needs_promtool
def test_the_evasion_would_be_caught(tmp_path):
    """With the held figure before this rule (measured GPUs plus init containers' GPUs), alpha, beta and gamma
    hold GPUs that no figure charges, and the story fails: it is not a check that passes anything."""
    before = (f"sum by (team) ({rules._measured_terms()} or "
              f"({rules._to_team(init_gpus.held_by_init())}))")
    groups = [{**group, "rules": [{**rule, "expr": before} if rule.get("record") == rules.HELD else rule
                                  for rule in group["rules"]]}
              for group in rules.rule_groups(load_platform(site_config()))]
    [story] = story_tests()
    story["promql_expr_test"] = [test for test in story["promql_expr_test"] if test["expr"] == rules.HELD]
    _write(tmp_path, groups, [story])
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode != 0 and "got: nil" in result.stdout + result.stderr, result.stdout + result.stderr


def test_the_reader_reads_every_device_count_the_host_policy_admits():
    """One digit is read: the host policy admits 1 to 8, and more digits would go uncharged."""
    assert re.fullmatch(NUM_DEVICES_PATTERN, "8") and not re.search(NUM_DEVICES_PATTERN, "10")
    assert f'{multi_fractions.KSM_NUM_DEVICES}=~"[13579]"' in multi_fractions.declared_devices()


def test_kai_names_multi_device_groups_in_label_keys_only_at_every_tag():
    for tag in ACCEPTED_TAGS[KAI]:
        constants = git(KAI, "show", f"{tag}:pkg/common/constants/constants.go")
        assert re.search(rf'\bGpuFractionsNumDevices\s*=\s*"{multi_fractions.NUM_DEVICES_ANNOTATION}"', constants)
        sharing = git(KAI, "show", f"{tag}:pkg/common/resources/gpu_sharing.go")
        assert "return numDevices > 1, nil" in go_function(sharing, "IsMultiFraction"), tag
        binder = git(KAI, "show", f"{tag}:pkg/binder/binding/resourcereservation/resource_reservation.go")
        update = go_function(binder, "(rsc *service) updatePodGPUGroup")
        assert re.search(r"if isMultiFraction \{\s*labelKey, labelValue := resources\.GetMultiFractionGpuGroupLabel"
                         r"\(gpuGroup\)\s*pod\.Labels\[labelKey\] = labelValue\s*\} else \{\s*"
                         r"pod\.Labels\[constants\.GPUGroup\] = gpuGroup", update), tag
        # The queue is charged the fraction on every device (what the held figure follows).
        pod_info = git(KAI, "show", f"{tag}:pkg/scheduler/api/pod_info/pod_info.go")
        assert "NewGpuResourceRequirementWithMultiFraction(" in pod_info, tag


def test_kube_state_metrics_exports_the_pod_node_and_annotation_at_every_accepted_release():
    for tag in MIRRORED_TAGS[KSM]:
        pod = git(KSM, "show", f"{tag}:internal/store/pod.go")
        info = pod[pod.index(f'"{multi_fractions.POD_INFO}"'):][:1500]
        assert '[]string{"host_ip", "pod_ip", "node",' in info and "p.Status.PodIP, p.Spec.NodeName," in info, tag
        utils = git(KSM, "show", f"{tag}:internal/store/utils.go")
        invalid = re.search(r"invalidLabelCharRE\s*=\s*regexp\.MustCompile\(`([^`]*)`\)", utils).group(1)
        expected = "annotation_" + re.sub(invalid, "_", multi_fractions.NUM_DEVICES_ANNOTATION).lower()
        assert multi_fractions.KSM_NUM_DEVICES == expected, tag


def failure_story() -> list[dict]:
    """node-1 runs two shared GPUs, GPU-a and GPU-c (KAI reservation pods res-a and res-c); alpha's ``spread`` holds
    half of two GPUs there. beta's ``wide`` holds shares of four GPUs on node-2, where GPU-b is shared. From minute
    10 GPU-c reports XID 79 (off the bus): a failure that pages the platform."""
    xid_series = [{"series": f'{xid.METRIC}{{UUID="{uuid}",gpu="0",Hostname="{node}",namespace="{RESERVATION}",'
                             f'pod="{pod}",container="resource-reservation"}}', "values": values}
                  for uuid, node, pod, values in (("GPU-a", "node-1", "res-a", "0x40"),
                                                  ("GPU-c", "node-1", "res-c", "0x9 79x30"),
                                                  ("GPU-b", "node-2", "res-b", "0x40"))]
    return [
        *_pod("vcluster-alpha", "spread", "node-1", "Running", gpu_fraction="0.5", gpu_fraction_num_devices="2"),
        *_pod("vcluster-beta", "wide", "node-2", "Running", gpu_memory="12288", gpu_fraction_num_devices="4"),
        *_reservation("res-a", "node-1", "GPU-a", (1000, 80000, 920)),
        *_reservation("res-c", "node-1", "GPU-c", (1000, 80000, 920)),
        *_reservation("res-b", "node-2", "GPU-b", (1000, 23000, 576)),
        *xid_series,
    ]


def _failed_alerts(at: str, teams: tuple[str, ...]) -> dict:
    return {"alertname": "GpuTenancyTeamGpuFailed", "eval_time": at, "exp_alerts": [
        {"exp_labels": {"severity": "warning", "UUID": "GPU-c", "gpu": "0", "Hostname": "node-1", "team": team}}
        for team in teams]}


@needs_promtool
def test_a_team_holding_fractions_of_several_gpus_is_told_when_a_shared_gpu_of_its_node_fails(tmp_path):
    """KAI names such a pod's GPUs in label keys only, so the team is told of any shared GPU of its pod's node that
    fails, and a team whose pods are on another node is not."""
    tests = [{"interval": "1m", "input_series": failure_story(),
              "alert_rule_test": [_failed_alerts("5m", ()), _failed_alerts("15m", ("alpha",))]}]
    _write(tmp_path, rules.rule_groups(load_platform(site_config())), tests)
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_without_the_node_join_the_team_was_never_told(tmp_path):
    """The alert as it was (the teams DCGM or a GPU group joins to the GPU) tells alpha nothing: the story fails."""
    before = rules.on_teams_gpus(f"({xid.fatal()} > bool 0)")
    groups = [{**group, "rules": [{**rule, "expr": before} if rule.get("alert") == "GpuTenancyTeamGpuFailed" else rule
                                  for rule in group["rules"]]}
              for group in rules.rule_groups(load_platform(site_config()))]
    _write(tmp_path, groups, [{"interval": "1m", "input_series": failure_story(),
                               "alert_rule_test": [_failed_alerts("15m", ("alpha",))]}])
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode != 0 and "GpuTenancyTeamGpuFailed" in result.stdout + result.stderr
