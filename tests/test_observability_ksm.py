"""A team cannot fill the shared Prometheus through kube-state-metrics: the series of its pods' tolerations are not
written, and its images are cut as Prometheus stores them, while the scrape and every other team's series stay.

Read upstream: kube-state-metrics at every mirrored tag (what it exports of a pod, its denylist flag), the
Prometheus operator's translation of a ServiceMonitor's relabellings, the container runtime's image reference
grammar (github.com/distribution/reference). The kube-prometheus-stack chart is rendered with the program's
values, and a real Prometheus scrapes a hostile team's series through the rendered relabellings.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from components import observability_ksm as ksm
from components.observability import stack_values
from config import load_platform
from tests.conftest import EXTRA_MIRRORED_TAGS, MIRRORED_TAGS, eks_config, git, go_function, mirrored_tag
from tests.local_prometheus import PROMETHEUS, query, running_prometheus, serving_exporter
from tests.test_observability_contract import all_expressions
from tests.test_observability_rules import site_config

KSM = "kubernetes/kube-state-metrics"
CHARTS = "prometheus-community/helm-charts"
OPERATOR = "prometheus-operator/prometheus-operator"
REFERENCE = "distribution/reference"
SITE = load_platform(site_config())
ROOT = Path(__file__).resolve().parent.parent


def family(source: str, name: str) -> str:
    """The generator of one metric family in kube-state-metrics' pod store, up to the next family."""
    start = source.index(f'"{name}"')
    end = source.find("\nfunc ", start)
    return source[start:end if end > 0 else len(source)]


@pytest.mark.parametrize("tag", MIRRORED_TAGS[KSM])
def test_kube_state_metrics_turns_each_toleration_and_image_into_label_values(tag):
    pod = git(KSM, "show", f"{tag}:internal/store/pod.go")
    tolerations = family(pod, "kube_pod_tolerations")
    assert "for _, t := range uniqueTolerations" in tolerations and '"key", "operator", "value"' in tolerations
    for name in ("kube_pod_container_info", "kube_pod_init_container_info"):
        block = family(pod, name)
        keys = re.search(r'labelKeys := \[\]string\{([^}]*)\}', block).group(1)
        assert [key.strip(' "') for key in keys.split(",")][1:4] == list(ksm.IMAGE_LABELS)
        assert "cs.Name, c.Image, cs.Image, cs.ImageID" in block
    # The denylist is kube-state-metrics' own flag, matched against family names before they are generated.
    options = git(KSM, "show", f"{tag}:pkg/options/options.go")
    assert '"metric-denylist"' in options


def test_what_is_dropped_or_cut_is_read_by_no_rule_board_or_report():
    text = "\n".join(all_expressions(SITE)) + (ROOT / "ops" / "usage.py").read_text()
    for metric in ksm.DENIED_METRICS:
        assert metric not in text
    for label in ksm.IMAGE_LABELS:
        assert not re.search(rf"\b{label}\b\s*(=|!=|=~|!~|,|\))", text), label


def test_a_reference_the_runtime_can_pull_is_never_cut():
    """The longest reference distribution/reference parses: a 255-character name, a 128-character tag and a SHA-512
    digest (its only longer algorithm)."""
    for tag in MIRRORED_TAGS[REFERENCE]:
        source = git(REFERENCE, "show", f"{tag}:reference.go")
        name = int(re.search(r"RepositoryNameTotalLengthMax\s*=\s*(\d+)", source).group(1)) \
            if "RepositoryNameTotalLengthMax" in source else int(re.search(r"NameTotalLengthMax\s*=\s*(\d+)",
                                                                            source).group(1))
        assert name == 255
        assert re.search(r"tag\s*:= /\[\\w\]\[\\w\.-\]\{0,127\}/", source)
        longest = name + len(":") + 128 + len("@sha512:") + 128
        assert longest == 520 < ksm.IMAGE_LABEL_CHARACTERS


