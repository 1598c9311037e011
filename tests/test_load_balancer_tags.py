"""A team's load balancers on EKS carry the site's and the team's AWS tags (config/load_balancer_tags.py), so the
account's bill splits them by site and team as it splits the site's other resources.

Inside the team's vCluster a MutatingAdmissionPolicy writes the platform's value of
``service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags`` on every LoadBalancer Service
(components/virtual_defaults.py): evaluated here with cel-python and merged as the API server merges an apply
configuration (tests/virtual_sim.py). The host's synced-objects policy admits that value only and requires it on a
Service that becomes a load balancer (components/synced_service_rules.py). Each attack is the Service a hostile tenant
(cluster-admin in its vCluster, free to delete the policy inside) creates or edits, as vCluster's syncer writes it on
the host (tests/synced_objects_sim.py). tests/test_load_balancer_tags_contract.py reads how the cloud provider reads
the value.
"""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
import yaml

from components.synced_objects_admission import policy_spec
from components.virtual_defaults import LOAD_BALANCER_TAGS_NAME
from config import load_platform
from config.errors import ConfigError
from config.load_balancer_keys import AWS_ADDITIONAL_TAGS, AWS_PREFIX
from config.load_balancer_tags import tags_annotation
from tests.conftest import dev_config, eks_config, run, security_model_text
from tests.synced_objects_sim import SyncedObjectsAdmission, synced_objects_admission_for, update_service
from tests.cel_judges import plain_value
from tests.tenant_sim import platform_of, project_config
from tests.test_image_volumes import kubeconfig_config
from tests.test_synced_objects_admission import Synced, created, rules, service, team_of
from tests.virtual_sim import VIRTUAL_KUBERNETES, TypeName, apply_configuration, manifests, named
from tools.offline.mocks import MOCK_CLUSTER_DNS
from tools.plan import cli as plan

TAGS_RULE, ANNOTATIONS = "service-load-balancer-tags", "service-load-balancer-annotations"
SERVICE_SCHEMA = {"$ref": "#/$defs/io.k8s.api.core.v1.Service"}
SITE_TAGS = {"cost-center": "ml platform", "owner": "ana@example.com"}


def with_load_balancers(config: dict, **services) -> dict:
    config["gpu-tenancy:vcluster"]["services"] = {"loadBalancers": 1, **services}
    if "eks" in config["gpu-tenancy:cluster"]:
        config["gpu-tenancy:cluster"]["eks"]["tags"] = dict(SITE_TAGS)
    return config


def tags_of(config: dict, team: str = "team-legal") -> tuple:
    return team_of(config, team).vcluster.services.load_balancer_tags


class Inside:
    """The team's tag policy in its virtual API server: matched by kind, conditions and expression in cel-python."""

    def __init__(self, team):
        objects = manifests(team)
        policy = named(objects, "MutatingAdmissionPolicy", LOAD_BALANCER_TAGS_NAME)
        self.policy = SyncedObjectsAdmission(
            policy["spec"], named(objects, "MutatingAdmissionPolicyBinding", LOAD_BALANCER_TAGS_NAME)["spec"])

    def write(self, virtual: dict, old: dict | None = None) -> dict:
        """``virtual`` as the virtual API server stores it after the policy."""
        operation = "CREATE" if old is None else "UPDATE"
        activation = self.policy.context("default", virtual, operation=operation, old=old, user="kubernetes-admin")
        if activation is None:
            return virtual
        for mutation in self.policy.spec["mutations"]:
            result = self.policy.evaluate(mutation["applyConfiguration"]["expression"],
                                          {**activation, "Object": TypeName()})
            virtual = apply_configuration(virtual, plain_value(result), SERVICE_SCHEMA)
        return virtual


def tenant(program, **services) -> Synced:
    """Team legal of the eks site, given a load balancer (and ``services``), with the site's tags."""
    team = team_of(with_load_balancers(eks_config(), **services), "team-legal")
    binding = synced_objects_admission_for(program, "team-legal").binding
    return Synced(SyncedObjectsAdmission(policy_spec(team, MOCK_CLUSTER_DNS, ()), binding), team)


