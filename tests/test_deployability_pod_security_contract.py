"""The deployability check's Pod Security volume allowlist against k8s.io/pod-security-admission at the release of
every Kubernetes a site may run: restricted's allowed volume types are read from its restrictedVolumes check."""

from __future__ import annotations

import re

import pytest

from config import versions
from tests.conftest import MIRRORED_TAGS, git, go_function, mirrored_tag
from tools.deployability.pod_security import restricted_volume_types, violations

POD_SECURITY = "kubernetes/pod-security-admission"


def _json_name(go_field: str) -> str:
    """The JSON name of a VolumeSource field: ``EmptyDir`` -> ``emptyDir``, ``CSI`` -> ``csi``."""
    return go_field.lower() if go_field.isupper() else go_field[0].lower() + go_field[1:]


@pytest.mark.parametrize("tag", MIRRORED_TAGS[POD_SECURITY])
def test_restricted_takes_the_volume_types_pod_security_admission_takes(tag):
    tag = mirrored_tag(POD_SECURITY, tag)
    source = git(POD_SECURITY, "show", f"{tag}:policy/check_restrictedVolumes.go")
    check = go_function(source, "restrictedVolumes_1_0")
    # The switch's first case lists the allowed sources: `case volume.ConfigMap != nil, volume.CSI != nil, ...:`.
    allowed_case = check[check.index("case "):check.index(":", check.index("case "))]
    upstream = {_json_name(field) for field in re.findall(r"volume\.(\w+) != nil", allowed_case)}
    assert upstream >= {"configMap", "secret", "persistentVolumeClaim"}, allowed_case
    kubernetes = f"1.{tag.split('.')[1]}"
    assert restricted_volume_types(kubernetes) == upstream, kubernetes


def test_an_image_volume_is_refused_under_restricted_only_before_kubernetes_1_33():
    spec = {"volumes": [{"name": "lib", "image": {"reference": "docker.io/library/busybox:1.36"}}],
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "app", "image": "app", "securityContext": {
                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}
    assert [v.control for v in violations(spec, "restricted", kubernetes_version="1.32")] == ["Volume Types"]
    assert violations(spec, "restricted", kubernetes_version="1.33") == []
    assert violations(spec, "restricted", kubernetes_version=versions.EKS_KUBERNETES_VERSION) == []
    # Other types restricted never took stay refused at every version.
    spec["volumes"].append({"name": "share", "nfs": {"server": "nfs.example", "path": "/"}})
    assert [v.control for v in violations(spec, "restricted", kubernetes_version="1.36")] == ["Volume Types"]
