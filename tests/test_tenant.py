"""TenantCluster: one protected namespace and vCluster release per team."""

from __future__ import annotations

from config.vocabulary import NETWORK_POLICY
from tests.conftest import destroy_order, dev_config, eks_config, run
from tools.offline.recording import REDACTED

RELEASE = "kubernetes:helm.sh/v3:Release"


def namespace_policies(program, namespace: str) -> dict[str, dict]:
    """The program's NetworkPolicies in a host namespace, by name (spec only)."""
    return {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in program.of_type(NETWORK_POLICY)
            if p.inputs["metadata"]["namespace"] == namespace}


def api_server_rules(program, namespace: str, release: str) -> list[dict]:
    """The egress rules of a team's control-plane policy that name ports and no peer."""
    spec = namespace_policies(program, namespace)[f"{release}-control-plane"]
    return [rule for rule in spec["egress"] if "to" not in rule]


def tenant_release(program, vcluster):
    return next(r for r in program.of_type(RELEASE) if r.inputs["name"] == vcluster)


def test_tenant_namespace_defaults_to_the_vcluster_cli_convention(dev_run):
    namespaces = {n.inputs["metadata"]["name"] for n in dev_run.of_type("kubernetes:core/v1:Namespace")}
    assert {"vcluster-team-nlp", "vcluster-team-vision", "vcluster-team-recommender"} <= namespaces


