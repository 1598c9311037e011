"""A team's view reaches only that team's series: the proxy's rewrite against a real Prometheus, and the plan.

prom-label-proxy itself cannot run here (no Debian or PyPI package; building it needs a newer Go and
modules from the internet; docs/testing-setup.md). What it does to a query is small and read at the pinned tag
(injectproxy/enforce.go, EnforceMatchers, held by a test below): every vector selector, inside range selectors too,
loses its matchers on the enforced label and gets ``<label>="<value>"``; with ``-error-on-replace`` a matcher on
that label the team's value does not satisfy is an error (HTTP 400). ``enforce`` below does exactly that with a real PromQL parser (promql-parser), and
the rewritten queries run on a real Prometheus on 127.0.0.1 that scrapes synthetic KAI, DCGM,
kube-state-metrics and API server series and evaluates the platform's real rule file.
"""

from __future__ import annotations

import json
import re

import promql_parser
import pytest
import yaml

from components import observability_dashboards as boards
from components.observability_shares import KSM_FRACTION, KSM_GROUP, RESERVATION_NAMESPACE
from components import observability_rules as rules
from components.observability_team_series import GPU_FAILED, GPU_XID, TEAM_LABEL, all_rule_groups
from components.observability_views import PROXY_PORT, proxy_args, proxy_name
from config import ConfigError, load_platform, versions
from config.model import UNLIMITED
from config.vocabulary import project_config
from tests.conftest import dev_config, git, mirrored_tag, run
from tests.test_observability_rules import site_config
from tests.local_prometheus import PROMETHEUS, query, running_prometheus, serving_exporter
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

needs_prometheus = pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not on $PATH (Debian package "
                                                                  "prometheus; .ci/run installs it)")
SITE = load_platform(site_config())


class Refused(Exception):
    """What prom-label-proxy answers with HTTP 400 under -error-on-replace."""


def satisfies(matcher, value: str) -> bool:
    """Whether ``value`` passes the matcher, as Prometheus matches (regular expressions anchored at both ends)."""
    ops = promql_parser.MatchOp
    if matcher.op in (ops.Equal, ops.NotEqual):
        return (matcher.value == value) == (matcher.op == ops.Equal)
    return bool(re.fullmatch(matcher.value, value)) == (matcher.op == ops.Re)


def enforce(query: str, label: str, value: str) -> str:
    """``query`` as prom-label-proxy rewrites it for ``-label label -label-value value -error-on-replace``: a matcher
    on the label that the value fails is refused (no series could answer), one it passes gives way to the value."""
    def visit(node):
        if not isinstance(node, promql_parser.VectorSelector):
            return None
        kept = []
        for matcher in node.matchers.matchers:
            if matcher.name != label:
                kept.append(matcher)
            elif not satisfies(matcher, value):
                raise Refused(f"{matcher} conflicts with {label}={value!r}")
        node.matchers = promql_parser.Matchers([*kept, promql_parser.Matcher(promql_parser.MatchOp.Equal, label,
                                                                              value)])
        return promql_parser.parse(str(node))

    return str(promql_parser.transform(promql_parser.parse(query), pre_visit=visit))


def test_enforce_rewrites_every_selector_and_refuses_another_team():
    rewritten = enforce('sum(rate(a{team="x",b="c"}[5m])) / on () count(b offset 1h) + {__name__=~"c.*"}',
                        "team", "x")
    assert rewritten.count('team="x"') == 3 and "offset 1h" in rewritten and "[5m]" in rewritten
    for other in ('a{team="y"}', 'a{team=~"y|z"}', 'a{team!="x"}', 'a{team!~"x|y"}', 'a{team=~"xx"}'):
        with pytest.raises(Refused):
            enforce(other, "team", "x")
    # A matcher the team's value passes is replaced by it: the query still reads the team's series only.
    for overlapping in ('a{team=~"x|y"}', 'a{team!="y"}', 'a{team=~".+"}'):
        assert enforce(overlapping, "team", "x") == 'a{team="x"}'


PROXY = "prometheus-community/prom-label-proxy"


