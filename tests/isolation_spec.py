"""The isolation site of issue 20 as raw stack config: one H100 pool split into MIG slices for two teams,
one memory-capped team and one exclusive team on an L40S pool."""

from __future__ import annotations

from tests.config_spec import eks_config


def isolation_config() -> dict:
    config = eks_config()
    config["cluster"]["eks"]["gpuNodeGroups"] = [
        # p5.48xlarge: 8 H100-80GB, each split 2 x 1g.10gb + 1 x 2g.20gb + 1 x 3g.40gb.
        {"name": "h100", "instanceTypes": ["p5.48xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1,
         "migConfig": "all-balanced"},
        # g6e.12xlarge: 4 L40S, no MIG.
        {"name": "l40s", "instanceTypes": ["g6e.12xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1},
    ]
    config["organization"]["resources"]["gpu"] = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    config["teams"] = [
        {"name": "team-llm", "resources": {"gpu": {"quota": 4, "limit": 8}},
         "isolation": {"tier": "mig", "migProfile": "1g.10gb", "nodePool": "h100"}},
        {"name": "team-vision", "resources": {"gpu": {"quota": 6, "limit": 12}},
         "isolation": {"tier": "mig", "migProfile": "3g.40gb", "nodePool": "h100"}},
        {"name": "team-nlp", "resources": {"gpu": {"quota": 1.5, "limit": 2}},
         "isolation": {"tier": "memory-capped", "nodePool": "l40s"}},
        {"name": "team-train", "resources": {"gpu": {"quota": 2, "limit": 2}},
         "isolation": {"tier": "exclusive", "nodePool": "l40s"}},
    ]
    return config


def prefixed(config: dict) -> dict:
    """Raw config as a stack file's ``config:`` block holds it (keys in the project's namespace)."""
    return {f"gpu-tenancy:{key}": value for key, value in config.items()}
