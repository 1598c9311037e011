"""The key type of network blocks (CIDR notation), which ``config.key_types`` has for every other kind of value.

A block is read as ``ipaddress`` reads it, after the shape the JSON Schema checks: an address the schema cannot
judge (``203.0.113.300/32``) is the loader's to refuse (config/schema.py LOADER_ONLY).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from config.key_collections import StringList
from config.key_types import Invalid


# A network block's shape (an address of digits, dots, hex and colons, then a prefix length), as the schema checks it.
NETWORK_SHAPE = r"[0-9A-Fa-f:.]+/[0-9]{1,3}"
IPV4_NETWORK_SHAPE = r"[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}"


@dataclass(frozen=True)
class NetworkList:
    """Network blocks in CIDR notation (``203.0.113.0/24``), each as ``ipaddress`` reads it. ``ipv4_only`` refuses
    IPv6 blocks; ``exact`` a block whose address has bits set past its prefix (AWS names a block by its network
    address; Kubernetes reads such a block as the network holding it)."""

    non_empty: bool = False
    ipv4_only: bool = False
    exact: bool = False
    fix: ClassVar[str] = "write it as a list of network blocks, e.g. [203.0.113.0/24]"

    @property
    def shape(self) -> str:
        return IPV4_NETWORK_SHAPE if self.ipv4_only else NETWORK_SHAPE

    def parse(self, value: object, fix: str) -> tuple[str, ...]:
        blocks = StringList(non_empty=self.non_empty).parse(value, fix)
        for index, block in enumerate(blocks):
            entry = {"entry": f"[{index}]", "value": block}
            if self.ipv4_only and re.fullmatch(NETWORK_SHAPE, block) and ":" in block:
                raise Invalid("is an IPv6 block, which this IPv4 setting cannot hold", "list IPv4 blocks only",
                              **entry)
            if not re.fullmatch(self.shape, block):
                raise Invalid("is not a network block in CIDR notation", "write a block such as 203.0.113.0/24 (a "
                              "single address as 203.0.113.7/32)", **entry)
            try:
                network = ipaddress.ip_network(block, strict=False)
            except ValueError as error:
                raise Invalid(f"holds no valid address and prefix length ({error})",
                              "write a block such as 203.0.113.0/24", **entry) from None
            if self.exact and block != str(network):
                raise Invalid(f"has bits set past its /{network.prefixlen} prefix",
                              f"write the network's own address: {network}", **entry)
        return blocks

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "string", "pattern": f"^(?:{self.shape})$"},
                **({"minItems": 1} if self.non_empty else {})}

    def shown(self) -> str:
        return ("non-empty " if self.non_empty else "") + f"list of {'IPv4 ' if self.ipv4_only else ''}CIDRs"


def is_ip_address(value: str) -> bool:
    """One IPv4 or IPv6 address, as ``ipaddress`` reads it."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
