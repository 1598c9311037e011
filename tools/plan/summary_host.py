"""The plan summary's host section: the host kind and its nodes' process limits, and on EKS the region and its tags,
the cluster with its upgrade policy and control plane logs, the teams' volumes' tags, the network and the managed node
groups; on MicroK8s and an existing cluster the setup steps."""

from __future__ import annotations

import json
from typing import Any, Optional

from config.model_host import EBS_CSI_CLAIM_NAMESPACE_TAG
from config.vocabulary import (
    AWS_PROVIDER, COMMANDS, EKS_ADDON, EKS_CLUSTER, EKS_NODE_GROUP, HOST_COMPONENT, K8S_PROVIDER, LOG_GROUP,
    NAT_GATEWAY, SUBNET, VPC,
)
from tools.plan.lookup import PlanIndex, dig, topological
from tools.plan.markdown import code, fmt_labels, fmt_num, table
from tools.plan.node_templates import LAUNCH_TEMPLATE


def _control_plane_logs_line(index: PlanIndex, types: list) -> str:
    if not types:
        return "- Control plane logs: **none** sent to CloudWatch"
    groups = [group["inputs"] for group in index.of_type(LOG_GROUP)]
    kept = ", ".join(f"{code(group.get('name'))}, kept "
                     f"{'forever' if not group.get('retentionInDays') else str(group['retentionInDays']) + ' days'}"
                     f"{' and left in place by `pulumi destroy`' if group.get('skipDestroy') else ''}"
                     for group in groups) or "a log group EKS creates, kept forever"
    return f"- Control plane logs to CloudWatch: {', '.join(code(kind) for kind in types)}, in {kept}"


def _tag_list(tags: dict) -> str:
    return ", ".join(code(f"{key}={value}") for key, value in sorted(tags.items()))


def _claim_volume_lines(index: PlanIndex) -> list[str]:
    """What the EBS CSI driver tags the claims' volumes with: they are its, not the program's."""
    lines = []
    for addon in index.of_type(EKS_ADDON):
        values = json.loads(addon["inputs"].get("configurationValues") or "{}")
        tags = (values.get("controller") or {}).get("extraVolumeTags") or {}
        tagged = _tag_list(tags) or "none of the site's"
        lines.append(f"- Teams' EBS volumes and snapshots (add-on {code(addon['inputs'].get('addonName'))}): tags "
                     f"{tagged}; each volume also the driver's {code(EBS_CSI_CLAIM_NAMESPACE_TAG)}, the team's "
                     "namespace")
    return lines


