"""The loader's placement rules: every team's pods must have a node pool to run on (config/placement.py)."""

from __future__ import annotations

from typing import Optional

from config.mig_pools import team_pool
from config.model import Cluster, Platform, Team
from config.model_host import HostProfile
from config.placement import placement, pool_labels
from config.reader import Reader, within
from config.vocabulary import POOL_LABEL, ROLE_LABEL


def _own_key(raw_teams: object, index: int, name: str) -> str:
    """``teams[i].vcluster.<name>`` if the team sets it, else the stack's ``vcluster.<name>`` it inherits."""
    team = raw_teams[index] if isinstance(raw_teams, list) and index < len(raw_teams) else None
    vcluster = team.get("vcluster") if isinstance(team, dict) else None
    if isinstance(vcluster, dict) and vcluster.get(name) is not None:
        return f"teams[{index}].vcluster.{name}"
    return f"vcluster.{name}"


def _selector_fix(host: HostProfile) -> str:
    if host.kind == "eks":
        return (f"select a GPU node group by {POOL_LABEL}: <its name>, or every GPU group by {ROLE_LABEL}: gpu "
                f"(the node groups and their labels: {pool_labels(host)})")
    return "remove nodeLabels (the host's node carries none of the program's labels) or use labels its node has"


def check_pool_labels(reader: Reader, cluster: Optional[Cluster], teams: list[Team], raw_teams: object) -> None:
    """A team's own nodeLabels naming a pool (``gpu-tenancy/pool``) other than its isolation.nodePool (or a mig
    team's only MIG-split pool): pin_teams would put the pool's label over the written one, and the team would run
    where its nodeLabels say it does not. A pool label in the stack's nodeLabels is a default for every team, which a
    team's nodePool refines, as a team's own nodeLabels replace it."""
    groups_read = cluster is not None and not any(within(issue.key, "cluster.eks.gpuNodeGroups")
                                                  for issue in reader.issues)
    for index, team in enumerate(teams):
        labels, key = team.vcluster.node_labels, _own_key(raw_teams, index, "nodeLabels")
        pool_key = f"teams[{index}].isolation.nodePool"
        if labels is None or team.isolation.tier is None or not key.startswith("teams[") \
                or any(within(issue.key, pool_key) for issue in reader.issues):
            continue
        written, pool = labels.get(POOL_LABEL), team.isolation.node_pool
        if pool is None and groups_read:
            pool = team_pool(team, cluster)
        if written is None or pool is None or written == pool:
            continue
        if team.isolation.node_pool is not None:
            remove = f"remove {POOL_LABEL} from {key} (nodePool adds it)"
            # A label naming no GPU node group is no pool to pin the team to.
            named = not groups_read or cluster.eks is None \
                or any(group.name == written for group in cluster.eks.gpu_node_groups)
            reader.fail(pool_key, pool, f"contradicts {key}, whose {POOL_LABEL} is {written}: the nodePool would "
                        f"silently replace it, and the team's pods would run on pool {pool}, not {written}",
                        f"keep one: set nodePool to {written}, or {remove}" if named
                        else f"{remove}: no GPU node group is named {written}")
        else:
            reader.fail(key, dict(labels), f"selects pool {written} by {POOL_LABEL}, but the team is mig and its "
                        f"slices are on {pool}, the only MIG-split pool, whose label would silently replace it",
                        f"remove {POOL_LABEL} from {key} (the team's pods run on pool {pool})")


