"""The commands that snapshot one team's virtual cluster, or bring it back from a snapshot, on a site.

    python -m ops.backup SITE TEAM snapshot URL
    python -m ops.backup SITE TEAM restore URL|slot:N [--volume-lost]
    python -m ops.backup SITE TEAM slots

It reads the site's stack file (no cluster, no Pulumi) and prints, for the team's vCluster, the vcluster CLI and
kubectl commands to run with the host's kubeconfig, in order: what docs/operations-data.md ("Backing up and restoring a
team") explains. URL is where the snapshot goes or comes from (config/snapshots.py: s3://BUCKET/KEY,
oci://REGISTRY/REPOSITORY:TAG or an https:// Azure blob URL; never container://, which lives on the volume it
should outlive), or ``slot:N``, slot N of the site's scheduled snapshots (``backup``), which ``slots`` lists as
vCluster's CLI takes them (the store's endpoint and region in the query).

The snapshot is uploaded by the team's control-plane pod and read back by vCluster's restore pod
(``app: vcluster-snapshot``), both in the team's namespace under the program's NetworkPolicies: where those keep
the store's port closed, the command says so and exits 1, since the snapshot or the restore would fail there.
Exit status 2: the site, the team or the URL is wrong.
"""

from __future__ import annotations

import argparse
import ipaddress
import shlex
import sys
from dataclasses import dataclass
from typing import Optional, Sequence
from urllib.parse import urlsplit

from components.tenant_network import tenant_network_policies
from config.errors import ConfigError
from config.model import Team
from config.snapshots import s3_endpoint, snapshot_url_problem, store_port
from config.stack_file import PROJECT_DIR, StackFileError, stack_config
from ops.sites import platform_of

# The policies whose pods talk to the store: the control plane uploads a snapshot (its snapshot controller), the
# pod `vcluster restore` starts reads one back.
UPLOADER, RESTORER = "control-plane", "snapshot"
EVERYWHERE = ipaddress.ip_network("0.0.0.0/0")


class BackupError(Exception):
    """A site, team or URL this command cannot work with: the message says which and how to fix it."""


@dataclass(frozen=True)
class Reach:
    """Where a pod of the team's namespace may open the store's port: ``everywhere``, or the ``blocks`` listed
    (cidr, the ranges excepted), or nowhere."""

    everywhere: bool
    blocks: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def admits(self, address: Optional[str]) -> bool:
        """Whether the store at ``address`` (an IP address, or None for a public host name) is reachable: a host
        name counts as reachable where the public internet is (a block of every address but private ranges)."""
        if self.everywhere:
            return True
        for cidr, holes in self.blocks:
            network = ipaddress.ip_network(cidr, strict=False)
            if address is None:
                if network == EVERYWHERE:
                    return True
                continue
            ip = ipaddress.ip_address(address)
            if ip.version == network.version and ip in network and \
                    not any(ip in ipaddress.ip_network(hole, strict=False) for hole in holes):
                return True
        return False


def store_reach(team: Team, role: str, port: int) -> Reach:
    """Where the pods of ``role``'s NetworkPolicy may reach TCP ``port`` (a team without policies: anywhere)."""
    policy = tenant_network_policies(team).get(role)
    if policy is None:
        return Reach(everywhere=True)
    blocks: list[tuple[str, tuple[str, ...]]] = []
    for rule in policy["spec"].get("egress") or []:
        ports = rule.get("ports")
        if ports and not any(entry.get("port") == port and entry.get("protocol", "TCP") == "TCP" for entry in ports):
            continue
        if not rule.get("to"):
            return Reach(everywhere=True)
        # Pod selectors name pods of the cluster, never an object store outside it.
        blocks += [(peer["ipBlock"]["cidr"], tuple(peer["ipBlock"].get("except") or ()))
                   for peer in rule["to"] if peer.get("ipBlock")]
    return Reach(everywhere=False, blocks=tuple(blocks))


def store_address(url: str) -> Optional[str]:
    """The store's IP address where the URL names one (an S3-compatible endpoint, a registry), else None."""
    host = urlsplit(s3_endpoint(url) or "").hostname if url.startswith("s3://") else urlsplit(url).hostname
    try:
        return str(ipaddress.ip_address(host or ""))
    except ValueError:
        return None


def snapshot_commands(team: Team, url: str) -> list[list[str]]:
    """Ask the team's control plane for a snapshot at ``url``, then read its state (Completed when stored)."""
    where = ["--namespace", team.namespace]
    return [["vcluster", "snapshot", "create", team.vcluster_name, url, *where],
            ["vcluster", "snapshot", "get", team.vcluster_name, url, *where]]


