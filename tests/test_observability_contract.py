"""Every metric name the rules and dashboards read exists upstream, with the labels they join on.

Read from the pinned upstream sources (fetched git mirrors): KAI at both accepted tags, dcgm-exporter,
kube-state-metrics (tests/conftest.py: MIRRORED_TAGS). A mirror that is absent skips its part, naming
$GPU_TENANCY_MIRRORS.
The API server's counter is not mirrored here; its name and labels were read from kubernetes/kubernetes
(staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/metrics/metrics.go, commit 008b365):
``apiserver_validating_admission_policy_check_total{policy, policy_binding, error_type, enforcement_action}``,
enforcement_action one of allow, deny, warn, audit.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

from components import observability_dashboards as boards
from components import observability_rules as rules
from components import observability_xid as xid
from components.observability_team_series import all_rule_groups
from config import load_platform
from config.observability import DCGM_FIELDS_BEYOND_DEFAULTS
from tests.conftest import ACCEPTED_TAGS, MIRRORED_TAGS, MIRRORS_VARIABLE, git
from tests.test_observability_rules import site_config

KAI = "kai-scheduler/KAI-Scheduler"
KAI_TAGS = ACCEPTED_TAGS[KAI]
DCGM = "NVIDIA/dcgm-exporter"
DCGM_FLOOR_TAG, DCGM_TAG = MIRRORED_TAGS[DCGM]
KSM = "kubernetes/kube-state-metrics"
# The kube-state-metrics the pinned kube-prometheus-stack ships.
KSM_TAG = MIRRORED_TAGS[KSM][-1]
APISERVER = {"apiserver_validating_admission_policy_check_total"}

_PROMQL_WORDS = {"by", "on", "and", "or", "unless", "without", "ignoring", "group_left", "group_right", "offset",
                 "bool", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names of a PromQL expression: identifiers that are not functions, keywords or label names."""
    text = re.sub(r'"[^"]*"', "", expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        if text[match.end():].lstrip().startswith("(") or word.lower() in _PROMQL_WORDS:
            continue
        names.add(word)
    return names


@lru_cache(maxsize=None)
def kai_metrics() -> frozenset[str]:
    names = set()
    for tag in KAI_TAGS:
        prefix = re.search(r'DefaultMetricsNamespace\s*=\s*"(\w+)"',
                           git(KAI, "show", f"{tag}:pkg/common/constants/constants.go")).group(1)
        per_tag = set()
        for path in ("pkg/queuecontroller/metrics/metrics.go", "pkg/scheduler/metrics/metrics.go"):
            per_tag |= {f"{prefix}_{name}" for name in re.findall(r'Name:\s*"(\w+)"', git(KAI, "show", f"{tag}:{path}"))}
        names = per_tag if not names else names & per_tag
    return frozenset(names)


@lru_cache(maxsize=None)
def dcgm_metrics() -> frozenset[str]:
    """DCGM's fields the exporter lists, and the exporter's own counters (``DCGM_EXP_*``, named in its source)."""
    fields = re.findall(r"^#?\s*(DCGM_FI_\w+)\s*,", git(DCGM, "show", f"{DCGM_TAG}:etc/dcp-metrics-included.csv"),
                        re.MULTILINE)
    return frozenset(fields) | dcgm_exporter_counters(DCGM_TAG)


@lru_cache(maxsize=None)
def dcgm_exporter_counters(tag: str) -> frozenset[str]:
    return frozenset(re.findall(r'=\s*"(DCGM_EXP_\w+)"', dcgm_go_source(tag, r'"DCGM_EXP_\w+"')))


def dcgm_go_source(tag: str, pattern: str) -> str:
    """The lines of the exporter's Go source (tests left out) at ``tag`` that match ``pattern``."""
    return git(DCGM, "grep", "-h", "-E", pattern, tag, "--", "*.go", ":!*_test.go")


@lru_cache(maxsize=None)
def ksm_metrics() -> frozenset[str]:
    return frozenset(re.findall(r'"(kube_\w+)"', git(KSM, "show", f"{KSM_TAG}:internal/store/pod.go")))


def recorded(platform) -> set[str]:
    return {rule["record"] for group in all_rule_groups(platform) for rule in group["rules"] if "record" in rule}


def all_expressions(platform) -> list[str]:
    exprs = [rule["expr"] for group in all_rule_groups(platform) for rule in group["rules"]]
    for _, board in boards.dashboards(platform).values():
        exprs.extend(boards.queries(board))
    return exprs


def test_metric_name_extraction():
    assert metric_names('max by (team) (kai_queue_allocated_gpus * on (queue_name) group_left (team) x:y:z)') == {
        "kai_queue_allocated_gpus", "x:y:z"}
    assert metric_names('increase(a_total{policy="p",x=~"b"}[10m]) >= 1') == {"a_total"}


def test_every_metric_read_exists_upstream_or_is_recorded_here():
    platform = load_platform(site_config())
    # Prometheus' own counter: tests/test_observability_storage.py reads it from a running Prometheus.
    known = recorded(platform) | kai_metrics() | dcgm_metrics() | ksm_metrics() | APISERVER | {rules.SIZE_RETENTIONS}
    used = set().union(*(metric_names(expr) for expr in all_expressions(platform)))
    assert used - known == set(), f"metrics read but defined nowhere upstream: {used - known}"
    # The ones the issue names, from their pinned sources.
    assert {"kai_queue_deserved_gpus", "kai_queue_allocated_gpus", "kai_queue_fair_share_gpu",
            "kai_queue_info"} <= kai_metrics()
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS",
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} <= dcgm_metrics()
    assert "kube_pod_status_phase" in ksm_metrics()