def host_section(index: PlanIndex) -> list[str]:
    lines = ["## Host", ""]
    clusters = index.of_type(EKS_CLUSTER)
    commands = [resource for resource in index.of_type(*COMMANDS)
                if resource["parent"] is None or index.under(resource, HOST_COMPONENT)]
    kind = index.registered(HOST_COMPONENT, "kind")
    lines.append(f"- Kind: **{kind or 'unknown: the plan has no host component'}**")
    lines += _pids_lines(kind, *(index.registered(HOST_COMPONENT, output)
                                 for output in ("podPidsLimit", "systemPidReserve", "pidEvictionThreshold")))
    lines += _memory_reserve_lines(index.registered(HOST_COMPONENT, "systemMemoryReserve"))

    if kind == "eks":
        for provider in index.of_type(AWS_PROVIDER):
            if provider["inputs"].get("region"):
                tags = json.loads(provider["inputs"].get("defaultTags") or "{}").get("tags") or {}
                tagged = _tag_list(tags) or "none"
                lines.append(f"- AWS region: {code(provider['inputs']['region'])} (provider {code(provider['name'])}), "
                             f"tags on every resource: {tagged}")
        for cluster in clusters:
            inputs = cluster["inputs"]
            lines.append(f"- EKS cluster {code(inputs.get('name', cluster['name']))}: Kubernetes "
                         f"{code(fmt_num(inputs.get('version', '—')))}, authentication mode "
                         f"{code(inputs.get('authenticationMode', '—'))}, default node group "
                         f"{'skipped' if inputs.get('skipDefaultNodeGroup') else 'created'}, upgrade policy "
                         f"{code((inputs.get('upgradePolicy') or {}).get('supportType', 'EXTENDED (unset)'))}")
            lines.append(_control_plane_logs_line(index, inputs.get("enabledClusterLogTypes") or []))
            vpc = inputs.get("vpcId")
            if vpc is not None and not index.of_type(VPC):
                lines.append(f"- Existing VPC {code(vpc)}; public subnets: {len(inputs.get('publicSubnetIds') or [])}, "
                             f"private subnets: {len(inputs.get('privateSubnetIds') or [])}")
        lines += _claim_volume_lines(index)
        lines += _network_lines(index)
        groups = sorted(index.of_type(EKS_NODE_GROUP), key=lambda r: r["name"])
        lines += ["", "### Managed node groups", ""]
        if not groups:
            lines.append("None.")
        else:
            rows = []
            for group in groups:
                inputs = group["inputs"]
                scaling = inputs.get("scalingConfig") or {}
                taints = inputs.get("taints") or []
                prefix = inputs.get("nodeGroupNamePrefix")
                rows.append([
                    code(group["name"]),
                    code(f"{prefix}<suffix>") if prefix else code(inputs.get("nodeGroupName", "—")),
                    code(inputs.get("amiType", "—")),
                    ", ".join(code(t) for t in inputs.get("instanceTypes") or []) or "—",
                    " / ".join(fmt_num(scaling.get(key)) for key in ("minSize", "desiredSize", "maxSize")),
                    fmt_num(_root_disk_size(index, group)),
                    fmt_labels(inputs.get("labels")),
                    ", ".join(code(f"{t.get('key')}={t.get('value')}:{t.get('effect')}") for t in taints
                              if isinstance(t, dict)) or "—",
                ])
            lines += table(["Node group", "EKS name", "AMI", "Instance types", "Min / desired / max", "Disk (GiB)",
                             "Labels", "Taints"], rows)
            lines += ["", "EKS names each group after its prefix plus a suffix of its own (`<suffix>`). "
                      + ("The site's Cluster Autoscaler sizes the groups within min and max: `pulumi up` leaves their "
                         "size alone." if all(group["inputs"].get("ignoreScalingChanges") for group in groups) else
                         "Nothing scales the groups: each runs its desired size, which every `pulumi up` sets again.")]
    elif kind == "microk8s":
        ordered = topological(commands)
        remote = [c for c in ordered if c["type"] == "command:remote:Command"]
        if remote:
            connection = remote[0]["inputs"].get("connection")
            if isinstance(connection, dict):
                port = fmt_num(connection.get("port", 22))
                target = f"{connection.get('user', '?')}@{connection.get('host', '?')}:{port}"
            else:  # a connection holding a secret private key is a secret as a whole
                target = str(connection)
            lines.append(f"- Runs over SSH: connection {code(target)}")
        else:
            lines.append("- Runs locally (`pulumi up` on the GPU machine itself)")
        lines += ["", "### Setup commands (in dependency order)", ""]
        for number, command in enumerate(ordered, 1):
            inputs = command["inputs"]
            where = "remote" if command["type"] == "command:remote:Command" else "local"
            line = f"{number}. {code(command['name'])} ({where}): {code(inputs.get('create', '—'))}"
            if inputs.get("delete"):
                line += f"; on destroy: {code(inputs['delete'])}"
            if command["options"].get("additionalSecretOutputs"):
                line += f"; secret outputs: {', '.join(code(o) for o in command['options']['additionalSecretOutputs'])}"
            lines.append(line)
    elif kind == "kubeconfig":
        for provider in index.of_type(K8S_PROVIDER):
            context = provider["inputs"].get("context")
            lines.append(f"- Existing cluster through provider {code(provider['name'])}: kubeconfig "
                         f"{code(provider['inputs'].get('kubeconfig', '—'))}"
                         + (f", context {code(context)}" if context else ""))
    return lines