@pytest.mark.parametrize("tag", MIRRORED_TAGS[OPERATOR])
def test_the_operator_writes_the_relabellings_as_prometheus_reads_them(tag):
    source = git(OPERATOR, "show", f"{mirrored_tag(OPERATOR, tag)}:pkg/prometheus/promcfg.go")
    body = go_function(source, "generateRelabelConfig")
    for field, key in (("SourceLabels", "source_labels"), ("TargetLabel", "target_label"), ("Regex", "regex"),
                       ("Replacement", "replacement"), ("Action", "action")):
        assert re.search(rf'Key: "{key}", Value: (\*|strings\.ToLower\()?c\.{field}', body), field
    assert all(set(rule) == set(OPERATOR_KEYS) for rule in ksm.image_truncations())


OPERATOR_KEYS = {"sourceLabels": "source_labels", "targetLabel": "target_label", "regex": "regex",
                 "replacement": "replacement", "action": "action"}


def as_prometheus(relabellings: list[dict]) -> list[dict]:
    """A ServiceMonitor's relabellings as the Prometheus operator writes them into Prometheus' configuration."""
    return [{OPERATOR_KEYS[key]: value.lower() if key == "action" else value for key, value in rule.items()}
            for rule in relabellings]


@pytest.fixture(scope="module")
def rendered_stack(tmp_path_factory):
    from tests.release_renders import rendered
    config = eks_config()
    config["gpu-tenancy:teams"] = config["gpu-tenancy:teams"][:1]
    config["gpu-tenancy:observability"] = {"prometheus": "install"}
    manifests = rendered(config, tmp_path_factory.mktemp("ksm"), stack="eks")
    return {path: text for path, text in manifests.items() if path.startswith("kube-prometheus-stack/")}


def one(manifests: dict[str, str], suffix: str) -> dict:
    [text] = [text for path, text in manifests.items() if path.endswith(suffix)]
    return next(doc for doc in yaml.safe_load_all(text) if doc)


def test_the_rendered_chart_denies_the_tolerations_and_cuts_the_images(rendered_stack):
    deployment = one(rendered_stack, "charts/kube-state-metrics/templates/deployment.yaml")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert f"--metric-denylist={','.join(ksm.DENIED_METRICS)}" in container["args"]
    monitor = one(rendered_stack, "charts/kube-state-metrics/templates/servicemonitor.yaml")
    [endpoint] = [endpoint for endpoint in monitor["spec"]["endpoints"] if endpoint["port"] == "http"]
    assert endpoint["metricRelabelings"] == ksm.image_truncations()
    # Still the pod's own namespace and pod labels (the chart's default, kept under the program's values).
    assert endpoint["honorLabels"] is True
    assert "sampleLimit" not in monitor["spec"] and "labelValueLengthLimit" not in monitor["spec"]
    # The chart's own rules and boards read neither.
    own = "\n".join(text for path, text in rendered_stack.items() if "/templates/prometheus/rules" in path
                    or "/templates/grafana/dashboards" in path)
    assert "kube_pod_container_info" not in own and all(metric not in own for metric in ksm.DENIED_METRICS)
    assert "image_spec" not in own and "image_id" not in own


@pytest.mark.parametrize("tag", [tag for tag in EXTRA_MIRRORED_TAGS[CHARTS] if tag.startswith("kube-state-metrics-")])
def test_every_accepted_kube_state_metrics_chart_takes_the_denylist_and_the_relabellings(tag):
    """The subchart of every accepted kube-prometheus-stack (tests/conftest.py EXTRA_MIRRORED_TAGS)."""
    chart = "charts/kube-state-metrics"
    defaults = yaml.safe_load(git(CHARTS, "show", f"{tag}:{chart}/values.yaml"))
    assert defaults["metricDenylist"] == [] and defaults["prometheus"]["monitor"]["http"]["metricRelabelings"] == []
    deployment = git(CHARTS, "show", f"{tag}:{chart}/templates/deployment.yaml")
    assert '- --metric-denylist={{ .Values.metricDenylist | join "," }}' in deployment
    monitor = git(CHARTS, "show", f"{tag}:{chart}/templates/servicemonitor.yaml")
    assert "toYaml (.Values.prometheus.monitor.http.metricRelabelings" in monitor