def test_queue_metrics_carry_queue_name_at_both_kai_tags():
    for tag in KAI_TAGS:
        controller = git(KAI, "show", f"{tag}:pkg/queuecontroller/metrics/metrics.go")
        assert re.search(r'queueNameLabel\s*=\s*"queue_name"', controller)
        scheduler = git(KAI, "show", f"{tag}:pkg/scheduler/metrics/metrics.go")
        assert re.search(r'Name:\s*"queue_fair_share_gpu".*?\[\]string\{"queue_name"', scheduler, re.DOTALL)


def test_dcgm_maps_gpus_to_pods_with_namespace_and_pod_labels():
    const = git(DCGM, "show", f"{DCGM_TAG}:internal/pkg/transformation/const.go")
    assert re.search(r'podAttribute\s*=\s*"pod"', const)
    assert re.search(r'namespaceAttribute\s*=\s*"namespace"', const)
    # The GPU identity labels the rules group by (UUID, gpu, Hostname) are those the exporter renders.
    template = git(DCGM, "show", f"{DCGM_TAG}:internal/pkg/rendermetrics/render_metrics.go")
    assert 'gpu="{{ $metric.GPU }}"' in template and 'Hostname="{{ $metric.Hostname }}"' in template
    assert re.search(r'uuid\s*:=\s*"UUID"', git(DCGM, "show", f"{DCGM_TAG}:internal/pkg/collector/gpu_collector.go"))


def test_ksm_phase_metric_has_namespace_pod_and_phase():
    source = git(KSM, "show", f"{KSM_TAG}:internal/store/pod.go")
    block = source[source.index('"kube_pod_status_phase"'):][:3000]
    assert '"phase"' in block


GPU_OPERATOR = "NVIDIA/gpu-operator"
GPU_OPERATOR_TAGS = ACCEPTED_TAGS[GPU_OPERATOR]


