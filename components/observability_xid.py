"""Which XID errors need the platform's operator and which only the application that hit them, as PromQL.

The DCGM exporter reports the code of a GPU's last XID error (``DCGM_FI_DEV_XID_ERRORS``). Many codes are
raised by a faulty application kernel, which any tenant can run at will: 13 (an out-of-bounds access or
illegal instruction), 31 (a GPU page fault), 43 (a channel stopped), 45 (a process killed with work in
flight). The driver contains those and the GPU stays usable. Other codes leave the GPU or the node needing a
reset, a reboot or a drain: 48 (a double-bit ECC error), 79 (the GPU fell off the bus), 119 (a GSP timeout).
Paging on every code let any tenant page the platform's on-call whenever it liked.

``NON_FATAL`` holds the codes NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors, "Analyzing Xid
Errors with the Xid Catalog") marks non-fatal, as NVIDIA's NVSentinel health monitor classifies it: the
immediate action is to restart the application or to ignore the event (its NONFATAL column, in its
xiderrorsmapping.csv). Every other code, listed as fatal or unknown to the catalog (a newer driver's), needs
the operator: an unknown code pages rather than stays silent.

The last code alone can hide a fatal one: the driver often logs a second code right after a fatal error (63
records the row remapping a double-bit error caused, 154 announces the recovery action a GSP timeout needs),
both non-fatal, and the exporter's next scrape sees only that one. The exporter therefore also counts every
code a GPU reported within its window (``DCGM_EXP_XID_ERRORS_COUNT``, one series per code in label ``xid``;
the platform's collector list turns it on, components/observability_dcgm.py): on a GPU that has those counts a
fatal code pages whatever came after it. A GPU without them (an operator the platform does not configure) is
judged by its last code.
"""

from __future__ import annotations

from config.observability import DCGM_XID_COUNT_FIELD

METRIC = "DCGM_FI_DEV_XID_ERRORS"
# Per GPU and code: how often the GPU reported that code within the exporter's window (5 minutes by default).
COUNT_METRIC = DCGM_XID_COUNT_FIELD
COUNT_LABEL = "xid"
# The window a new code counts as new in: an alert fires once per code change and resolves after it.
NEW_WINDOW = "15m"

NON_FATAL = frozenset({
    8, 11, 13, 14, 25, 31, 32, 37, 38, 39, 40, 41, 43, 44, 45, 60, 63, 66, 67, 68, 69, 70, 71, 72, 75, 76, 77,
    80, 82, 83, 84, 85, 86, 88, 89, 92, 93, 94, *range(96, 108), 121, *range(126, 136), 137, 139, 141,
    152, 153, 154, 157, 159, 161,
})


def code_runs(codes: frozenset[int]) -> list[tuple[int, int]]:
    """``codes`` as sorted runs of consecutive numbers, first and last of each."""
    runs: list[tuple[int, int]] = []
    for code in sorted(codes):
        if runs and runs[-1][1] == code - 1:
            runs[-1] = (runs[-1][0], code)
        else:
            runs.append((code, code))
    return runs


def _is_non_fatal() -> str:
    """The XID series whose last code is non-fatal (comparisons filter; the series keep their labels)."""
    terms = [f"{METRIC} == {first}" if first == last else f"({METRIC} >= {first} and {METRIC} <= {last})"
             for first, last in code_runs(NON_FATAL)]
    return f"({' or '.join(terms)})"


def new_code() -> str:
    """Per XID series: its code, while a code it reported in the last window is new (value: the code)."""
    return f"({METRIC} > 0 and changes({METRIC}[{NEW_WINDOW}]) > 0)"


def counted_fatal() -> str:
    """Per GPU and code: the codes that need the operator among those the exporter counted in its window, each
    one whatever code followed it (value: how often; the code is label ``xid``)."""
    contained = "|".join(str(code) for code in sorted(NON_FATAL))
    return f'({COUNT_METRIC}{{{COUNT_LABEL}!="", {COUNT_LABEL}!~"0|{contained}"}} > 0)'


def fatal() -> str:
    """Codes that need the operator, fatal in the catalog or not in it: counted ones where the exporter counts,
    else a new last code (value: the code, or for a counted one how often; see ``COUNT_LABEL``)."""
    last_code = f"({new_code()} unless {_is_non_fatal()})"
    return f"({counted_fatal()} or ({last_code} unless on (UUID) {COUNT_METRIC}))"


def non_fatal() -> str:
    """New codes the driver contained (the application that hit them is stopped, the GPU stays usable), on a GPU
    that did not also report a code needing the operator within the exporter's window."""
    return f"(({new_code()} and {_is_non_fatal()}) unless on (UUID) {counted_fatal()})"
