"""GPUs held by ordinary init containers: charged as held GPUs (promtool on the platform's real rule file), and
every upstream name the method relies on read at the mirrored tags (kube-state-metrics of every accepted
kube-prometheus-stack, dcgm-exporter's pod mapping, KAI's pod accounting).

The story, one sample a minute, on the three-team site of tests/test_observability_rules.py:
- alpha's pod ``evade`` runs its job in an ordinary init container ``train`` holding 2 whole GPUs, from minute
  1 to 180, then its main container (no GPU) runs to the end: the kubelet keeps the 2 GPUs the pod's until it
  ends. DCGM names no pod for those GPUs. Its pod ``done`` had an init container with a GPU and has ended
  (``Succeeded``): its devices are free.
- beta's pod ``mesh`` has a sidecar (restartable init container) ``proxy`` with 1 GPU, which DCGM names; its pod
  ``warm`` warms a 3g MIG slice in an ordinary init container and its main container reuses the slice (DCGM names
  it from the start); its pod ``bake`` holds 2 x 1g slices in an ordinary init container only, exported twice
  (two kube-state-metrics replicas).
- gamma's pod ``serve`` runs a container with 1 GPU; its pod ``fetch`` downloads in an ordinary init container
  holding 2 GPUs while its main container will reuse 1 of them (DCGM names that one from the start).
- a pod in a namespace no team owns holds 4 GPUs in an init container.
Hand-computed held GPUs (KAI units): alpha 2 (beta's and gamma's pods are not alpha's), beta 1 + 3 + 2 = 6,
gamma 1 + 1 + (2 - 1) = 3. alpha's 4 hours of 2 GPUs (3 in the init container, 1 idle after it) are 8 GPU-hours.
"""

from __future__ import annotations

import re

import yaml

from components import observability_init_gpus as init_gpus
from components import observability_rules as rules
from components import observability_team_series as team_series
from config import load_platform, versions
from tests.conftest import ACCEPTED_TAGS, MIRRORED_TAGS, git, go_function
from tests.test_observability_rules import _gpu, _queue, needs_promtool, promtool, site_config

KSM = "kubernetes/kube-state-metrics"
CHARTS = "prometheus-community/helm-charts"
DCGM = "NVIDIA/dcgm-exporter"
KAI = "kai-scheduler/KAI-Scheduler"
# Minutes 1 to 180 (180 samples): alpha's init container runs; 0 before and after. From minute 181 the pod runs.
RUNS_3H = "0 1x179 0x60"
RUNNING_AFTER_3H = "0x180 1x60"
FLAT = "1+0x240"


def _ksm(metric: str, namespace: str, pod: str, values: str, instance: str = "ksm-0", **labels: str) -> dict:
    extra = "".join(f',{key}="{value}"' for key, value in labels.items())
    return {"series": f'{metric}{{namespace="{namespace}",pod="{pod}",uid="uid-{pod}",instance="{instance}"{extra}}}',
            "values": values}


def _init(namespace: str, pod: str, container: str, resource: str, count: int, running: str, *,
          restart_policy: str = "", instance: str = "ksm-0") -> list[dict]:
    """kube-state-metrics' series of one init container (labels as v2.19.1 and v2.20.0 name them)."""
    return [
        _ksm(init_gpus.INIT_INFO, namespace, pod, FLAT, instance, container=container, image_spec="img", image="img",
             image_id="", container_id="", restart_policy=restart_policy),
        _ksm(init_gpus.INIT_REQUESTS, namespace, pod, f"{count}+0x240", instance, container=container, node="node-1",
             resource=resource, unit="integer"),
        _ksm(init_gpus.INIT_RUNNING, namespace, pod, running, instance, container=container),
    ]


def _phase(namespace: str, pod: str, phase: str, values: str) -> dict:
    return _ksm(init_gpus.POD_PHASE, namespace, pod, values, phase=phase)


def _main(namespace: str, pod: str, resource: str, count: int) -> dict:
    return _ksm(init_gpus.CONTAINER_REQUESTS, namespace, pod, f"{count}+0x240", container="main", node="node-1",
                resource=resource, unit="integer")


