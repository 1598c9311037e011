"""What pulumi-eks' ``eks.Cluster`` hands the EKS cluster it creates (``nodejs/eks/cluster/cluster.ts``, the
``aws.eks.Cluster`` it constructs), read at the mirrored tag: the program's settings reach EKS only if they are passed
on as given. The control plane's log group is named after the cluster (``/aws/eks/<name>/cluster``), so the name
must be EKS's as the program states it, not one pulumi-eks makes up."""

from __future__ import annotations

import re

import pytest

from tests.conftest import MIRRORED_TAGS, git

EKS = "pulumi/pulumi-eks"
# eks.Cluster's inputs (as its Python SDK spells them, camelCase in the TypeScript) the program sets and relies on
# reaching the EKS cluster unchanged.
PASSED_ON = ("name", "enabledClusterLogTypes", "upgradePolicy", "version", "endpointPrivateAccess",
             "endpointPublicAccess")


def eks_cluster_arguments(tag: str) -> str:
    """The object literal pulumi-eks passes as the arguments of ``new aws.eks.Cluster``."""
    source = git(EKS, "show", f"{tag}:nodejs/eks/cluster/cluster.ts")
    start = source.index("new aws.eks.Cluster(")
    # The first brace opening a line: the resource's name before it is a template string with braces of its own.
    body = re.compile(r"^\s*\{", re.M).search(source, start).end() - 1
    depth = 0
    for index in range(body, len(source)):
        depth += {"{": 1, "}": -1}.get(source[index], 0)
        if depth == 0:
            return source[body:index + 1]
    raise AssertionError(f"pulumi-eks {tag}: the arguments of new aws.eks.Cluster do not end")


@pytest.mark.parametrize("tag", MIRRORED_TAGS[EKS])
@pytest.mark.parametrize("argument", PASSED_ON)
def test_eks_cluster_passes_the_programs_setting_to_the_eks_cluster_as_given(tag, argument):
    arguments = eks_cluster_arguments(tag)
    assert re.search(rf"^\s*{argument}: args\.{argument},$", arguments, re.M), (
        f"pulumi-eks {tag} no longer passes args.{argument} to aws.eks.Cluster as given")
