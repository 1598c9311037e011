"""Team access (config/access.py, components/tenant_access.py): endpoints, OIDC and the kubeconfigs, planned
offline and checked against vCluster 0.36.1's chart schema and source."""

from __future__ import annotations

import copy
import dataclasses
import json
import re

import pytest
import yaml

from components.tenant_access import (
    AUTHENTICATION_CONFIG_MAP, AUTHENTICATION_DIR, EXTERNAL_DNS_HOSTNAME, EXTERNAL_DNS_PREFIX, exposure_values,
    with_server,
)
from config import ConfigError, load_platform
from config.hosts import TENANT_EGRESS_EXCEPTIONS
from config.vocabulary import project_config
from tests.conftest import VIRTUAL_APISERVER_TAGS, dev_config, eks_config, git, go_function, mirrored_tag, run, upstream_file
from tests.reference_cel import REFERENCE
from tests.test_tenant import api_server_rules, namespace_policies

RELEASE = "kubernetes:helm.sh/v3:Release"
ISSUER = "https://login.example.com:5556/dex"
SECRET_KEYS = ("client-key-data", "client-certificate-data", "token", "password", "client-secret")


def oidc_dev_config() -> dict:
    """The lab site with NodePorts on the box and Dex as the issuer (on a port vCluster's policy does not open)."""
    config = dev_config()
    config["gpu-tenancy:vcluster"]["access"] = {
        "exposure": "nodePort", "host": "gpu-box.lab.example",
        "oidc": {"issuerUrl": ISSUER, "clientId": "kubernetes", "adminGroups": ["platform"]}}
    for index, team in enumerate(config["gpu-tenancy:teams"]):
        team["vcluster"] = {"access": {"nodePort": 30443 + index, "oidc": {
            "adminGroups": [f"{team['name']}-admins"], "viewGroups": [f"{team['name']}-readers"]}}}
    return config


@pytest.fixture(scope="module")
def oidc_run():
    return run(oidc_dev_config(), stack="lab-oidc")


def release(program, team: str):
    return next(r for r in program.of_type(RELEASE) if r.inputs["name"] == team)


def load(config: dict):
    return load_platform(project_config(config))


def test_oidc_site_configures_each_virtual_api_server(oidc_run):
    values = release(oidc_run, "team-nlp").inputs["values"]
    assert values["controlPlane"]["distro"]["k8s"]["apiServer"]["extraArgs"] == [
        f"--authentication-config={AUTHENTICATION_DIR}/config.yaml"]
    persistence = values["controlPlane"]["statefulSet"]["persistence"]
    assert persistence["addVolumes"][0]["configMap"]["name"] == AUTHENTICATION_CONFIG_MAP
    assert persistence["addVolumeMounts"][0]["mountPath"] == AUTHENTICATION_DIR
    config_map = next(r for r in oidc_run.of_type("kubernetes:core/v1:ConfigMap")
                      if r.inputs["metadata"].get("name") == AUTHENTICATION_CONFIG_MAP
                      and r.inputs["metadata"]["namespace"] == "vcluster-team-nlp")
    authentication = yaml.safe_load(config_map.inputs["data"]["config.yaml"])
    jwt = authentication["jwt"][0]
    assert jwt["issuer"] == {"url": ISSUER, "audiences": ["kubernetes"]}
    assert jwt["claimMappings"] == {"username": {"claim": "email", "prefix": "oidc:"},
                                    "groups": {"claim": "groups", "prefix": "oidc:"}}
    # The control plane cannot start without its file: the release waits for the ConfigMap.
    assert config_map.urn in release(oidc_run, "team-nlp").dependencies


def test_groups_are_bound_inside_each_vcluster_with_the_prefix_the_api_server_adds(oidc_run):
    manifests = list(yaml.safe_load_all(
        release(oidc_run, "team-vision").inputs["values"]["experimental"]["deploy"]["vcluster"]["manifests"]))
    bound = {doc["roleRef"]["name"]: [s["name"] for s in doc["subjects"]] for doc in manifests
             if doc["kind"] == "ClusterRoleBinding"}
    # The team's own groups replace the stack's list (lists are not merged).
    assert bound == {"cluster-admin": ["oidc:team-vision-admins"], "view": ["oidc:team-vision-readers"]}


