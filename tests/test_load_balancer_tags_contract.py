"""What a team's load balancer on EKS is tagged with, read from the AWS cloud provider at every mirrored tag: the
Service's host namespace and name (the team's namespace, which vCluster's syncer writes) and the cloud provider's
cluster tag, on both kinds it creates (classic and network load balancers). The site's tags cannot reach it: the
only other tags are the Service's ``additional-resource-tags`` annotation, which is the platform's key, refused to the
teams (config/load_balancer_keys.py). docs/observability-charging.md says so."""

from __future__ import annotations

import re

import pytest

from config.load_balancer_keys import AWS_PLATFORM_KEYS
from tests.conftest import MIRRORED_TAGS, git

CLOUD_PROVIDER_AWS = "kubernetes/cloud-provider-aws"
PROVIDER = "pkg/providers/v1"
ADDITIONAL_TAGS = "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"


def show(tag: str, name: str) -> str:
    return git(CLOUD_PROVIDER_AWS, "show", f"{tag}:{PROVIDER}/{name}")


@pytest.mark.parametrize("tag", MIRRORED_TAGS[CLOUD_PROVIDER_AWS])
def test_each_load_balancer_is_tagged_with_the_services_namespace_and_the_cluster(tag):
    constants = show(tag, "aws.go")
    assert 'const TagNameKubernetesService = "kubernetes.io/service-name"' in constants
    assert f'ServiceAnnotationLoadBalancerAdditionalTags = "{ADDITIONAL_TAGS}"' in constants
    creating = show(tag, "aws_loadbalancer.go")
    # The classic and the network load balancer: the annotation's tags, the Service's name, then the cluster's.
    tagged = re.findall(r"tags := getKeyValuePropertiesFromAnnotation\(annotations, "
                        r"ServiceAnnotationLoadBalancerAdditionalTags\)\s*(?://.*\s*)*"
                        r"tags\[TagNameKubernetesService\] = namespacedName\.String\(\)\s*"
                        r"tags = c\.tagging\.buildTags\(ResourceLifecycleOwned, tags\)", creating)
    assert len(tagged) == 2, f"cloud-provider-aws {tag}: the load balancers are tagged another way"
    tagging = show(tag, "tags.go")
    assert 'const TagNameKubernetesClusterPrefix = "kubernetes.io/cluster/"' in tagging
    assert "tags[t.clusterTagKey()] = string(lifecycle)" in tagging


def test_the_annotation_that_would_add_tags_is_the_platforms():
    assert ADDITIONAL_TAGS in AWS_PLATFORM_KEYS
