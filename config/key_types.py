"""The types a stack-config key can have: each reads and checks one raw value, and knows its JSON Schema
and how the config reference names it.

Stack config is untrusted YAML, so ``parse`` gets any value at all; it returns the value the program
uses or raises ``Invalid`` with what is wrong and how to fix it. Defaults, required keys and the key's
path are config.reader's business: a type only sees a value that is there.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, Iterable, Optional

from config.errors import MISSING

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_LABEL_FIX = "use at most {limit} lowercase letters, digits and '-', starting and ending with a letter or digit"
# An http(s) URL as the config's URL keys take it: a host, then any path; no white space.
HTTP_URL_PATTERN = r"https?://[^\s/]+(/\S*)?"
# Kubernetes' quantity grammar (apimachinery's resource.Quantity), non-negative: 1.5, .5, 5., 500m, 16Gi, 1e9, 2E+3.
# Plain groups (number, its fraction, suffix): the JSON Schema carries the pattern, and editors read ECMA regexes.
QUANTITY = re.compile(r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$")
# The largest number a quantity holds (apimachinery caps larger ones).
LARGEST_QUANTITY = 2**63 - 1
# Decimal exponents past every float (1e308 the largest, 5e-324 the smallest above zero).
BEYOND_FLOATS = 400
# Far beyond any real quota (memory is counted in MB); keeps float conversions exact and finite.
LARGEST_NUMBER = 10**12


@dataclass(frozen=True)
class Check:
    """A shape rule of a string key: the value must fullmatch ``pattern`` (with ``refuse``: must not).

    ``pattern`` is written without anchors and in the common subset of Python and ECMA-262 regular
    expressions, because the JSON Schema carries it too (anchored there).
    """

    pattern: str
    problem: str
    fix: str
    refuse: bool = False

    def passes(self, value: str) -> bool:
        return bool(re.fullmatch(self.pattern, value)) != self.refuse

    def schema(self) -> dict[str, Any]:
        anchored = {"pattern": f"^(?:{self.pattern})$"}
        return {"not": anchored} if self.refuse else anchored


def failed_check(checks: Iterable[Check], value: str) -> Optional[Check]:
    """The first of ``checks`` that ``value`` does not pass, if any."""
    return next((check for check in checks if not check.passes(value)), None)


def refuse_names(names: Iterable[str], problem: str, fix: str) -> Check:
    """A check refusing exactly these values."""
    return Check("|".join(re.escape(name) for name in names), problem, fix, refuse=True)


def string_schema(*parts: dict[str, Any]) -> dict[str, Any]:
    """A non-blank string meeting every part (patterns go under allOf: one schema holds one pattern)."""
    return {"type": "string", "allOf": [{"pattern": r"\S"}, *parts]}


class Invalid(Exception):
    """A value its type refuses. ``entry`` names the map entry at fault (holding ``value``), if it is one."""

    def __init__(self, problem: str, fix: str, *, entry: Optional[str] = None, value: object = None):
        super().__init__(problem)
        self.problem, self.fix, self.entry, self.value = problem, fix, entry, value


def is_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(value) <= LARGEST_NUMBER if isinstance(value, int) else math.isfinite(value) and abs(value) <= LARGEST_NUMBER


def did_you_mean(name: str, known: Iterable[str]) -> str:
    known = list(known)
    same_letters = [choice for choice in known if choice.lower() == name.lower()]
    close = same_letters or difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else "remove it"


def type_name(value: object) -> str:
    """How a problem names what it found instead."""
    if value is MISSING:
        return "nothing"
    if value is None:
        return "null (nothing written)"
    if isinstance(value, bool):
        return f"a boolean ({value!r})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})" if len(value) <= 40 else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


# Helm reads the charts' manifests, which write names unquoted (the vCluster chart's `namespace: {{ .Release.Namespace
# }}`), and vCluster the manifests the program writes for inside a tenant, with go-yaml v2 (YAML 1.1, through
# sigs.k8s.io/yaml): a plain scalar it reads as a boolean, null, number or date names nothing there, and the install
# fails. Of the DNS-1123 labels these are its boolean and null words, integers (decimal, 0x, 0o, 0b), floats with an
# exponent and dates YYYY-M-D (tests/test_yaml_names_contract.py reads go-yaml's resolver). Every DNS-label key has it.
READ_AS_TEXT_BY_HELM = Check(
    "y|yes|n|no|true|false|on|off|null|[0-9]+(e-?[0-9]+)?|0x[0-9a-f]+|0o[0-7]+|0b[01]+|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}",
    "is read by Helm's and vCluster's YAML (1.1, go-yaml v2) as a boolean, null, number or date, and the charts and "
    "the program's manifests write names unquoted, so it would name nothing there",
    "choose a name YAML reads as text, e.g. with a letter and a dash (team-yes, ns-2024-1-5)", refuse=True)


@dataclass(frozen=True)
class Text:
    """A non-empty string; ``form`` is how the reference names one whose reader checks its shape further."""

    choices: Optional[tuple[str, ...]] = None
    dns_label: bool = False
    max_length: int = 63
    form: Optional[str] = None
    checks: tuple[Check, ...] = ()
    fix: ClassVar[str] = "set it to a string"

    @property
    def _all_checks(self) -> tuple[Check, ...]:
        return ((READ_AS_TEXT_BY_HELM,) if self.dns_label else ()) + self.checks

    def parse(self, value: object, fix: str) -> str:
        if is_number(value):
            raise Invalid(f"expected a string, got {type_name(value)}",
                          f'quote it so YAML keeps it as written, e.g. "{value}"')
        if not isinstance(value, str) or not value.strip():
            raise Invalid(f"expected a non-empty string, got {type_name(value)}", fix)
        if self.choices is not None and value not in self.choices:
            options = ", ".join(self.choices)
            suggestion = did_you_mean(value, self.choices)
            raise Invalid(f"must be one of {options}", f"{suggestion} (allowed: {options})" if suggestion != "remove it"
                          else f"use one of the allowed values (allowed: {options})")
        if self.dns_label and (len(value) > self.max_length or not DNS_LABEL.fullmatch(value)):
            too_long = f" of at most {self.max_length} characters" if len(value) > self.max_length else ""
            raise Invalid(f"is not a DNS-1123 label{too_long}", DNS_LABEL_FIX.format(limit=self.max_length))
        failed = failed_check(self._all_checks, value)
        if failed is not None:
            raise Invalid(failed.problem, failed.fix)
        return value

    def schema(self) -> dict[str, Any]:
        schema = string_schema(*(check.schema() for check in self._all_checks))
        if self.choices is not None:
            schema["enum"] = list(self.choices)
        if self.dns_label:
            schema["allOf"].append({"pattern": DNS_LABEL.pattern})
            schema["maxLength"] = self.max_length
        return schema

    def shown(self) -> str:
        if self.choices is not None:
            return " | ".join(f"`{choice}`" for choice in self.choices)
        if self.dns_label:
            return "DNS-1123 label" + (f" of at most {self.max_length} characters" if self.max_length != 63 else "")
        return self.form or "string"


@dataclass(frozen=True)
class Boolean:
    fix: ClassVar[str] = "set it to true or false"

    def parse(self, value: object, fix: str) -> bool:
        if not isinstance(value, bool):
            raise Invalid(f"expected true or false, got {type_name(value)}", fix)
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    def shown(self) -> str:
        return "boolean"


@dataclass(frozen=True)
class Number:
    """A real number; with ``unlimited``, -1 is allowed too and means no bound."""

    minimum: Optional[float] = None
    unlimited: bool = False
    maximum: Optional[float] = None

    @property
    def bounds(self) -> str:
        limits = [f">= {self.minimum:g}"] if self.minimum is not None else []
        limits += [f"<= {self.maximum:g}"] if self.maximum is not None else []
        parts = (["-1 (unlimited)"] if self.unlimited else []) + ([" and ".join(limits)] if limits else [])
        return " or ".join(parts) if parts else "(any finite number)"

    @property
    def fix(self) -> str:
        return f"set it to a number {self.bounds}"

    def parse(self, value: object, fix: str) -> float:
        if not is_number(value):
            raise Invalid(f"expected a number of at most {LARGEST_NUMBER:g}, got {type_name(value)}", fix)
        if self.unlimited and value == -1:
            return value
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            raise Invalid(f"must be {self.bounds}", fix)
        return value

    def schema(self) -> dict[str, Any]:
        bounded = {"type": "number", "minimum": self.minimum if self.minimum is not None else -LARGEST_NUMBER,
                   "maximum": self.maximum if self.maximum is not None else LARGEST_NUMBER}
        return {"anyOf": [{"const": -1}, bounded]} if self.unlimited else bounded

    def shown(self) -> str:
        shown = "number" + (f" ≥ {self.minimum:g}" if self.minimum is not None else "")
        shown += f" ≤ {self.maximum:g}" if self.maximum is not None else ""
        return shown + (", or `-1`" if self.unlimited else "")


@dataclass(frozen=True)
class Integer:
    minimum: Optional[int] = None
    maximum: Optional[int] = None
    # The only values taken, where a service takes a fixed set rather than a range.
    choices: Optional[tuple[int, ...]] = None

    @property
    def bounds(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f"between {self.minimum} and {self.maximum}"
        if self.minimum is not None:
            return f">= {self.minimum}"
        return f"<= {self.maximum}" if self.maximum is not None else ""

    @property
    def fix(self) -> str:
        if self.choices is not None:
            return f"set it to one of {self._listed}"
        return f"set it to a whole number {self.bounds}"

    @property
    def _listed(self) -> str:
        return ", ".join(map(str, self.choices or ()))

    def parse(self, value: object, fix: str) -> int:
        if isinstance(value, float) and value.is_integer() and math.isfinite(value):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) > LARGEST_NUMBER:
            raise Invalid(f"expected a whole number of at most {LARGEST_NUMBER:g}, got {type_name(value)}", fix)
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            raise Invalid(f"must be {self.bounds}", fix)
        if self.choices is not None and value not in self.choices:
            nearest = sorted(self.choices, key=lambda choice: (abs(choice - value), choice))[:2]
            raise Invalid(f"must be one of {self._listed}",
                          f"use one of those, e.g. {' or '.join(map(str, sorted(nearest)))}")
        return value

    def schema(self) -> dict[str, Any]:
        if self.choices is not None:
            return {"type": "integer", "enum": list(self.choices)}
        return {"type": "integer", "minimum": self.minimum if self.minimum is not None else -LARGEST_NUMBER,
                "maximum": self.maximum if self.maximum is not None else LARGEST_NUMBER}

    def shown(self) -> str:
        if self.choices is not None:
            return f"integer, one of {self._listed}"
        if self.minimum is not None and self.maximum is not None:
            return f"integer {self.minimum}–{self.maximum}"
        if self.minimum is not None:
            return f"integer ≥ {self.minimum}"
        return f"integer ≤ {self.maximum}" if self.maximum is not None else "integer"


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes quantity (``500m``, ``4``, ``16Gi``); a plain non-negative number is read as one."""

    fix: ClassVar[str] = "use a value such as 500m, 4, 512Mi or 16Gi"

    def parse(self, value: object, fix: str) -> str:
        if is_number(value) and value >= 0:
            value = str(value)  # every digit: "{:g}" keeps six
        if not isinstance(value, str) or not QUANTITY.fullmatch(value):
            raise Invalid("is not a Kubernetes quantity", fix)
        if quantity_value(value) > LARGEST_QUANTITY:
            raise Invalid(f"is larger than a Kubernetes quantity holds ({LARGEST_QUANTITY})", fix)
        return value

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [{"type": "string", "pattern": QUANTITY.pattern},
                          {"type": "number", "minimum": 0, "maximum": LARGEST_NUMBER}]}

    def shown(self) -> str:
        return "quantity"


QUANTITY_SUFFIXES = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
                     "P": 1e15, "E": 1e18,
                     "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}


def quantity_value(quantity: str) -> float:
    """A validated Kubernetes quantity (``500m``, ``16``, ``64Gi``, ``1e9``) as a plain number of base units."""
    match = QUANTITY.fullmatch(quantity)
    assert match is not None, quantity
    number, suffix = Decimal(match.group(1)), match.group(3) or ""
    if suffix in QUANTITY_SUFFIXES:
        return float(number) * QUANTITY_SUFFIXES[suffix]
    exponent = int(suffix[1:])
    # An exponent can have any number of digits: decide the ones beyond any float before scaling.
    magnitude = number.adjusted() + exponent
    if number and magnitude > BEYOND_FLOATS:
        return math.inf
    return 0.0 if not number or magnitude < -BEYOND_FLOATS else float(number.scaleb(exponent))