def test_tenant_namespaces_enforce_a_pod_security_level(dev_run):
    namespace = dev_run.named("tenant-team-nlp-namespace").inputs["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "baseline"
    config = dev_config()
    config["gpu-tenancy:teams"][1]["vcluster"] = {"podSecurity": "restricted"}
    labels = run(config).named("tenant-team-vision-namespace").inputs["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_namespace_and_vcluster_name_are_configurable(eks_run):
    release = tenant_release(eks_run, "rag-legal")
    assert release.inputs["namespace"] == "team-legal"
    assert eks_run.outputs["tenants"]["team-legal"]["connectCommand"] == \
        "vcluster connect rag-legal --namespace team-legal"


def test_tenant_release_is_the_pinned_loft_chart(dev_run):
    release = tenant_release(dev_run, "team-nlp").inputs
    assert release["chart"] == "vcluster"
    assert release["repositoryOpts"]["repo"] == "https://charts.loft.sh"
    assert release["version"] == "0.36.1"
    assert release["atomic"] is True


def test_vcluster_values_keep_kai_working(dev_run):
    values = tenant_release(dev_run, "team-nlp").inputs["values"]
    assert values["experimental"]["syncSettings"]["setOwner"] is False
    assert values["sync"]["fromHost"]["nodes"] == {"enabled": True, "selector": {"all": True}, "clearImageStatus": True}
    assert values["sync"]["fromHost"]["runtimeClasses"] == {"enabled": True}
    assert values["sync"]["toHost"]["pods"]["enforceTolerations"] == ["nvidia.com/gpu:NoSchedule"]
    assert values["controlPlane"]["backingStore"] == {"database": {"embedded": {"enabled": True}}}
    assert values["controlPlane"]["statefulSet"]["resources"]["requests"] == {"cpu": "200m", "memory": "256Mi"}


def test_node_labels_sync_only_the_gpu_pool(eks_run):
    values = tenant_release(eks_run, "rag-legal").inputs["values"]
    assert values["sync"]["fromHost"]["nodes"]["selector"] == {"labels": {"gpu-tenancy/pool": "gpu"}}


def test_team_overrides_merge_over_stack_defaults():
    config = dev_config()
    config["gpu-tenancy:vcluster"]["controlPlaneResources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    config["gpu-tenancy:teams"][1]["vcluster"] = {
        "syncRuntimeClasses": False,
        "extraValues": {"controlPlane": {"statefulSet": {"scheduling": {"priorityClassName": "tenant-cp"}}}},
    }
    program = run(config)
    vision = tenant_release(program, "team-vision").inputs["values"]
    nlp = tenant_release(program, "team-nlp").inputs["values"]
    assert vision["sync"]["fromHost"]["runtimeClasses"] == {"enabled": False}
    assert nlp["sync"]["fromHost"]["runtimeClasses"] == {"enabled": True}
    assert vision["controlPlane"]["statefulSet"]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert vision["controlPlane"]["statefulSet"]["scheduling"] == {"priorityClassName": "tenant-cp"}
    assert vision["experimental"]["syncSettings"]["setOwner"] is False
    assert "scheduling" not in nlp["controlPlane"]["statefulSet"]


def test_namespace_and_release_are_protected_and_the_release_waits_for_its_queue(dev_run):
    release = tenant_release(dev_run, "team-nlp")
    namespace = dev_run.named("tenant-team-nlp-namespace")
    assert release.options.get("protect") is True
    assert namespace.options.get("protect") is True
    queue = dev_run.named("queues-team-nlp")
    assert queue.urn in release.dependencies
    assert namespace.urn in release.dependencies


def test_protection_can_be_turned_off_per_team_for_a_decommission():
    config = dev_config()
    config["gpu-tenancy:teams"][2]["protect"] = False
    program = run(config)
    assert "protect" not in tenant_release(program, "team-recommender").options
    assert tenant_release(program, "team-nlp").options["protect"] is True


def test_tenant_kubeconfig_is_read_from_the_vc_secret_and_exported_as_a_secret(eks_run):
    secret = eks_run.named("tenant-team-legal-kubeconfig")
    assert secret.read is True
    assert secret.inputs["id"] == "team-legal/vc-rag-legal"
    assert eks_run.outputs["tenantKubeconfigs"] == REDACTED
    assert "tenantKubeconfigs" in eks_run.secret_outputs


def test_every_team_of_a_stack_gets_its_own_tenant():
    config = eks_config()
    config["gpu-tenancy:teams"].append({"name": "team-search", "resources": {"gpu": {"quota": 0, "limit": 1}}})
    program = run(config)
    assert tenant_release(program, "team-search").inputs["namespace"] == "vcluster-team-search"
    assert "team-search" in program.outputs["tenants"]


# --- tenant resource boundaries --------------------------------------------------------------------


def test_every_tenant_gets_quota_limit_range_and_network_policy_by_default(dev_run):
    policies = tenant_release(dev_run, "team-nlp").inputs["values"]["policies"]
    quota = policies["resourceQuota"]
    assert quota["enabled"] is True
    # The team's 16 CPU, 64Gi, 23 pods (the dev stack's), 20 Services, 20 claims and 100Gi, plus its control plane
    # (200m, 256Mi, one pod, three Services, a 5Gi claim) and its DNS (50m, 64Mi, one pod); the chart's other keys
    # removed.
    # Ephemeral-storage limits: 23 pods at the default 8Gi, the control plane's 10Gi and the DNS's default 8Gi.
    # Objects: 2 ConfigMaps per pod and KAI's 2 (sharing is on) with the platform's 4; 2 Secrets per pod with the
    # platform's 8; 2 slices per Service and 2 per Service and IP family; an Endpoints per Service. No huge pages.
    assert quota["quota"] == {"requests.cpu": "16250m", "requests.memory": "65856Mi", "requests.storage": "105Gi",
                              "count/pods": 25, "count/services": 23, "count/persistentvolumeclaims": 21,
                              "limits.ephemeral-storage": "202Gi",
                              "requests.hugepages-2Mi": "0", "requests.hugepages-1Gi": "0",
                              "services.loadbalancers": 0, "services.nodeports": 0,
                              "limits.cpu": None, "limits.memory": None,
                              "requests.ephemeral-storage": None, "count/secrets": 54, "count/configmaps": 96,
                              "count/endpoints": 23, "count/endpointslices.discovery.k8s.io": 86}
    assert policies["limitRange"] == {"enabled": True,
                                      "default": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "8Gi"},
                                      "defaultRequest": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "0"},
                                      "max": {"ephemeral-storage": "20Gi"}}
    # vCluster's own policies are off: the program renders them (components/tenant_network.py).
    assert policies["networkPolicy"] == {"enabled": False}
    assert set(namespace_policies(dev_run, "vcluster-team-nlp")) == {
        "team-nlp-workloads", "team-nlp-control-plane", "team-nlp-dns", "team-nlp-snapshot"}


