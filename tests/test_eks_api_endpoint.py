"""Who reaches an EKS site's API server (cluster.eks.apiEndpoint): what the cluster is given, what is refused before
anything is registered, and what the site's reviewer is told."""

from __future__ import annotations

import pytest

from config import ConfigError, load_platform
from config.secrets import SECRET_KEYS
from tests.conftest import eks_config, run
from tools.offline.recording import ProgramRun
from tools.offline.mockrun import run_program

KEY = "cluster.eks.apiEndpoint"


def _with_endpoint(endpoint: dict, **eks: object) -> dict:
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"].update(apiEndpoint=endpoint, **eks)
    return config


def _loaded(config: dict):
    return load_platform({key.removeprefix("gpu-tenancy:"): value for key, value in config.items()},
                         placeholders=SECRET_KEYS)


def _cluster_inputs(program: ProgramRun) -> dict:
    return program.of_type("eks:index:Cluster")[0].inputs


def _refused(config: dict) -> ConfigError:
    record = ProgramRun()
    with pytest.raises(ConfigError) as error:
        run_program(config, stack="test", record=record)
    assert record.resources == [], "a refused site registers nothing"
    return error.value


def test_by_default_both_endpoints_are_on_and_the_reviewer_is_told_the_public_one_answers_everyone(eks_run):
    cluster = _cluster_inputs(eks_run)
    assert cluster["endpointPublicAccess"] is True
    assert cluster["publicAccessCidrs"] == ["0.0.0.0/0"]
    # The nodes reach the API server inside the VPC rather than through the NAT gateway.
    assert cluster["endpointPrivateAccess"] is True
    [note] = [note for note in eks_run.notes if note.startswith(KEY)]
    assert "every address on the internet" in note and f"{KEY}.publicAccessCidrs" in note


def test_a_listed_public_endpoint_is_given_the_list_and_says_where_pulumi_must_run():
    program = run(_with_endpoint({"publicAccessCidrs": ["203.0.113.0/24", "198.51.100.7/32"]}))
    cluster = _cluster_inputs(program)
    assert cluster["publicAccessCidrs"] == ["203.0.113.0/24", "198.51.100.7/32"]
    assert cluster["endpointPrivateAccess"] is True
    [note] = [note for note in program.notes if note.startswith(KEY)]
    assert "203.0.113.0/24, 198.51.100.7/32 only" in note and "`pulumi up`" in note
    assert not [warning for warning in program.warnings if KEY in warning]


