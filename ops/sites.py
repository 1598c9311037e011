"""The committed sites, as CI needs them.

    python -m ops.sites matrix [--project-dir DIR]

Prints the GitHub Actions matrix (``{"include": [...]}``, one line of JSON) of every committed
``Pulumi.<stack>.yaml``, so the workflows never name a stack. Each entry:

- ``stack``: the stack (site) name;
- ``kind``: ``cluster.kind``;
- ``cloud``: whose credentials the job needs (``aws`` for EKS sites, ``none`` otherwise) and
  ``region``: the AWS region of an EKS site (``cluster.eks.region``; empty otherwise);
- ``runner``: the ``runs-on`` labels: ``ci.runner`` of the stack config for a site only reachable
  from a self-hosted runner, else ``[ubuntu-latest]``.

Committed means tracked by git: a stack file nobody added (a draft, a copy made by hand) is left
out and named on stderr. Outside a git checkout (an unpacked archive) every stack file counts.

Every stack is validated first (unset secrets are allowed, as in an offline plan): if any is
invalid, the command exits with status 2 and the config error of every invalid one, and nothing
is printed on stdout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from config import ConfigError, Platform, load_platform
from config.load import namespace_issues
from config.secrets import SECRET_KEYS, encrypted_key_issues
from config.stack_file import PROJECT_DIR, StackFileError, stack_config, stack_names
from config.vocabulary import project_config
from ops.stack_edit import contains_secure

GITHUB_HOSTED = ("ubuntu-latest",)


@dataclass(frozen=True)
class Site:
    stack: str
    kind: str
    cloud: str
    region: str
    runner: tuple[str, ...]

    @property
    def self_hosted(self) -> bool:
        return self.runner != GITHUB_HOSTED

    def matrix_entry(self) -> dict:
        return {"stack": self.stack, "kind": self.kind, "cloud": self.cloud, "region": self.region,
                "runner": list(self.runner)}


def platform_of(config: dict, stack: str) -> Platform:
    """Validate a stack's ``config:`` block (full keys) as the program would, secrets aside."""
    issues = namespace_issues(config)
    if issues:
        raise ConfigError(issues)
    project = project_config(config)
    refused = encrypted_key_issues(name for name, value in project.items() if contains_secure(value))
    if refused:
        raise ConfigError(refused)
    raw = {name: value for name, value in project.items() if name not in SECRET_KEYS}
    secrets = {name for name, value in project.items() if name in SECRET_KEYS and value}
    return load_platform(raw, secrets_set=secrets, placeholders=set(SECRET_KEYS) - secrets, stack=stack)


def site_of(platform: Platform) -> Site:
    eks = platform.cluster.eks
    return Site(stack=platform.stack, kind=platform.cluster.kind, cloud="aws" if eks is not None else "none",
                region=eks.region if eks is not None else "", runner=platform.ci.runner or GITHUB_HOSTED)


def tracked_stacks(project_dir: Path) -> tuple[list[str], list[str]]:
    """The stacks whose file git tracks, and those whose file it does not. Outside a git checkout (or
    without git) every stack file counts as committed."""
    names = stack_names(project_dir)
    try:
        listed = subprocess.run(["git", "-C", str(project_dir), "ls-files", "-z", "--", "Pulumi.*.yaml"],
                                capture_output=True, text=True, check=False)
    except OSError:
        return names, []
    if listed.returncode != 0:
        return names, []
    tracked = {path for path in listed.stdout.split("\0") if path}
    return ([name for name in names if f"Pulumi.{name}.yaml" in tracked],
            [name for name in names if f"Pulumi.{name}.yaml" not in tracked])


def sites(project_dir: Path = PROJECT_DIR) -> list[Site]:
    """Every committed site; raises one ``StackFileError`` naming every invalid stack and its problems."""
    found, broken = [], []
    for stack in tracked_stacks(project_dir)[0]:
        try:
            found.append(site_of(platform_of(stack_config(project_dir, stack), stack)))
        except (ConfigError, StackFileError) as error:
            broken.append(f"stack {stack}: {error}")
    if broken:
        raise StackFileError("\n".join(broken))
    return found


def matrix(project_dir: Path = PROJECT_DIR) -> dict:
    return {"include": [site.matrix_entry() for site in sites(project_dir)]}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.sites",
                                     description="The committed sites (Pulumi.<stack>.yaml), for CI.")
    parser.add_argument("command", choices=["matrix"],
                        help="matrix: print the GitHub Actions matrix of every site as one line of JSON")
    parser.add_argument("--project-dir", metavar="DIR", type=Path, default=PROJECT_DIR,
                        help="directory holding the stack files (default: the project root)")
    args = parser.parse_args(argv)
    for stack in tracked_stacks(args.project_dir)[1]:
        print(f"note: Pulumi.{stack}.yaml is not tracked by git, so it is not a committed site: left out "
              f"(git add it to deploy it from CI)", file=sys.stderr)
    try:
        document = matrix(args.project_dir)
    except StackFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not document["include"]:
        print(f"error: no Pulumi.<stack>.yaml in {args.project_dir}", file=sys.stderr)
        return 2
    print(json.dumps(document, sort_keys=True, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