def check_placement(reader: Reader, host: Optional[HostProfile], teams: list[Team], raw_teams: object) -> None:
    """A node selector that matches no node pool, or only pools whose taints the tenant does not tolerate,
    leaves every pod of the tenant Pending: refused at the key that decides it (a team's or the stack's), with that
    key's own value. Teams whose selectors come from one key and read alike share one message."""
    if host is None or host.node_pools is None:
        return
    if any(issue.key in ("cluster", "cluster.kind", "cluster.eks") or issue.key.startswith("cluster.eks.gpuNodeGroups")
           for issue in reader.issues):
        return  # the node groups were not read: where pods can run is not known
    unplaced: dict[tuple[str, str, str], tuple[object, list[Team], Optional[str]]] = {}
    for index, team in enumerate(teams):
        settings = team.vcluster
        if team.name is None or settings.node_labels is None or settings.enforce_tolerations is None:
            continue
        where = placement(host, settings.node_labels, settings.enforce_tolerations)
        if where.matching:
            if not where.runnable:
                key = _own_key(raw_teams, index, "enforceTolerations")
                value = list(settings.enforce_tolerations)
                unplaced.setdefault(("enforceTolerations", key, repr((value, settings.node_labels))),
                                    (value, [], None))[1].append(team)
            continue
        # The pool pin_teams added to the selector (none where the team's nodePool has a problem of its own).
        pinned = None if any(within(issue.key, f"teams[{index}].isolation.nodePool") for issue in reader.issues) \
            else team.isolation.node_pool
        key, value, pool = _unmatched_key(host, raw_teams, index, team, pinned)
        unplaced.setdefault(("nodeLabels", key, repr(value)), (value, [], pool))[1].append(team)
    for (name, key, _), (value, stranded, pool) in unplaced.items():
        who = ", ".join(team.name for team in stranded)
        pending = f"so every pod of team(s) {who} (their DNS included) would stay Pending"
        if name == "enforceTolerations":
            settings = stranded[0].vcluster  # the group's teams share their labels and tolerations
            pools = placement(host, settings.node_labels, settings.enforce_tolerations).matching
            taints = sorted({f"{taint.key}={taint.value}:{taint.effect}" for pool in pools for taint in pool.taints})
            reader.fail(key, value, f"tolerates none of the taints ({', '.join(taints)}) of the node pools "
                        f"nodeLabels {dict(settings.node_labels)} select ({', '.join(pool.name for pool in pools)}), "
                        f"{pending}",
                        "keep nvidia.com/gpu:NoSchedule in enforceTolerations (the default), or select an "
                        "untainted pool with nodeLabels")
        elif key.endswith(".nodePool"):
            labels = _written_labels(stranded[0], value)
            found = ", ".join(found.name for found in placement(host, labels, ()).matching)
            reader.fail(key, value, f"pool {value} does not carry the labels of vcluster.nodeLabels {labels}, which "
                        f"the team inherits and which select only {found}: together they select no node pool, "
                        f"{pending}", f"pin the team to one of {found}, or give it nodeLabels of its own that "
                        f"pool {value} carries (teams[<n>].vcluster.nodeLabels; the node pools and their labels: "
                        f"{pool_labels(host)})")
        else:
            added = f" (with {POOL_LABEL}: {pool} from isolation.nodePool)" if pool else ""
            reader.fail(key, value, f"selects no node pool of this {host.kind} host{added}, {pending}",
                        _selector_fix(host))


def _written_labels(team: Team, pinned: Optional[str]) -> dict[str, str]:
    """The team's selector as its nodeLabels key holds it: without the pool label its nodePool pinned."""
    labels = dict(team.vcluster.node_labels)
    if pinned is not None and labels.get(POOL_LABEL) == pinned:
        del labels[POOL_LABEL]
    return labels


def _unmatched_key(host: HostProfile, raw_teams: object, index: int, team: Team,
                   pinned: Optional[str]) -> tuple[str, object, Optional[str]]:
    """The key a selector that matches no pool comes from, its value, and the pool isolation.nodePool pinned.

    The nodeLabels as written when they select nothing alone. Else the pinned pool contradicts them: the team's own
    nodeLabels (the whole selector, pool included, as vCluster gets it), or, when it inherits the stack's, which
    other teams use, its nodePool."""
    key = _own_key(raw_teams, index, "nodeLabels")
    labels = _written_labels(team, pinned)
    if labels == dict(team.vcluster.node_labels) or not placement(host, labels, ()).matching:
        return key, labels, None
    if key.startswith("teams["):
        return key, dict(team.vcluster.node_labels), pinned
    return f"teams[{index}].isolation.nodePool", pinned, pinned