def story_series() -> list[dict]:
    slice_3g = {"series": 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-m",gpu="1",Hostname="node-1",'
                          'GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",namespace="vcluster-beta",pod="warm",container="main"}',
                "values": "0.5+0x240"}
    return [
        *[_queue("kai_queue_allocated_gpus", queue, f"{value}+0x240") for queue, value in
          (("alpha", 2), ("beta", 6), ("gamma", 3))],
        *_init("vcluster-alpha", "evade", "train", "nvidia_com_gpu", 2, RUNS_3H),
        _phase("vcluster-alpha", "evade", "Running", RUNNING_AFTER_3H),
        *_init("vcluster-alpha", "done", "prep", "nvidia_com_gpu", 1, "0+0x240"),
        _phase("vcluster-alpha", "done", "Running", "0+0x240"),
        _phase("vcluster-alpha", "done", "Succeeded", FLAT),
        *_init("vcluster-beta", "mesh", "proxy", "nvidia_com_gpu", 1, FLAT, restart_policy="Always"),
        _gpu("DCGM_FI_DEV_GPU_UTIL", "GPU-p", "vcluster-beta", "50+0x240", pod="mesh"),
        *_init("vcluster-beta", "warm", "load", "nvidia_com_mig_3g_40gb", 1, FLAT),
        _main("vcluster-beta", "warm", "nvidia_com_mig_3g_40gb", 1),
        slice_3g,
        *[series for instance in ("ksm-0", "ksm-1")
          for series in _init("vcluster-beta", "bake", "bake", "nvidia_com_mig_1g_10gb", 2, FLAT, instance=instance)],
        _main("vcluster-gamma", "serve", "nvidia_com_gpu", 1),
        _gpu("DCGM_FI_DEV_GPU_UTIL", "GPU-n", "vcluster-gamma", "50+0x240", pod="serve"),
        *_init("vcluster-gamma", "fetch", "download", "nvidia_com_gpu", 2, FLAT),
        _main("vcluster-gamma", "fetch", "nvidia_com_gpu", 1),
        _gpu("DCGM_FI_DEV_GPU_UTIL", "GPU-u", "vcluster-gamma", "50+0x240", pod="fetch"),
        *_init("vcluster-nobody", "hoard", "hoard", "nvidia_com_gpu", 4, FLAT),
    ]


def _samples(record: str, at: str, values: dict[str, float]) -> dict:
    return {"expr": record, "eval_time": at,
            "exp_samples": [{"labels": f"{record}{{{labels}}}", "value": value} for labels, value in values.items()]}


def init_container_story_tests() -> list[dict]:
    """The story's promtool tests, run on the platform's rule file by test_observability_rules.py's test of every
    rule (the same file this module would write)."""
    pods = {f'namespace="vcluster-{ns}",pod="{pod}"': value for ns, pod, value in
            (("alpha", "evade", 2), ("beta", "bake", 2), ("gamma", "fetch", 1), ("nobody", "hoard", 4))}
    recording = [
        _samples(init_gpus.INIT_GPUS, "10m", pods),
        _samples(rules.HELD, "10m", {'team="alpha"': 2, 'team="beta"': 6, 'team="gamma"': 3}),
        # What DCGM measures: alpha's GPUs are not among them, so alpha has no utilisation to be idle by.
        _samples(rules.MEASURED, "10m", {'team="beta"': 4, 'team="gamma"': 2}),
        _samples(rules.USED, "10m", {'team="beta"': 2, 'team="gamma"': 1}),
        _samples(rules.UTILISATION, "10m", {'team="beta"': 0.5, 'team="gamma"': 0.5}),
        # After alpha's init container, its pod still holds the 2 GPUs, idle, until it ends.
        _samples(init_gpus.INIT_GPUS, "200m", pods),
        _samples(rules.HELD, "200m", {'team="alpha"': 2, 'team="beta"': 6, 'team="gamma"': 3}),
        _samples(rules.HELD_HOURS, "60m", {'team="alpha"': 2, 'team="beta"': 6, 'team="gamma"': 3}),
        # The report's sum (ops.usage: one sample a minute): 240 minutes of 2 GPUs.
        {"expr": f'sum_over_time(({rules.held_gpus()})[4h:1m]) / 60', "eval_time": "240m", "exp_samples": [
            {"labels": f'{{team="{team}"}}', "value": value} for team, value in
            (("alpha", 8), ("beta", 6 * 4 + 0.1), ("gamma", 3 * 4 + 0.05))]},
    ]
    return [{"interval": "1m", "input_series": story_series(), "promql_expr_test": recording,
             "alert_rule_test": [{"alertname": "GpuTenancyAllocatedGpuIdle", "eval_time": "70m", "exp_alerts": []}]}]


@needs_promtool
def test_the_evasion_would_be_caught(tmp_path):
    """Without the init-container term (the held figure before this rule), alpha's 2 GPUs are charged to no one
    and the story above fails: it is not a check that passes anything."""
    platform = load_platform(site_config())
    groups = [{**group, "rules": [{**rule, "expr": f"sum by (team) ({rules._measured_terms()})"}
                                  if rule.get("record") == rules.HELD else
                                  {key: value for key, value in rule.items() if key != "annotations"}
                                  for rule in group["rules"]]} for group in rules.rule_groups(platform)]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    [story] = init_container_story_tests()
    story["promql_expr_test"] = [test for test in story["promql_expr_test"] if test["expr"] == rules.HELD][:1]
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [story]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    assert promtool("test", "rules", "tests.yml", cwd=tmp_path).returncode != 0


def test_team_boards_see_their_pods_init_container_gpus():
    [rule] = [rule for rule in team_series.team_series_rules() if rule["record"] == team_series.POD_INIT_GPUS]
    assert init_gpus.INIT_GPUS in rule["expr"] and "group_left (team)" in rule["expr"]


