"""Every AWS resource of an EKS site carries the stack's name (``gpu-tenancy/stack``) and the site's own tags
(``cluster.eks.tags``): what the program creates, as the AWS provider's default tags, the nodes' instances and
volumes, which EKS starts from the node groups' launch templates, through those templates, and the teams' volumes,
which the EBS CSI driver creates, through its add-on's configuration. The account's bill splits by site. Keys and
values are held to AWS's rules before anything is registered."""

from __future__ import annotations

import json

import pytest

from config import ConfigError
from config.model_host import MAX_SITE_TAGS, STACK_TAG
from tests.conftest import eks_config, run

KEY = "cluster.eks.tags"


def default_tags(program) -> dict:
    [provider] = program.of_type("pulumi:providers:aws")
    return json.loads(provider.inputs["defaultTags"])["tags"]


def with_tags(tags) -> dict:
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["tags"] = tags
    return config


def test_every_aws_resource_is_created_through_the_one_provider_that_tags_it_with_the_stack(eks_run):
    [provider] = eks_run.of_type("pulumi:providers:aws")
    assert default_tags(eks_run) == {STACK_TAG: "eks"}
    aws_resources = [resource for resource in eks_run.resources if resource.type.startswith("aws:")]
    assert aws_resources and all(resource.provider == provider.urn for resource in aws_resources)


def test_the_nodes_instances_and_volumes_carry_the_same_tags_through_their_launch_templates():
    program = run(with_tags({"cost-center": "ml-platform"}), stack="espoo")
    templates = program.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert len(templates) == len(program.of_type("eks:index:ManagedNodeGroup")) == 2
    for template in templates:
        assert template.inputs["tagSpecifications"] == [
            {"resourceType": kind, "tags": {"cost-center": "ml-platform", STACK_TAG: "espoo"}}
            for kind in ("instance", "volume")]


def test_the_sites_tags_are_added_beside_the_stacks():
    program = run(with_tags({"cost-center": "ml-platform", "site": "lab east", "budget": 42}), stack="espoo")
    assert default_tags(program) == {"cost-center": "ml-platform", "site": "lab east", "budget": "42",
                                     STACK_TAG: "espoo"}


@pytest.mark.parametrize("tags, entry, problem", [
    ({"aws:createdBy": "me"}, "aws:createdBy", "is reserved"),
    ({"AWS:team": "x"}, "AWS:team", "is reserved"),
    ({STACK_TAG: "other"}, STACK_TAG, "is reserved"),
    ({"team#1": "x"}, "team#1", "is not an AWS tag key"),
    ({"k" * 129: "x"}, "k" * 129, "is not an AWS tag key"),
    ({"owner": "ana,bob"}, "owner", "is not an AWS tag value"),
    ({"owner": "v" * 257}, "owner", "is not an AWS tag value"),
    ({"owner": True}, "owner", "expected a string value"),
    ({"CSIVolumeName": "x"}, "CSIVolumeName", "reserved by the EBS CSI driver"),
    ({"kubernetes.io/cluster/lab": "owned"}, "kubernetes.io/cluster/lab", "reserved by the EBS CSI driver"),
    ({"ebs.csi.aws.com/cluster": "true"}, "ebs.csi.aws.com/cluster", "reserved by the EBS CSI driver"),
    ({"team=ml": "x"}, "team=ml", "holds '='"),
    ({" team": "ml"}, " team", "starts or ends with a space"),
    ({"team": "ml "}, "team", "starts or ends with a space"),
])
def test_a_tag_aws_would_refuse_or_the_program_sets_is_refused_naming_it(tags, entry, problem):
    with pytest.raises(ConfigError) as error:
        run(with_tags(tags))
    [issue] = error.value.issues
    assert issue.key == f"{KEY}.{entry}" and problem in issue.problem and issue.fix


def test_more_tags_than_a_resource_has_room_for_are_refused():
    with pytest.raises(ConfigError) as error:
        run(with_tags({f"tag-{index}": "x" for index in range(MAX_SITE_TAGS + 1)}))
    [issue] = error.value.issues
    assert issue.key == KEY and f"more than {MAX_SITE_TAGS}" in issue.problem


def test_an_empty_value_is_a_tag_aws_takes():
    assert default_tags(run(with_tags({"reviewed": ""})))["reviewed"] == ""


def test_the_teams_volumes_carry_the_same_tags_through_the_ebs_csi_add_on():
    program = run(with_tags({"cost-center": "ml-platform"}), stack="espoo")
    [addon] = program.of_type("aws:eks/addon:Addon")
    assert json.loads(addon.inputs["configurationValues"]) == {
        "controller": {"extraVolumeTags": {"cost-center": "ml-platform", STACK_TAG: "espoo"}}}