def test_the_pinned_proxy_rewrites_as_enforce_does():
    """The tag the image pins: its flags, and EnforceMatchers' rule for an enforced equality matcher under
    -error-on-replace (the existing matcher must match the value: for =, !=, =~ and !~ alike), then its drop."""
    tag = mirrored_tag(PROXY, versions.PROM_LABEL_PROXY_IMAGE.rsplit(":", 1)[1])
    main = git(PROXY, "show", f"{tag}:main.go")
    flags = {argument.split("=", 1)[0].lstrip("-") for argument in proxy_args(SITE.teams[0], "http://prometheus")}
    assert all(f'"{flag}"' in main for flag in flags), flags
    source = git(PROXY, "show", f"{tag}:injectproxy/enforce.go")
    body = source[source.index("func (ms PromQLEnforcer) EnforceMatchers("):]
    # The outer switch, on the enforced matcher's type, is indented three tabs; the inner one, on the query's, four.
    equal = body[body.index("\n\t\t\tcase labels.MatchEqual:"):body.index("\n\t\t\tcase labels.MatchNotEqual:")]
    assert re.findall(r"ok = ([^\n]+)", equal) == [
        "matcher.Value == target.Value", "matcher.Value != target.Value", "target.Matches(matcher.Value)",
        "target.Matches(matcher.Value)"]
    assert "if matcher.Type == labels.MatchEqual || matcher.String() == target.String() {" in body


# --- the series Prometheus scrapes --------------------------------------------------------------------

def exposition(scrape: int) -> str:
    """KAI, DCGM, kube-state-metrics and API server series for every team of SITE; counters grow per scrape."""
    lines = []
    for number, team in enumerate(SITE.teams, start=1):
        queue = f'queue_name="{team.queue_name}"'
        lines += [f"kai_queue_deserved_gpus{{{queue}}} {team.resources.gpu.quota}",
                  f"kai_queue_allocated_gpus{{{queue}}} {0.5 * number}",
                  f'DCGM_FI_DEV_GPU_UTIL{{UUID="GPU-{number}",gpu="0",Hostname="node",namespace="{team.namespace}",'
                  f'pod="train-{team.name}"}} {20 * number}',
                  f'DCGM_FI_DEV_FB_USED{{UUID="GPU-{number}",gpu="0",Hostname="node",namespace="{team.namespace}",'
                  f'pod="train-{team.name}"}} {1000 * number}',
                  f'kube_pod_status_phase{{namespace="{team.namespace}",pod="wait-{team.name}",phase="Pending"}} 1',
                  # The team's application faults its GPU from the second scrape on (a new XID, 13).
                  f'DCGM_FI_DEV_XID_ERRORS{{UUID="GPU-{number}",gpu="0",Hostname="node",namespace="{team.namespace}",'
                  f'pod="train-{team.name}"}} {13 if scrape > 1 else 0}',
                  # ... and the GPU itself fails (119), the driver logging 154 right after: the counts hold both.
                  *(f'DCGM_EXP_XID_ERRORS_COUNT{{UUID="GPU-{number}",gpu="0",Hostname="node",'
                    f'namespace="{team.namespace}",pod="train-{team.name}",xid="{code}",window_size_in_ms="300000"}} 1'
                    for code in ((119, 154) if scrape > 1 else ())),
                  f'apiserver_validating_admission_policy_check_total{{policy="gpu-tenancy-{team.name}",'
                  f'policy_binding="gpu-tenancy-{team.name}",enforcement_action="deny"}} {scrape * number}',
                  f'apiserver_validating_admission_policy_check_total{{policy="gpu-tenancy-pod-size",'
                  f'policy_binding="gpu-tenancy-pod-size-{team.name}",enforcement_action="deny"}} {scrape}']
        # A shared GPU: KAI's reservation pod holds it (DCGM names that pod), the team's pod holds half of it.
        reservation, shared = f'namespace="{RESERVATION_NAMESPACE}",pod="gpu-reservation-{number}"', \
            f'namespace="{team.namespace}",pod="infer-{team.name}"'
        lines += [f'DCGM_FI_DEV_GPU_UTIL{{UUID="GPU-S{number}",gpu="1",Hostname="node",{reservation}}} 40',
                  *(f'DCGM_FI_DEV_FB_{field}{{UUID="GPU-S{number}",gpu="1",Hostname="node",{reservation}}} 8000'
                    for field in ("USED", "FREE")),
                  f'DCGM_FI_DEV_FB_RESERVED{{UUID="GPU-S{number}",gpu="1",Hostname="node",{reservation}}} 0',
                  f'kube_pod_labels{{{reservation},{KSM_GROUP}="group-{number}"}} 1',
                  f'kube_pod_labels{{{shared},{KSM_GROUP}="group-{number}"}} 1',
                  f'kube_pod_annotations{{{shared},{KSM_FRACTION}="0.5"}} 1',
                  f'kube_pod_status_phase{{{reservation},phase="Running"}} 1',
                  f'kube_pod_status_phase{{{shared},phase="Running"}} 1']
        # An ordinary init container holding whole GPUs, which DCGM names no pod for, runs.
        warming = f'namespace="{team.namespace}",pod="prep-{team.name}",container="warm"'
        lines += [f'kube_pod_init_container_info{{{warming},restart_policy=""}} 1',
                  f'kube_pod_init_container_resource_requests{{{warming},node="node",resource="nvidia_com_gpu",'
                  f'unit="integer"}} {number}',
                  f'kube_pod_init_container_status_running{{{warming}}} 1']
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    if PROMETHEUS is None:
        pytest.skip("prometheus is not on $PATH (Debian package prometheus; .ci/run installs it)")
    root = tmp_path_factory.mktemp("team-views")
    (root / "rules.yml").write_text(yaml.safe_dump({"groups": all_rule_groups(SITE)}))

    def every_team_has_series(url: str) -> bool:
        # Ready when the last rule group has results for every team and the denial counter has grown.
        denied = query_or_empty(url, "team:gpu_tenancy_admission_denials:increase1h > 0")
        faulted, failed = query_or_empty(url, GPU_XID), query_or_empty(url, GPU_FAILED)
        return len(denied) >= len(SITE.teams) and len(faulted) >= len(SITE.teams) and len(failed) >= len(SITE.teams)

    with serving_exporter(exposition) as exporter:
        config = yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(root / "rules.yml")],
            # honor_labels, as the DCGM monitor: the exporter's namespace/pod labels are kept.
            "scrape_configs": [{"job_name": "synthetic", "honor_labels": True,
                                "static_configs": [{"targets": [exporter]}]}]})
        with running_prometheus(root, config, ready=every_team_has_series, timeout=90,
                                not_ready="prometheus gave no team series") as url:
            yield url