@pytest.fixture(scope="module")
def legal(eks_run) -> Synced:
    return tenant(eks_run)


@pytest.fixture(scope="module")
def legal_with_node_ports(eks_run) -> Synced:
    """The host keeps a Service's allocateLoadBalancerNodePorts on an edit, so only a team that may hold node ports
    turns a ClusterIP Service into a load balancer."""
    return tenant(eks_run, nodePorts=2)


def load_balancer(annotations: dict | None = None, **spec) -> dict:
    lb = service(type="LoadBalancer", allocateLoadBalancerNodePorts=False, **spec)
    if annotations is not None:
        lb["metadata"]["annotations"] = annotations
    return lb


def platform_value(tenant: Synced) -> str:
    return tags_annotation(tenant.team.vcluster.services.load_balancer_tags)


# --- the config ----------------------------------------------------------------------------------------------------


def test_an_eks_team_with_load_balancers_gets_the_stacks_the_sites_and_its_own_tag():
    config = with_load_balancers(eks_config())
    platform = platform_of(config)
    for team in platform.teams:
        assert team.vcluster.services.load_balancer_tags == (
            ("gpu-tenancy/stack", platform.stack), *SITE_TAGS.items(), ("gpu-tenancy/team", team.name))


@pytest.mark.parametrize("config", [
    pytest.param(eks_config, id="eks-without-load-balancers"),
    pytest.param(lambda: with_load_balancers(dev_config()), id="microk8s"),
    pytest.param(lambda: with_load_balancers(kubeconfig_config()), id="existing-cluster"),
    pytest.param(lambda: with_load_balancers(eks_config(), loadBalancerAnnotations=[AWS_ADDITIONAL_TAGS]),
                 id="eks-site-hands-the-team-the-key"),
])
def test_no_tags_where_the_cloud_provider_is_not_aws_the_team_has_no_load_balancer_or_the_site_hands_it_the_key(
        config):
    platform = load_platform(project_config(config()), secrets_set={"kubeconfig"})
    assert platform.teams and all(not team.vcluster.services.load_balancer_tags for team in platform.teams)


def test_a_site_tag_value_holding_an_equals_sign_is_refused_where_load_balancers_are_tagged():
    config = with_load_balancers(eks_config())
    config["gpu-tenancy:cluster"]["eks"]["tags"]["billing"] = "code=42"
    with pytest.raises(ConfigError) as error:
        platform_of(config)
    [issue] = [issue for issue in error.value.issues if issue.key == "cluster.eks.tags.billing"]
    assert issue.value == "code=42" and "billing=code" in issue.problem and "team-legal" in issue.problem
    assert "leave '=' out" in issue.fix
    # Without a tagged load balancer the value stays as valid as before.
    config["gpu-tenancy:vcluster"]["services"] = {"loadBalancers": 0}
    assert platform_of(config).cluster.eks.tags["billing"] == "code=42"


def test_the_team_tag_is_the_programs_and_no_site_tag():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["tags"] = {"gpu-tenancy/team": "platform"}
    with pytest.raises(ConfigError) as error:
        platform_of(config)
    assert error.value.keys == ["cluster.eks.tags.gpu-tenancy/team"]
    assert "gpu-tenancy/team to a team's name" in str(error.value)


# --- the program: the same value inside and on the host -----------------------------------------------------------


def test_the_program_writes_one_value_in_the_virtual_policy_and_the_host_rule():
    program = run(with_load_balancers(eks_config()), stack="kotka")
    team = team_of(with_load_balancers(eks_config()), "team-legal")
    value = f"gpu-tenancy/stack=kotka,{tags_annotation(SITE_TAGS.items())},gpu-tenancy/team=team-legal"
    values = program.named("tenant-team-legal-vcluster").inputs["values"]
    inside = list(yaml.safe_load_all(values["experimental"]["deploy"]["vcluster"]["manifests"]))
    policy = named(inside, "MutatingAdmissionPolicy", LOAD_BALANCER_TAGS_NAME)
    assert value in policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    host = synced_objects_admission_for(program, "team-legal").spec
    [rule] = [v for v in host["validations"] if v["message"].startswith(f"[{TAGS_RULE}]")]
    assert f"== '{value}'" in rule["expression"]
    assert team.vcluster.services.load_balancer_tags[-1] == ("gpu-tenancy/team", "team-legal")