def test_the_values_are_the_ones_the_program_gives_the_release():
    assert stack_values(SITE)["kube-state-metrics"] == ksm.KSM_VALUES


# A hostile team's image: 200 KiB, a line break inside, in two pods; an honest team's, the longest it can pull.
HOSTILE = "registry.example/" + "a" * 100_000 + "\n" + "b" * 100_000
HONEST = "registry.example/" + "n" * 238 + ":" + "t" * 128 + "@sha512:" + "f" * 128


def escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(_scrape: int) -> str:
    lines = ["# TYPE kube_pod_container_info gauge"]
    for namespace, pod, image in (("team-a", "p1", HOSTILE), ("team-a", "p2", HOSTILE + "c"),
                                  ("team-b", "honest", HONEST)):
        lines.append(f'kube_pod_container_info{{namespace="{namespace}",pod="{pod}",container="main",'
                     f'image_spec="{escaped(image)}",image="{escaped(image)}",image_id="",container_id=""}} 1')
    lines += ["# TYPE kube_pod_status_phase gauge", 'kube_pod_status_phase{namespace="team-b",pod="honest",phase="Running"} 1']
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not on $PATH (Debian package prometheus; .ci/run "
                                               "installs it)")
def test_a_real_prometheus_keeps_the_scrape_and_cuts_only_the_hostile_images(tmp_path, rendered_stack):
    monitor = one(rendered_stack, "charts/kube-state-metrics/templates/servicemonitor.yaml")
    [endpoint] = [endpoint for endpoint in monitor["spec"]["endpoints"] if endpoint["port"] == "http"]
    jobs = {
        "platform": {"metric_relabel_configs": as_prometheus(endpoint["metricRelabelings"])},
        "unbounded": {},  # without the relabellings: what Prometheus stored before
        "length-limited": {"label_value_length_limit": ksm.IMAGE_LABEL_CHARACTERS},  # Prometheus' own limit
    }

    def every_job_scraped(url: str) -> bool:
        try:
            return len(query(url, "up")) == len(jobs) and len(query(url, 'kube_pod_status_phase{job="platform"}')) == 1
        except OSError:
            return False

    with serving_exporter(exposition) as exporter:
        config = yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": [
            {"job_name": job, "honor_labels": True, "static_configs": [{"targets": [exporter]}], **extra}
            for job, extra in jobs.items()]})
        with running_prometheus(tmp_path, config, ready=every_job_scraped, timeout=60,
                                not_ready="prometheus did not scrape the exporter") as url:
            up = {series["metric"]["job"]: series["value"][1] for series in query(url, "up")}
            assert up == {"platform": "1", "unbounded": "1", "length-limited": "0"}, \
                "a per-scrape limit drops every team's series with the hostile one"
            stored = {series["metric"]["pod"]: series["metric"]
                      for series in query(url, 'kube_pod_container_info{job="platform"}')}
            assert set(stored) == {"p1", "p2", "honest"}
            for pod in ("p1", "p2"):
                for label in ("image_spec", "image"):
                    assert stored[pod][label] == HOSTILE[:ksm.IMAGE_LABEL_CHARACTERS]
                assert "image_id" not in stored[pod]
            assert stored["honest"]["image_spec"] == stored["honest"]["image"] == HONEST
            whole = query(url, 'kube_pod_container_info{job="unbounded",pod="p1"}')
            assert whole[0]["metric"]["image_spec"] == HOSTILE, "the control: unrelabelled, Prometheus keeps it all"
