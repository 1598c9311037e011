"""No team's Service takes a node port the site holds for a vCluster endpoint (components/synced_objects_admission.py
rule ``service-endpoint-node-ports``, config/access_rules.py ``endpoint_node_ports``).

A team allowed node ports may name any port of the range in its Service: vCluster's API proxy creates the host
Service with the tenant's node ports, and the syncer copies them on update (tests/synced_objects_sim.py). The
endpoints' ports (``access.nodePort``, 30443 and up) are in the range the host's allocator hands out, and a control
plane's Service takes its port only when the team's release installs it or re-creates it: a squatter there has the
other team's ``pulumi up`` fail, or receives its members' connections. The chart writes the control plane's Service,
never the syncer, so the policy never judges an endpoint itself.
"""

from __future__ import annotations

import copy
import re

import pytest

from config.access_rules import endpoint_node_ports
from config.hosts import MICROK8S_REGISTRY_NODE_PORT
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, dev_config, eks_config, git, run
from tests.synced_objects_sim import allocated, create_service, synced_objects_admission_for
from tests.tenant_sim import platform_of
from tests.test_synced_objects_admission import ALLOCATED_IP, Synced, rules, service
from tests.test_tenant_services import with_exposure

VCLUSTER = "loft-sh/vcluster"
MICROK8S = "canonical/microk8s"
FIRST_ENDPOINT = 30443


def node_port_site(node_ports: int = 2, load_balancers: int = 1) -> dict:
    """The dev site with a nodePort endpoint per team (30443 and up), each team allowed node ports."""
    config = with_exposure(dev_config(), {"exposure": "nodePort", "host": "gpu-box.lab.example"},
                           lambda index: {"nodePort": FIRST_ENDPOINT + index})
    for team in config["gpu-tenancy:teams"]:
        team["vcluster"]["services"] = {"nodePorts": node_ports, "loadBalancers": load_balancers}
    return config


@pytest.fixture(scope="module")
def site():
    config = node_port_site()
    platform = platform_of(config)
    program = run(config, stack="endpoint-node-ports")
    tenants = {team.name: Synced(synced_objects_admission_for(program, team.name), team) for team in platform.teams}
    return platform, tenants


def node_port_service(*node_ports: int, **spec) -> dict:
    ports = [{"name": f"p{index}", "port": 80 + index, "targetPort": 8080, "protocol": "TCP",
              **({"nodePort": port} if port else {})} for index, port in enumerate(node_ports)]
    return service(selector={"app": "web"}, type=spec.pop("type", "NodePort"), ports=ports, **spec)


def created(tenant: Synced, virtual: dict) -> dict:
    return allocated(create_service(virtual, tenant.team), ALLOCATED_IP)


def test_every_endpoint_port_is_reserved_for_its_team(site):
    platform, _ = site
    assert endpoint_node_ports(platform.teams) == tuple(team.vcluster.access.node_port for team in platform.teams) \
        == tuple(range(FIRST_ENDPOINT, FIRST_ENDPOINT + len(platform.teams)))


def test_another_teams_endpoint_port_is_refused_on_create_and_update(site):
    platform, tenants = site
    nlp = tenants["team-nlp"]
    for team in platform.teams:
        port = team.vcluster.access.node_port
        squat = created(nlp, node_port_service(port))
        assert squat["spec"]["ports"][0]["nodePort"] == port
        assert rules(nlp.create(squat)) == {"service-endpoint-node-ports"}, team.name
        # A second port of the Service, or a later update through the syncer, is refused the same.
        assert rules(nlp.create(created(nlp, node_port_service(0, port)))) == {"service-endpoint-node-ports"}
        honest = created(nlp, node_port_service(0))
        moved = copy.deepcopy(honest)
        moved["spec"]["ports"][0]["nodePort"] = port
        assert rules(nlp.update(honest, moved)) == {"service-endpoint-node-ports"}
        # The health check port of a LoadBalancer with externalTrafficPolicy Local is a node port too.
        balancer = created(nlp, node_port_service(0, type="LoadBalancer"))
        health = copy.deepcopy(balancer)
        health["spec"].update(externalTrafficPolicy="Local", healthCheckNodePort=port)
        assert rules(nlp.update(balancer, health)) == {"service-endpoint-node-ports"}
        assert rules(nlp.create(health)) == {"service-endpoint-node-ports"}


