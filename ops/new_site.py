"""Start a new site (Pulumi stack) from an existing one.

    python -m ops.new_site SITE --from STACK [--set PATH=VALUE ...] [--project-dir DIR]

Copies the ``config:`` of ``Pulumi.STACK.yaml``, applies each ``--set`` (a Pulumi config path:
``teams[0].resources.gpu.quota=0.2``, ``vcluster.nodeLabels["gpu-tenancy/pool"]=gpu``,
``aws:region=eu-west-1``), drops every encrypted value (it is encrypted for STACK and cannot be
read by SITE), validates the ``gpu-tenancy:*`` result with the config model and only then writes
``Pulumi.SITE.yaml``. It never overwrites a stack file and never talks to Pulumi: it prints the
commands to run next.

Paths are relative to the ``gpu-tenancy`` namespace unless their first key holds a ':'. VALUE is
read as YAML: ``0.5`` is a number, ``true`` a boolean, ``[a, b]`` a list, ``{a: 1}`` a map and
anything else text (quote it, ``'"1.33"'``, to keep a number-like value a string; a value YAML reads as
nothing, such as a Slack channel ``#gpu`` where ``#`` starts a comment, is refused with the quoted form). ``null``
(or ``~``) removes the key or list item, as ``pulumi config rm --path`` does: a stack file holds no nulls. Exit status:
0 written, 2 nothing written (bad arguments, unknown stack, existing file or invalid config).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence


REPO_DIR = Path(__file__).resolve().parent.parent  # before config.stack_file is importable
if str(REPO_DIR) not in sys.path:  # `python -m ops.new_site` from another directory
    sys.path.insert(0, str(REPO_DIR))

from config import ConfigError  # noqa: E402
from config.secrets import SECRET_KEYS, encrypted_key_issues, secret_command as project_secret_command  # noqa: E402
from config.vocabulary import PROJECT  # noqa: E402
from config.vocabulary import CLUSTER_KINDS  # noqa: E402
from config.stack_file import StackFileError, read_stack_file, stack_names  # noqa: E402
from ops.sites import platform_of, site_of  # noqa: E402
from ops.stack_edit import (
    ABSENT, Assignment, UsageError, apply, dump_yaml, format_path, is_secure, parse_assignment, parse_path,
    project_name, qualify, quote_past_the_shell, resolve_top,
)

__all__ = ["UsageError", "format_path", "parse_assignment", "parse_path", "main", "run"]

_REMOVED = object()
_UNSET = object()
_OTHER_HOSTS_RUNNER = object()

STACK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
# Stack-file settings that belong to the source stack's own secrets; `pulumi stack init` writes new ones.
STACK_SECRET_SETTINGS = ("secretsprovider", "encryptedkey", "encryptionsalt")



# --- secrets ----------------------------------------------------------------------------------


@dataclass
class Secret:
    path: tuple  # (full key, ...) as stored in the stack file
    plaintext: bool = False  # a secret key stored unencrypted in the source

    @property
    def whole_key(self) -> bool:
        return len(self.path) == 1


def drop_secrets(config: dict) -> list[Secret]:
    """Remove every ``{secure: ...}`` value in place (map entries are deleted, list items become
    null so later indexes keep their meaning) and every secret key stored in plain text."""
    dropped: list[Secret] = []

    def walk(node: Any, path: tuple) -> None:
        if isinstance(node, dict):
            for name in list(node):
                if is_secure(node[name]):
                    del node[name]
                    dropped.append(Secret(path + (name,)))
                else:
                    walk(node[name], path + (name,))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                if is_secure(item):
                    node[index] = None
                    dropped.append(Secret(path + (index,)))
                else:
                    walk(item, path + (index,))

    for key in list(config):
        value = config[key]
        if is_secure(value):
            del config[key]
            dropped.append(Secret((key,)))
        elif project_name(key) in SECRET_KEYS and value not in (None, ""):
            del config[key]
            dropped.append(Secret((key,), plaintext=True))
        else:
            walk(value, (key,))
    return dropped


def secret_command(secret: Secret, site: str) -> str:
    key = secret.path[0]
    full = qualify(key)
    if secret.whole_key:
        name = project_name(key)
        if name in SECRET_KEYS:
            return project_secret_command(name, site)
        return f"pulumi config set --secret {shlex.quote(full)} --stack {site}   # prompts for the value"
    path = format_path((full,) + tuple(secret.path[1:]))
    quoted = "'" + path.replace("'", "'\"'\"'") + "'"
    return f"pulumi config set --secret --path {quoted} --stack {site}   # prompts for the value"


# --- the command ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ops.new_site",
        description="Write Pulumi.SITE.yaml for a new site from an existing stack's config, with changes. "
                    "Encrypted values are not copied; the commands to set them again are printed.",
        epilog="examples:\n"
               "  python -m ops.new_site lab2 --from dev --set teams[0].resources.gpu.quota=0.2\n"
               "  python -m ops.new_site eu --from eks --set cluster.eks.region=eu-west-1 "
               "--set aws:region=eu-west-1\n"
               "  python -m ops.new_site gpu-only --from eks --set 'vcluster.nodeLabels[\"gpu-tenancy/pool\"]=gpu'",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("site", metavar="SITE", help="name of the new stack (letters, digits, '-', '_', '.')")
    parser.add_argument("--from", dest="source", metavar="STACK", required=True,
                        help="existing stack whose Pulumi.STACK.yaml is copied")
    parser.add_argument("--set", dest="sets", metavar="PATH=VALUE", action="append", default=[],
                        help="change one value (Pulumi config path, gpu-tenancy namespace unless PATH starts "
                             "with namespace:); VALUE is YAML, null removes the key. Repeatable, applied in order.")
    parser.add_argument("--project-dir", metavar="DIR", type=Path, default=REPO_DIR,
                        help="directory holding the stack files (default: %(default)s)")
    return parser


def _check_stack_name(name: str, what: str) -> None:
    if not STACK_NAME.fullmatch(name):
        raise UsageError(f"{what} {name!r} is not a valid stack name: use 1-100 letters, digits, '-', '_' or '.'")


def _read_source(project_dir: Path, stack: str) -> dict:
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise UsageError(f"no stack file {path.name} in {project_dir}; stacks there: "
                         f"{', '.join(stack_names(project_dir)) or 'none'}")
    try:
        return read_stack_file(path)
    except StackFileError as error:
        raise UsageError(str(error)) from None
    except ConfigError as error:
        raise UsageError(f"{path.name} cannot be copied until it is fixed:\n{error}") from None


def _show(value: Any) -> str:
    if value is ABSENT:
        return "(not set)"
    if value is _REMOVED:
        return "(removed: settings of another cluster.kind)"
    if value is _OTHER_HOSTS_RUNNER:
        return "(removed: the runner that reached the source's host)"
    if value is _UNSET:
        return "(removed)"
    return dump_yaml(value, default_flow_style=True, width=10**6).strip().removesuffix("\n...").strip()


def run(site: str, source: str, sets: Sequence[str], project_dir: Path) -> int:
    _check_stack_name(site, "SITE")
    _check_stack_name(source, "--from")
    if not project_dir.is_dir():
        raise UsageError(f"--project-dir {project_dir} is not a directory")
    target = project_dir / f"Pulumi.{site}.yaml"
    if target.exists():
        raise UsageError(f"{target.name} already exists in {project_dir}; refusing to overwrite it "
                         "(choose another SITE, or delete the file first)")
    assignments = [parse_assignment(text) for text in sets]

    document = _read_source(project_dir, source)
    config: dict = document.get("config") or {}
    dropped = drop_secrets(config)
    old_kind = _cluster_kind(config)
    changes = []
    for assignment in assignments:
        old = apply(config, assignment)
        new = _UNSET if assignment.value is None else assignment.value
        changes.append((format_path(assignment.path), old, new))

    changes += switch_kind(config, old_kind, assignments)

    # A --set on (or above) a dropped value replaced it: that one is no longer to be set again.
    set_paths = [tuple(assignment.path) for assignment in assignments]
    dropped = [secret for secret in dropped
               if not any(secret.path[:len(path)] == path for path in set_paths)]

    # Dropped secret keys (sshPrivateKey, kubeconfig) are simply unset until `pulumi config set`. An encrypted
    # value under any other project key is refused, as the program refuses it, unless a --set replaced it.
    refused = encrypted_key_issues({project_name(secret.path[0]) for secret in dropped} - {None})
    check = {qualify(key): value for key, value in config.items()}
    try:
        if refused:
            raise ConfigError(refused)
        platform = platform_of(check, site)
    except ConfigError as error:
        told = ConfigError(quote_past_the_shell(error.issues, assignments))
        print(f"error: the config for {site} (from {source} with {_tally(changes)}) is invalid; "
              f"nothing was written.\n{told}", file=sys.stderr)
        return 2

    output = {name: config if name == "config" else value for name, value in document.items()
              if name not in STACK_SECRET_SETTINGS}
    output["config"] = config  # kept in its place when the source has it
    header = f"# Site {site}: created from stack {source} by `python -m ops.new_site`.\n"
    if dropped:
        header += f"# Encrypted values of {source} were not copied: set them again with pulumi config set --secret.\n"
    text = header + dump_yaml(output, default_flow_style=False)
    try:
        with open(target, "x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        raise UsageError(f"{target.name} already exists in {project_dir}; refusing to overwrite it") from None

    for warning in platform.warnings:
        if not any(f"{PROJECT}:{name} is not set" in warning for name in platform.missing_secrets):
            print(f"warning: {warning}", file=sys.stderr)
    for note in platform.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"Wrote {target} from stack {source} ({_tally(changes)}).")
    for path, old, new in changes:
        print(f"  {path}: {_show(new)} (unchanged: {source} has it too)" if old == new
              else f"  {path}: {_show(old)} -> {_show(new)}")
    _print_next_steps(site, source, document, platform, dropped)
    return 0


def _tally(changes: Sequence[tuple[str, Any, Any]]) -> str:
    """The changes a --set made, and how many wrote the value the source already had (listed as unchanged)."""
    unchanged = sum(1 for _, old, new in changes if old == new)
    return f"{len(changes) - unchanged} change(s)" + (f", {unchanged} unchanged" if unchanged else "")


def switch_kind(config: dict, old_kind: Any, assignments: Sequence[Assignment]) -> list[tuple[str, Any, Any]]:
    """After ``cluster.kind`` changed, drop the settings block of every other kind (``cluster.microk8s``
    when the site becomes ``eks``) and the CI runner, chosen to reach the source's host, unless a ``--set`` wrote
    them; returns the removals as changes."""
    key = resolve_top(config, f"{PROJECT}:cluster")
    cluster = config.get(key)
    if not isinstance(cluster, dict) or cluster.get("kind") == old_kind:
        return []
    written = {assignment.path[1] for assignment in assignments
               if assignment.path[0] == key and len(assignment.path) > 1}
    removed = []
    for kind in CLUSTER_KINDS:
        if kind != cluster.get("kind") and kind in cluster and kind not in written:
            removed.append((format_path([key, kind]), cluster.pop(kind), _REMOVED))
    ci_key = resolve_top(config, f"{PROJECT}:ci")
    ci = config.get(ci_key)
    if isinstance(ci, dict) and "runner" in ci and not any(assignment.path[0] == ci_key for assignment in assignments):
        removed.append((format_path([ci_key, "runner"]), ci.pop("runner"), _OTHER_HOSTS_RUNNER))
        if not ci:
            del config[ci_key]
    return removed


def _cluster_kind(config: dict) -> Any:
    cluster = config.get(resolve_top(config, f"{PROJECT}:cluster"))
    return cluster.get("kind") if isinstance(cluster, dict) else None


def _print_next_steps(site: str, source: str, document: dict, platform: Any, dropped: list[Secret]) -> None:
    other = [secret for secret in dropped if not (secret.whole_key and project_name(secret.path[0]) in SECRET_KEYS)]
    unneeded = [project_name(secret.path[0]) for secret in dropped if secret.whole_key
                and project_name(secret.path[0]) in SECRET_KEYS
                and project_name(secret.path[0]) not in platform.missing_secrets]
    if platform.missing_secrets or other:
        print(f"\nSecrets {site} needs that this file cannot hold (set them after pulumi stack init):")
        for name in platform.missing_secrets:
            print(f"  {PROJECT}:{name}")
        for secret in other:
            note = " (was stored in plain text in the source; keep it encrypted)" if secret.plaintext else ""
            print(f"  {format_path((qualify(secret.path[0]),) + tuple(secret.path[1:]))}{note}")
        if any(not secret.whole_key and isinstance(secret.path[-1], int) for secret in other):
            print("  (encrypted list items were left as null so the other items keep their index)")
    for name in unneeded:
        print(f"  ({PROJECT}:{name} of {source} is not needed by {site} and was not copied)")

    ci = site_of(platform)
    print("\nCI:")
    if ci.self_hosted:
        print(f"  previews and deploys run on a self-hosted runner labelled {', '.join(ci.runner)}: register "
              "one where the cluster is reachable (repository Settings -> Actions -> Runners)")
    elif ci.cloud == "aws" and not platform.cluster.eks.api_endpoint.public_access:
        print(f"  none yet: the API server answers inside the VPC only, where GitHub-hosted runners are not; set "
              f"{PROJECT}:ci.runner to the labels of a self-hosted runner there (e.g. --set 'ci.runner=[self-hosted, "
              f"{site}-vpc]') and register it (repository Settings -> Actions -> Runners)")
    elif ci.cloud == "aws":
        print(f"  GitHub-hosted runners, with AWS credentials for {ci.region} from the AWS_ROLE_ARN secret (OIDC); "
              f"allow repo:<owner>/<repo>:environment:{site} in the role's trust policy")
    elif platform.cluster.microk8s is not None and not platform.cluster.microk8s.remote:
        print(f"  none yet: the box's setup steps run where pulumi up runs (no cluster.microk8s.host); set "
              f"{PROJECT}:ci.runner to the labels of a self-hosted runner on the GPU box (e.g. --set "
              "'ci.runner=[self-hosted, gpu-lab]') and register it there (repository Settings -> Actions -> Runners)")
    else:
        print(f"  GitHub-hosted runners, which must reach the {ci.kind} cluster; if only an on-prem machine can, "
              f"set {PROJECT}:ci.runner to its self-hosted runner's labels "
              "(e.g. --set 'ci.runner=[self-hosted, gpu-lab]')")
    print(f"  create the GitHub environment {site} (add required reviewers to gate pulumi up); "
          "the workflows pick the site up from its stack file (python -m ops.sites matrix)")

    provider = document.get("secretsprovider")
    init = f"pulumi stack init {site}"
    if provider:
        init += f" --secrets-provider {shlex.quote(str(provider))}"
    print("\nNext:")
    print(f"  {init}")
    print(f"      (alternative to this file: pulumi stack init {site} --copy-config-from {source} copies "
          f"{source}'s config with its secrets but none of the --set changes)")
    for name in platform.missing_secrets:
        print(f"  {project_secret_command(name, site)}")
    for secret in other:
        print(f"  {secret_command(secret, site)}")
    print(f"  python -m tools.plan {site}        # review what would be created, offline")
    print(f"  python -m tools.charts pull --stack {site} && python -m tools.plan {site} --render-charts "
          "--fail-on-findings   # and check it against the real charts (what they add, e.g. pods past a node's)")
    print(f"  pulumi preview --stack {site}")
    print(f"  pulumi up --stack {site}           # the first deployment (CI's deploy job does it after merge)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error argparse already printed
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        return run(args.site, args.source, args.sets, args.project_dir)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
