"""Grafana dashboards as code (grafana-foundation-sdk): one platform view and one view per team.

Plain data: each function returns the dashboard's JSON model; components/observability.py ships them as
ConfigMaps for Grafana's dashboard sidecar. A team's dashboard has the team written into every query
(no variable to switch teams), so it shows that team and nothing else.
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import bargauge, dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef, DataTransformerConfig
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from components import observability_mig as mig
from components import observability_rules as rules
from components import observability_team_series as series
from components import observability_xid as xid
from config.model import Platform, Team

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
ADMISSION_DENIALS = "apiserver_validating_admission_policy_check_total{enforcement_action=\"deny\"}"


def _query(expr: str, legend: str = "", *, instant: bool = False, ref: str = "A") -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)
    if instant:
        query = query.instant().format(PromQueryFormat.TABLE)
    return query


def _series(title: str, queries: list[prometheus.Dataquery], unit: str, width: int = 12) -> timeseries.Panel:
    panel = timeseries.Panel().title(title).unit(unit).span(width).height(8).datasource(DATASOURCE)
    for query in queries:
        panel = panel.with_target(query)
    return panel


def _stat(title: str, expr: str, unit: str, width: int = 4, legend: str = "") -> stat.Panel:
    return (stat.Panel().title(title).unit(unit).span(width).height(4).datasource(DATASOURCE)
            .with_target(_query(expr, legend)))


def _base(uid: str, title: str, tags: list[str]) -> dashboard.Dashboard:
    return (dashboard.Dashboard(title).uid(uid).tags(["gpu-tenancy", *tags]).refresh("1m").time("now-24h", "now")
            .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus")))


def platform_dashboard(platform: Platform) -> dict:
    queue = "max by (queue_name) ({})"
    tree = (table.Panel().title("Queue tree (KAI's view)").span(24).height(8).datasource(DATASOURCE)
            .description("Every queue stack config defines, its parent, and what KAI reports for it. A queue with "
                         "no fair share is not in the scheduler's tree (see alert GpuTenancyQueueMissing).")
            .with_target(_query(f"max by (queue_name, parent) ({rules.QUEUE_INFO})", instant=True, ref="A"))
            .with_target(_query(queue.format("kai_queue_deserved_gpus"), instant=True, ref="B"))
            .with_target(_query(queue.format("kai_queue_allocated_gpus"), instant=True, ref="C"))
            .with_target(_query(queue.format("kai_queue_fair_share_gpu"), instant=True, ref="D"))
            .with_transformation(DataTransformerConfig(id_val="merge", options={})))
    board = (_base("gpu-tenancy-platform", f"GPU tenancy: platform ({platform.stack})", ["platform"])
             .with_row(dashboard.Row("Site"))
             .with_panel(_stat("GPUs promised (team quotas)", rules.PROMISED, "short"))
             .with_panel(_stat("GPUs present (DCGM)", rules.PRESENT, "short"))
             .with_panel(_stat("GPUs allocated", rules.SITE_ALLOCATED, "short"))
             .with_panel(_stat("Pending pods (all teams)", f"sum({rules.PENDING})", "short"))
             .with_panel(_stat("Admission refusals, 1h",
                               f"sum(increase({ADMISSION_DENIALS}[1h]) * {rules.ON_TEAMS_POLICIES})", "short",
                               width=8))
             .with_row(dashboard.Row("Queues"))
             .with_panel(tree)
             .with_row(dashboard.Row("Teams"))
             .with_panel(_series("GPU quota vs allocated vs held vs used per team", [
                 _query(rules.QUOTA, "{{team}} quota", ref="A"),
                 _query(rules.ALLOCATED, "{{team}} allocated", ref="B"),
                 _query(rules.HELD, "{{team}} held", ref="C"),
                 _query(rules.USED, "{{team}} used", ref="D")], "short", width=24))
             .with_panel(bargauge.Panel().title("Utilisation of the GPUs DCGM measures per team").unit("percentunit")
                         .min(0).max(1).span(12).height(8).datasource(DATASOURCE)
                         .with_target(_query(rules.UTILISATION, "{{team}}")))
             .with_panel(bargauge.Panel().title("Headroom to each team's GPU limit").unit("short").min(0)
                         .span(12).height(8).datasource(DATASOURCE)
                         .with_target(_query(rules.HEADROOM, "{{team}}")))
             .with_row(dashboard.Row("Nodes and pending work"))
             .with_panel(_series("GPUs per node", [_query(
                 f"count by (Hostname) ({mig.card_busy('Hostname')})", "{{Hostname}}")], "short"))
             .with_panel(_series("GPU utilisation per node", [_query(
                 f"100 * avg by (Hostname) ({mig.card_busy('Hostname')})", "{{Hostname}}")], "percent"))
             .with_panel(_series("Pending pods per team", [_query(rules.PENDING, "{{team}}")], "short"))
             .with_panel(_series("GPU-hours allocated per team, per hour", [
                 _query(rules.ALLOCATED_HOURS, "{{team}}")], "short")))
    return _json(board)


def team_dashboard(team: Team) -> dict:
    # Every query reads series labelled team="<team>": the team's query proxy admits nothing else.
    only = f'{{{series.TEAM_LABEL}="{team.name}"}}'
    board = (_base(f"gpu-tenancy-team-{team.name}"[:40], f"GPU tenancy: {team.display_name}", ["team", team.name])
             .with_row(dashboard.Row("Now"))
             .with_panel(_stat("GPU quota (guaranteed)", rules.QUOTA + only, "short"))
             .with_panel(_stat("GPUs allocated", rules.ALLOCATED + only, "short"))
             .with_panel(_stat("Utilisation of measured GPUs", rules.UTILISATION + only, "percentunit"))
             .with_panel(_stat("Headroom to limit", rules.HEADROOM + only, "short"))
             .with_panel(_stat("GPU-hours allocated, 24h", f"avg_over_time({rules.ALLOCATED}{only}[24h]) * 24", "short"))
             .with_panel(_stat("Pending pods", rules.PENDING + only, "short"))
             .with_row(dashboard.Row("Over time"))
             .with_panel(_series("Quota vs allocated vs held vs used", [
                 _query(rules.QUOTA + only, "quota", ref="A"),
                 _query(rules.ALLOCATED + only, "allocated", ref="B"),
                 _query(rules.HELD + only, "held", ref="C"),
                 _query(rules.USED + only, "used", ref="D")], "short", width=24))
             .with_panel(_series("GPU utilisation per pod", [_query(
                 series.POD_GPU_UTILISATION + only, "{{pod}} {{UUID}}")], "percent"))
             .with_panel(_series("GPU memory used per pod", [_query(
                 series.POD_GPU_MEMORY_USED + only, "{{pod}} {{UUID}}")], "decmbytes"))
             .with_panel(_series("Shared GPUs: share held and busy time charged per pod", [
                 _query(series.POD_GPU_SHARE + only, "{{pod}} share of {{UUID}}", ref="A"),
                 _query(series.POD_GPU_CHARGED + only, "{{pod}} charged", ref="B")], "short", width=24)
                 .description("Pods holding a KAI fraction of a GPU: their share (gpu-fraction, or gpu-memory over "
                              "the GPU's memory) and the GPUs charged to them, the share times the GPU's busy ratio. "
                              "Busy time of a shared GPU is not split by who ran: every pod on it is charged its "
                              "share of it."))
             .with_panel(_series("GPUs held by init containers, per pod", [_query(
                 series.POD_INIT_GPUS + only, "{{pod}}")], "short", width=24)
                 .description("GPUs (MIG slices in compute slices) a pod's ordinary init containers hold, from "
                              "their run until the pod ends, beyond those its containers reuse. They are charged as held GPUs; DCGM maps them to no pod, so their busy time is "
                              "not measured and they count in neither used nor utilisation."))
             .with_panel(_series("Pending pods", [_query(rules.PENDING + only, "pending")], "short"))
             .with_panel(_series("Pods refused by the admission policy, per hour",
                                 [_query(series.ADMISSION_DENIALS + only, "refused")], "short"))
             .with_panel(_series("GPU errors (XID code) on the team's GPUs", [_query(
                 series.GPU_XID + only, "{{UUID}} on {{Hostname}}")], "none", width=24)
                 .description("The code of each new XID error a GPU the team's pods hold or share reported, for "
                              f"{xid.NEW_WINDOW} after it appeared. A code NVIDIA's XID catalog lists as non-fatal "
                              "(13, 31, 43, 45, ...) means the driver stopped an application on that GPU, usually "
                              "for a fault in its own kernel: restart it and look at the application "
                              "(compute-sanitizer finds the faulting kernel). A fatal code means the GPU needs a reset: the platform "
                              "team is alerted. A non-fatal code on a GPU the panel below shows as failed is the "
                              "driver's follow-up to that failure (63, 154), not the application's fault."))
             .with_panel(_series("GPUs that failed (the platform team is paged)", [_query(
                 series.GPU_FAILED + only, "{{UUID}} on {{Hostname}}")], "none", width=24)
                 .description("1 while a GPU the team's pods hold or share reports an XID error that needs the "
                              "platform's operator (a reset, a reboot or a drain): the platform team is paged with "
                              "the code. Work on that GPU may fail until the operator has reset it or drained "
                              "its node.")))
    return _json(board)


def _json(board: dashboard.Dashboard) -> dict:
    model = json.loads(JSONEncoder(sort_keys=True).encode(board.build()))
    # The builder leaves every panel id at 0; Grafana links, alerts and "view panel" need them distinct.
    for number, panel in enumerate(model["panels"], start=1):
        panel["id"] = number
    return model


def dashboards(platform: Platform) -> dict[str, tuple[str, dict]]:
    """ConfigMap key -> (Grafana folder, dashboard model) for every dashboard of the site."""
    boards = {"platform": ("GPU tenancy", platform_dashboard(platform))}
    for team in platform.teams:
        boards[f"team-{team.name}"] = (f"GPU tenancy - {team.name}", team_dashboard(team))
    return boards


def queries(board: dict) -> list[str]:
    """Every PromQL expression of a dashboard model."""
    found = []
    for panel in board.get("panels", []):
        for target in panel.get("targets") or []:
            if target.get("expr"):
                found.append(target["expr"])
        found.extend(queries(panel))
    return found