def test_kai_services_the_monitors_select_exist_at_both_tags():
    from components.observability import KAI_QUEUE_CONTROLLER, KAI_SCHEDULER
    for tag in KAI_TAGS:
        common = git(KAI, "show", f"{tag}:pkg/operator/operands/common/common.go")
        # Every Service the operator writes is labelled app=<its name>.
        assert re.search(r'GetLabels\(\)\["app"\]\s*=\s*resourceName', common)
        controller = git(KAI, "show", f"{tag}:pkg/operator/operands/queue_controller/resources.go")
        assert f'defaultResourceName = "{KAI_QUEUE_CONTROLLER[0]}"' in controller
        defaults = git(KAI, "show", f"{tag}:pkg/apis/kai/v1/queue_controller/queue_controller.go")
        assert f'p.Name = common.SetDefault(p.Name, ptr.To("{KAI_QUEUE_CONTROLLER[1]}"))' in defaults
        shard = git(KAI, "show", f"{tag}:pkg/operator/operands/scheduler/resources_for_shard.go")
        assert 'serviceName := fmt.Sprintf("%s-%s", *kaiConfig.Spec.Global.SchedulerName, shard.Name)' in shard
        assert f'Name:       "{KAI_SCHEDULER[1]}"' in shard
        scheduler_name = re.search(r'DefaultSchedulerName\s*=\s*"([\w-]+)"',
                                   git(KAI, "show", f"{tag}:pkg/common/constants/constants.go")).group(1)
        chart_shard = git(KAI, "show", f"{tag}:deployments/kai-scheduler/templates/default-shard.yaml")
        shard_name = re.search(r"^\s+name:\s*(\S+)", chart_shard, re.MULTILINE).group(1)
        assert KAI_SCHEDULER[0] == f"{scheduler_name}-{shard_name}"


def test_kai_shard_accepts_the_fairness_fields_at_both_tags():
    import yaml
    for tag in KAI_TAGS:
        crd = yaml.safe_load(git(KAI, "show", f"{tag}:deployments/kai-scheduler/crds/kai.scheduler_schedulingshards.yaml"))
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        assert spec["kValue"]["type"] == "number"
        usage = spec["usageDBConfig"]["properties"]
        assert {"clientType", "connectionString", "usageParams"} <= set(usage)
        assert {"windowSize", "windowType", "halfLifePeriod"} <= set(usage["usageParams"]["properties"])
        assert crd["spec"]["scope"] == "Cluster"


def test_dcgm_exporter_service_and_pod_mapping_at_both_operator_tags():
    from components.observability import DCGM_EXPORTER
    import yaml
    for tag in GPU_OPERATOR_TAGS:
        # The asset files are renumbered between releases: find the Service and the DaemonSet by kind.
        assets = {path: git(GPU_OPERATOR, "show", f"{tag}:{path}") for path in
                  git(GPU_OPERATOR, "ls-tree", "--name-only", f"{tag}:assets/state-dcgm-exporter/").split()
                  for path in [f"assets/state-dcgm-exporter/{path}"]}
        [service_text] = [text for text in assets.values() if re.search(r"^kind: Service$", text, re.MULTILINE)]
        [daemonset] = [text for text in assets.values() if re.search(r"^kind: DaemonSet$", text, re.MULTILINE)]
        service = yaml.safe_load(service_text)
        assert service["metadata"]["labels"]["app"] == DCGM_EXPORTER[0]
        assert DCGM_EXPORTER[1] in [port["name"] for port in service["spec"]["ports"]]
        assert re.search(r'name: DCGM_EXPORTER_KUBERNETES\n\s+value: "true"', daemonset)
        values = yaml.safe_load(git(GPU_OPERATOR, "show", f"{tag}:deployments/gpu-operator/values.yaml"))
        assert "enabled" in values["dcgmExporter"]
        # dcgmExporter.config.name is commented out in values.yaml but read by the ClusterPolicy template,
        # and the exporter reads the dcgm-metrics.csv key of that ConfigMap.
        policy = git(GPU_OPERATOR, "show", f"{tag}:deployments/gpu-operator/templates/clusterpolicy.yaml")
        assert "name: {{ .Values.dcgmExporter.config.name }}" in policy
        chart_config_map = git(GPU_OPERATOR, "show",
                                f"{tag}:deployments/gpu-operator/templates/dcgm_exporter_config.yaml")
        assert "dcgm-metrics.csv:" in chart_config_map
        controller = git(GPU_OPERATOR, "show", f"{tag}:controllers/object_controls.go")
        assert re.search(r'MetricsConfigFileName\s*=\s*"dcgm-metrics.csv"', controller)