def placement_warnings(platform: Platform) -> list[str]:
    return _gpu_less_warnings(platform) + _scale_to_zero_warnings(platform)


def _gpu_less_warnings(platform: Platform) -> list[str]:
    """A team guaranteed GPUs whose pods can reach no GPU node: its queue's quota can never be used."""
    host = platform.host
    if host is None or host.node_pools is None:
        return []
    stranded = [team.name for team in platform.teams
                if team.resources.gpu.quota > 0 and (where := placement(host, team.vcluster.node_labels,
                                                                        team.vcluster.enforce_tolerations)) is not None
                and where.runnable and not any(pool.gpu for pool in where.runnable)]
    if not stranded:
        return []
    return [f"team(s) {', '.join(stranded)} are guaranteed GPUs (resources.gpu.quota) but their pods can reach no "
            "GPU node: vcluster.nodeLabels selects only pools without GPUs, or enforceTolerations does not tolerate "
            "the GPU pools' taints, so every GPU pod they create stays Pending. Fix: select the GPU pools "
            f"(the node pools and their labels: {pool_labels(host)}) and keep nvidia.com/gpu:NoSchedule in "
            "enforceTolerations, or set the team's gpu quota to 0."]


def _scale_to_zero_warnings(platform: Platform) -> list[str]:
    """Teams whose pods can run only on EKS GPU node groups that may all be empty, whether every GPU group may or only
    the ones a team is pinned to (``isolation.nodePool``, ``nodeLabels``): stranded while they are. A group may be
    empty when the site's autoscaler may take it to ``minSize`` 0, or, with nothing scaling the groups, when it runs
    ``desiredSize`` 0 nodes, which it then always does."""
    eks, host = platform.cluster.eks, platform.host
    if eks is None or host is None:
        return []
    may_empty = {group.name: index for index, group in enumerate(eks.gpu_node_groups) if group.scaling.may_be_empty}
    stranded: dict[tuple[str, ...], list[str]] = {}
    for team in platform.teams:
        where = placement(host, team.vcluster.node_labels, team.vcluster.enforce_tolerations)
        if where is not None and where.runnable and all(pool.name in may_empty for pool in where.runnable):
            stranded.setdefault(tuple(sorted(pool.name for pool in where.runnable)), []).append(team.name)
    fewest = eks.fewest_nodes_key
    warnings = []
    for pools, teams in stranded.items():
        keys = ", ".join(f"cluster.eks.gpuNodeGroups[{may_empty[pool]}].{fewest}" for pool in pools)
        if len(pools) == len(eks.gpu_node_groups):
            groups = "every GPU node group has"
            reach = "vcluster.nodeLabels: {} so tenant CPU pods may use the system nodes"
        else:
            groups = f"GPU node group(s) {', '.join(pools)} have"
            reach = "let the teams' pods reach another node group (teams[].isolation.nodePool, vcluster.nodeLabels)"
        if eks.autoscaled:
            empty = "when those groups scale to zero"
        else:
            empty = ("nothing scales the groups (cluster.eks.autoscaler: none), so they have no node until "
                     "desiredSize is raised")
            reach += ", or set cluster.eks.autoscaler: cluster-autoscaler if the site runs one"
        warnings.append(
            f"cluster.eks.gpuNodeGroups: {groups} {fewest} 0, and the pods of team(s) {', '.join(teams)} can only "
            f"run there: {empty}, each tenant's DNS and every other tenant pod have nowhere to run (the vCluster "
            "control planes stay on the system group but their tenants cannot resolve names). "
            f"Fix: set {fewest}: 1 on one of them ({keys}), or {reach}.")
    return warnings