def test_stack_quota_defaults_and_team_overrides_combine_key_by_key():
    config = dev_config()
    config["gpu-tenancy:vcluster"]["resourceQuota"] = {"cpu": "32", "memory": "128Gi"}
    config["gpu-tenancy:teams"][0]["vcluster"] = {"resourceQuota": {"pods": 10}, "networkPolicy": False}
    program = run(config)
    nlp = tenant_release(program, "team-nlp").inputs["values"]["policies"]
    vision = tenant_release(program, "team-vision").inputs["values"]["policies"]
    assert nlp["resourceQuota"]["quota"]["count/pods"] == 10 + 2
    assert nlp["resourceQuota"]["quota"]["requests.cpu"] == "32250m"
    assert namespace_policies(program, "vcluster-team-nlp") == {}
    assert vision["resourceQuota"]["quota"]["count/pods"] == 100 + 2
    assert vision["resourceQuota"]["quota"]["requests.memory"] == "131392Mi"
    assert len(namespace_policies(program, "vcluster-team-vision")) == 4


# --- nothing is lost by accident ------------------------------------------------------------------


def test_a_removed_team_loses_its_vcluster_before_its_queue_and_children_go_before_the_parent(dev_run):
    order = destroy_order(dev_run)
    for team in ("team-nlp", "team-vision", "team-recommender"):
        assert order.index(f"tenant-{team}-vcluster") < order.index(f"queues-{team}")
        assert order.index(f"queues-{team}") < order.index("queues-ml-org")
    assert order.index("queues-ml-org") < order.index("kai-release")


def test_releases_upgrade_in_place_and_fail_atomically(dev_run, eks_run):
    for program in (dev_run, eks_run):
        for release in program.of_type("kubernetes:helm.sh/v3:Release"):
            # A fixed release name means a version bump is a helm upgrade, not a new release.
            assert release.inputs["name"]
            assert "replaceOnChanges" not in release.options
            assert "deleteBeforeReplace" not in release.options
            assert release.inputs["atomic"] is True and release.inputs["cleanupOnFail"] is True
            assert release.inputs["timeout"] >= 600


def test_control_plane_resource_overrides_merge_per_key():
    config = dev_config()
    config["gpu-tenancy:teams"][0]["vcluster"] = {"controlPlaneResources": {"requests": {"cpu": "1"}}}
    resources = tenant_release(run(config), "team-nlp").inputs["values"]["controlPlane"]["statefulSet"]["resources"]
    assert resources["requests"] == {"cpu": "1", "memory": "256Mi"}
    assert resources["limits"] == {"memory": "2Gi"}


# --- what the host kind needs (config/hosts.py) -----------------------------------------------------


def test_microk8s_control_planes_reach_the_api_server_on_16443_only(dev_run):
    assert api_server_rules(dev_run, "vcluster-team-nlp", "team-nlp") == [{"ports": [{"port": 16443, "protocol": "TCP"}]}]