def test_platform_dcgm_collector_list_keeps_every_default_field_and_adds_ecc():
    from components import observability_dcgm
    csv_text = git(DCGM, "show", f"{DCGM_TAG}:etc/dcp-metrics-included.csv")
    defaults = set(re.findall(r"^(DCGM_FI_\w+)\s*,", csv_text, re.MULTILINE))
    ours = {name for name, _, _ in observability_dcgm.FIELDS}
    assert defaults <= ours, f"default fields the platform's list would drop: {defaults - ours}"
    assert ours <= dcgm_metrics(), f"fields the exporter does not know: {ours - dcgm_metrics()}"
    # What the rules and boards read beyond the operator's defaults is exactly what the platform's list adds
    # for them, and what an external operator is told to add (config/load_observability.py).
    read = set().union(*(metric_names(expr) for expr in all_expressions(load_platform(site_config()))))
    assert {name for name in read if name.startswith("DCGM_")} - defaults == set(DCGM_FIELDS_BEYOND_DEFAULTS)
    assert set(DCGM_FIELDS_BEYOND_DEFAULTS) <= ours
    # The exporter's own counters are listed (commented out) in its full default list.
    every_counter = git(DCGM, "show", f"{DCGM_TAG}:etc/default-counters.csv")
    kinds = dict(re.findall(r"^#?\s*(DCGM_(?:FI|EXP)_\w+)\s*,\s*(\w+)", csv_text + every_counter, re.MULTILINE))
    assert all(kinds[name] == kind for name, kind, _ in observability_dcgm.FIELDS)
    assert all("," not in help_text for _, _, help_text in observability_dcgm.FIELDS)


def test_the_gpu_operators_floor_and_newer_tag_ship_the_mirrored_exporters():
    import yaml
    from config.versions import GPU_OPERATOR_MINIMUM_VERSION
    shipped = {tag: yaml.safe_load(git(GPU_OPERATOR, "show", f"{tag}:deployments/gpu-operator/values.yaml"))
               ["dcgmExporter"]["version"] for tag in GPU_OPERATOR_TAGS}
    assert shipped[GPU_OPERATOR_MINIMUM_VERSION].startswith(f"{DCGM_FLOOR_TAG}-")
    assert any(version.startswith(f"{DCGM_TAG}-") for version in shipped.values())


@pytest.mark.parametrize("tag", MIRRORED_TAGS[DCGM])
def test_the_exporter_counts_each_xid_code_in_a_window_once_the_collector_list_names_the_counter(tag):
    """What components/observability_xid.py reads: at the floor's exporter and a current one, listing the counter
    turns the XID collector on; it counts every XID value DCGM recorded since the window's start, per code in
    label ``xid`` (a window label beside it), and gives a GPU with none one series of 0 without the label; the
    window is 5 minutes unless the exporter is told otherwise."""
    assert xid.COUNT_METRIC in dcgm_exporter_counters(tag)
    assert dcgm_go_source(tag, r"func IsDCGMExpXIDErrorsCountEnabled")
    assert dcgm_go_source(tag, r"IdentifyMetricType\(record\[0\]\)"), "the collector list's parser"
    assert dcgm_go_source(tag, rf'metricValueLabels\["{xid.COUNT_LABEL}"\] = fmt\.Sprint\(entityValue\)')
    assert dcgm_go_source(tag, r'windowSizeInMSLabel\s*=\s*"window_size_in_ms"')
    assert dcgm_go_source(tag, r"GetValuesSince\(")
    assert dcgm_go_source(tag, r"createMetric\(labels, mi, uuid, 0\)")
    five_minutes = r"Value:\s*int\(\(5 \* time\.Minute\)\.Milliseconds\(\)\)"
    assert re.search(rf"CLIXIDCountWindowSize,\s*Aliases:[^\n]*\n\s*{five_minutes}",
                     git(DCGM, "show", f"{tag}:pkg/cmd/app.go"))


