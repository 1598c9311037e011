"""Charging shared GPUs: the annotation reader run by promtool, and every name the method relies on read from
the pinned upstream sources (KAI's reservation pods and GPU groups, kube-state-metrics' label export and the
chart values that switch it on, the DCGM exporter's pod mapping)."""

from __future__ import annotations

import re

import yaml

from components import observability_shares as shares
from components.kai import kai_values
from components.observability import stack_values
from config import load_platform, versions
from config.observability import KSM_FLAGS
from tests.conftest import ACCEPTED_TAGS, MIRRORED_TAGS, git, go_function
from tests.test_observability_rules import needs_promtool, promtool, site_config

KAI = "kai-scheduler/KAI-Scheduler"
KSM = "kubernetes/kube-state-metrics"
# The kube-state-metrics the pinned kube-prometheus-stack ships.
KSM_TAG = MIRRORED_TAGS[KSM][-1]
DCGM = "NVIDIA/dcgm-exporter"
DCGM_TAG = MIRRORED_TAGS[DCGM][-1]
CHARTS = "prometheus-community/helm-charts"
KPS_TAG = f"kube-prometheus-stack-{versions.KUBE_PROMETHEUS_STACK_VERSION}"

# Annotation value -> the number the rules must read (None: a form they do not read, so the pod is not charged).
FRACTIONS = {"0.33": 0.33, ".5": 0.5, "0.05": 0.05, "0.050": 0.05, "0.2500": 0.25, "0.999": 0.999, "0.1234": 0.1234,
             "0.98765": 0.9876, "00.25": 0.25, "5e-1": None, "half": None}
MEMORIES = {"10560": 10560, "7": 7, "81920": 81920, "1000000": 1000000, "4096": 4096, "+512": None, "1.5": None}


def _reader_tests(name: str, label: str, expected: dict[str, float | None], expr: str) -> dict:
    series, readable = [], 0
    for index, (value, number) in enumerate(expected.items()):
        ids = f'namespace="ns",pod="{name}-{index}",uid="u{index}"'
        series.append({"series": f'kube_pod_annotations{{{ids},{label}="{value}"}}', "values": "1+0x5"})
        if number is not None:
            readable += 1
            series.append({"series": f"expected_{name}{{{ids}}}", "values": f"{number!r}+0x5"})
    # A pod without the annotation, and one exported twice (two kube-state-metrics replicas): counted once.
    series.append({"series": f'kube_pod_annotations{{namespace="ns",pod="{name}-none",uid="n"}}', "values": "1+0x5"})
    twice = {"series": f'kube_pod_annotations{{namespace="ns",pod="{name}-twice",uid="t",{label}="{next(iter(expected))}",'
                       'instance="ksm-2"}', "values": "1+0x5"}
    series.append(twice)
    series.append({"series": f'expected_{name}{{namespace="ns",pod="{name}-twice",uid="t"}}',
                   "values": f"{next(iter(expected.values()))!r}+0x5"})
    return {"interval": "1m", "input_series": series,
            "promql_expr_test": [{"expr": f"count({expr})", "eval_time": "2m",
                                  "exp_samples": [{"labels": "{}", "value": readable + 1}]}],
            "alert_rule_test": [{"alertname": f"Misread_{name}", "eval_time": "2m", "exp_alerts": []}]}


@needs_promtool
def test_annotations_are_read_as_the_numbers_they_spell(tmp_path):
    readers = {"fraction": (shares.KSM_FRACTION, FRACTIONS, shares.declared_fraction()),
               "memory": (shares.KSM_MEMORY, MEMORIES, shares.declared_memory())}
    # An alert per reader fires for any pod whose number is off, or whose value should be unread but is read.
    rules = [{"alert": f"Misread_{name}",
              "expr": f"abs(({expr}) - on (namespace, pod) max by (namespace, pod) (expected_{name})) > 1e-9"
                      f" or (({expr}) unless on (namespace, pod) expected_{name})"}
             for name, (_, _, expr) in readers.items()]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "readers", "rules": rules}]}))
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m",
             "tests": [_reader_tests(name, label, expected, expr) for name, (label, expected, expr) in readers.items()]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_a_misread_annotation_would_be_caught(tmp_path):
    """The reader test above fails when the expected number is wrong (it is not a check that passes anything)."""
    rules = [{"alert": "Misread_fraction", "expr": f"abs(({shares.declared_fraction()}) - on (namespace, pod) "
                                                   "max by (namespace, pod) (expected_fraction)) > 1e-9"}]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "readers", "rules": rules}]}))
    wrong = _reader_tests("fraction", shares.KSM_FRACTION, {"0.33": 0.3}, shares.declared_fraction())
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [wrong]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    assert promtool("test", "rules", "tests.yml", cwd=tmp_path).returncode != 0


def _go_constant(source: str, name: str) -> str:
    return re.search(rf'\b{name}\s*=\s*"([^"]*)"', source).group(1)


