"""The device plugin's named GPU sharing profiles, rendered from validated settings.

Each profile becomes one key of the time-slicing ConfigMap. The key carries a short hash of
its content because the device plugin only reloads when a node's selected key (or the
``default`` key) changes, not when the content behind a key is edited: a new hash rolls a
content change out to every node that uses the profile.
"""

from __future__ import annotations

import hashlib

import yaml

from config.model import TimeSlicing

EXCLUSIVE = "exclusive"
TIME_SLICED = "time-sliced"
PROFILES = (EXCLUSIVE, TIME_SLICED)


def profile_documents(time_slicing: TimeSlicing) -> dict[str, dict]:
    """Profile name -> device-plugin config document."""
    return {
        # No sharing: the right choice where KAI splits GPUs itself with reservation pods.
        EXCLUSIVE: {"version": "v1"},
        TIME_SLICED: {
            "version": "v1",
            "sharing": {
                "timeSlicing": {
                    # Keep advertising nvidia.com/gpu so the nvidia.com/gpu taint toleration and
                    # existing requests keep matching.
                    "renameByDefault": False,
                    "failRequestsGreaterThanOne": True,
                    "resources": [{"name": "nvidia.com/gpu", "replicas": time_slicing.replicas}],
                }
            },
        },
    }


def _render(document: dict) -> str:
    return yaml.safe_dump(document, sort_keys=True, default_flow_style=False)


def profile_keys(time_slicing: TimeSlicing) -> dict[str, str]:
    """Profile name -> ConfigMap key (``<profile>-<hash8>``)."""
    return {
        name: f"{name}-{hashlib.sha256(_render(document).encode()).hexdigest()[:8]}"
        for name, document in profile_documents(time_slicing).items()
    }


def config_map_data(time_slicing: TimeSlicing) -> dict[str, str]:
    """ConfigMap ``data``: each profile under its hashed key and under its plain name.

    The program only ever selects hashed keys. The plain names are for nodes labelled by hand
    (MicroK8s, existing clusters): a label naming a key that is missing from the ConfigMap breaks
    the device plugin's config manager, and a plain name survives a content change, at the price
    of that node only picking the change up when its device plugin restarts.
    """
    keys = profile_keys(time_slicing)
    data = {}
    for name, document in sorted(profile_documents(time_slicing).items()):
        data[keys[name]] = data[name] = _render(document)
    return dict(sorted(data.items()))


def default_key(time_slicing: TimeSlicing) -> str:
    return profile_keys(time_slicing)[time_slicing.default_profile]