KPS = "prometheus-community/helm-charts"


def test_kube_prometheus_stack_pin_and_values_match_the_chart():
    """The pinned tag exists; the values set are chart keys; the Prometheus Service, the monitor selection by
    release label and the dashboard sidecar are what components/observability.py relies on."""
    import yaml
    from components.observability import stack_values
    from config import versions
    from config.observability import INSTALL_RELEASE
    stack_tags = ACCEPTED_TAGS[KPS]
    assert f"kube-prometheus-stack-{versions.KUBE_PROMETHEUS_STACK_VERSION}" in stack_tags
    for tag in stack_tags:  # every release the config accepts
        assert tag in git(KPS, "tag", "--list", "kube-prometheus-stack-*").split()
        chart = "charts/kube-prometheus-stack"
        defaults = yaml.safe_load(git(KPS, "show", f"{tag}:{chart}/values.yaml"))
        values = stack_values(load_platform(site_config()))
        spec = defaults["prometheus"]["prometheusSpec"]
        assert {"retention", "storageSpec"} <= set(spec)
        assert spec["serviceMonitorSelectorNilUsesHelmValues"] is True and spec["ruleSelectorNilUsesHelmValues"] is True
        sidecar = defaults["grafana"]["sidecar"]["dashboards"]
        ours = values["grafana"]["sidecar"]["dashboards"]
        assert (sidecar["label"], sidecar["labelValue"]) == (ours["label"], ours["labelValue"])
        assert "enabled" in defaults["grafana"]
        # Release name contains the chart name: fullname is the release name, so the Service is <release>-prometheus.
        helpers = git(KPS, "show", f"{tag}:{chart}/templates/_helpers.tpl")
        assert "if contains $name .Release.Name" in helpers and len(INSTALL_RELEASE) <= 26
        service = git(KPS, "show", f"{tag}:{chart}/templates/prometheus/service.yaml")
        assert 'name: {{ template "kube-prometheus-stack.fullname" . }}-prometheus' in service
        prometheus = git(KPS, "show", f"{tag}:{chart}/templates/prometheus/prometheus.yaml")
        assert "release: {{ $.Release.Name | quote }}" in prometheus


def test_the_pr_workflow_fetches_every_mirror_the_contract_tests_read():
    """GitHub Actions has the network this machine lacks: the Tests job fetches each mirror at these tags."""
    import yaml
    from config import versions
    workflow = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "pull-request.yml"
    job = yaml.safe_load(workflow.read_text())["jobs"]["test"]
    script = next(step["run"] for step in job["steps"] if step.get("name") == "Fetch the upstream sources at their pinned tags")
    lines = [line.split() for line in script.splitlines() if line.strip().startswith("fetch ")]
    fetched = {words[1]: set(words[2:]) for words in lines}
    assert len(fetched) == len(lines), "a repository is fetched by two lines"
    assert fetched == {repository: set(tags) for repository, tags in MIRRORED_TAGS.items()}
    # and saves every upstream tag next to each mirror, where tests/conftest.py upstream_tags reads them
    assert 'git ls-remote --tags --refs "https://github.com/$repository" > "${mirror%/repo}/tags"' in script
    assert f"kube-prometheus-stack-{versions.KUBE_PROMETHEUS_STACK_VERSION}" in ACCEPTED_TAGS[KPS]
    assert job["env"][MIRRORS_VARIABLE]