def test_eks_control_planes_reach_the_api_server_on_443_only(eks_run):
    # vCluster's own rule opened 443, 8443 and 6443 to every address; on EKS the Service ranges are left out but for
    # the kubernetes Service's address (tests/test_control_plane_egress_services.py).
    spec = namespace_policies(eks_run, "team-legal")["rag-legal-control-plane"]
    assert [rule for rule in spec["egress"] if rule.get("ports") == [{"port": 443, "protocol": "TCP"}]] == [{
        "ports": [{"port": 443, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.100.0.0/16", "172.20.0.0/16"]}},
               {"ipBlock": {"cidr": "10.100.0.1/32"}}, {"ipBlock": {"cidr": "172.20.0.1/32"}}]}]


def test_api_server_egress_rule_fits_the_vcluster_schema(dev_run):
    import jsonschema
    import json
    from tests.conftest import upstream_file

    schema = json.loads(upstream_file("vcluster", "values.schema.json").read_text())
    jsonschema.validate(tenant_release(dev_run, "team-nlp").inputs["values"], schema)


def test_node_labels_default_per_host_kind():
    config = eks_config()
    del config["gpu-tenancy:vcluster"]["nodeLabels"]
    values = tenant_release(run(config), "rag-legal").inputs["values"]
    # Every tenant pod (DNS included) is pinned to the GPU pools; the system pool is the platform's.
    assert values["sync"]["fromHost"]["nodes"]["selector"] == {"labels": {"gpu-tenancy/role": "gpu"}}
    assert values["sync"]["toHost"]["pods"]["enforceTolerations"] == ["nvidia.com/gpu:NoSchedule"]
    config = dev_config()
    values = tenant_release(run(config), "team-nlp").inputs["values"]
    assert values["sync"]["fromHost"]["nodes"]["selector"] == {"all": True}


def kubeconfig_wait(program, tenant):
    return next(r for r in program.of_type("kubernetes:batch/v1:Job") if r.name == f"tenant-{tenant}-kubeconfig-wait")


def test_the_kubeconfig_is_read_only_after_vcluster_wrote_its_secret(eks_run):
    job = kubeconfig_wait(eks_run, "team-legal")
    release = tenant_release(eks_run, "rag-legal")
    secret = eks_run.named("tenant-team-legal-kubeconfig")
    assert release.urn in job.dependencies
    assert job.urn in secret.dependencies
    spec = job.inputs["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["wait", "--for=create", "secrets/vc-rag-legal", "--timeout=300s",
                                 "--namespace", "team-legal"]
    assert job.inputs["metadata"]["namespace"] == "team-legal"
    # Bounded: two attempts of 5 minutes, then the Job (and pulumi up) fails.
    assert spec["backoffLimit"] == 1 and spec["activeDeadlineSeconds"] <= 900
    assert job.options["customTimeouts"]["create"] == "15m"
    roles = [r for r in eks_run.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
             if r.inputs["metadata"]["namespace"] == "team-legal"]
    assert [r.inputs["rules"] for r in roles] == [[{"apiGroups": [""], "resources": ["secrets"],
                                                   "resourceNames": ["vc-rag-legal"],
                                                   "verbs": ["get", "list", "watch"]}]]


def test_the_kubeconfig_wait_pod_runs_under_restricted_pod_security_and_the_tenant_quota(dev_run):
    pod = kubeconfig_wait(dev_run, "team-nlp").inputs["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    # The namespace's ResourceQuota covers requests and limits of cpu and memory.
    assert set(container["resources"]["requests"]) == set(container["resources"]["limits"]) == {"cpu", "memory"}


def test_a_sites_network_policy_values_go_to_the_programs_policies_and_never_turn_vclusters_on():
    config = dev_config()
    rule = {"to": [{"ipBlock": {"cidr": "10.9.0.0/16"}}], "ports": [{"port": 5432, "protocol": "TCP"}]}
    config["gpu-tenancy:vcluster"]["extraValues"] = {"policies": {"networkPolicy": {
        "enabled": True, "workload": {"egress": [rule]}}}}
    program = run(config)
    assert tenant_release(program, "team-nlp").inputs["values"]["policies"]["networkPolicy"] == {"enabled": False}
    assert namespace_policies(program, "vcluster-team-nlp")["team-nlp-workloads"]["egress"][-1] == rule