def test_member_kubeconfigs_hold_no_secret_and_point_at_the_endpoint(oidc_run):
    assert "teamKubeconfigs" not in oidc_run.secret_outputs
    for index, team in enumerate(("team-nlp", "team-vision", "team-recommender")):
        text = oidc_run.outputs["teamKubeconfigs"][team]
        config = yaml.safe_load(text)
        assert config["clusters"][0]["cluster"]["server"] == f"https://gpu-box.lab.example:{30443 + index}"
        assert config["clusters"][0]["cluster"]["certificate-authority-data"]
        user = config["users"][0]["user"]
        assert set(user) == {"exec"}
        assert user["exec"]["command"] == "kubectl" and user["exec"]["args"][:2] == ["oidc-login", "get-token"]
        assert f"--oidc-issuer-url={ISSUER}" in user["exec"]["args"]
        assert not [key for key in SECRET_KEYS if re.search(rf"^[\s-]*{key}:", text, re.MULTILINE)]
    assert "tenantKubeconfigs" in oidc_run.secret_outputs


def test_the_admin_kubeconfig_points_at_the_endpoint_too():
    admin = yaml.safe_dump({"clusters": [{"name": "c", "cluster": {"server": "https://localhost:8443"}}]})
    assert yaml.safe_load(with_server(admin, "https://nlp.vc.example"))["clusters"][0]["cluster"]["server"] == \
        "https://nlp.vc.example"
    assert with_server(admin, None) == admin


def test_the_issuer_port_gets_a_control_plane_egress_rule_of_its_own_at_public_addresses(oidc_run):
    """The API server's port opens to every address; the issuer's, named by a host name, only at public ones: on a
    private one it may be another team's control plane (tests/test_control_plane_egress_ports.py)."""
    assert [rule["ports"][0]["port"] for rule in api_server_rules(oidc_run, "vcluster-team-nlp", "team-nlp")] == [16443]
    egress = namespace_policies(oidc_run, "vcluster-team-nlp")["team-nlp-control-plane"]["egress"]
    [issuer] = [rule for rule in egress if rule.get("ports") == [{"port": 5556, "protocol": "TCP"}]]
    assert issuer["to"] == [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(TENANT_EGRESS_EXCEPTIONS)}}]


def test_endpoint_names_are_in_the_certificate_and_the_exported_kubeconfig(oidc_run):
    values = release(oidc_run, "team-recommender").inputs["values"]
    assert values["controlPlane"]["proxy"]["extraSANs"] == ["gpu-box.lab.example"]
    assert values["controlPlane"]["service"] == {"httpsNodePort": 30445, "spec": {"type": "NodePort"}}
    assert values["exportKubeConfig"]["server"] == "https://gpu-box.lab.example:30445"


@pytest.mark.parametrize("access, expected", [
    ({"exposure": "loadBalancer", "domain": "vc.example.com", "loadBalancerSourceRanges": ["203.0.113.0/24"]},
     {"service": {"annotations": {"external-dns.alpha.kubernetes.io/hostname": "rag-legal.vc.example.com"},
                  "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": ["203.0.113.0/24"]}}}),
    ({"exposure": "gateway", "domain": "vc.example.com", "gateway": {"name": "edge", "namespace": "gw"}},
     {"tlsRoute": {"enabled": True, "host": "rag-legal.vc.example.com",
                   "parentRefs": [{"name": "edge", "namespace": "gw"}]}}),
])
def test_loadbalancer_and_gateway_endpoints_fit_the_chart_schema(access, expected):
    import jsonschema
    config = eks_config()
    config["gpu-tenancy:vcluster"] = {**config.get("gpu-tenancy:vcluster", {}), "access": access}
    team = load(config).teams[0]
    values = exposure_values(team.vcluster.access)
    for key, value in expected.items():
        assert values["controlPlane"][key] == value
    assert values["exportKubeConfig"]["server"] == "https://rag-legal.vc.example.com"
    schema = json.loads(upstream_file("vcluster", "values.schema.json").read_text())
    jsonschema.validate(values, schema)


