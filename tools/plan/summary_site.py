"""summary.md: where tenant pods run, observability, what the charts create cluster-wide, what the site exposes.

Read from the plan (and, with ``--render-charts``, from the rendered charts' objects): ``chart_objects`` is a
list of ``(release, manifest)`` pairs, None when the charts were not rendered. Plans without rendered
charts stay the same whatever the chart cache holds.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from config.hosts import EKS_TAINT_EFFECTS
from config.model_host import NodePool, Taint
from config.observability import CONTROL_PLANE_SCRAPES
from config.placement import place
from config.vocabulary import (
    EKS_NODE_GROUP, HOST_COMPONENT, NAMESPACE, OBSERVABILITY_COMPONENT, POOL_LABEL, RELEASE, TENANT_COMPONENT,
)
from tools.plan.lookup import KUBERNETES, PlanIndex, dig
from tools.plan.markdown import code, fmt_labels, table

ChartObjects = Optional[Sequence[tuple[str, dict[str, Any]]]]
_KUBERNETES_EFFECTS = {eks: kubernetes for kubernetes, eks in EKS_TAINT_EFFECTS.items()}
# Cluster-scoped kinds a reviewer weighs first: who gets which rights, which APIs and admission hooks appear.
_CLUSTER_KINDS = ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                  "APIService", "PriorityClass", "RuntimeClass", "StorageClass", "CSIDriver", "IngressClass",
                  "Namespace", "PodSecurityPolicy")
EXPOSED_TYPES = ("LoadBalancer", "NodePort")
RENDER_HINT = ("the charts were not rendered for this plan (run `python -m tools.plan STACK --render-charts` with "
               "the charts in the cache, `python -m tools.charts pull --stack STACK`, to list them)")


def _pools(index: PlanIndex) -> tuple[Optional[str], Optional[list[NodePool]]]:
    """The host kind and the node pools the plan creates (None: an existing cluster's, not known)."""
    kind = index.registered(HOST_COMPONENT, "kind")
    if kind == "eks":
        pools = []
        for group in sorted(index.of_type(EKS_NODE_GROUP), key=lambda r: r["name"]):
            inputs = group["inputs"]
            labels = {key: str(value) for key, value in (inputs.get("labels") or {}).items()}
            taints = tuple(Taint(str(t.get("key")), str(t.get("value") or ""),
                                 _KUBERNETES_EFFECTS.get(t.get("effect"), str(t.get("effect"))))
                           for t in inputs.get("taints") or [] if isinstance(t, dict))
            pools.append(NodePool(labels.get(POOL_LABEL, group["name"]), labels, taints,
                                  gpu="NVIDIA" in str(inputs.get("amiType", ""))))
        return kind, pools
    if kind == "microk8s":
        return kind, [NodePool("the MicroK8s node", {}, gpu=True)]
    return kind, None


def placement_section(index: PlanIndex) -> list[str]:
    """Each team's node selector and tolerations (as its vCluster release renders them) and the pools they fit."""
    lines = ["## Where tenant pods run", ""]
    kind, pools = _pools(index)
    rows = []
    for component in sorted(index.of_type(TENANT_COMPONENT), key=lambda r: r["name"]):
        release = next((r for r in index.descendants(component) if r["type"] == RELEASE), None)
        values = dig(release, "inputs", "values") or {}
        selector = dig(values, "sync", "fromHost", "nodes", "selector") or {}
        labels = selector.get("labels") or {} if not selector.get("all") else {}
        tolerations = dig(values, "sync", "toHost", "pods", "enforceTolerations") or []
        if pools is None:
            fit = "not known to the plan (existing cluster): check `kubectl get nodes --show-labels` and taints"
        else:
            where = place(kind, pools, labels, tolerations)
            runnable = [pool.name for pool in where.runnable]
            blocked = [pool.name for pool in where.matching if pool not in where.runnable]
            fit = (", ".join(code(name) for name in runnable) or "**none: every pod stays Pending**") + \
                (f" (untolerated taints on {', '.join(code(name) for name in blocked)})" if blocked else "")
        rows.append([code(dig(component, "outputs", "team") or component["name"]),
                     fmt_labels(labels) if labels else "none (all nodes)",
                     ", ".join(code(t) for t in tolerations) or "none", fit])
    if not rows:
        return lines + ["No tenants."]
    lines += table(["Team", "Node selector", "Tolerations", "Pools its pods can run on"], rows)
    lines += ["", "Every pod a tenant's vCluster syncs, its DNS included, gets this node selector and these "
                  "tolerations. The vCluster control planes carry neither: they run on untainted nodes"
              + (" (the system node group)." if kind == "eks" else ".")]
    return lines


def observability_section(index: PlanIndex) -> list[str]:
    lines = ["## Observability", ""]
    components = index.of_type(OBSERVABILITY_COMPONENT)
    if not components:
        return lines + ["Off (`observability.prometheus: off`): nothing is scraped, no alert rules or dashboards."]
    outputs = components[0].get("outputs") or {}
    children = index.descendants(components[0])
    namespace = outputs.get("namespace")
    created = next((r for r in children
                    if r["type"] == NAMESPACE and dig(r, "inputs", "metadata", "name") == namespace), None)
    mode = outputs.get("mode")
    lines += [f"- Mode: **{mode}**" + (" (kube-prometheus-stack installed by this stack)" if mode == "install"
                                       else " (the site's own Prometheus operator)" if mode == "external" else ""),
              f"- Prometheus URL: {code(outputs['prometheusUrl']) if outputs.get('prometheusUrl') else 'not set'}"
              + (" (read by KAI's time-aware fairness)" if outputs.get("timeAwareFairness")
                 else " (nothing reads it: time-aware fairness is off)" if outputs.get("prometheusUrl") else ""),
              f"- Namespace {code(namespace)}: " + (
                  ("created by this stack" + (", protected" if created["options"].get("protect") else
                                              ", **not protected**: removing it deletes the history and Grafana's "
                                              "database")) if created else
                  "**must already exist** (this stack does not create it)"),
              f"- Monitors and rules carry {code('release=' + str(outputs.get('releaseLabel')))}, the label the "
              "Prometheus selects them by"]
    release = next((r for r in children if r["type"] == RELEASE), None)
    values = dig(release, "inputs", "values") or {}
    lines += [*kept_data(values), *alert_delivery(values, alertmanager_configuration(values, outputs)), ""]
    monitors = sorted((r for r in children if r["type"].endswith(":ServiceMonitor")),
                      key=lambda r: str(dig(r, "inputs", "metadata", "name")))
    rows = [[code(dig(m, "inputs", "metadata", "name")),
             ", ".join(code(n) for n in dig(m, "inputs", "spec", "namespaceSelector", "matchNames") or []) or "—",
             fmt_labels(dig(m, "inputs", "spec", "selector", "matchLabels")),
             ", ".join(code(e.get("port")) for e in dig(m, "inputs", "spec", "endpoints") or []) or "—"]
            for m in monitors]
    lines += ["What is scraped:", ""]
    lines += table(["ServiceMonitor", "Service namespace", "Service labels", "Port"], rows) if rows else ["Nothing."]
    if mode == "install":
        off = [component for component in CONTROL_PLANE_SCRAPES if dig(values, component, "enabled") is False]
        lines += ["", "The installed chart adds its own monitors (kube-state-metrics, the kubelets, its Prometheus)"
                  + (f"; not {', '.join(code(c) for c in off)} (`observability.controlPlaneMetrics`)." if off else ".")]
    return lines


def kept_data(values: dict[str, Any]) -> list[str]:
    """How long the installed Prometheus keeps history and where Grafana's database lives, as the release sets them."""
    if not values:
        return []
    spec = dig(values, "prometheus", "prometheusSpec") or {}
    claim = dig(spec, "storageSpec", "volumeClaimTemplate", "spec") or {}
    volume = dig(claim, "resources", "requests", "storage")
    lines = [f"- Prometheus keeps {code(spec.get('retention', 'the chart default'))} of history"
             + (f", at most {code(spec['retentionSize'])} (`retentionSize`)" if spec.get("retentionSize")
                else ", **with no size limit**")
             + (f", on a {code(volume)} volume ({_storage_class(claim)})" if volume else ", **on an emptyDir**")]
    grafana = values.get("grafana") or {}
    if grafana.get("enabled", True):
        persistence = grafana.get("persistence") or {}
        lines.append(f"- Grafana's database (team organizations, boards, sign-in settings): a "
                     f"{code(persistence.get('size'))} volume ({_storage_class(persistence)})"
                     if persistence.get("enabled") else
                     "- Grafana's database: **an emptyDir, erased whenever its pod restarts**")
    return lines


def alertmanager_configuration(values: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """The configuration the installed Alertmanager runs: the one the component reports (a Secret of its own, whose
    content the plan hides), else the one in the release's values."""
    return outputs.get("alertmanagerConfiguration") or dig(values, "alertmanager", "config") or {}


def alert_delivery(values: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """Where the installed Alertmanager sends alerts (by ``config``, its configuration) and keeps its silences, as
    the release sets them."""
    if not values:
        return []
    manager = values.get("alertmanager") or {}
    claim = dig(manager, "alertmanagerSpec", "storage", "volumeClaimTemplate", "spec") or {}
    volume = dig(claim, "resources", "requests", "storage")
    lines = [f"- Alertmanager's silences and notification log: a {code(volume)} volume ({_storage_class(claim)})"
             if volume else "- Alertmanager's silences: **an emptyDir, lost whenever its pod restarts**"]
    route = config.get("route") or {}
    receivers = {receiver.get("name"): receiver for receiver in config.get("receivers") or []}
    # The route of the chart's always-firing Watchdog, when it goes somewhere: a heartbeat.
    heartbeats = [child for child in route.get("routes") or [] if child.get("receiver") != "null"
                  and 'alertname = "Watchdog"' in (child.get("matchers") or [])]
    for child in heartbeats:
        files = [config[key] for field, configs in receivers.get(child["receiver"], {}).items()
                 if field.endswith("_configs") for config in configs for key in config if key.endswith("_file")]
        lines.append(f"- Heartbeat: `Watchdog` posted every {code(child.get('repeat_interval'))} to the dead man's "
                     f"switch at the URL read from {', '.join(code(f) for f in files) or '**the values**'}")
    if not heartbeats:
        lines.append("- No heartbeat: nothing tells anyone when alerting itself stops "
                     "(see observability.alerting.heartbeat)")
    teams = [child for child in route.get("routes") or [] if _team_of(child)]
    delivering = [receiver for name, receiver in receivers.items() if name != "null"
                  and name not in {child["receiver"] for child in heartbeats + teams}]
    lines += [_team_delivery(child, receivers.get(child["receiver"]) or {}, bool(delivering)) for child in teams]
    team_of_receiver = {child["receiver"]: _team_of(child) for child in teams}
    lines += [_team_namespace_delivery(team_of_receiver[child["receiver"]], child)
              for child in route.get("routes") or [] if child.get("receiver") in team_of_receiver
              and not _team_of(child)]
    if not delivering:
        return lines + ["- " + ("Other alerts are" if teams else "Alerts are")
                        + " sent **nowhere** (the chart's `null` receiver): see observability.alerting"]
    for receiver in delivering:
        kinds, channels = _kinds_and_channels(receiver)
        matchers = [matcher for child in route.get("routes") or [] if child.get("receiver") == receiver["name"]
                    for matcher in child.get("matchers") or []]
        which = "alerts matching " + ", ".join(code(matcher) for matcher in matchers) if matchers else \
            "every alert but those routed to `null`"
        files = [config[key] for field in receiver if field.endswith("_configs") for config in receiver[field]
                 for key in config if key.endswith("_file")]
        lines.append(f"- Alerts go to {', '.join(kinds)}" + (f" ({', '.join(code(c) for c in channels)})"
                                                              if channels else "")
                     + f": {which}; address read from {', '.join(code(f) for f in files) or '**the values**'}")
    kept = ["; ".join(code(matcher) for matcher in child.get("matchers") or [])
            for child in route.get("routes") or [] if child.get("receiver") == "null"]
    if kept:
        lines.append("- Kept in Alertmanager, sent nowhere: " + " / ".join(kept))
    return lines


def _kinds_and_channels(receiver: dict[str, Any]) -> tuple[list[str], list[str]]:
    kinds = [key.removesuffix("_configs") for key in receiver if key.endswith("_configs")]
    channels = [config["channel"] for key in receiver if key.endswith("_configs") for config in receiver[key]
                if config.get("channel")]
    return kinds, channels


def _team_of(route: dict[str, Any]) -> Optional[str]:
    """The team a route is for (teams[].alerting): it matches one value of the team label."""
    names = [matcher.split('"')[1] for matcher in route.get("matchers") or [] if matcher.startswith('team = "')]
    return names[0] if names else None


def _team_delivery(route: dict[str, Any], receiver: dict[str, Any], site: bool) -> str:
    """Where one team's own alerts go: kind, channel, severities and the file the address is read from."""
    kinds, channels = _kinds_and_channels(receiver)
    matchers = route.get("matchers") or []
    names = [code(matcher) for matcher in matchers if matcher.startswith("alertname")]
    files = [config[key] for field in receiver if field.endswith("_configs") for config in receiver[field]
             for key in config if key.endswith("_file")]
    onward = "also to the site receiver" if route.get("continue") and site else "to the team only"
    return (f"- Team {code(_team_of(route))}'s alerts ({', '.join(names)}) go to {', '.join(kinds)}"
            + (f" ({', '.join(code(c) for c in channels)})" if channels else "")
            + f", {_least_severity(matchers)} and up, {onward}; address read from "
            + (", ".join(code(f) for f in files) or "**the values**"))


def _least_severity(matchers: list[str]) -> str:
    """The least severe level a route's severity matcher lets through (every level when it has none)."""
    levels = [matcher.split('"')[1].split("|")[0] for matcher in matchers if matcher.startswith("severity")]
    return levels[0] if levels else "info"


def _team_namespace_delivery(team: Optional[str], route: dict[str, Any]) -> str:
    """The chart's alerts about a team's own host namespace, which its receiver also gets (``alerts: all``)."""
    matchers = route.get("matchers") or []
    namespaces = [matcher.split('"')[1] for matcher in matchers if matcher.startswith("namespace")]
    return (f"- Team {code(team)}'s receiver also gets the chart's alerts about its host namespace "
            f"{', '.join(code(namespace) for namespace in namespaces)} (its pods, jobs and volumes, not its control "
            f"plane), {_least_severity(matchers)} and up, to the team only")


def _storage_class(claim: dict[str, Any]) -> str:
    return f"class {code(claim['storageClassName'])}" if claim.get("storageClassName") else "the default class"


def _manifest_name(manifest: dict[str, Any]) -> str:
    return str((manifest.get("metadata") or {}).get("name", ""))


def chart_objects_section(chart_objects: ChartObjects) -> list[str]:
    """Every cluster-scoped object the charts create, grouped by release."""
    lines = ["## Cluster-scoped objects of the charts", ""]
    if chart_objects is None:
        return lines + [f"Not listed: {RENDER_HINT}."]
    grouped: dict[str, dict[str, list[str]]] = {}
    for release, manifest in chart_objects:
        kind = str(manifest.get("kind", ""))
        if kind in _CLUSTER_KINDS and not (manifest.get("metadata") or {}).get("namespace"):
            grouped.setdefault(release, {}).setdefault(kind, []).append(_manifest_name(manifest))
    if not grouped:
        return lines + ["None."]
    for release in sorted(grouped):
        lines += [f"### Release {code(release)}", ""]
        lines += table(["Kind", "Count", "Names"],
                       [[code(kind), str(len(names)), ", ".join(code(n) for n in sorted(names))]
                        for kind, names in sorted(grouped[release].items())])
        lines.append("")
    return lines[:-1]


def _exposed_values(value: Any, path: str = "") -> list[str]:
    """Paths in Helm values that set a Service type exposing the site (``...type: LoadBalancer``)."""
    if isinstance(value, dict):
        found = [f"{path}.{key}".lstrip(".") for key, item in value.items()
                 if key == "type" and item in EXPOSED_TYPES and "ervice" in path]
        return found + [p for key in sorted(value) for p in _exposed_values(value[key], f"{path}.{key}")]
    return []


def exposure_section(index: PlanIndex, chart_objects: ChartObjects) -> list[str]:
    """Services of type LoadBalancer or NodePort: what the site opens beyond the cluster network."""
    lines = ["## What the site exposes", ""]
    rows = []
    for resource in index.resources:
        if resource["type"] == f"{KUBERNETES}core/v1:Service" and dig(resource, "inputs", "spec", "type") \
                in EXPOSED_TYPES:
            rows.append([code(dig(resource, "inputs", "metadata", "namespace") or "—") + "/" +
                         code(dig(resource, "inputs", "metadata", "name")), code(resource["inputs"]["spec"]["type"]),
                         "this program"])
    for release, manifest in chart_objects or ():
        spec = manifest.get("spec") or {}
        if manifest.get("kind") == "Service" and spec.get("type") in EXPOSED_TYPES:
            namespace = (manifest.get("metadata") or {}).get("namespace") or "—"
            rows.append([code(namespace) + "/" + code(_manifest_name(manifest)), code(spec["type"]),
                         f"release {code(release)}"])
    # A rendered release's Services already show what its values ask for.
    rendered = {release for release, _ in chart_objects or ()}
    for release in sorted(index.of_type(RELEASE), key=lambda r: r["name"]):
        name = dig(release, "inputs", "name") or release["name"]
        for path in [] if name in rendered else _exposed_values(dig(release, "inputs", "values") or {}):
            rows.append([f"values {code(path)}", code(dig(release, "inputs", "values", *path.split("."))),
                         f"release {code(name)}"])
    lines += table(["Service", "Type", "Created by"], sorted(rows)) if rows else \
        ["No Service of type LoadBalancer or NodePort" + (" (program and rendered charts)." if chart_objects is not None
                                                          else " in the program or the release values.")]
    if chart_objects is None:
        lines += ["", f"Services the charts render by default are not included: {RENDER_HINT}."]
    return lines


def site_sections(index: PlanIndex, chart_objects: ChartObjects) -> list[str]:
    """The sections of this module, in the order the summary shows them, each followed by a blank line."""
    lines: list[str] = []
    for section in (placement_section(index), observability_section(index), chart_objects_section(chart_objects),
                    exposure_section(index, chart_objects)):
        lines += section + [""]
    return lines
