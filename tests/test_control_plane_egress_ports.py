"""One team's control plane and another's, on the port every vCluster control plane serves on (8443).

Each control plane admits 8443 from anywhere (vCluster's rule, for its Service), so a rule of one team's control plane
that opens 8443 to an address that may hold that pod hands its tenant the other team's virtual API server
(docs/security-isolation.md, The control plane's egress). 8443 is also Keycloak's HTTPS port and minikube's API
server's. Here: an OIDC issuer on 443 and on 8443, a kubeconfig host's API server on 6443, on 8443 and unstated, with
the program's policies (vCluster's are off; tests/test_control_plane_egress.py holds the two together at every
accepted release). The reach is closed, or, where the program cannot close it (the host API server's port, whose
addresses it does not know), the plan says so, naming the key, its value and the fix; the honest paths stay open.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Optional

import pytest

from components.tenant_network import tenant_network_policies
from ops.sites import platform_of
from tests.test_control_plane_egress import PRIVATE_SERVICE, control_plane_pod
from tests.test_tenant_network import Target, kubeconfig_on_port, reaches
from tools.deployability.network_ingress import Pod

NODE, POD = "192.168.1.20", "10.1.37.9"
# Where an issuer's name resolves when the site states nothing: a public address.
PUBLIC_ISSUER = "203.0.113.50"
TEAMS = "team-nlp, team-vision, team-recommender"
HOST_DNS = Pod("kube-system", {"k8s-app": "kube-dns"})
ISSUER_KEY = "teams[0].vcluster.access.oidc.issuerAddresses"


def site(api_server_port: Optional[int] = 6443, **oidc):
    platform = platform_of(kubeconfig_on_port(api_server_port, **oidc), "site")
    team, other = platform.teams[:2]
    return platform, team, other, list(tenant_network_policies(team).values())


def warnings_on(platform, key: str) -> list[str]:
    return [warning for warning in platform.warnings if warning.startswith(key)]


def other_plane(other) -> Target:
    return Target("another team's vCluster API server", POD, 8443, pod=control_plane_pod(other))


@pytest.mark.parametrize("issuer_port", [443, 8443])
@pytest.mark.parametrize("api_server_port", [6443, 8443, None])
def test_a_control_plane_reaches_another_teams_only_where_the_plan_warns(api_server_port, issuer_port):
    platform, team, other, policies = site(api_server_port, issuerUrl=f"https://login.example.com:{issuer_port}/ml")
    source = control_plane_pod(team)
    open_8443 = api_server_port in (8443, None)
    assert reaches(policies, source, other_plane(other)) == open_8443
    assert reaches(policies, source, Target("a private HTTPS service", PRIVATE_SERVICE, 8443)) == open_8443
    warned = warnings_on(platform, "cluster.kubeconfig.apiServerPort")
    assert len(warned) == open_8443
    if api_server_port == 8443:
        assert warned[0].startswith("cluster.kubeconfig.apiServerPort is 8443") and TEAMS in warned[0]
        assert "--apiserver-port" in warned[0] and "pods/NAME/proxy" in warned[0]
    assert warnings_on(platform, ISSUER_KEY) == []
    # The issuer's port opens at public addresses only; at a private one, only where it is the API server's too.
    api_ports = (api_server_port,) if api_server_port else (443, 8443, 6443)
    assert reaches(policies, source, Target("the issuer's port", PRIVATE_SERVICE, issuer_port)) == (
        issuer_port in api_ports)
    honest = [Target("the OIDC issuer", PUBLIC_ISSUER, issuer_port),
              *(Target(f"the host API server on {port}", NODE, port) for port in api_ports),
              *(Target("the host's DNS pods", POD, 53, protocol, pod=HOST_DNS) for protocol in ("UDP", "TCP"))]
    assert [target.what for target in honest if not reaches(policies, source, target)] == []


@pytest.mark.parametrize("issuer", [
    {"issuerUrl": "https://login.lab.example:8443/ml", "issuerAddresses": ["192.168.1.30/32"]},
    {"issuerUrl": "https://192.168.1.30:8443/ml"},
])
def test_an_issuer_at_a_private_address_is_reached_there_only(issuer):
    platform, team, other, policies = site(**issuer)
    source = control_plane_pod(team)
    assert reaches(policies, source, Target("the OIDC issuer", "192.168.1.30", 8443))
    assert [where for where in ("192.168.1.31", PUBLIC_ISSUER, PRIVATE_SERVICE)
            if reaches(policies, source, Target("the issuer's port elsewhere", where, 8443))] == []
    assert not reaches(policies, source, other_plane(other))
    assert warnings_on(platform, ISSUER_KEY) == []


@pytest.mark.parametrize("addresses, port, warned", [
    (["10.0.0.0/16"], 8443, True),
    (["192.168.1.30/32", "172.20.0.0/24"], 8443, True),
    (["10.0.0.0/16"], 443, False),  # no control plane serves there
    (["10.0.5.20/32"], 8443, False),  # the issuer's own address
    (["203.0.113.0/24"], 8443, False),  # public: no pod of the site
])
def test_an_issuer_on_8443_at_a_private_network_is_warned(addresses, port, warned):
    platform, team, other, policies = site(issuerUrl=f"https://login.lab.example:{port}/ml",
                                           issuerAddresses=addresses)
    [warning] = warnings_on(platform, ISSUER_KEY) or [None]
    assert (warning is not None) == warned
    if warned:
        wide = [block for block in addresses if not block.endswith("/32")]
        assert f"lists {', '.join(wide)} for an OIDC issuer on 8443" in warning and TEAMS in warning
        assert "List the issuer's own addresses" in warning and "vcluster.access.oidc.issuerAddresses" in warning
        # What it warns of is real: the stated network, where another team's control plane may run.
        plane = dataclasses.replace(other_plane(other), address=str(ipaddress.ip_network(wide[0])[9]))
        assert reaches(policies, control_plane_pod(team), plane)


@pytest.mark.parametrize("config, warned", [
    ({"teams": 1, "fenced": True}, False),
    ({"teams": 3, "fenced": False}, False),
    ({"teams": 2, "fenced": True}, True),
])
def test_only_a_site_with_another_control_plane_to_reach_is_warned(config, warned):
    """The warnings speak where a team's egress is fenced and there is another control plane."""
    site_config = kubeconfig_on_port(8443, issuerUrl="https://login.lab.example:8443/ml",
                                     issuerAddresses=["10.0.0.0/16"])
    site_config["gpu-tenancy:teams"] = site_config["gpu-tenancy:teams"][:config["teams"]]
    site_config["gpu-tenancy:vcluster"]["networkPolicy"] = config["fenced"]
    platform = platform_of(site_config, "site")
    assert bool(warnings_on(platform, "cluster.kubeconfig.apiServerPort is 8443")) == warned
    assert bool(warnings_on(platform, ISSUER_KEY)) == warned


