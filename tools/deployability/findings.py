"""A finding of the deployability check: its severity, the rule, the object, what is wrong and the fix.

The rules of ``site_rules`` and ``schemas`` report findings themselves, and ``check`` turns what the other rule
modules return into findings, sorts them and writes the report. The type lives apart so that a rule reports without
importing the check that runs it.
"""

from __future__ import annotations

import dataclasses

ERROR, WARNING, INFO = "error", "warning", "info"


@dataclasses.dataclass(frozen=True)
class Finding:
    severity: str
    rule: str
    object: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"[{self.severity}] {self.rule}: {self.object}: {self.message}. Fix: {self.fix}"