def query_or_empty(url: str, expr: str) -> list[dict]:
    try:
        return query(url, expr)
    except OSError:
        return []


@needs_prometheus
@pytest.mark.parametrize("team", SITE.teams, ids=lambda team: team.name)
def test_every_team_board_query_through_the_proxy_returns_that_team_only(prometheus, team):
    _, board = boards.dashboards(SITE)[f"team-{team.name}"]
    for expr in boards.queries(board):
        result = query(prometheus, enforce(expr, TEAM_LABEL, team.name))
        if expr.startswith(rules.HEADROOM) and team.resources.gpu.limit == UNLIMITED:
            assert result == [], "a team without a GPU limit has no headroom to show"
            continue
        assert result, f"{team.name}'s panel is empty through its proxy: {expr}"
        assert all(series["metric"].get(TEAM_LABEL, team.name) == team.name for series in result), expr


@needs_prometheus
def test_a_team_asking_for_another_namespace_or_team_gets_nothing_or_an_error(prometheus):
    alpha, beta = SITE.teams[0], SITE.teams[1]
    beta_pods = f'DCGM_FI_DEV_GPU_UTIL{{namespace="{beta.namespace}"}}'
    assert query(prometheus, beta_pods), "the control: Prometheus itself has beta's series"
    assert query(prometheus, enforce(beta_pods, TEAM_LABEL, alpha.name)) == []
    everything = query(prometheus, enforce('{__name__=~".+"}', TEAM_LABEL, alpha.name))
    assert everything and {series["metric"][TEAM_LABEL] for series in everything} == {alpha.name}
    with pytest.raises(Refused):
        enforce(f'team:kai_queue_allocated_gpus:max{{team="{beta.name}"}}', TEAM_LABEL, alpha.name)
    # A matcher every team passes gives way to the team's own: alpha still reads only alpha's series.
    for widened in ('team:kai_queue_allocated_gpus:max{team=~".+"}', 'team:kai_queue_allocated_gpus:max{team!=""}'):
        answered = query(prometheus, enforce(widened, TEAM_LABEL, alpha.name))
        assert answered and {series["metric"][TEAM_LABEL] for series in answered} == {alpha.name}


# --- what the plan deploys ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def with_team_views():
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install", "grafanaUrl": "https://grafana.example.com"}
    return run(config, stack="dev")