def test_oidc_values_fit_the_chart_schema(oidc_run):
    import jsonschema
    schema = json.loads(upstream_file("vcluster", "values.schema.json").read_text())
    jsonschema.validate(release(oidc_run, "team-nlp").inputs["values"], schema)


def test_a_site_without_exposure_registers_nothing_for_access(dev_run):
    assert not dev_run.of_type("gpu-tenancy:platform:TenantAccess")
    assert "teamKubeconfigs" not in dev_run.outputs
    assert "exportKubeConfig" not in release(dev_run, "team-nlp").inputs["values"]


@pytest.mark.parametrize("access, key, problem", [
    ({"exposure": "nodePort", "host": "box"}, "teams[0].vcluster.access.nodePort", "needs the team's node port"),
    ({"exposure": "loadBalancer"}, "teams[0].vcluster.access.host", "needs an endpoint name"),
    ({"exposure": "gateway", "domain": "vc.example"}, "teams[0].vcluster.access.gateway.name", "needs the Gateway"),
    ({"exposure": "loadBalancer", "host": "one.example"}, "teams[1].vcluster.access.host", "already the endpoint"),
    ({"oidc": {"issuerUrl": "https://id.example", "clientId": "k"}}, "teams[0].vcluster.access.exposure",
     "has no endpoint"),
    ({"exposure": "nodePort", "host": "box", "nodePort": 30443, "oidc": {"issuerUrl": "http://id.example",
                                                                         "clientId": "k"}},
     "teams[0].vcluster.access.oidc.issuerUrl", "not an https URL"),
    ({"oidc": {"adminGroups": ["ops"]}}, "teams[0].vcluster.access.oidc.adminGroups", "no OIDC issuer"),
    ({"exposure": "nodePort", "host": "box", "nodePort": 30443}, "teams[1].vcluster.access.nodePort",
     "already used by teams[0]"),
    ({"exposure": "nodePort", "nodePort": 20000}, "vcluster.access.nodePort", "between 30000 and 32767"),
])
def test_bad_access_settings_are_refused_with_the_key_and_the_fix(access, key, problem):
    config = dev_config()
    config["gpu-tenancy:vcluster"]["access"] = access
    with pytest.raises(ConfigError) as error:
        load(config)
    issue = next((i for i in error.value.issues if i.key == key), None)
    assert issue is not None, [str(i) for i in error.value.issues]
    assert problem in issue.problem and issue.fix
    assert " = None:" not in str(issue), "a key left out reads <not set>, as everywhere else"


@pytest.mark.parametrize("kind, access, key", [
    ("microk8s", {"exposure": "nodePort", "nodePort": 30443}, "teams[0].vcluster.access.host"),
    ("kubeconfig", {"exposure": "nodePort", "nodePort": 30443}, "teams[0].vcluster.access.host"),
    ("microk8s", {"exposure": "loadBalancer"}, "teams[0].vcluster.access.host"),
    ("microk8s", {"exposure": "gateway", "domain": "vc.example"}, "teams[0].vcluster.access.gateway.name"),
    ("microk8s", {"oidc": {"issuerUrl": "https://id.example"}}, "teams[0].vcluster.access.oidc.clientId"),
    ("microk8s", {"oidc": {"adminGroups": ["ops"]}}, "teams[0].vcluster.access.oidc.adminGroups"),
])
def test_an_access_error_tells_which_key_to_set_by_its_full_name(kind, access, key):
    """The error is filed under the team's key (the merged settings are checked per team): its fix names a key the
    site can find, the team's, not a bare ``vcluster.access...`` that reads as the stack-wide block only."""
    config = dev_config()
    if kind == "kubeconfig":
        config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"gpus": 1}}
        config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    config["gpu-tenancy:vcluster"]["access"] = access
    for index, team in enumerate(config["gpu-tenancy:teams"]):
        team["vcluster"] = {"access": {"nodePort": 30443 + index}} if "nodePort" in access else {}
    with pytest.raises(ConfigError) as error:
        load(config)
    issue = next((i for i in error.value.issues if i.key == key), None)
    assert issue is not None, [str(i) for i in error.value.issues]
    assert "teams[0].vcluster.access." in issue.fix, issue.fix
    if key.endswith(".host") and access["exposure"] == "nodePort":
        assert "vcluster.access.host, for every team" in issue.fix
        assert ("cluster.microk8s.host" in issue.fix) == (kind == "microk8s")


