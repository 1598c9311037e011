"""The JSON Schema of a stack file, derived from the key definitions (config/keys.py).

Every block becomes an object that allows its keys only and requires its required keys, every key its
type's schema (enums, patterns, bounds, version floors) with the key's description, and a block's
conditions become ``if``/``then`` (no ``eks`` block under kind microk8s). Rules that compare several
values (quotas fitting, names unique, a selector matching a node group) stay with the loader, which
runs anyway before anything is registered: ``LOADER_ONLY`` lists them, and the schema's ``$comment``.
"""

from __future__ import annotations

from typing import Any

from config.keys import REQUIRED
from config.load import STACK_CONFIG
from config.secrets import SECRETS
from config.vocabulary import OTHER_NAMESPACES, PROJECT

SCHEMA_ID = "https://gpu-tenancy.invalid/stack-config.schema.json"

# The rules the loader checks and a JSON Schema cannot state, each as (pattern of the key it names, words of
# its problem) -> why. The schema's $comment lists them; tests/test_schema_agreement.py proves they are
# exactly where schema and loader disagree on its corpus of sites.
LOADER_ONLY = {
    (r"organization\.resources\.gpu\.quota", "add up to"): "a sum over every team's quota",
    (r"teams\[\d+\]\.resources\.gpu\.quota", "unlimited guarantee cannot fit"): "compares a team's and the org's",
    (r".*\.limit", "below the quota"): "compares two values of one entry",
    (r".*\.limit", "caps a queue whose quota is -1"): "compares two values of one entry",
    (r"teams\[\d+\]\.(name|vclusterName|namespace)", "is already used by"): "uniqueness of one field across entries",
    (r"teams\[\d+\]\.name", "organization's queue name"): "compares a team's name with the org's",
    (r"teams\[\d+\]\.namespace", "is the namespace of"): "compares with namespaces other keys choose",
    (r"teams\[\d+\]\.vclusterName", "taken from teams"): "a default derived from teams[].name",
    (r"cluster\.eks\.(systemNodeGroup|gpuNodeGroups\[\d+\])\.desiredSize", "must lie between"):
        "minSize ≤ desiredSize ≤ maxSize orders three values",
    (r"cluster\.eks\.gpuNodeGroups\[\d+\]\.name", "duplicate node group name"): "uniqueness across entries",
    (r"cluster\.eks\.(vpcId|privateSubnetIds)", ""): "ties the VPC to its subnets",
    (r"cluster\.eks\.vpcCidr", "has no room"): "compares with availabilityZones",
    (r"cluster\.eks\.name", "node group's name prefix"): "the node group name AWS makes of it (the schema checks "
                                                            "the label only)",
    (r"cluster\.eks\.gpuNodeGroups\[\d+\]\.name", "node group name prefix"): "compares with cluster.eks.name",
    (r"(teams\[\d+\]\.)?vcluster\.resourceQuota\.(cpu|memory)", "at the default request"):
        "compares with resourceQuota.pods and the LimitRange's default request",
    (r"cluster\.eks\.vpcCidr", "valid IPv4 network block"): "host bits set (the schema checks the shape only)",
    (r"cluster\.eks\.vpcCidr", "is not inside"): "inside the private ranges (the schema checks the shape only)",
    (r"cluster\.eks\.gpuNodeGroups\[\d+\]\.labels", "sets "): "a label key inside a map the program fills",
    (r"cluster\.eks\.apiEndpoint\.privateAccess", "no API server endpoint"): "compares with publicAccess",
    (r"cluster\.eks\.apiEndpoint\.publicAccessCidrs", "publicAccess: false"): "compares with publicAccess",
    (r"cluster\.eks\.apiEndpoint\.publicAccessCidrs", "NAT gateway"):
        "compares with privateAccess and cluster.eks.vpcId",
    (r"(cluster\.eks\.apiEndpoint\.publicAccessCidrs|.*\.access\.loadBalancerSourceRanges)\[\d+\]",
     "no valid address"): "reads each block as an address and a prefix (the schema checks the shape only)",
    (r"cluster\.eks\.apiEndpoint\.publicAccessCidrs\[\d+\]", "bits set past"):
        "host bits set (the schema checks the shape only)",
    # These four a hand-written if/then could state; the schema's conditions come from one block's definitions.
    (r"gpuOperator\.mode", "MicroK8s addon only exists"): "ties it to cluster.kind, another block",
    (r"gpuOperator\.mode", "enableNvidiaAddon"): "ties it to cluster.microk8s, another block",
    (r"gpuOperator\.driverEnabled", "AL2023"): "ties it to cluster.kind, another block",
    (r"observability\.timeAwareFairness\.enabled", ""): "ties a nested key to observability's mode and URL",
    (r"observability\.namespace", "is the namespace of"): "compares with namespaces other keys choose",
    (r"observability\.controlPlaneMetrics", ""): "ties it to cluster.kind, another block",
    (r"(teams\[\d+\]\.)?vcluster\.nodeLabels", "selects no node pool"): "compares with the node groups' labels",
    (r"(teams\[\d+\]\.)?vcluster\.enforceTolerations", "tolerates none"): "compares with the node groups' taints",
    (r"teams\[\d+\]\.vcluster\.(alwaysPullImages|allowedRegistries)", "setting of the whole stack"):
        "the stack's and the teams' vcluster blocks are one definition; a team's may not hold this key",
    (r"backup\.region", "S3-compatible store"): "required with backup.endpoint (one block's keys tied by a value)",
    (r"cluster\.(microk8s|eks|kubeconfig)\.kubernetesVersion", "image volume"):
        "ties it to teams[].isolation.tier, another block",
}


def _shown(pattern: str) -> str:
    """A key pattern as the reference writes keys: ``teams[].name``."""
    return pattern.replace(r"\[\d+\]", "[]").replace(".*", "*").replace("\\", "")


def stack_file_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of ``Pulumi.<stack>.yaml``."""
    config: dict[str, Any] = {f"{PROJECT}:{key.name}": key.schema() for key in STACK_CONFIG.keys}
    config.update({f"{PROJECT}:{secret.name}": {
        "description": secret.description, "type": "object", "properties": {"secure": {"type": "string"}},
        "required": ["secure"], "additionalProperties": False} for secret in SECRETS})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"Pulumi.<stack>.yaml of {PROJECT}",
        "description": "Generated by python -m tools.docs.schema from the key definitions in config/; "
                       "see docs/config-reference.md.",
        "$comment": "Checked by the loader only: " + "; ".join(
            f"{_shown(pattern)} ({why})" for (pattern, _), why in LOADER_ONLY.items()) + ".",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": config,
                "patternProperties": {f"^({'|'.join(OTHER_NAMESPACES)}):": {}},
                "additionalProperties": False,
                "required": [f"{PROJECT}:{key.name}" for key in STACK_CONFIG.keys if key.default is REQUIRED],
            },
        },
    }