def test_honest_node_port_services_are_admitted(site):
    _, tenants = site
    for tenant in tenants.values():
        # The allocator's choice, a port the tenant pins outside the endpoints', a LoadBalancer.
        assert tenant.create(created(tenant, node_port_service(0, 0))) == []
        assert tenant.create(created(tenant, node_port_service(31080))) == []
        balancer = created(tenant, node_port_service(0, type="LoadBalancer", externalTrafficPolicy="Local"))
        assert tenant.create(balancer) == []
        relabelled = copy.deepcopy(balancer)
        relabelled["metadata"]["labels"]["tier"] = "web"
        assert tenant.update(balancer, relabelled) == []


def test_the_control_planes_own_service_is_the_charts_and_not_judged(site):
    """Helm writes each endpoint's Service from the chart (chart/templates/service.yaml, the https port's nodePort
    from httpsNodePort); the syncer never writes it, and the policy matches only what the syncer writes."""
    _, tenants = site
    nlp = tenants["team-nlp"]
    endpoint = {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": nlp.team.vcluster_name, "namespace": nlp.team.namespace,
                             "labels": {"app": "vcluster", "release": nlp.team.vcluster_name}},
                "spec": {"type": "NodePort", "ports": [{"name": "https", "port": 443, "targetPort": 8443,
                                                       "nodePort": nlp.team.vcluster.access.node_port}]}}
    assert not nlp.admission.matches(nlp.team.namespace, endpoint, user=nlp.syncer)
    assert not nlp.admission.matches(nlp.team.namespace, endpoint, user="system:serviceaccount:pulumi:deployer")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_chart_writes_the_endpoint_service_and_the_syncer_copies_tenant_node_ports(tag):
    """What the rule relies on, read from vCluster's source: the chart's Service takes httpsNodePort; the proxy
    keeps a tenant's ports on create; the syncer copies ports and the health check port on update."""
    chart = git(VCLUSTER, "show", f"{tag}:chart/templates/service.yaml")
    assert re.search(r"- name: https\s+port: 443\s+targetPort: 8443\s+nodePort: "
                     r"\{\{ \.Values\.controlPlane\.service\.httpsNodePort \}\}", chart)
    proxy = git(VCLUSTER, "show", f"{tag}:pkg/server/filters/service.go")
    assert "err = ctx.HostClient.Create(req.Context(), newService)" in proxy
    assert "StripNodePorts" not in proxy
    syncer = git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/services/syncer.go")
    for field in ("Ports", "HealthCheckNodePort"):
        assert f"event.Virtual.Spec.{field}, event.Host.Spec.{field} = patcher.CopyBidirectional(" in syncer


def test_pinned_control_plane_ports_in_extra_values_are_reserved_too():
    config = node_port_site()
    config["gpu-tenancy:teams"][1]["vcluster"]["extraValues"] = {"controlPlane": {"service": {
        "httpsNodePort": 31443, "spec": {"ports": [{"name": "https", "port": 443, "nodePort": 31444}]}}}}
    assert {31443, 31444} <= set(endpoint_node_ports(platform_of(config).teams))


def test_without_node_ports_the_general_rule_refuses_them_alone():
    """A team without node ports has every node port refused by service-node-ports, and no second message."""
    config = node_port_site(node_ports=0, load_balancers=0)
    program = run(config, stack="endpoint-node-ports-none")
    team = platform_of(config).teams[0]
    tenant = Synced(synced_objects_admission_for(program, team.name), team)
    names = {validation["message"][1:validation["message"].index("]")]
             for validation in tenant.admission.spec["validations"]}
    assert "service-endpoint-node-ports" not in names and "service-node-ports" in names


