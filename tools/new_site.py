"""Start a new site (Pulumi stack) from an existing one.

    python -m tools.new_site SITE --from STACK [--set PATH=VALUE ...] [--project-dir DIR]

Copies the ``config:`` of ``Pulumi.STACK.yaml``, applies each ``--set`` (a Pulumi config path:
``teams[0].resources.gpu.quota=0.2``, ``vcluster.nodeLabels["gpu-tenancy/pool"]=gpu``,
``aws:region=eu-west-1``), drops every encrypted value (it is encrypted for STACK and cannot be
read by SITE), validates the ``gpu-tenancy:*`` result with the config model and only then writes
``Pulumi.SITE.yaml``. It never overwrites a stack file and never talks to Pulumi: it prints the
commands to run next.

Paths are relative to the ``gpu-tenancy`` namespace unless their first key holds a ':'. VALUE is
read as YAML: ``0.5`` is a number, ``true`` a boolean, ``[a, b]`` a list, ``{a: 1}`` a map and
anything else text (quote it, ``'"1.33"'``, to keep a number-like value a string). Exit status:
0 written, 2 nothing written (bad arguments, unknown stack, existing file or invalid config).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import yaml

REPO_DIR = Path(__file__).resolve().parent.parent
if str(REPO_DIR) not in sys.path:  # `python -m tools.new_site` from another directory
    sys.path.insert(0, str(REPO_DIR))

from config import ConfigError  # noqa: E402
from config.load import PROJECT, SECRET_KEYS, CLUSTER_KINDS, secret_command as project_secret_command  # noqa: E402
from config.stack_file import StackFileError, core_value, parse_value, read_stack_file, stack_names  # noqa: E402
from tools.sites import platform_of, site_of  # noqa: E402

STACK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
# Stack-file settings that belong to the source stack's own secrets; `pulumi stack init` writes new ones.
STACK_SECRET_SETTINGS = ("secretsprovider", "encryptedkey", "encryptionsalt")
NOT_COPIED = "<encrypted in the source stack, not copied>"

Segment = Union[str, int]


class UsageError(Exception):
    """A problem with the command line or the files it names; nothing is written."""


# --- YAML -------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """PyYAML already quotes text a YAML 1.1 reader would take for something else; this also
    quotes text that Pulumi (YAML 1.2) would read as a number (``1e3``), so the file written is
    read back the same by both."""

    def represent_str(self, data: str) -> yaml.ScalarNode:
        node = super().represent_str(data)
        if node.style is None and core_value(data) != data:
            node.style = '"'
        return node


_Dumper.add_representer(str, _Dumper.represent_str)


def dump_yaml(value: Any, **options: Any) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, **options)


def is_secure(value: object) -> bool:
    """A value Pulumi encrypted in the stack file: ``{secure: v1:...}``."""
    return isinstance(value, dict) and set(value) == {"secure"}


def contains_secure(value: object) -> bool:
    if is_secure(value):
        return True
    if isinstance(value, dict):
        return any(contains_secure(item) for item in value.values())
    if isinstance(value, list):
        return any(contains_secure(item) for item in value)
    return False


# --- config paths -------------------------------------------------------------------------------


def format_path(path: Sequence[Segment]) -> str:
    """A path in Pulumi's ``--path`` syntax: ``gpu-tenancy:teams[0].resources``, ``a["x.y/z"]``."""
    text = ""
    for position, segment in enumerate(path):
        if isinstance(segment, int):
            text += f"[{segment}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+" if position else r"(?:[A-Za-z0-9_-]+:)?[A-Za-z0-9_-]+", segment):
            text += segment if position == 0 else f".{segment}"
        else:
            text += '["' + segment.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return text


def _path_error(text: str, at: int, problem: str) -> UsageError:
    return UsageError(f"--set {text!r}: {problem} (at character {at + 1}); write PATH=VALUE, e.g. "
                      "teams[0].resources.gpu.quota=0.5 or vcluster.nodeLabels[\"gpu-tenancy/pool\"]=gpu")


