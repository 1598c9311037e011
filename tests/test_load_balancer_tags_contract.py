"""What a team's load balancer on EKS is tagged with, read from the AWS cloud provider at every mirrored tag: the
Service's host namespace and name (the team's namespace, which vCluster's syncer writes) and the cloud provider's
cluster tag, on both kinds it creates (classic and network load balancers), and the tags of the Service's
``additional-resource-tags`` annotation, which is the platform's to write (config/load_balancer_tags.py): the
provider's own parser, built with Go, reads the platform's value as the platform's tags. docs/observability-charging.md
says so, and says which load balancers get them when."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from config.load_balancer_keys import AWS_ADDITIONAL_TAGS, AWS_PLATFORM_KEYS
from config.load_balancer_tags import tags_annotation
from config.model_host import STACK_TAG, TEAM_TAG
from tests.conftest import MIRRORED_TAGS, eks_config, git, go_function
from tests.go_toolchain import cache_folder, go_binary, offline_environment
from tests.tenant_sim import platform_of

CLOUD_PROVIDER_AWS = "kubernetes/cloud-provider-aws"
PROVIDER = "pkg/providers/v1"
ADDITIONAL_TAGS = "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"
PARSER = "getKeyValuePropertiesFromAnnotation"


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


def test_the_annotation_is_the_one_the_platform_writes():
    assert AWS_ADDITIONAL_TAGS == ADDITIONAL_TAGS


def provider_reads(tag: str, values: list[str], tmp_path) -> list[dict]:
    """Each of ``values`` as the provider's own parser at ``tag`` turns the annotation into tags (built with Go)."""
    parser = go_function(show(tag, "aws_loadbalancer.go"), PARSER) + "\n}\n"
    (tmp_path / "go.mod").write_text("module parse\n\ngo 1.22\n")
    (tmp_path / "main.go").write_text(
        'package main\n\nimport (\n\t"encoding/json"\n\t"os"\n\t"strings"\n)\n' + parser +
        "\nfunc main() {\n\tvar values []string\n\tjson.NewDecoder(os.Stdin).Decode(&values)\n"
        "\tread := []map[string]string{}\n\tfor _, value := range values {\n"
        f'\t\tread = append(read, {PARSER}(map[string]string{{"a": value}}, "a"))\n'
        "\t}\n\tjson.NewEncoder(os.Stdout).Encode(read)\n}\n")
    done = subprocess.run([go_binary(), "run", "."], cwd=tmp_path, input=json.dumps(values), capture_output=True,
                          text=True, env=offline_environment(cache_folder(), "mod"))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[CLOUD_PROVIDER_AWS])
def test_the_provider_reads_the_platforms_value_as_the_platforms_tags(tag, tmp_path):
    config = eks_config()
    config["gpu-tenancy:vcluster"]["services"] = {"loadBalancers": 1}
    config["gpu-tenancy:cluster"]["eks"]["tags"] = {"cost-center": "ml platform", "owner": "ana@example.com",
                                                    "empty": "", "path": "a/b:c+d@e.f_g-h"}
    tags = [team.vcluster.services.load_balancer_tags for team in platform_of(config).teams]
    assert all(STACK_TAG == t[0][0] and TEAM_TAG == t[-1][0] for t in tags)
    # The value a site tag with '=' would give, which the config refuses (config/load_balancer_tags.py).
    cut = tags_annotation([(STACK_TAG, "eks"), ("billing", "code=42")])
    read = provider_reads(tag, [tags_annotation(t) for t in tags] + [cut], tmp_path)
    assert read[:-1] == [dict(t) for t in tags]
    assert read[-1] == {STACK_TAG: "eks", "billing": "code"}


@pytest.mark.parametrize("tag", MIRRORED_TAGS[CLOUD_PROVIDER_AWS])
def test_which_load_balancers_get_the_tags_and_when(tag):
    """As docs/observability-charging.md says: a classic load balancer when created and at each later sync, its
    security group when created from v1.35; a network load balancer only when created."""
    creating = show(tag, "aws_loadbalancer.go")
    classic = go_function(creating, "(c *Cloud) ensureLoadBalancer")
    existing = classic[classic.index("} else {"):]
    assert re.search(rf"tags := {PARSER}\(annotations, ServiceAnnotationLoadBalancerAdditionalTags\)\s*"
                     r"if len\(tags\) > 0 \{\s*err := c\.addLoadBalancerTags\(ctx, loadBalancerName, tags\)",
                     existing), f"cloud-provider-aws {tag}: an existing classic load balancer is tagged another way"
    network = go_function(creating, "(c *Cloud) ensureLoadBalancerv2")
    created_at = network.index("if loadBalancer == nil {")
    assert "AddTags" not in network and "addLoadBalancerTags" not in network
    assert network.index(f"{PARSER}(annotations, ServiceAnnotationLoadBalancerAdditionalTags)") < created_at
    security_group = re.search(rf"c\.createSecurityGroup\([^\n]*{PARSER}\(annotations, "
                               r"ServiceAnnotationLoadBalancerAdditionalTags\)\)", show(tag, "aws.go"))
    minor = int(tag.split(".")[1])
    assert bool(security_group) == (minor >= 35), f"cloud-provider-aws {tag}: the security group's tags moved"
