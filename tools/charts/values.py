"""The values a release really gets: the chart's defaults coalesced under the values the program passes.

Helm merges maps key by key and deletes a key whose value is null, so what a chart renders differs from
the values a plan shows wherever the program leaves a default alone. :class:`ChartValues` reads each
release's chart from the chart cache (``tools.charts.cache``) and merges as Helm does; when the chart is
not cached, or Helm's SDK is not installed, it says so rather than guessing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from tools.charts.cache import cached_from, chart_cache_dir, find_cached
from tools.charts.refs import ChartKey, helm_sdk
from tools.charts.render import release_chart_key
from tools.offline.recording import integral_numbers


@dataclass(frozen=True)
class EffectiveValues:
    """``values`` is None when the chart could not be read; ``source`` says where they came from, or why not."""

    values: Optional[dict[str, Any]]
    source: str


class ChartValues:
    """Effective values of releases, from the chart cache (``cache_dir``, else ``$GPU_TENANCY_CHART_CACHE``,
    else ``.charts/``). Use it as a context manager: the charts it loaded stay open until it closes."""

    def __init__(self, cache_dir: Optional[os.PathLike[str] | str] = None):
        self.cache = chart_cache_dir(cache_dir)
        self._charts: dict[ChartKey, Any] = {}

    def __enter__(self) -> "ChartValues":
        return self

    def __exit__(self, *_: Any) -> None:
        for chart in self._charts.values():
            chart.close()
        self._charts.clear()

    def effective(self, inputs: Mapping[str, Any]) -> EffectiveValues:
        key = release_chart_key(inputs)
        found, reason = find_cached(key, self.cache)
        if found is None:
            return EffectiveValues(None, f"{key.describe()} is not in the chart cache"
                                         + (f" ({reason})" if reason else ""))
        try:
            if key not in self._charts:
                self._charts[key] = helm_sdk().Chart.load(found)
            merged = self._charts[key].merge_values(integral_numbers(dict(inputs.get("values") or {})))
        except Exception as error:  # no SDK, or an unreadable archive: said, like a missing chart
            return EffectiveValues(None, f"{key.describe()} could not be read ({error})")
        origin = cached_from(self.cache, key)
        copy = "" if origin == key.source else f" (its copy pulled from {origin}, which the mirror is taken to serve)"
        return EffectiveValues(merged, f"{key.describe()} from the chart cache{copy}")