def restore_commands(team: Team, url: str, volume_lost: bool) -> list[list[str]]:
    """Bring the team's virtual cluster back from ``url``. With the volume lost, the claim goes first and the
    StatefulSet makes a new, empty one (its volumeClaimTemplates) for the control plane to start on; ``vcluster
    restore`` then pauses the control plane, deletes the team's synced pods, writes the snapshot into a new
    database on the claim and starts the control plane again."""
    namespace, name = team.namespace, team.vcluster_name
    commands: list[list[str]] = []
    if volume_lost:
        commands += [
            ["kubectl", "--namespace", namespace, "delete", "persistentvolumeclaim", f"data-{name}-0", "--wait=false"],
            ["kubectl", "--namespace", namespace, "delete", "pod", f"{name}-0"],
            ["kubectl", "--namespace", namespace, "rollout", "status", f"statefulset/{name}", "--timeout=10m"],
        ]
    commands += [
        ["vcluster", "restore", name, url, "--namespace", namespace],
        ["kubectl", "--namespace", namespace, "rollout", "status", f"statefulset/{name}", "--timeout=10m"],
        ["vcluster", "connect", name, "--namespace", namespace, "--", "kubectl", "get", "namespaces"],
    ]
    return commands


def reach_problems(team: Team, url: str, restore: bool) -> list[str]:
    """Why the team's pods cannot reach the store ``url`` names (nothing when they can)."""
    port = store_port(url)
    role, who = (RESTORER, "vCluster's restore pod (app: vcluster-snapshot)") if restore else \
        (UPLOADER, "the control plane, which uploads the snapshot,")
    reach = store_reach(team, role, port)
    if reach.admits(store_address(url)):
        return []
    return [f"{who} may not open TCP {port} to the store under the NetworkPolicy {team.vcluster_name}-{role}: "
            "set the site's `backup` block to this store (it opens the store's port to both pods), or run the "
            "snapshot where the policy lets it through (docs/operations-data.md, \"Backing up and restoring a team\")"]


def site_team(stack: str, team_name: str, config: Optional[dict] = None) -> Team:
    try:
        platform = platform_of(config if config is not None else stack_config(PROJECT_DIR, stack), stack)
    except (ConfigError, StackFileError) as error:
        raise BackupError(f"site {stack}: {error}") from error
    team = next((team for team in platform.teams if team.name == team_name), None)
    if team is None:
        raise BackupError(f"site {stack} has no team {team_name!r}; its teams: "
                          f"{', '.join(team.name for team in platform.teams)}")
    return team


def slot_urls(team: Team) -> list[str]:
    """The URL of each slot the site's scheduled snapshots write for the team (``backup``), in slot order."""
    backup = team.vcluster.backup
    if backup is None:
        raise BackupError("the site takes no scheduled snapshots (its `backup` block is left out or empty): name the "
                          "snapshot's URL")
    return [backup.slot_url(team.namespace, team.vcluster_name, slot) for slot in range(backup.keep)]


def plan(stack: str, team_name: str, action: str, url: str, volume_lost: bool = False,
         config: Optional[dict] = None) -> tuple[list[list[str]], list[str]]:
    """The commands for ``action`` (snapshot or restore) and the reasons they would fail on the site. ``url`` may
    be ``slot:N``: slot N of the site's scheduled snapshots."""
    team = site_team(stack, team_name, config)
    if url.startswith("slot:"):
        slots, number = slot_urls(team), url.removeprefix("slot:")
        if not number.isdigit() or int(number) >= len(slots):
            raise BackupError(f"{url!r}: the site keeps slots 0 to {len(slots) - 1} (backup.keep)")
        url = slots[int(number)]
    problem = snapshot_url_problem(url)
    if problem:
        raise BackupError(f"URL {url!r} {problem[0]}: {problem[1]}")
    restore = action == "restore"
    commands = restore_commands(team, url, volume_lost) if restore else snapshot_commands(team, url)
    return commands, reach_problems(team, url, restore)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.backup", description=__doc__.split("\n\n")[0])
    parser.add_argument("stack", help="the site (Pulumi stack)")
    parser.add_argument("team", help="the team's name (teams[].name)")
    parser.add_argument("action", choices=("snapshot", "restore", "slots"),
                        help="slots: the URLs of the site's scheduled snapshots of the team (backup), one a slot")
    parser.add_argument("url", nargs="?", help="where the snapshot goes or comes from, e.g. "
                                               "s3://BUCKET/team-nlp/2026-12-05.tar.gz, or slot:N of the site's "
                                               "scheduled snapshots")
    parser.add_argument("--volume-lost", action="store_true",
                        help="the control plane's volume is gone (restore only): start it on a new, empty claim first")
    args = parser.parse_args(argv)
    if args.volume_lost and args.action != "restore":
        parser.error("--volume-lost goes with restore")
    if (args.url is None) != (args.action == "slots"):
        parser.error("snapshot and restore take a URL, slots none")
    try:
        if args.action == "slots":
            print("\n".join(slot_urls(site_team(args.stack, args.team))))
            return 0
        commands, problems = plan(args.stack, args.team, args.action, args.url, args.volume_lost)
    except BackupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(shlex.join(command) for command in commands))
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