def test_kai_reservation_pods_and_gpu_groups_at_both_tags():
    for tag in ACCEPTED_TAGS[KAI]:
        constants = git(KAI, "show", f"{tag}:pkg/common/constants/constants.go")
        assert _go_constant(constants, "GPUGroup") == shares.GPU_GROUP_LABEL
        assert re.search(r"MultiGpuGroupLabelPrefix\s*=\s*GPUGroup \+ \"/\"", constants)
        assert _go_constant(constants, "GpuFraction") == shares.FRACTION_ANNOTATION
        assert _go_constant(constants, "GpuMemory") == shares.MEMORY_ANNOTATION
        assert _go_constant(constants, "AppLabelName") == shares.RESERVATION_APP_LABEL[0]
        default = _go_constant(constants, "DefaultResourceReservationName")
        assert default == shares.RESERVATION_NAMESPACE == shares.RESERVATION_APP_LABEL[1]
        # The chart's defaults and the operator's: reservation pods live in that namespace with that app label.
        chart = yaml.safe_load(git(KAI, "show", f"{tag}:deployments/kai-scheduler/values.yaml"))
        assert chart["global"]["resourceReservation"]["namespace"] == shares.RESERVATION_NAMESPACE
        assert chart["global"]["resourceReservation"]["appLabel"] == shares.RESERVATION_APP_LABEL[1]
        operator = git(KAI, "show", f"{tag}:pkg/apis/kai/v1/binder/binder.go")
        assert "r.Namespace = common.SetDefault(r.Namespace, ptr.To(constants.DefaultResourceReservationName))" in operator

        binder = git(KAI, "show", f"{tag}:pkg/binder/binding/resourcereservation/resource_reservation.go")
        # The reservation pod holds one whole nvidia.com/gpu (so DCGM maps the GPU to it) and carries the group.
        assert re.search(r"numberOfGPUsToReserve\s*=\s*1\b", binder)
        assert "constants.NvidiaGpuResource: *resource.NewQuantity(numberOfGPUsToReserve" in binder
        pod = go_function(binder, "(rsc *service) createResourceReservationPod")
        assert re.search(r"Namespace:\s*rsc\.namespace,\s*Labels: map\[string\]string\{\s*"
                         r"constants\.AppLabelName:\s*rsc\.appLabelValue,\s*constants\.GPUGroup:\s*gpuGroup,", pod)
        # A pod with one fraction gets the same group as a label value; a multi-device one only a label key.
        assert "pod.Labels[constants.GPUGroup] = gpuGroup" in binder
        assert "labelKey, labelValue := resources.GetMultiFractionGpuGroupLabel(gpuGroup)" in binder
        sharing = git(KAI, "show", f"{tag}:pkg/common/resources/gpu_sharing.go")
        assert "return constants.MultiGpuGroupLabelPrefix + gpuGroup, gpuGroup" in sharing
        # KAI itself tells reservation pods from fractional pods by namespace, as the rules do.
        assert "if pod.Namespace == rsc.namespace {\n\t\t\treservationPods[gpuGroupToSync] = pod" in binder


def test_kai_may_give_a_share_to_an_init_container_at_every_tag():
    """Why a pending pod can be using its share: KAI's binder looks the container named by the annotation up among
    the init containers first, and kube-state-metrics says which init container runs."""
    for tag in ACCEPTED_TAGS[KAI]:
        constants = git(KAI, "show", f"{tag}:pkg/common/constants/constants.go")
        assert _go_constant(constants, "GpuFractionContainerName") == shares.FRACTION_CONTAINER_ANNOTATION
        access = git(KAI, "show", f"{tag}:pkg/binder/common/gpu_access.go")
        lookup = access[access.index("func GetFractionContainerRef("):]
        assert "name, found := pod.Annotations[constants.GpuFractionContainerName]" in lookup
        assert "for index, container := range pod.Spec.InitContainers {" in lookup
        assert "Type:      gpusharingconfigmap.InitContainer," in lookup
    pod = git(KSM, "show", f"{KSM_TAG}:internal/store/pod.go")
    family = pod[pod.index('"kube_pod_init_container_status_running"'):][:900]
    assert 'LabelKeys:   []string{"container"},' in family and "boolFloat64(cs.State.Running != nil)" in family


def test_the_program_leaves_kai_reservation_namespace_at_its_default():
    platform = load_platform(site_config())
    assert "resourceReservation" not in kai_values(platform.kai_scheduler).get("global", {})


