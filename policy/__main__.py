"""CrossGuard entry point: ``pulumi preview --policy-pack policy`` (or ``pulumi up``).

The Pulumi CLI starts a Python policy pack as ``python -u -m pulumi.policy <engine> .`` with the
pack's directory as working directory; that runs this file with ``runpy.run_path(".")``, which
puts policy/ on sys.path with no parent package (``__package__`` is empty). So the sibling
modules are imported as top-level modules then, and as ``policy.*`` when this package is
imported from the project root (tests, ``python -m policy.check``, ``python -m policy``).

Constructing the PolicyPack starts the analyzer's gRPC server and blocks: never import this
module in tests (they use ``pack.build_policies()`` and ``rules`` directly).
"""

import os
import sys

from pulumi_policy import PolicyPack

if __package__:  # `python -m policy` from the project root
    from .pack import PACK_DESCRIPTION, PACK_NAME, build_policies
else:  # the Pulumi CLI (cwd=policy/); also `python policy/__main__.py`
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from pack import PACK_DESCRIPTION, PACK_NAME, build_policies

PolicyPack(name=PACK_NAME, description=PACK_DESCRIPTION, policies=build_policies())
