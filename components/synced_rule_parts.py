"""The pieces the synced-objects policy's rules are built of (components/synced_objects_admission.py): one policy
judges every kind the syncer writes, so each rule says which kinds it judges."""

from __future__ import annotations

from components.admission_metadata import refusal

# A dotted IPv4 address in its one canonical form (RE2, as CEL's ``matches``; backslashes doubled for the CEL
# string): each octet 0-255 without a leading zero. API servers without strict IP validation read "010.0.0.1"
# as 10.0.0.1, which the non-public prefixes (synced_objects_admission.py ipv4_pattern) would not match.
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
CANONICAL_IPV4 = f"^{_OCTET}(\\\\.{_OCTET}){{3}}$"


def meta_of(obj: str, field: str) -> str:
    return f"(has({obj}.metadata.{field}) ? {obj}.metadata.{field} : {{}})"


def absent(field: str) -> str:
    return f"(!has(object.spec.{field}) || object.spec.{field} == '')"


def kind_rule(name: str, kinds: tuple[str, ...], expression: str, problem: str, fix: str) -> dict:
    """A refusal that judges only objects of ``kinds`` (one policy covers every kind the syncer writes)."""
    applies = " || ".join(f"object.kind == '{kind}'" for kind in kinds)
    return refusal(name, f"!({applies}) || ({expression})", problem, fix)