def test_nodeport_on_a_remote_microk8s_box_defaults_to_its_address():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "10.1.2.3"
    config["gpu-tenancy:vcluster"]["access"] = {"exposure": "nodePort"}
    for index, team in enumerate(config["gpu-tenancy:teams"]):
        team["vcluster"] = {"access": {"nodePort": 31000 + index}}
    config["gpu-tenancy:sshPrivateKey"] = {"secure": "x"}
    teams = load_platform({name: value for name, value in project_config(config).items() if name != "sshPrivateKey"},
                          secrets_set={"sshPrivateKey"}).teams
    assert [t.vcluster.access.server for t in teams] == [f"https://10.1.2.3:{31000 + i}" for i in range(3)]


def test_a_loadbalancer_on_microk8s_warns_about_the_missing_provider():
    config = dev_config()
    config["gpu-tenancy:vcluster"]["access"] = {"exposure": "loadBalancer", "domain": "lab.example"}
    assert any("metallb" in warning for warning in load(config).warnings)


def test_the_authentication_config_fields_exist_in_kubernetes_v1_types_vendored_by_vcluster():
    """vCluster 0.36.1 vendors k8s.io/apiserver 0.36: the field names rendered are the v1 API's JSON names."""
    types = git("loft-sh/vcluster", "show", "v0.36.1:vendor/k8s.io/apiserver/pkg/apis/apiserver/v1/types.go")
    for field in ("jwt", "issuer", "url", "audiences", "certificateAuthority", "claimMappings", "username", "groups",
                  "claim", "prefix", "userValidationRules", "expression", "message"):
        assert re.search(rf'json:"{field}(,omitempty)?"', types), field
    k8s = git("loft-sh/vcluster", "show", "v0.36.1:pkg/k8s/k8s.go")
    # The distro appends apiServer.extraArgs to kube-apiserver's command line.
    assert "command.MergeArgs(args, apiServer.ExtraArgs)" in k8s
    statefulset = git("loft-sh/vcluster", "show", "v0.36.1:chart/templates/statefulset.yaml")
    assert "controlPlane.statefulSet.persistence.addVolumeMounts" in statefulset


def test_vclusters_control_plane_policy_admits_the_endpoint_port_from_anywhere():
    """NodePort, load balancer and gateway traffic reaches the pod on 8443 (after Service translation)."""
    policy = git("loft-sh/vcluster", "show", "v0.36.1:chart/templates/networkpolicy.yaml")
    control_plane = policy[policy.index("name: vc-cp-"):]
    ingress = control_plane[control_plane.index("  ingress:"):]
    first_rule = ingress.split("\n    - ")[1]
    assert "port: 8443" in first_rule and "from:" not in first_rule


def test_the_review_summary_shows_each_teams_endpoint_identity_and_smoke_test(oidc_run):
    from tools.plan.document import build_plan
    from tools.plan.summary import render_summary
    summary = render_summary(build_plan(oidc_run, "lab-oidc"))
    section = summary[summary.index("### Access per tenant"):]
    row = next(line for line in section.splitlines() if line.startswith("| `team-nlp`"))
    assert "`https://gpu-box.lab.example:30443`" in row
    assert "OIDC groups: `team-nlp-admins` → cluster-admin; `team-nlp-readers` → view" in row
    assert "queue `team-nlp`" in row and "must be refused" in row


