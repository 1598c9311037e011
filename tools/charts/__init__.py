"""Helm charts offline: their references (``refs``), the local cache and the contracts a cached chart
carries (``cache``), in-process rendering (``render``). ``python -m tools.charts`` fills the cache (``cli``)."""
