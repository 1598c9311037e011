"""Which charts a site needs: the pinned sources of the charts the program installs, and the charts a
stack's releases use, read from an offline run of the program."""

from __future__ import annotations

from config import versions
from config.stack_file import stack_names
from tools.charts.refs import ChartKey, pinned_chart_key
from tools.charts.render import release_chart_key, release_records
from tools.offline.mockrun import load_stack_file, owned_event_loops, run_program


def stack_chart_keys(stack: str) -> list[ChartKey]:
    """The charts a stack's releases use, read from an offline run of the program (no network)."""
    with owned_event_loops():
        run = run_program(load_stack_file(stack), stack=stack)
    keys: list[ChartKey] = []
    for _, inputs in release_records(run.resources):
        key = release_chart_key(inputs)
        if key not in keys:
            keys.append(key)
    return sorted(keys, key=lambda key: (key.name, key.version, key.source))


def pinned_chart_keys() -> list[ChartKey]:
    """Every chart the tests render: the pinned defaults and every committed stack's charts.

    The GPU Operator is included even when no committed stack installs it (a MicroK8s site
    patches the addon's operator): its ClusterPolicy CRD is the contract of that patch; so is
    kube-prometheus-stack, which a stack installs with ``observability.prometheus: install``."""
    keys = {pinned_chart_key(versions.VCLUSTER_CHART, versions.VCLUSTER_VERSION),
            pinned_chart_key("kai-scheduler", versions.KAI_VERSION),
            pinned_chart_key(versions.GPU_OPERATOR_CHART, versions.GPU_OPERATOR_VERSION),
            pinned_chart_key(versions.KUBE_PROMETHEUS_STACK_CHART, versions.KUBE_PROMETHEUS_STACK_VERSION)}
    for stack in stack_names():
        keys.update(stack_chart_keys(stack))
    return sorted(keys, key=lambda key: (key.name, key.version, key.source))