def lb_site_config() -> dict:
    """The lab site with every team's endpoint on a load balancer named through external-dns."""
    config = dev_config()
    config["gpu-tenancy:vcluster"]["access"] = {"exposure": "loadBalancer", "domain": "vc.example.com"}
    return config


@pytest.mark.parametrize("annotations", [
    "the other team's endpoint", {EXTERNAL_DNS_PREFIX + "target": "203.0.113.7"},
    {EXTERNAL_DNS_PREFIX + "internal-hostname": "grafana.vc.example.com"}])
def test_a_tenant_service_cannot_claim_a_dns_name_through_external_dns(dev_run, annotations):
    """vCluster copies a Service's annotations to the host, where the site's external-dns would publish the name
    (vision's endpoint, resolved to nlp's pods or load balancer) for whichever Service it orders first."""
    from tests.synced_objects_sim import allocated, create_service, synced_objects_admission_for
    from tests.tenant_sim import platform_of
    teams = {team.name: team for team in platform_of(lb_site_config()).teams}
    if annotations == "the other team's endpoint":
        annotations = exposure_values(teams["team-vision"].vcluster.access)["controlPlane"]["service"]["annotations"]
        assert annotations == {EXTERNAL_DNS_HOSTNAME: "team-vision.vc.example.com"}
    nlp, admission = teams["team-nlp"], synced_objects_admission_for(dev_run, "team-nlp")
    syncer = f"system:serviceaccount:{nlp.namespace}:vc-{nlp.vcluster_name}"
    virtual = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "default", "annotations": {"prometheus.io/scrape": "true"}},
               "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 443}]}}
    honest = allocated(create_service(virtual, nlp), "None")
    assert admission.review(nlp.namespace, honest, user=syncer) == []
    claiming = copy.deepcopy(virtual)
    claiming["metadata"]["annotations"].update(annotations)
    attack = allocated(create_service(claiming, nlp), "None")
    for refusals in (admission.review(nlp.namespace, attack, user=syncer),
                     admission.review(nlp.namespace, attack, operation="UPDATE", old=honest, user=syncer)):
        assert [message.split("]")[0] for message in refusals] == ["[external-dns"]
    # The platform's own control-plane Service, which carries the name, is vCluster's and not judged.
    own = {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": nlp.vcluster_name, "namespace": nlp.namespace, "annotations": {EXTERNAL_DNS_HOSTNAME: "x"}}}
    assert not admission.matches(nlp.namespace, own, user=syncer)


def oidc_identity(authentication: dict, claims: dict) -> tuple[str, list[str]]:
    """The user a JWT's claims become under ``authentication`` (claim mappings), or a refusal naming the first
    userValidationRule that fails, as the API server applies them (rules run with cel-python and, agreeing, with
    CEL C++: tests/reference_cel.py)."""
    import celpy
    jwt = authentication["jwt"][0]
    mappings = jwt["claimMappings"]
    user = {"username": mappings["username"]["prefix"] + claims[mappings["username"]["claim"]],
            "groups": [mappings["groups"]["prefix"] + group for group in claims.get(mappings["groups"]["claim"], [])]}
    env = celpy.Environment()
    rules = jwt.get("userValidationRules", [])
    failed = [rule["message"] for rule in rules
              if not env.program(env.compile(rule["expression"])).evaluate({"user": celpy.json_to_cel(user)})]
    reference = REFERENCE.review({"validations": rules}, {"user": user})
    assert reference.refusals == [("message", message) for message in failed], f"CEL C++: {reference.refusals}"
    if failed:
        raise PermissionError(failed[0])
    return user["username"], user["groups"]


def authentication_of(config: dict, team: str = "team-nlp") -> dict:
    from components.tenant_access import authentication_config
    access = next(t for t in load(config).teams if t.name == team).vcluster.access
    return authentication_config(access)


def test_an_honest_member_logs_in_with_the_prefixed_names_the_bindings_use():
    authentication = authentication_of(oidc_dev_config())
    assert oidc_identity(authentication, {"email": "ana@example.com", "groups": ["team-nlp-admins"]}) == \
        ("oidc:ana@example.com", ["oidc:team-nlp-admins"])


def test_a_member_of_no_group_of_the_team_cannot_sign_in_to_its_vcluster():
    """Every team's vCluster trusts one issuer and one audience: a member of team-vision (or of no team) presenting
    a valid token at team-nlp's endpoint is refused at sign-in, so nothing team-nlp binds to system:authenticated
    reaches them; team-nlp's readers sign in."""
    authentication = authentication_of(oidc_dev_config())
    for groups in (["team-vision-admins"], [], ["team-nlp"]):
        with pytest.raises(PermissionError, match="only members of oidc:team-nlp-admins, oidc:team-nlp-readers"):
            oidc_identity(authentication, {"email": "eve@example.com", "groups": groups})
    assert oidc_identity(authentication, {"email": "rob@example.com", "groups": ["other", "team-nlp-readers"]}) == \
        ("oidc:rob@example.com", ["oidc:other", "oidc:team-nlp-readers"])


@pytest.mark.parametrize("prefix, claims", [
    # Prefixes the loader refuses: the API server's own rules hold without it.
    ("system:", {"email": "mallory@example.com", "groups": ["masters"]}),
    ("system", {"email": "mallory@example.com", "groups": [":masters"]}),
    ("system:", {"email": "serviceaccount:kube-system:generic-garbage-collector", "groups": []}),
])
def test_no_token_becomes_a_kubernetes_identity_whatever_the_prefix(prefix, claims):
    """A member of team A who names an IdP group 'masters' must not become system:masters (cluster-admin, past
    RBAC) in every team's vCluster: the API server's userValidationRules refuse the login."""
    from components.tenant_access import authentication_config
    access = load(oidc_dev_config()).teams[0].vcluster.access
    oidc = dataclasses.replace(access.oidc, username_prefix=prefix, groups_prefix=prefix)
    authentication = authentication_config(dataclasses.replace(access, oidc=oidc))
    with pytest.raises(PermissionError, match="may not start with system:"):
        oidc_identity(authentication, claims)


@pytest.mark.parametrize("key", ["groupsPrefix", "usernamePrefix"])
@pytest.mark.parametrize("prefix", ["system:", "system:oidc:", "system", "sys"])
def test_a_prefix_that_can_spell_system_is_refused_with_the_key(key, prefix):
    config = oidc_dev_config()
    config["gpu-tenancy:vcluster"]["access"]["oidc"][key] = prefix
    with pytest.raises(ConfigError) as error:
        load(config)
    issue = next(i for i in error.value.issues if i.key == f"teams[0].vcluster.access.oidc.{key}")
    assert issue.value == prefix and "system:masters" in issue.problem and "oidc:" in issue.fix
    config["gpu-tenancy:vcluster"]["access"]["oidc"][key] = "sso:"
    oidc = load(config).teams[0].vcluster.access.oidc
    assert {"groupsPrefix": oidc.groups_prefix, "usernamePrefix": oidc.username_prefix}[key] == "sso:"


APISERVER = "kubernetes/apiserver"


@pytest.mark.parametrize("tag", VIRTUAL_APISERVER_TAGS)
def test_the_virtual_api_server_refuses_an_email_its_token_calls_unverified(tag):
    """The default username claim is the e-mail (config/access.py). The API server of every virtual cluster's
    Kubernetes refuses a token whose email_verified claim is false when the username comes from the email claim
    (a token without that claim passes: whether an IdP sends it is the IdP's)."""
    assert load(oidc_dev_config()).teams[0].vcluster.access.oidc.username_claim == "email"
    source = git(APISERVER, "show", f"{mirrored_tag(APISERVER, tag)}:plugin/pkg/authenticator/token/oidc/oidc.go")
    username = go_function(source, "(a *jwtAuthenticator) getUsername")
    email = username[username.index('if usernameClaim == "email" {'):]
    assert 'c.hasClaim("email_verified")' in email and "if !emailVerified {" in email
    assert 'fmt.Errorf("oidc: email not verified")' in email