@pytest.mark.parametrize("where, key", [
    ("team", "teams[1].vcluster.extraValues.controlPlane.service.httpsNodePort"),
    ("stack", "teams[1].vcluster.extraValues.controlPlane.service.httpsNodePort"),
    ("spec", "teams[1].vcluster.extraValues.controlPlane.service.spec.ports[0].nodePort"),
])
def test_a_port_pinned_in_extra_values_may_not_be_another_teams(where, key):
    """Two control-plane Services cannot hold one node port: the second team's release would fail on the host,
    so the config refuses it first, at the key that pins it."""
    from config.errors import ConfigError
    config = node_port_site()
    taken = FIRST_ENDPOINT  # teams[0]'s access.nodePort
    service_values = ({"spec": {"ports": [{"name": "https", "port": 443, "nodePort": taken}]}} if where == "spec"
                      else {"httpsNodePort": taken})
    pin = {"controlPlane": {"service": service_values}}
    if where == "stack":
        config["gpu-tenancy:vcluster"]["extraValues"] = pin
    else:
        config["gpu-tenancy:teams"][1]["vcluster"]["extraValues"] = pin
    with pytest.raises(ConfigError) as error:
        platform_of(config)
    issue = next((i for i in error.value.issues if i.key == key), None)
    assert issue is not None, [str(i) for i in error.value.issues]
    assert issue.problem == "is already used by teams[0]" and str(taken) in str(issue)
    assert "teams[].vcluster.extraValues" in issue.fix


def test_a_team_may_pin_its_own_endpoint_port_again():
    config = node_port_site()
    config["gpu-tenancy:teams"][1]["vcluster"]["extraValues"] = {"controlPlane": {"service": {
        "httpsNodePort": FIRST_ENDPOINT + 1}}}
    assert FIRST_ENDPOINT + 1 in endpoint_node_ports(platform_of(config).teams)


# --- node ports the nodes pull images from ---------------------------------------------------------------------


def test_microk8s_registry_port_is_refused_to_a_team_allowed_node_ports(site):
    """MicroK8s' containerd pulls localhost:32000/... over plain HTTP on every node; a team's Service on node port
    32000 would serve those images to every pod that names them, another team's or the platform's."""
    platform, tenants = site
    assert platform.host.trusted_node_ports == (MICROK8S_REGISTRY_NODE_PORT,)
    nlp = tenants["team-nlp"]
    registry = created(nlp, node_port_service(MICROK8S_REGISTRY_NODE_PORT))
    assert rules(nlp.create(registry)) == {"service-trusted-node-ports"}
    assert rules(nlp.update(created(nlp, node_port_service(0)), registry)) == {"service-trusted-node-ports"}
    health = created(nlp, node_port_service(0, type="LoadBalancer", externalTrafficPolicy="Local",
                                            healthCheckNodePort=MICROK8S_REGISTRY_NODE_PORT))
    assert rules(nlp.create(health)) == {"service-trusted-node-ports"}
    assert nlp.create(created(nlp, node_port_service(31000))) == []


def test_a_host_whose_nodes_trust_no_node_port_has_no_such_rule(eks_run):
    team = platform_of(eks_config()).teams[0]
    names = {validation["message"][1:validation["message"].index("]")]
             for validation in synced_objects_admission_for(eks_run, team.name).spec["validations"]}
    assert platform_of(eks_config()).host.trusted_node_ports == ()
    assert "service-trusted-node-ports" not in names


def test_the_registry_port_is_the_one_microk8s_nodes_pull_from():
    for tag in MIRRORED_TAGS[MICROK8S]:
        hosts = git(MICROK8S, "show", f"{tag}:microk8s-resources/default-args/certs.d/"
                                      f"localhost__{MICROK8S_REGISTRY_NODE_PORT}/hosts.toml")
        assert f'server = "http://localhost:{MICROK8S_REGISTRY_NODE_PORT}"' in hosts, tag
        assert re.search(r'capabilities = \[[^]]*"pull"', hosts), tag