def test_kube_state_metrics_names_the_exported_label_and_annotations_as_the_rules_read_them():
    utils = git(KSM, "show", f"{KSM_TAG}:internal/store/utils.go")
    invalid = re.search(r"invalidLabelCharRE\s*=\s*regexp\.MustCompile\(`([^`]*)`\)", utils).group(1)
    camel = re.search(r"matchAllCap\s*=\s*regexp\.MustCompile\(\"([^\"]*)\"\)", utils).group(1)
    assert 'return prefix + "_" + lintLabelName(SanitizeLabelName(labelName))' in utils
    assert "return toSnakeCase(s)" in utils and 'snake := matchAllCap.ReplaceAllString(s, "${1}_${2}")' in utils
    assert "return strings.ToLower(snake)" in utils

    def upstream(prefix: str, key: str) -> str:
        return f"{prefix}_" + re.sub(camel, r"\1_\2", re.sub(invalid, "_", key)).lower()

    for prefix, key, ours in (("label", shares.GPU_GROUP_LABEL, shares.KSM_GROUP),
                              ("annotation", shares.FRACTION_ANNOTATION, shares.KSM_FRACTION),
                              ("annotation", shares.MEMORY_ANNOTATION, shares.KSM_MEMORY),
                              ("annotation", shares.FRACTION_CONTAINER_ANNOTATION, shares.KSM_FRACTION_CONTAINER)):
        assert ours == upstream(prefix, key) == shares.ksm_label_name(prefix, key)
    assert (shares.KSM_GROUP, shares.KSM_FRACTION) == ("label_runai_gpu_group", "annotation_gpu_fraction")

    pod = git(KSM, "show", f"{KSM_TAG}:internal/store/pod.go")
    for family, prefix in (("kube_pod_labels", "label"), ("kube_pod_annotations", "annotation")):
        block = pod[pod.index(f'"{family}"'):][:900]
        assert f'createPrometheusLabelKeysValues("{prefix}"' in block
    assert re.search(r'descPodLabelsDefaultLabels\s*=\s*\[\]string\{"namespace", "pod", "uid"\}', pod)
    options = git(KSM, "show", f"{KSM_TAG}:pkg/options/options.go")
    for flag in KSM_FLAGS:
        assert f'"{flag.split("=", 1)[0].lstrip("-")}"' in options


def test_kube_prometheus_stack_values_switch_the_export_on():
    """The values reach kube-state-metrics v2.20.0 (the chart's dependency) as the two allowlist flags."""
    chart = "charts/kube-prometheus-stack"
    dependencies = yaml.safe_load(git(CHARTS, "show", f"{KPS_TAG}:{chart}/Chart.yaml"))["dependencies"]
    [ksm] = [dependency for dependency in dependencies if dependency["name"] == "kube-state-metrics"]
    subchart = yaml.safe_load(git(CHARTS, "show", f"{KPS_TAG}:charts/kube-state-metrics/Chart.yaml"))
    assert subchart["version"] == ksm["version"] and f"v{subchart['appVersion']}" == KSM_TAG
    defaults = yaml.safe_load(git(CHARTS, "show", f"{KPS_TAG}:charts/kube-state-metrics/values.yaml"))
    ours = stack_values(load_platform(site_config()))["kube-state-metrics"]
    assert set(ours) <= set(defaults)
    # The collectors replace the chart's list but secrets (tests/test_observability_discovery_contract.py).
    assert all(defaults[key] == [] for key in ours if key not in ("prometheus", "collectors"))
    deployment = git(CHARTS, "show", f"{KPS_TAG}:charts/kube-state-metrics/templates/deployment.yaml")
    rendered = {"--metric-labels-allowlist": "metricLabelsAllowlist",
                "--metric-annotations-allowlist": "metricAnnotationsAllowList"}
    for flag, key in rendered.items():
        assert f'- {flag}={{{{ .Values.{key} | join "," }}}}' in deployment
        assert f"{flag}={','.join(ours[key])}" in KSM_FLAGS
    # kube-prometheus-stack scrapes kube-state-metrics keeping its namespace/pod labels (the pod's, not its own).
    parent = yaml.safe_load(git(CHARTS, "show", f"{KPS_TAG}:{chart}/values.yaml"))
    assert parent["kube-state-metrics"]["prometheus"]["monitor"]["http"]["honorLabels"] is True


def test_dcgm_maps_the_gpu_to_the_pod_holding_the_nvidia_gpu_device():
    appconfig = git(DCGM, "show", f"{DCGM_TAG}:internal/pkg/appconfig/const.go")
    assert re.search(r'NvidiaResourceName\s*=\s*"nvidia.com/gpu"', appconfig)
    mapper = git(DCGM, "show", f"{DCGM_TAG}:internal/pkg/transformation/kubernetes.go")
    assert "resourceName != appconfig.NvidiaResourceName" in mapper
    defaults = git(DCGM, "show", f"{DCGM_TAG}:etc/dcp-metrics-included.csv")
    for field in ("FB_USED", "FB_FREE", "FB_RESERVED", "GPU_UTIL"):
        assert re.search(rf"^DCGM_FI_DEV_{field},", defaults, re.MULTILINE), field