def test_the_policy_inside_is_a_valid_kubernetes_1_36_object_matching_services_only(legal):
    objects = manifests(legal.team)
    policy = named(objects, "MutatingAdmissionPolicy", LOAD_BALANCER_TAGS_NAME)
    binding = named(objects, "MutatingAdmissionPolicyBinding", LOAD_BALANCER_TAGS_NAME)
    for obj in (policy, binding):
        kubernetes_validate.validate(obj, VIRTUAL_KUBERNETES, strict=True)
    assert [rule["resources"] for rule in policy["spec"]["matchConstraints"]["resourceRules"]] == [["services"]]
    assert binding["spec"]["policyName"] == LOAD_BALANCER_TAGS_NAME


def test_the_review_summary_shows_each_teams_tags(tmp_path):
    config = with_load_balancers(eks_config())
    assert plan.main(["kotka", "--out", str(tmp_path)], config=config) == 0
    summary = (tmp_path / "summary.md").read_text()
    for team in ("team-legal", "team-support"):
        [line] = [line for line in summary.splitlines() if line.startswith(f"- `{team}`: `gpu-tenancy-{team}-synced-")]
        assert (f"{TAGS_RULE} (on every load balancer: `gpu-tenancy/stack=kotka`, `cost-center=ml platform`, "
                f"`owner=ana@example.com`, `gpu-tenancy/team={team}`)") in line


def test_sites_without_tagged_load_balancers_ship_no_tag_policy_and_no_tag_rule(eks_run, dev_run):
    for program, team in ((eks_run, "team-legal"), (dev_run, "team-nlp")):
        inside = program.named(f"tenant-{team}-vcluster").inputs["values"]["experimental"]["deploy"]["vcluster"]
        assert LOAD_BALANCER_TAGS_NAME not in inside["manifests"]
        spec = synced_objects_admission_for(program, team).spec
        assert not [v for v in spec["validations"] if v["message"].startswith(f"[{TAGS_RULE}]")]


# --- honest tenants: their Services unmodified -------------------------------------------------------------------


def test_a_load_balancer_created_inside_gets_the_tags_and_is_admitted_on_the_host(legal):
    stored = Inside(legal.team).write(load_balancer({AWS_PREFIX + "type": "nlb"}))
    annotations = stored["metadata"]["annotations"]
    assert annotations == {AWS_PREFIX + "type": "nlb", AWS_ADDITIONAL_TAGS: platform_value(legal)}
    assert legal.create(created(legal, stored)) == []


def test_a_value_the_tenant_wrote_is_replaced_by_the_platforms(legal):
    stored = Inside(legal.team).write(load_balancer({AWS_ADDITIONAL_TAGS: "gpu-tenancy/team=team-support"}))
    assert stored["metadata"]["annotations"][AWS_ADDITIONAL_TAGS] == platform_value(legal)
    assert legal.create(created(legal, stored)) == []


def test_other_services_are_left_alone_and_admitted(legal):
    inside = Inside(legal.team)
    cluster_ip = service()
    assert inside.write(cluster_ip) == cluster_ip
    assert legal.create(created(legal, cluster_ip)) == []


def test_a_service_made_a_load_balancer_by_an_edit_gets_the_tags(legal_with_node_ports):
    legal = legal_with_node_ports
    inside = Inside(legal.team)
    before = service()
    host = created(legal, before)
    edited = inside.write(load_balancer(), old=before)
    assert edited["metadata"]["annotations"][AWS_ADDITIONAL_TAGS] == platform_value(legal)
    assert legal.update(host, update_service(host, edited, legal.team)) == []


def test_a_load_balancer_from_before_the_rule_keeps_syncing_and_is_tagged_when_edited(legal):
    old_virtual = load_balancer()
    host = created(legal, old_virtual)
    resynced = update_service(host, old_virtual, legal.team)
    assert legal.update(host, resynced) == []
    edited = Inside(legal.team).write(load_balancer(loadBalancerSourceRanges=["192.0.2.0/24"]), old=old_virtual)
    assert legal.update(host, update_service(host, edited, legal.team)) == []