def test_a_kubeconfig_site_that_leaves_its_api_server_port_unstated_is_warned():
    [warning] = warnings_on(platform_of(kubeconfig_on_port(None), "site"), "cluster.kubeconfig.apiServerPort")
    assert "is not set" in warning and "another team's control plane serves on 8443" in warning and TEAMS in warning


def test_a_named_issuer_on_another_port_than_the_api_servers_is_noted_until_its_addresses_are_stated():
    """The control plane reaches such an issuer at public addresses only: one resolving to a private address would
    be cut off, sign-ins failing, so the plan says how to state it."""
    def noted(platform) -> list[str]:
        return [note for note in platform.notes if "at public addresses only" in note]

    named = site(6443, issuerUrl="https://login.lab.example:8443/ml")[0]
    [note] = noted(named)  # one note for the issuer, naming every team that signs in there
    assert "issuerAddresses" in note and "login.lab.example on port 8443" in note
    assert all(f"teams[{position}] ({team.name})" in note for position, team in enumerate(named.teams))
    for quiet in (site(6443, issuerUrl="https://login.lab.example:8443/ml", issuerAddresses=["10.0.5.20/32"]),
                  site(6443, issuerUrl="https://10.0.5.20:8443/ml"),
                  site(6443, issuerUrl="https://login.lab.example:6443/ml")):
        assert noted(quiet[0]) == []


@pytest.mark.parametrize("api_server_port", [8443, None])
def test_the_api_servers_stated_addresses_close_8443_to_other_control_planes(api_server_port):
    """With cluster.kubeconfig.apiServerAddresses the API server's rule opens its port(s) there only: the host API
    server stays reachable, another team's control plane on 8443 does not, and the plan no longer warns."""
    config = kubeconfig_on_port(api_server_port)
    config["gpu-tenancy:cluster"]["kubeconfig"]["apiServerAddresses"] = [f"{NODE}/32"]
    platform = platform_of(config, "site")
    team, other = platform.teams[:2]
    policies = list(tenant_network_policies(team).values())
    source = control_plane_pod(team)
    assert not reaches(policies, source, other_plane(other))
    assert not reaches(policies, source, Target("a private HTTPS service", PRIVATE_SERVICE, 8443))
    api_ports = (api_server_port,) if api_server_port else (443, 8443, 6443)
    assert all(reaches(policies, source, Target(f"the host API server on {port}", NODE, port)) for port in api_ports)
    assert warnings_on(platform, "cluster.kubeconfig.api") == []


def test_stated_api_server_addresses_that_may_hold_pods_are_warned():
    config = kubeconfig_on_port(8443)
    config["gpu-tenancy:cluster"]["kubeconfig"]["apiServerAddresses"] = ["10.1.0.0/16"]
    platform = platform_of(config, "site")
    [warning] = warnings_on(platform, "cluster.kubeconfig.apiServerAddresses")
    assert "lists 10.1.0.0/16" in warning and TEAMS in warning and "own addresses" in warning
    team, other = platform.teams[:2]
    # What it warns of is real: another team's control plane inside the stated network.
    inside = dataclasses.replace(other_plane(other), address="10.1.37.9")
    assert reaches(list(tenant_network_policies(team).values()), control_plane_pod(team), inside)