def test_a_private_only_endpoint_sends_no_address_list_and_says_pulumi_runs_in_the_vpc():
    program = run(_with_endpoint({"publicAccess": False}))
    cluster = _cluster_inputs(program)
    assert cluster["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in cluster
    assert cluster["endpointPrivateAccess"] is True
    [note] = [note for note in program.notes if note.startswith(KEY)]
    assert "inside the VPC only" in note and "access.exposure: none" in note


def test_a_private_only_endpoint_deployed_from_github_hosted_runners_is_warned():
    # A trial site: new_site and the CI matrix sent it to GitHub-hosted runners, which never reach the VPC.
    [warning] = [warning for warning in run(_with_endpoint({"publicAccess": False})).warnings if KEY in warning]
    assert "ci.runner is not set" in warning and "self-hosted runner in the VPC" in warning
    config = _with_endpoint({"publicAccess": False})
    config["gpu-tenancy:ci"] = {"runner": ["self-hosted", "vpc"]}
    assert not [warning for warning in run(config).warnings if KEY in warning]
    listed = run(_with_endpoint({"publicAccessCidrs": ["203.0.113.0/24"]}))
    [note] = [note for note in listed.notes if note.startswith(KEY)]
    assert "so must CI's runner" in note and "set ci.runner" in note


def test_a_cluster_with_neither_endpoint_is_refused_naming_the_fix():
    [issue] = _refused(_with_endpoint({"publicAccess": False, "privateAccess": False})).issues
    assert issue.key == f"{KEY}.privateAccess"
    assert "no API server endpoint" in issue.problem and issue.fix == f"set {KEY}.privateAccess: true"


def test_addresses_for_a_public_endpoint_that_is_off_are_refused():
    [issue] = _refused(_with_endpoint({"publicAccess": False, "publicAccessCidrs": ["203.0.113.0/24"]})).issues
    assert issue.key == f"{KEY}.publicAccessCidrs" and "publicAccess: false" in issue.problem


def test_a_public_only_list_on_the_vpc_the_program_creates_is_refused_since_its_nat_address_is_not_known_yet():
    [issue] = _refused(_with_endpoint({"privateAccess": False, "publicAccessCidrs": ["203.0.113.0/24"]})).issues
    assert issue.key == f"{KEY}.publicAccessCidrs" and "NAT gateway" in issue.problem
    assert issue.fix == f"set {KEY}.privateAccess: true"


def test_a_public_only_endpoint_open_to_everyone_keeps_working_without_the_private_one():
    program = run(_with_endpoint({"privateAccess": False}))
    assert _cluster_inputs(program)["endpointPrivateAccess"] is False
    assert not [warning for warning in program.warnings if KEY in warning]


def test_a_public_only_list_on_an_existing_vpc_is_warned_to_hold_its_nat_gateways():
    config = _with_endpoint({"privateAccess": False, "publicAccessCidrs": ["203.0.113.0/24"]},
                            vpcId="vpc-123", privateSubnetIds=["subnet-a", "subnet-b"])
    program = run(config)
    assert _cluster_inputs(program)["publicAccessCidrs"] == ["203.0.113.0/24"]
    [warning] = [warning for warning in program.warnings if KEY in warning]
    assert "vpc-123" in warning and "NAT gateways" in warning and f"{KEY}.privateAccess: true" in warning


@pytest.mark.parametrize("block, problem, fix", [
    ("203.0.113.7", "not a network block", "203.0.113.7/32"),
    ("203.0.113.7/24", "bits set past its /24 prefix", "write the network's own address: 203.0.113.0/24"),
    ("2001:db8::/32", "IPv6 block", "IPv4 blocks only"),
    ("203.0.113.300/32", "no valid address", "203.0.113.0/24"),
    ("office", "not a network block", "203.0.113.0/24"),
])
def test_each_listed_block_is_checked_and_named_by_its_place_in_the_list(block, problem, fix):
    config = _with_endpoint({"publicAccessCidrs": ["198.51.100.0/24", block]})
    with pytest.raises(ConfigError) as error:
        _loaded(config)
    [issue] = error.value.issues
    assert issue.key == f"{KEY}.publicAccessCidrs[1]" and issue.value == block
    assert problem in issue.problem and fix in issue.fix


def test_an_empty_address_list_is_refused_rather_than_read_as_everyone():
    with pytest.raises(ConfigError) as error:
        _loaded(_with_endpoint({"publicAccessCidrs": []}))
    assert error.value.keys == [f"{KEY}.publicAccessCidrs"]


@pytest.mark.parametrize("block", ["office", "10.0.0.0/40", "10.0.0.1"])
def test_load_balancer_source_ranges_are_network_blocks_too(block):
    config = eks_config()
    config["gpu-tenancy:vcluster"]["access"] = {"exposure": "loadBalancer", "domain": "gpu.example.com",
                                                "loadBalancerSourceRanges": ["203.0.113.0/24", block]}
    with pytest.raises(ConfigError) as error:
        _loaded(config)
    assert error.value.keys == ["vcluster.access.loadBalancerSourceRanges[1]"]


def test_load_balancer_source_ranges_take_ipv6_and_addresses_inside_a_block():
    config = eks_config()
    ranges = ["2001:db8::/32", "203.0.113.7/24"]
    config["gpu-tenancy:vcluster"]["access"] = {"exposure": "loadBalancer", "domain": "gpu.example.com",
                                                "loadBalancerSourceRanges": ranges}
    platform = _loaded(config)
    assert all(team.vcluster.access.load_balancer_source_ranges == tuple(ranges) for team in platform.teams)