def test_a_load_balancer_tagged_before_the_sites_tags_changed_keeps_syncing_and_takes_the_new_ones_when_edited(
        eks_run):
    before = tenant(eks_run)
    config = with_load_balancers(eks_config())
    config["gpu-tenancy:cluster"]["eks"]["tags"]["cost-center"] = "research"
    after = Synced(SyncedObjectsAdmission(policy_spec(team_of(config, "team-legal"), MOCK_CLUSTER_DNS, ()),
                                          before.admission.binding), team_of(config, "team-legal"))
    old_virtual = Inside(before.team).write(load_balancer())
    host = created(before, old_virtual)
    assert after.update(host, update_service(host, old_virtual, after.team)) == []
    edited = Inside(after.team).write(load_balancer(loadBalancerSourceRanges=["192.0.2.0/24"]), old=old_virtual)
    assert "cost-center=research" in edited["metadata"]["annotations"][AWS_ADDITIONAL_TAGS]
    assert after.update(host, update_service(host, edited, after.team)) == []
    # Back to the old value, which the team's tags no longer are, is another value.
    assert rules(after.update(update_service(host, edited, after.team), host)) == {ANNOTATIONS, TAGS_RULE}


# --- hostile tenants: the objects they would send -----------------------------------------------------------------


def test_a_load_balancer_without_the_tags_is_refused(legal):
    """The tenant deleted the policy inside: its Service reaches the host untagged."""
    assert rules(legal.create(created(legal, load_balancer()))) == {TAGS_RULE}


@pytest.mark.parametrize("value", [
    "gpu-tenancy/team=team-support",
    "gpu-tenancy/stack=eks,cost-center=ml platform,owner=ana@example.com,gpu-tenancy/team=team-support",
    None,  # the platform's value with a tag of the tenant's added
    " {platform}",  # the platform's value with a space first, which the provider trims
])
def test_another_value_of_the_tag_annotation_is_refused(legal, value):
    platform = platform_value(legal)
    value = f"{platform},cost-center=free" if value is None else value.format(platform=platform)
    assert rules(legal.create(created(legal, load_balancer({AWS_ADDITIONAL_TAGS: value})))) == {ANNOTATIONS, TAGS_RULE}


def test_a_cluster_ip_service_may_carry_no_other_value_to_keep_when_it_becomes_a_load_balancer(legal):
    cluster_ip = service()
    cluster_ip["metadata"]["annotations"] = {AWS_ADDITIONAL_TAGS: "gpu-tenancy/team=team-support"}
    assert rules(legal.create(created(legal, cluster_ip))) == {ANNOTATIONS}


def test_an_edit_may_not_drop_or_change_the_tags(legal):
    tagged = Inside(legal.team).write(load_balancer())
    host = created(legal, tagged)
    dropped = copy.deepcopy(host)
    del dropped["metadata"]["annotations"][AWS_ADDITIONAL_TAGS]
    assert rules(legal.update(host, dropped)) == {TAGS_RULE}
    changed = copy.deepcopy(host)
    changed["metadata"]["annotations"][AWS_ADDITIONAL_TAGS] = "gpu-tenancy/team=team-support"
    assert rules(legal.update(host, changed)) == {ANNOTATIONS, TAGS_RULE}


def test_a_service_made_a_load_balancer_without_the_tags_is_refused(legal_with_node_ports):
    legal = legal_with_node_ports
    host = created(legal, service())
    made = update_service(host, load_balancer(), legal.team)
    assert rules(legal.update(host, made)) == {TAGS_RULE}


def test_the_security_model_names_the_rule_and_the_policy_inside(legal):
    text = security_model_text()
    assert f"`{TAGS_RULE}`" in text and f"`{LOAD_BALANCER_TAGS_NAME}`" in text
    assert any(v["message"].startswith(f"[{TAGS_RULE}]") for v in legal.admission.spec["validations"])