def parse_path(text: str, *, stop_at_equals: bool = True) -> tuple[list[Segment], int]:
    """Parse a config path at the start of ``text``; returns its segments and where it ended
    (at the first '=' outside quotes, or the end of the text)."""
    segments: list[Segment] = []
    length, index = len(text), 0

    def ends(at: int) -> bool:
        return at >= length or (stop_at_equals and text[at] == "=")

    while True:
        if index < length and text[index] == "[":
            start = index
            index += 1
            if index < length and text[index] in "\"'":
                quote, key = text[index], []
                index += 1
                while index < length and text[index] != quote:
                    if text[index] == "\\" and index + 1 < length:
                        index += 1
                    key.append(text[index])
                    index += 1
                if index >= length:
                    raise _path_error(text, start, "unterminated quoted key")
                index += 1
                if index >= length or text[index] != "]":
                    raise _path_error(text, index, "expected ']' after a quoted key")
                if not key:
                    raise _path_error(text, start, "empty key")
                segments.append("".join(key))
            else:
                close = text.find("]", index)
                inner = text[index:close] if close >= 0 else text[index:]
                if close < 0 or not re.fullmatch(r"[0-9]+", inner):
                    raise _path_error(text, start, f"[{inner}] is not a list index: "
                                      "use [0], [1], ... for list items or [\"key\"] for a key with dots or slashes")
                segments.append(int(inner))
                index = close
            index += 1
        else:
            start = index
            while not ends(index) and text[index] not in ".[]":
                index += 1
            if index == start:
                what = "missing path" if start == 0 and ends(start) else "empty key in path"
                raise _path_error(text, start, what)
            segments.append(text[start:index])
        if ends(index):
            break
        if text[index] == ".":
            index += 1
            if ends(index) or text[index] in ".[":
                raise _path_error(text, index, "'.' must be followed by a key name")
        elif text[index] != "[":
            raise _path_error(text, index, f"unexpected {text[index]!r}")
    if isinstance(segments[0], int):
        raise _path_error(text, 0, "a path starts with a key name, not a list index")
    return segments, index


def qualify(first: str) -> str:
    """The full config key of a path's first segment: ``teams`` -> ``gpu-tenancy:teams``."""
    if ":" in first:
        namespace, _, name = first.partition(":")
        if not namespace or not name:
            raise UsageError(f"{first!r} is not a config key: write namespace:name, e.g. aws:region")
        return first
    return f"{PROJECT}:{first}"


def project_name(key: str) -> Optional[str]:
    """``gpu-tenancy:teams`` (or a bare ``teams``) -> ``teams``; keys of other namespaces -> None."""
    if ":" not in key:
        return key
    namespace, _, name = key.partition(":")
    return name if namespace == PROJECT else None


@dataclass
class Assignment:
    text: str
    path: list[Segment]  # first segment is the full key, e.g. gpu-tenancy:teams
    value: Any


def parse_assignment(text: str) -> Assignment:
    segments, end = parse_path(text)
    if end >= len(text):
        raise UsageError(f"--set {text!r} has no '=': write PATH=VALUE, e.g. teams[0].resources.gpu.quota=0.5")
    raw_value = text[end + 1:]
    if not raw_value.strip():
        raise UsageError(f"--set {text!r} has no value after '=': write '' for an empty string")
    try:
        value = parse_value(raw_value, format_path(segments))
    except StackFileError as error:
        raise UsageError(f"--set {text!r}: {error}; quote text that contains YAML syntax, e.g. "
                         "--set 'organization.displayName=\"ML: research\"'") from None
    except ConfigError as error:
        raise UsageError(f"--set {text!r}: " + "; ".join(f"{issue.problem}. Fix: {issue.fix}"
                                                        for issue in error.issues)) from None
    if contains_secure(value):
        raise UsageError(f"--set {text!r}: encrypted values cannot be copied between stacks; set secrets with "
                         "pulumi config set --secret after pulumi stack init")
    try:
        segments[0] = qualify(str(segments[0]))
    except UsageError as error:
        raise UsageError(f"--set {text!r}: {error}") from None
    if project_name(segments[0]) in SECRET_KEYS:
        raise UsageError(f"--set {text!r}: {segments[0]} is a secret and must not be written in plain text; "
                         f"set it after pulumi stack init with: pulumi config set --secret {segments[0]} < ...")
    return Assignment(text, segments, value)


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    return f"{type(value).__name__} value ({value!r})"


def resolve_top(config: dict, key: str) -> str:
    """The key as the stack file spells it (a bare ``teams`` counts as ``gpu-tenancy:teams``)."""
    name = project_name(key)
    if key not in config and name is not None and name in config:
        return name
    return key


_ABSENT = object()
_REMOVED = object()


def _get(container: Union[dict, list], key: Segment) -> Any:
    if isinstance(container, list):
        return container[key] if key < len(container) else _ABSENT
    return container.get(key, _ABSENT)


def _put(container: Union[dict, list], key: Segment, value: Any) -> None:
    if isinstance(container, list) and key == len(container):
        container.append(value)
    else:
        container[key] = value


