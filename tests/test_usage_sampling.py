"""The usage report counts every scrape: its step is at most the platform's scrape interval.

The attack: the report samples its sums at whole multiples of its step (UTC), which anyone can predict, and each
sample holds the latest scrape before it. When a pod ends, its series are marked stale at the next scrape. With
the old 60 s step and 30 s scrapes, only one scrape in two was ever held by a sample: a team replacing its GPU pod
every minute, each present at the other scrape, held the GPU nearly all the time and the report charged nothing,
although Prometheus had seen the pod at every other scrape (promtool below, with staleness markers as a real
scrape writes them; a backfilled Prometheus has none). With a step no longer than the scrape interval every scrape
is held by a sample. What remains: a pod that lives wholly between two scrapes of every exporter is seen by no one
(docs/observability-charging.md).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import yaml

from components import observability_rules as rules
from components.observability import service_monitor_spec, stack_values
from config import load_platform, versions
from config.observability import SCRAPE_INTERVAL_SECONDS
from ops import usage
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.test_observability_rules import needs_promtool, promtool, site_config

OPERATOR = "prometheus-operator/prometheus-operator"
CHARTS = "prometheus-community/helm-charts"
START, END = datetime.fromtimestamp(0, timezone.utc), datetime.fromtimestamp(600, timezone.utc)
MINUTES = 10
ARGS = ["--prometheus", "http://127.0.0.1:1", "--from", START.isoformat(), "--to", END.isoformat()]


def _burst_series() -> list[dict]:
    """DCGM's series of one whole GPU, scraped at :10 and :40 of each minute (promtool steps of 10 s): alpha's pod
    ``burst-<minute>`` holds it from :41 of the minute before to :39, so the :10 scrape names it and the :40 scrape
    finds it gone (a staleness marker) and names no pod for the free GPU."""
    series = []
    for minute in range(MINUTES):
        values = ["_"] * (6 * MINUTES)
        values[6 * minute + 1], values[6 * minute + 4] = "100", "stale"
        series.append({"series": f'DCGM_FI_DEV_GPU_UTIL{{UUID="GPU-1",gpu="0",Hostname="node-1",'
                                 f'namespace="vcluster-alpha",pod="burst-{minute}",container="main"}}',
                       "values": " ".join(values)})
    return series


def _charged(step: int) -> dict:
    """The report's held GPU-hours for [START, END) at ``step``, as the report asks Prometheus for them."""
    expr = usage.hours_query(rules.held_gpus(), START, END, step)
    return {"expr": expr, "eval_time": f"{usage.evaluation_time(END, step) - START.timestamp():g}s"}


def _run(tmp_path, tests: list[dict]) -> str:
    platform = load_platform(site_config())
    info = [group for group in rules.rule_groups(platform) if group["name"] == "gpu-tenancy-info"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": info}, sort_keys=False))
    document = {"rule_files": ["rules.yml"], "evaluation_interval": "10s",
                "tests": [{"interval": "10s", "input_series": _burst_series(), "promql_expr_test": tests}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    return result.stdout + result.stderr if result.returncode else ""


@needs_promtool
def test_a_pod_seen_at_every_other_scrape_is_charged_for_those_scrapes(tmp_path):
    step = usage._parser().parse_args(ARGS).step
    # Ten scrapes saw the pod; each is held by one sample of 30 s.
    expected = [{"labels": '{team="alpha"}', "value": MINUTES * SCRAPE_INTERVAL_SECONDS / 3600}]
    assert _run(tmp_path, [{**_charged(step), "exp_samples": expected}]) == ""


@needs_promtool
def test_the_old_step_charged_that_pod_nothing(tmp_path):
    """The hole the step bound closes, shown on the same scrapes: a 60 s step holds no scrape that saw the pod."""
    assert _run(tmp_path, [{**_charged(60), "exp_samples": []}]) == ""


class _Unreachable:
    url = "http://127.0.0.1:1"

    def query(self, expr: str, at: float) -> list:
        raise AssertionError("the step must be refused before any query")


def test_a_step_longer_than_the_scrape_interval_is_refused_before_any_query(capsys):
    with pytest.raises(usage.UsageError) as refused:
        usage.report(_Unreachable(), START, END, SCRAPE_INTERVAL_SECONDS + 1)
    assert f"--step {SCRAPE_INTERVAL_SECONDS + 1}" in str(refused.value)
    assert f"Use --step {SCRAPE_INTERVAL_SECONDS}" in str(refused.value)
    assert usage.main([*ARGS, "--step", "60"]) == 2
    assert "--step 60 is longer than the 30s the platform scrapes at" in capsys.readouterr().err


def test_the_platform_scrapes_at_the_interval_the_report_assumes():
    """The program's monitors (KAI, DCGM) say so; kube-state-metrics' monitor and Prometheus itself leave it to the
    Prometheus operator's default (next test)."""
    [endpoint] = service_monitor_spec("kai-scheduler", ("queue-controller", "metrics"))["endpoints"]
    assert endpoint["interval"] == f"{SCRAPE_INTERVAL_SECONDS}s"
    chart = f"kube-prometheus-stack-{versions.KUBE_PROMETHEUS_STACK_VERSION}"
    values = yaml.safe_load(git(CHARTS, "show", f"{chart}:charts/kube-prometheus-stack/values.yaml"))
    assert values["prometheus"]["prometheusSpec"]["scrapeInterval"] == ""
    ksm = yaml.safe_load(git(CHARTS, "show", f"{chart}:charts/kube-state-metrics/values.yaml"))
    assert ksm["prometheus"]["monitor"]["http"]["interval"] == ""
    assert "interval" not in values["kube-state-metrics"]["prometheus"]["monitor"]["http"]
    ours = stack_values(load_platform(site_config()))
    assert "scrapeInterval" not in ours.get("prometheus", {}).get("prometheusSpec", {})
    assert "interval" not in str(ours.get("kube-state-metrics", {}))


@pytest.mark.parametrize("tag", MIRRORED_TAGS[OPERATOR])
def test_the_prometheus_operator_scrapes_every_30_seconds_by_default(tag):
    types = git(OPERATOR, "show", f"{mirrored_tag(OPERATOR, tag)}:pkg/apis/monitoring/v1/prometheus_types.go")
    block = types[types.index("// scrapeInterval defines interval between consecutive scrapes."):][:300]
    assert f'+kubebuilder:default:="{SCRAPE_INTERVAL_SECONDS}s"' in block and "ScrapeInterval Duration" in block