def _pids_lines(kind: Optional[str], limit: Any, reserve: Any, threshold: Any) -> list[str]:
    """Where the kubelets' process limits come from, and what changing them does."""
    if limit is None:
        return []
    table_share = (f"; for the system, **{fmt_num(reserve)}** of each node's process table no pod may take "
                   f"(`systemReserved` `pid`), and pods are evicted, most processes first, below "
                   f"**{threshold}** of it free (`evictionHard` `pid.available`)")
    if kind == "eks":
        return [f"- Per-pod process limit (kubelet `podPidsLimit`): **{fmt_num(limit)}**{table_share}; all in every "
                "node group's launch template user data, so a new value makes a new template version, which replaces "
                "the groups' nodes"]
    if kind == "microk8s":
        return [f"- Per-pod process limit (kubelet `--pod-max-pids`): **{fmt_num(limit)}**{table_share}; all in the "
                "snap's kubelet arguments (step `host-pod-pids-limit`); a new value restarts kubelite, and running "
                "pods keep the per-pod limit they started with"]
    return [f"- Per-pod process limit, system reserve and eviction threshold: **not set by this stack**: the site "
            f"sets its kubelets' `podPidsLimit` (cluster.podPidsLimit: {fmt_num(limit)}), `systemReserved` `pid` and "
            "`evictionHard` `pid.available` (see Notes)"]


def _root_disk_size(index: PlanIndex, group: dict[str, Any]) -> Any:
    """A node group's root disk in GiB, which its launch template sets (EKS refuses ``diskSize`` beside one)."""
    templates = [index.by_urn[urn] for urn in group.get("dependencies") or () if urn in index.by_urn
                 and index.by_urn[urn]["type"] == LAUNCH_TEMPLATE]
    mappings = templates[0]["inputs"].get("blockDeviceMappings") or () if templates else ()
    return next((size for size in (dig(mapping, "ebs", "volumeSize") for mapping in mappings) if size is not None),
                None)


def _memory_reserve_lines(reserve: Any) -> list[str]:
    """What a MicroK8s box keeps of its memory from all pods together, and what changing it does."""
    if reserve is None:
        return []
    return [f"- Memory for the box's own services (kubelet `systemReserved` `memory`, "
            f"cluster.microk8s.systemReservedMemory): **{reserve}**, which no pod may take: pods running the box out "
            "of memory are OOM-killed among themselves, leaving the snap's services (k8s-dqlite, kubelite) at least "
            "this much; in the same step, so a new value restarts kubelite, and the box's Allocatable changes by the "
            "difference (a running pod whose memory request no longer fits is refused when the kubelet admits the "
            "running pods again)"]


def _network_lines(index: PlanIndex) -> list[str]:
    """The VPC the program creates for an EKS host: CIDR, subnets and NAT gateways."""
    lines = []
    for vpc in sorted(index.of_type(VPC), key=lambda r: r["urn"]):
        subnets = sorted(index.of_type(SUBNET), key=lambda r: str(dig(r, "inputs", "cidrBlock")))
        public = [code(dig(r, "inputs", "cidrBlock")) for r in subnets if dig(r, "inputs", "mapPublicIpOnLaunch")]
        private = [code(dig(r, "inputs", "cidrBlock")) for r in subnets if not dig(r, "inputs", "mapPublicIpOnLaunch")]
        lines.append(f"- VPC created by this stack: CIDR {code(dig(vpc, 'inputs', 'cidrBlock'))}; public subnets "
                     f"{', '.join(public) or '—'}; private subnets {', '.join(private) or '—'}; "
                     f"{len(index.of_type(NAT_GATEWAY))} NAT gateway(s)")
    return lines