def apply(config: dict, assignment: Assignment) -> Any:
    """Set one value in ``config`` (creating missing maps and lists, appending at index == length).
    Returns the value it replaced (``_ABSENT`` if none); rewrites ``assignment.path`` to the stored key."""
    path = assignment.path
    path[0] = resolve_top(config, path[0])
    container: Union[dict, list] = config
    key: Segment = path[0]
    for depth, segment in enumerate(path[1:], start=1):
        where = format_path(path[:depth])
        node = _get(container, key)
        if node is _ABSENT or node is None:
            node = [] if isinstance(segment, int) else {}
            _put(container, key, node)
        elif isinstance(segment, int) and not isinstance(node, list):
            hint = f"use a key, e.g. {where}.name" if isinstance(node, dict) else "set the whole value instead"
            raise UsageError(f"--set {assignment.text!r}: {where} is a {_kind(node)}, not a list; {hint}")
        elif isinstance(segment, str) and not isinstance(node, dict):
            hint = f"use an index, e.g. {where}[0]" if isinstance(node, list) else \
                f"a path cannot go through it (set {where} itself to replace it)"
            raise UsageError(f"--set {assignment.text!r}: {where} is a {_kind(node)}, not a map; {hint}")
        if isinstance(segment, int) and segment > len(node):
            items = "[0]" if len(node) == 1 else f"[0]..[{len(node) - 1}]"
            advice = f"use {items} to change an item or [{len(node)}] to append" if node else \
                "use [0] to add the first item"
            raise UsageError(f"--set {assignment.text!r}: index out of range: {format_path(path[:depth + 1])} "
                             f"does not exist, {where} has {len(node)} item(s); {advice}")
        container, key = node, segment
    old = _get(container, key)
    _put(container, key, assignment.value)
    return old


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
        prog="python -m tools.new_site",
        description="Write Pulumi.SITE.yaml for a new site from an existing stack's config, with changes. "
                    "Encrypted values are not copied; the commands to set them again are printed.",
        epilog="examples:\n"
               "  python -m tools.new_site lab2 --from dev --set teams[0].resources.gpu.quota=0.2\n"
               "  python -m tools.new_site eu --from eks --set cluster.eks.region=eu-west-1 "
               "--set aws:region=eu-west-1\n"
               "  python -m tools.new_site lab3 --from dev --set 'vcluster.nodeLabels[\"gpu-tenancy/pool\"]=gpu'",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("site", metavar="SITE", help="name of the new stack (letters, digits, '-', '_', '.')")
    parser.add_argument("--from", dest="source", metavar="STACK", required=True,
                        help="existing stack whose Pulumi.STACK.yaml is copied")
    parser.add_argument("--set", dest="sets", metavar="PATH=VALUE", action="append", default=[],
                        help="change one value (Pulumi config path, gpu-tenancy namespace unless PATH starts "
                             "with namespace:); VALUE is YAML. Repeatable, applied in order.")
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
    if value is _ABSENT:
        return "(not set)"
    if value is _REMOVED:
        return "(removed: settings of another cluster.kind)"
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
        changes.append((format_path(assignment.path), old, assignment.value))

    changes += switch_kind(config, old_kind, assignments)

    # A --set on (or above) a dropped value replaced it: that one is no longer to be set again.
    set_paths = [tuple(assignment.path) for assignment in assignments]
    dropped = [secret for secret in dropped
               if not any(secret.path[:len(path)] == path for path in set_paths)]

    # Dropped secret keys (sshPrivateKey, kubeconfig) are simply unset until `pulumi config set`;
    # other encrypted project keys keep a stand-in so validation does not call them missing.
    check = {qualify(key): value for key, value in config.items()}
    for secret in dropped:
        name = project_name(secret.path[0])
        if secret.whole_key and name is not None and name not in SECRET_KEYS:
            check.setdefault(qualify(secret.path[0]), NOT_COPIED)
    try:
        platform = platform_of(check, site)
    except ConfigError as error:
        print(f"error: the config for {site} (from {source} with {len(changes)} change(s)) is invalid; "
              f"nothing was written.\n{error}", file=sys.stderr)
        return 2

    output = {name: config if name == "config" else value for name, value in document.items()
              if name not in STACK_SECRET_SETTINGS}
    output["config"] = config  # kept in its place when the source has it
    header = f"# Site {site}: created from stack {source} by `python -m tools.new_site`.\n"
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
    print(f"Wrote {target} from stack {source} ({len(changes)} change(s)).")
    for path, old, new in changes:
        print(f"  {path}: {_show(old)} -> {_show(new)}")
    _print_next_steps(site, source, document, platform, dropped)
    return 0


def switch_kind(config: dict, old_kind: Any, assignments: Sequence[Assignment]) -> list[tuple[str, Any, Any]]:
    """After ``cluster.kind`` changed, drop the settings block of every other kind (``cluster.microk8s``
    when the site becomes ``eks``) unless a ``--set`` wrote it; returns the removals as changes."""
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
    elif ci.cloud == "aws":
        print(f"  GitHub-hosted runners, with AWS credentials for {ci.region} from the AWS_ROLE_ARN secret (OIDC); "
              f"allow repo:<owner>/<repo>:environment:{site} in the role's trust policy")
    else:
        print(f"  GitHub-hosted runners, which must reach the {ci.kind} cluster; if only an on-prem machine can, "
              f"set {PROJECT}:ci.runner to its self-hosted runner's labels "
              "(e.g. --set 'ci.runner=[self-hosted, gpu-lab]')")
    print(f"  create the GitHub environment {site} (add required reviewers to gate pulumi up); "
          "the workflows pick the site up from its stack file (python -m tools.sites matrix)")

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