def test_each_team_gets_a_proxy_enforcing_its_team_label(with_team_views):
    platform = load_platform(project_config(dev_config()) | {"observability": {"prometheus": "install"}})
    upstream = platform.observability.prometheus_url
    for team in platform.teams:
        [deployment] = [r for r in with_team_views.of_type("kubernetes:apps/v1:Deployment")
                        if r.name == f"observability-team-views-{team.name}-proxy"]
        [container] = deployment.inputs["spec"]["template"]["spec"]["containers"]
        assert container["image"] == versions.PROM_LABEL_PROXY_IMAGE and ":latest" not in container["image"]
        assert container["args"] == proxy_args(team, upstream)
        assert {f"-label={TEAM_LABEL}", f"-label-value={team.name}", "-error-on-replace",
                f"-upstream={upstream}"} <= set(container["args"])
        policies = [r for r in with_team_views.resources if r.type.endswith("NetworkPolicy")
                    and r.inputs["metadata"]["name"] == proxy_name(team)]
        [ingress] = policies[0].inputs["spec"]["ingress"]
        assert ingress["from"] == [{"podSelector": {"matchLabels": {
            "app.kubernetes.io/name": "grafana", "app.kubernetes.io/instance": "kube-prometheus-stack"}}}]


def test_each_team_organization_holds_one_data_source_its_proxy_and_its_board(with_team_views):
    organizations = {r.name: r for r in with_team_views.of_type("grafana:oss/organization:Organization")}
    sources = with_team_views.of_type("grafana:oss/dataSource:DataSource")
    teams = [r.inputs["name"] for r in organizations.values()]
    assert len(sources) == len(teams) == len(set(teams)) and teams
    for source in sources:
        team = source.name.removeprefix("observability-team-views-").removesuffix("-datasource")
        org = next(r for r in organizations.values() if r.inputs["name"] == team)
        same_org = [r for r in sources if r.inputs["orgId"] == source.inputs["orgId"]]
        assert same_org == [source], "a team's organization has exactly one data source"
        assert source.inputs["url"] == f"http://gpu-tenancy-query-{team}.monitoring.svc.cluster.local:{PROXY_PORT}"
        assert org.urn in source.dependencies and org.inputs["createUsers"] is False
        board = with_team_views.named(f"observability-team-views-{team}-dashboard")
        assert board.inputs["orgId"] == source.inputs["orgId"]
        assert json.loads(board.inputs["configJson"])["uid"] == f"gpu-tenancy-team-{team}"[:40]
    provider = with_team_views.of_type("pulumi:providers:grafana")
    assert [p.inputs["auth"] for p in provider] == ["[secret]"]


def test_without_grafana_url_there_are_proxies_but_no_organizations():
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install"}
    program = run(config, stack="dev")
    assert program.of_type("kubernetes:apps/v1:Deployment")
    assert not program.of_type("grafana:oss/organization:Organization") and not program.of_type(
        "pulumi:providers:grafana")


def test_the_summary_lists_who_sees_what_and_never_the_password(with_team_views):
    plan = build_plan(with_team_views, "dev")
    summary = render_summary(plan)
    section = summary[summary.index("## Who sees what"):summary.index("## Warnings")]
    for team in ("team-nlp", "team-vision"):
        assert f'| `{team}` | `team="{team}"` | `gpu-tenancy-query-{team}` | `{team}` | `Prometheus ({team})` |' in section
    password = with_team_views.named("observability-grafana-admin-secret").raw_inputs["stringData"]["admin-password"]
    assert password not in summary and password not in json.dumps(plan)
    assert "## Who sees what" not in render_summary(build_plan(run(dev_config(), stack="dev"), "dev"))


@pytest.mark.parametrize("observability, words", [
    ({"prometheus": "external", "external": {"releaseLabel": "x"}}, "the Grafana this program installs"),
    ({"prometheus": "install", "grafana": False}, "the Grafana this program installs"),
    ({"prometheus": "install"}, "is not an http(s) URL"),
])
def test_grafana_url_is_refused_where_there_is_no_grafana_to_reach(observability, words):
    raw = site_config()
    raw["observability"] = {**observability, "grafanaUrl": "grafana.example.com" if len(observability) == 1
                            else "https://grafana.example.com"}
    with pytest.raises(ConfigError) as refused:
        load_platform(raw)
    assert "observability.grafanaUrl" in str(refused.value) and words in str(refused.value)
