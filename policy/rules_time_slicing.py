"""The advisory on GPU sharing: no device-plugin time-slicing by default (or on labelled nodes) while KAI
shares GPUs, as each time-slice replica would be handed out in fractions again.

Like ``rules.py``, this module imports nothing from the project or from ``pulumi_policy``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

try:  # PyYAML comes with the pulumi SDK; without it the time-slicing rule reads key names only.
    import yaml
except ImportError:  # pragma: no cover
    yaml = None

if __package__:  # imported as the `policy` package
    from .rule_model import (
        GPU_OPERATOR_CHART, KAI_CHART, NODE_PROFILE_LABEL, TIME_SLICED_PREFIX, Finding, Resource, get, is_chart,
        is_kind, is_number, kubernetes_kind,
    )
else:  # the Pulumi CLI runs the pack from policy/ as top-level modules
    from rule_model import (
        GPU_OPERATOR_CHART, KAI_CHART, NODE_PROFILE_LABEL, TIME_SLICED_PREFIX, Finding, Resource, get, is_chart,
        is_kind, is_number, kubernetes_kind,
    )


def profile_is_time_sliced(key: Any, content: Any = None) -> bool:
    """A device-plugin profile shares GPUs by time-slicing: by its key name, or by its content."""
    if not isinstance(key, str):
        return False
    if key.startswith(TIME_SLICED_PREFIX):
        return True
    if isinstance(content, str) and yaml is not None:
        try:
            content = yaml.safe_load(content)
        except yaml.YAMLError:
            return False
    entries = get(content, "sharing", "timeSlicing", "resources")
    if isinstance(entries, Sequence) and not isinstance(entries, str):
        return any(is_number(get(entry, "replicas")) and get(entry, "replicas") > 1 for entry in entries)
    return False


def _device_plugin_configs(resources: Sequence[Resource]) -> Iterable[tuple[Resource, Mapping[str, Any]]]:
    """(resource, devicePlugin.config) of GPU Operator releases and ClusterPolicy (patches)."""
    for resource in resources:
        config = None
        if is_chart(resource, GPU_OPERATOR_CHART):
            config = get(resource.inputs, "values", "devicePlugin", "config")
        elif kubernetes_kind(resource.type)[0] == "nvidia.com" and kubernetes_kind(resource.type)[2].startswith(
                "ClusterPolicy"):
            config = get(resource.inputs, "spec", "devicePlugin", "config")
        if isinstance(config, Mapping):
            yield resource, config


def _profile_content(resources: Sequence[Resource], config: Mapping[str, Any], key: str) -> Any:
    inline = get(config, "data", key)
    if inline is not None:
        return inline
    for resource in resources:
        if is_kind(resource, "ConfigMap") and get(resource.inputs, "metadata", "name") == config.get("name"):
            content = get(resource.inputs, "data", key)
            if content is not None:
                return content
    return None


def time_slicing_with_kai_sharing(resources: Sequence[Resource]) -> list[Finding]:
    """Advisory: no device-plugin time-slicing by default (or on labelled nodes) while KAI shares GPUs."""
    sharing = [resource for resource in resources if is_chart(resource, KAI_CHART)
               and get(resource.inputs, "values", "global", "gpuSharing") in (True, "true")]
    if not sharing:
        return []
    why = ("KAI counts each time-slice replica as a whole GPU and then hands out fractions of it, so the same "
           "card is promised several times over. Use a no-sharing profile where KAI shares GPUs.")
    findings = []
    for resource, config in _device_plugin_configs(resources):
        default = config.get("default")
        if isinstance(default, str) and profile_is_time_sliced(default, _profile_content(resources, config, default)):
            findings.append(Finding(
                f"{resource.type} {resource.name} makes the time-slicing profile {default!r} the device plugin's "
                f"default while the KAI release has global.gpuSharing on: {why}", resource.urn))
    for resource in resources:
        for labels in (get(resource.inputs, "labels"), get(resource.inputs, "metadata", "labels")):
            value = get(labels, NODE_PROFILE_LABEL) if isinstance(labels, Mapping) else None
            if isinstance(value, str) and value.startswith(TIME_SLICED_PREFIX):
                findings.append(Finding(
                    f"{resource.type} {resource.name} labels nodes {NODE_PROFILE_LABEL}={value} (time-slicing) while "
                    f"the KAI release has global.gpuSharing on: {why}", resource.urn))
    return findings
