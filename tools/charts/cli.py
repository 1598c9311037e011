"""Helm charts of the platform's releases: the chart cache and offline rendering, on the command line.

Pulumi's preview of a ``helm.v3.Release`` shows the values it passes, not the objects the chart
will create; these modules render those objects offline with helm-python-sdk (Helm v4's Go SDK
behind a C ABI, no ``helm`` binary), and give the contract and deployability checks the charts'
own values, schemas and CRDs:

* ``tools.chart_refs``: which chart version from which source (:class:`ChartKey`), the errors;
* ``tools.chart_cache``: the cache directory (``.charts/``, ``$GPU_TENANCY_CHART_CACHE`` or
  ``--cache DIR``), filled by pulling or from a local chart directory, and a cached chart's
  contracts (:func:`chart_contracts`);
* ``tools.chart_render``: rendering one release, or every release of a plan into
  ``<out>/manifests/<release>/<template path>``.

Command line (``python -m tools.charts ...``):

* ``pull`` (needs internet access): with no argument, every pinned chart: the defaults of
  ``config/versions.py`` and every chart a committed stack's releases use (what CI runs before
  the tests); ``pull --stack STACK`` one stack's charts; ``pull CHART --version V [--repo URL]``
  one chart (a name with ``--repo``, or an ``oci://`` reference). A chart a site pulls from its
  mirror (``mirrors.charts``) whose upstream's copy is cached is reported as not pulled from the
  mirror; ``--force`` pulls the mirror's. A closing summary counts what was pulled, what was
  cached and which charts are upstream copies.
* ``add DIR [--version V] [--app-version V] [--chart CHART [--repo URL]]`` (offline): packages
  a chart directory into the cache. The source defaults to where ``config/versions.py`` pulls a
  chart of that name from; ``--version`` stamps the version the way the projects' release
  pipelines do (a chart directory at a git tag carries a placeholder such as ``0.0.0``).
* ``list`` shows what is cached.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

import yaml

from tools.charts.cache import (
    CACHE_ENV, CACHED, PULLED, UPSTREAM_COPY, cache_chart, cached_charts, chart_cache_dir, pull_chart, upstream_source,
)
from tools.charts.pins import pinned_chart_keys, stack_chart_keys
from tools.charts.refs import ChartError, ChartKey, chart_key, pinned_chart_key


# --- CLI ----------------------------------------------------------------------------------------


def _add(args: argparse.Namespace, cache: Path) -> int:
    chart_file = args.directory / "Chart.yaml"
    try:
        metadata = yaml.safe_load(chart_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        print(f"error: {args.directory} is not a chart directory ({chart_file}: {error})", file=sys.stderr)
        return 2
    version = args.version or str(metadata.get("version") or "")
    try:
        if args.chart:
            key = chart_key(args.chart, args.repo, version)
        else:
            if args.repo:
                print("error: --repo goes with --chart", file=sys.stderr)
                return 2
            key = pinned_chart_key(str(metadata.get("name") or ""), version)
        path = cache_chart(args.directory, key.ref, key.repo, key.version, cache_dir=cache,
                           stamp_version=bool(args.version), app_version=args.app_version)
    except (ValueError, ChartError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"added {key.describe()} from {args.directory} -> {path}")
    return 0


def _pull(args: argparse.Namespace, parser: argparse.ArgumentParser, cache: Path) -> int:
    if args.stack and args.chart:
        parser.error("pull takes --stack STACK, or CHART --version V [--repo URL], or nothing (every pinned chart)")
    if (args.repo or args.version) and not args.chart:
        parser.error("--repo and --version go with CHART")
    try:
        if args.chart:
            keys = [chart_key(args.chart, args.repo, args.version)]
        else:
            keys = stack_chart_keys(args.stack) if args.stack else pinned_chart_keys()
    except (ValueError, FileNotFoundError, yaml.YAMLError) as error:  # config.ConfigError is a ValueError
        print(f"error: {error}", file=sys.stderr)
        return 2
    done: dict[str, list[ChartKey]] = {PULLED: [], CACHED: [], UPSTREAM_COPY: []}
    failed = 0
    for key in keys:
        try:
            path, how = pull_chart(key.ref, key.repo, key.version, cache_dir=cache, force=args.force,
                                   plain_http=args.plain_http)
        except ChartError as error:
            failed += 1
            print(f"error: {error}", file=sys.stderr)
            continue
        done[how].append(key)
        if how == UPSTREAM_COPY:
            print(f"not pulled from the mirror: {key.describe()}: the cache holds the upstream's copy "
                  f"({upstream_source(key)}), which renders use in its place -> {path}")
        else:
            print(f"{how} {key.describe()} -> {path}")
    print(_summary(done, failed))
    return 1 if failed else 0


def _summary(done: dict[str, list[ChartKey]], failed: int) -> str:
    summary = f"{len(done[PULLED])} pulled, {len(done[CACHED])} already cached"
    if done[UPSTREAM_COPY]:
        summary += (f", {len(done[UPSTREAM_COPY])} not pulled from the site's mirror ("
                    + ", ".join(f"{key.name} {key.version}" for key in done[UPSTREAM_COPY])
                    + ": the upstream's copy in the cache stands in; --force pulls the mirror's in its place)")
    return summary + (f", {failed} failed" if failed else "")


def _list(cache: Path) -> int:
    entries = cached_charts(cache)
    if not entries:
        print(f"chart cache {cache}: empty")
        return 0
    print(f"chart cache {cache}:")
    for entry in entries:
        print(f"  {Path(entry['path']).name}  {entry['source'] or '(source unknown)'}  "
              f"{entry['digest'] or ''}".rstrip())
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.charts",
        description="The Helm chart cache used to render the stack's releases offline. "
                    "'pull' needs internet access; 'add' and 'list' work offline.")
    cache_help = f"cache directory (default: ${CACHE_ENV}, else .charts/ at the project root)"
    commands = parser.add_subparsers(dest="command", required=True)
    pull = commands.add_parser("pull", help="download charts into the cache (needs internet access)")
    pull.add_argument("chart", nargs="?", metavar="CHART",
                      help="chart name (with --repo) or oci:// reference; omit for every pinned chart")
    pull.add_argument("--stack", metavar="STACK", help="pull every chart the stack's releases use")
    pull.add_argument("--repo", metavar="URL", help="HTTP(S) chart repository of CHART")
    pull.add_argument("--version", metavar="V", help="exact chart version")
    pull.add_argument("--force", action="store_true", help="download again even if cached")
    pull.add_argument("--plain-http", action="store_true", help="plain HTTP to the OCI registry (local ones)")
    pull.add_argument("--cache", metavar="DIR", type=Path, default=None, help=cache_help)
    add = commands.add_parser("add", help="put a local chart directory into the cache (offline)")
    add.add_argument("directory", metavar="DIR", type=Path, help="chart directory (holds Chart.yaml)")
    add.add_argument("--version", metavar="V",
                     help="the chart version to cache it as, stamped into the package (default: Chart.yaml's)")
    add.add_argument("--app-version", metavar="V", help="appVersion stamped with --version")
    add.add_argument("--chart", metavar="CHART",
                     help="chart name (with --repo) or oci:// reference the releases use "
                          "(default: the program's source for a chart of this name)")
    add.add_argument("--repo", metavar="URL", help="HTTP(S) chart repository of --chart")
    add.add_argument("--cache", metavar="DIR", type=Path, default=None, help=cache_help)
    listing = commands.add_parser("list", help="show the cached charts")
    listing.add_argument("--cache", metavar="DIR", type=Path, default=None, help=cache_help)
    args = parser.parse_args(argv)
    cache = chart_cache_dir(args.cache)
    if args.command == "list":
        return _list(cache)
    if args.command == "add":
        if args.app_version and not args.version:
            parser.error("--app-version goes with --version")
        return _add(args, cache)
    return _pull(args, parser, cache)

