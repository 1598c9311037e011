"""The one-off command docs/observability-charging.md gives for putting the site's tags on the EBS volumes of claims
made before the EBS CSI driver had them, run as written with ``bash``, real ``jq`` and ``xargs``, and stand-ins for
``kubectl`` (answering the host's PersistentVolumes) and ``aws`` (recording each call): the driver's volumes, and only
they, are tagged, each once, in calls EC2 takes (CreateTags: up to 1,000 resource IDs a call)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "observability-charging.md"
TAGS = ["--tags", "Key=gpu-tenancy/stack,Value=eks"]
EC2_MOST_IDS = 1000


def retag_command() -> str:
    blocks = re.findall(r"```\n(.*?)```", DOC.read_text(), re.S)
    [command] = [block for block in blocks if "aws ec2 create-tags" in block]
    return command


def volume(name: str, source: dict) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], **source}}


def ebs(name: str, handle: str) -> dict:
    return volume(name, {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": handle, "fsType": "ext4"}})


def run_with(volumes: list[dict], tmp_path: Path) -> list[list[str]]:
    """The calls ``aws`` gets when ``kubectl`` answers ``volumes``."""
    if shutil.which("jq") is None:
        pytest.skip("jq is not on $PATH (Debian package jq; .ci/run installs it)")
    tools = tmp_path / "bin"
    tools.mkdir(parents=True)
    listing = tmp_path / "pv.json"
    listing.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": volumes}))
    calls = tmp_path / "calls.jsonl"
    stand_ins = {
        "kubectl": f"import sys\nassert sys.argv[1:] == ['get', 'pv', '-o', 'json'], sys.argv\n"
                   f"sys.stdout.write(open({str(listing)!r}).read())\n",
        "aws": f"import json, sys\nopen({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n",
    }
    for name, body in stand_ins.items():
        path = tools / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", retag_command()], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def test_the_ebs_csi_drivers_volumes_and_only_they_are_tagged(tmp_path):
    volumes = [ebs("pvc-a", "vol-0aaa"), volume("local", {"hostPath": {"path": "/data"}}),
               volume("shared", {"csi": {"driver": "efs.csi.aws.com", "volumeHandle": "fs-0123::fsap-1"}}),
               ebs("pvc-b", "vol-0bbb")]
    assert run_with(volumes, tmp_path) == [
        ["ec2", "create-tags", "--region", "us-east-2", *TAGS, "--resources", "vol-0aaa", "vol-0bbb"]]


def test_nothing_is_called_without_an_ebs_volume(tmp_path):
    assert run_with([volume("local", {"hostPath": {"path": "/data"}})], tmp_path) == []
    assert run_with([], tmp_path / "empty") == []


def test_many_volumes_go_in_calls_ec2_takes_each_volume_once(tmp_path):
    handles = [f"vol-{index:017x}" for index in range(2_500)]
    calls = run_with([ebs(f"pvc-{index}", handle) for index, handle in enumerate(handles)], tmp_path)
    prefix = ["ec2", "create-tags", "--region", "us-east-2", *TAGS, "--resources"]
    assert all(call[:len(prefix)] == prefix and 0 < len(call) - len(prefix) <= EC2_MOST_IDS for call in calls)
    assert [handle for call in calls for handle in call[len(prefix):]] == handles
