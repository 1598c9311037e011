"""The backup store's port, for the control plane and the restore pod, wherever the API server's rule does not
already open it to every address: a site that states its API server's addresses narrows that rule, even on the
store's port (a trial's existing cluster on 443 with two stated endpoints: no snapshot could reach S3)."""

from __future__ import annotations

import pytest

from components.tenant_network import tenant_network_policies
from ops.sites import platform_of
from tests.test_tenant_backup import pods
from tests.test_tenant_network import Target, kubeconfig_on_port, reaches

S3 = Target("S3", "52.95.110.1", 443)


def teams(api_server_addresses: list[str], networking: list[str], **kubeconfig):
    config = kubeconfig_on_port(443)
    config["gpu-tenancy:cluster"]["kubeconfig"].update(
        {"networking": networking, **({"apiServerAddresses": api_server_addresses} if api_server_addresses else {}),
         **kubeconfig})
    config["gpu-tenancy:backup"] = {"url": "s3://corp-backups/lab"}
    return platform_of(config, "site").teams


@pytest.mark.parametrize("networking, extra", [(["calico"], {}),
                                               (["aws-vpc-cni"], {"serviceRanges": ["10.100.0.0/16"]})])
def test_stated_api_server_addresses_on_the_stores_port_still_leave_the_store_reachable(networking, extra):
    for team in teams(["192.168.10.5/32", "192.168.10.6/32"], networking, **extra):
        policies = list(tenant_network_policies(team).values())
        for who, pod in pods(team).items():
            assert reaches(policies, pod, S3), who
            # As the store's rule reaches it: the public internet, not the cluster's own ranges.
            assert not reaches(policies, pod, Target("a private address", "10.1.0.7", 443)), who


def test_an_api_server_rule_open_everywhere_on_the_stores_port_adds_nothing():
    team = teams([], ["calico"])[0]
    policies = tenant_network_policies(team)
    assert all(rule.get("to") is None for policy in policies.values() for rule in policy["spec"]["egress"]
               if any(port.get("port") == 443 for port in rule.get("ports") or []))
    assert all(reaches(list(policies.values()), pod, S3) for pod in pods(team).values())
