"""Where a value a site's ``vcluster.extraValues`` write falls in the vCluster chart's classification.

config/vcluster_values.py lists the chart's values and why each is classified so; this module reads that list: a
written leaf falls under its own entry or the nearest map (``name.*``) above it that the chart has at the tenant's
release (``SINCE``, ``UNTIL``), and a block that only holds other values is never written itself. Kept apart so that
the list stays data an upgrade edits, and the few rules that read it sit where config/virtual_cluster.py and the
chart contract tests find them.
"""

from __future__ import annotations

from typing import Iterator, Optional

from config import versions
from config.vcluster_values import CLASSIFIED, SINCE, UNTIL, Values


def _table() -> dict[str, Values]:
    table: dict[str, Values] = {}
    for values in CLASSIFIED:
        for path in values.paths:
            assert path not in table, f"{path} is classified twice"
            table[path] = values
    return table


TABLE = _table()


def classified(path: str, version: str) -> Optional[tuple[str, Values]]:
    """The classified value ``path`` (a leaf a site writes, dotted) is, or falls under at chart ``version``."""
    parts = path.split(".")
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        for key in ((prefix,) if length == len(parts) else ()) + (f"{prefix}.*",):
            if key in TABLE and _at(key.removesuffix(".*"), version):
                return key, TABLE[key]
    return None


def _at(path: str, version: str) -> bool:
    since, until = SINCE.get(path), UNTIL.get(path)
    return (since is None or versions.release_order(version) >= versions.release_order(since)) and \
        (until is None or versions.release_order(version) < versions.release_order(until))


# Every path that holds other classified values (a site sets their keys, never the block itself).
BLOCKS = {".".join(path.split(".")[:length]) for path in TABLE for length in range(1, len(path.split(".")))} \
    - {path.removesuffix(".*") for path in TABLE}


def leaves(values: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, object]]:
    """(dotted path, value) of every value a site's extraValues write; an empty map writes nothing."""
    if isinstance(values, dict) and path and not values:
        return
    if isinstance(values, dict):
        for key, value in values.items():
            yield from leaves(value, path + (str(key),))
    else:
        yield ".".join(path), values