def _ksm_tags() -> list[str]:
    """The kube-state-metrics each accepted kube-prometheus-stack ships (its subchart's appVersion)."""
    tags = set()
    for release in versions.KUBE_PROMETHEUS_STACK_RELEASES:
        chart = yaml.safe_load(git(CHARTS, "show", f"kube-prometheus-stack-{release}:charts/kube-prometheus-stack/"
                                                  "Chart.yaml"))
        [ksm] = [dependency for dependency in chart["dependencies"] if dependency["name"] == "kube-state-metrics"]
        subchart = yaml.safe_load(git(CHARTS, "show", f"kube-state-metrics-{ksm['version']}:charts/kube-state-metrics/"
                                                      "Chart.yaml"))
        tags.add(f"v{subchart['appVersion']}")
    return sorted(tags)


def _family(source: str, name: str) -> str:
    """The generator function that defines a metric family in kube-state-metrics' pod store."""
    [generator] = re.findall(rf"func (\w+)\(\) generator\.FamilyGenerator {{\n[^\n]*\n\t\t\"{name}\"", source)
    return go_function(source, generator)


def test_kube_state_metrics_exports_what_the_rule_reads_at_every_accepted_release():
    tags = _ksm_tags()
    assert set(tags) == set(MIRRORED_TAGS[KSM]), "mirror exactly the kube-state-metrics the accepted charts ship"
    for tag in tags:
        pod = git(KSM, "show", f"{tag}:internal/store/pod.go")
        for name in (init_gpus.INIT_INFO, init_gpus.INIT_REQUESTS, init_gpus.INIT_RUNNING,
                     init_gpus.CONTAINER_REQUESTS):
            # On by default: an opt-in family would need a flag the program does not pass.
            assert "NewFamilyGeneratorWithStability(" in _family(pod, name), (tag, name)
        info = _family(pod, init_gpus.INIT_INFO)
        assert f'"container", "image_spec", "image", "image_id", "container_id", "{init_gpus.RESTART_POLICY_LABEL}"' \
               in info, tag
        assert "restartPolicy = string(*c.RestartPolicy)" in info and 'restartPolicy := ""' in info, tag
        for name in (init_gpus.INIT_REQUESTS, init_gpus.CONTAINER_REQUESTS):
            requests = _family(pod, name)
            assert 'metric.LabelKeys = []string{"container", "node", "resource", "unit"}' in requests, (tag, name)
            # nvidia.com/gpu and nvidia.com/mig-* are extended resources, exported under their sanitised names.
            assert "if isExtendedResourceName(resourceName) {" in requests, (tag, name)
            assert "SanitizeLabelName(string(resourceName)), string(constant.UnitInteger)" in requests, (tag, name)
        phase = _family(pod, init_gpus.POD_PHASE)
        assert "NewFamilyGeneratorWithStability(" in phase and 'LabelKeys:   []string{"phase"},' in phase, tag
        assert "{string(v1.PodRunning), phase == v1.PodRunning}," in phase, tag
        running = _family(pod, init_gpus.INIT_RUNNING)
        assert 'LabelKeys:   []string{"container"},' in running and "boolFloat64(cs.State.Running != nil)" in running
        utils = git(KSM, "show", f"{tag}:internal/store/utils.go")
        invalid = re.search(r"invalidLabelCharRE\s*=\s*regexp\.MustCompile\(`([^`]*)`\)", utils).group(1)
        assert "return invalidLabelCharRE.ReplaceAllString(s, \"_\")" in utils, tag
        assert re.sub(invalid, "_", "nvidia.com/gpu") == init_gpus.WHOLE_GPU_RESOURCE
        assert re.sub(invalid, "_", "nvidia.com/mig-3g.40gb").startswith(init_gpus.MIG_RESOURCE_PREFIX + "3g_")


def test_dcgm_names_pods_from_their_containers_only_at_both_tags():
    """The gap: the exporter reads each pod's Containers of the kubelet's List (sidecars are among them, ordinary
    init containers are not), for whole GPUs and MIG slices alike."""
    paths = {"3.3.8-3.6.0": "pkg/dcgmexporter/kubernetes.go",
             "4.5.3-4.8.2": "internal/pkg/transformation/kubernetes.go"}
    assert set(paths) == set(MIRRORED_TAGS[DCGM])
    for tag, path in paths.items():
        mapper = git(DCGM, "show", f"{tag}:{path}")
        assert "pod.GetContainers()" in mapper and "InitContainers" not in mapper, tag
        assert "ListPodResourcesRequest{}" in mapper, tag


def test_kai_counts_ordinary_init_containers_in_the_allocation_at_every_tag():
    for tag in ACCEPTED_TAGS[KAI]:
        pod_info = git(KAI, "show", f"{tag}:pkg/scheduler/api/pod_info/pod_info.go")
        effects = go_function(pod_info, "initContainerEffects")
        assert "for _, container := range pod.Spec.InitContainers {" in effects, tag
        assert "*container.RestartPolicy == v1.ContainerRestartPolicyAlways" in effects, tag
        assert "initPhasePeak.SetMaxResource(containerReq)" in effects, tag
        assert "result.SetMaxResource(initPhasePeak)" in go_function(pod_info, "getPodResourceRequest"), tag
