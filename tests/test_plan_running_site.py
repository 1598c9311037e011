"""The plan diff's "Changes a running site refuses or that lose state", on real charts and real config edits.

The real-chart tests render the charts of the chart cache ($GPU_TENANCY_CHART_CACHE) with the program's values
before and after an edit; the rules' own semantics are checked on small objects built for them.
"""

from __future__ import annotations

import itertools
import re

import pytest
import yaml

from config import versions
from tests.conftest import dev_config, eks_config, git, mirrored_tag, real_charts_or_skip
from tests.isolation_spec import isolation_config, prefixed
from tests.release_renders import RELEASES, every_release_renders, plan_of, rendered
from tools.plan import cli as plan
from tools.plan.diff import diff_plans, render_diff
from tools.plan.replacement import DATA_REPLACES, FORCE_NEW, pulumi_findings, replacing_paths
from tools.plan.chart_versions import HOOK_LEAVES
from tools.plan.running_site import chart_findings, chart_objects

SERIOUS = ("refused", "stops", "lost", "unknown")


@pytest.fixture(scope="module")
def dev_render(tmp_path_factory):
    return rendered(dev_config(), tmp_path_factory.mktemp("dev-render"))


def _extra_values(volume_claim: dict) -> dict:
    config = dev_config()
    config["gpu-tenancy:vcluster"]["extraValues"] = {"controlPlane": {"statefulSet": {"persistence": {
        "volumeClaim": volume_claim}}}}
    return config


# --- real charts, real edits ------------------------------------------------------------------------


@pytest.mark.parametrize("volume_claim, old, new", [({"size": "10Gi"}, "5Gi", "10Gi"),
                                                    ({"storageClass": "fast"}, "microk8s-hostpath", "fast")])
def test_a_control_plane_volume_edit_through_extra_values_is_refused_for_every_tenant(
        volume_claim, old, new, dev_render, tmp_path):
    findings = chart_findings(dev_render, rendered(_extra_values(volume_claim), tmp_path))
    assert {finding.category for finding in findings} == {"refused"}
    assert sorted(finding.subject for finding in findings) == [
        f"{team}: StatefulSet vcluster-{team}/{team} (apps)" for team in ("team-nlp", "team-recommender",
                                                                           "team-vision")]
    for finding in findings:
        assert finding.field.startswith("spec.volumeClaimTemplates[0].spec.")
        assert (finding.old, finding.new) == (old, new)
        assert "ValidateStatefulSetUpdate" in finding.why and "--cascade=orphan" in finding.fix


def test_growing_grafanas_volume_is_refused_but_prometheus_volume_and_retention_are_taken(tmp_path):
    """Grafana is a StatefulSet of the kube-prometheus-stack chart, so Helm patches its claim template; Prometheus'
    StatefulSet belongs to the Prometheus operator, which the chart only hands the new size."""
    def site(**observability):
        config = dev_config()
        config["gpu-tenancy:observability"] = {"prometheus": "install", **observability}
        return config
    before = rendered(site(), tmp_path / "before")
    [finding] = chart_findings(before, rendered(site(grafanaStorage="20Gi"), tmp_path / "grafana"))
    assert (finding.category, finding.subject) == (
        "refused", "kube-prometheus-stack: StatefulSet monitoring/kube-prometheus-stack-grafana (apps)")
    assert (finding.field, finding.old, finding.new) == (
        "spec.volumeClaimTemplates[0].spec.resources.requests.storage", "10Gi", "20Gi")
    assert chart_findings(before, rendered(site(storage="100Gi", retention="30d"), tmp_path / "prometheus")) == []


HONEST_EDITS = {
    "a team's quota": lambda config: config["gpu-tenancy:teams"][0]["resources"]["gpu"].update(quota=0.2),
    "a team's limit": lambda config: config["gpu-tenancy:teams"][1]["resources"]["gpu"].update(limit=-1),
    "a team added": lambda config: config["gpu-tenancy:teams"].append(
        {"name": "team-audio", "resources": {"gpu": {"quota": 0.01, "limit": 1}}}),
    "control-plane resources": lambda config: config["gpu-tenancy:teams"][0].update(
        vcluster={"controlPlaneResources": {"requests": {"cpu": "1", "memory": "1Gi"}}}),
    "the tenant quota": lambda config: config["gpu-tenancy:vcluster"].update(resourceQuota={"pods": 50}),
}


@pytest.mark.parametrize("edit", HONEST_EDITS, ids=list(HONEST_EDITS))
def test_an_honest_change_is_not_reported(edit, dev_render, tmp_path):
    config = dev_config()
    HONEST_EDITS[edit](config)
    findings = chart_findings(dev_render, rendered(config, tmp_path))
    findings += pulumi_findings(diff_plans(plan_of(dev_config()), plan_of(config)), plan_of(dev_config()),
                                plan_of(config))
    assert [finding for finding in findings if finding.category in SERIOUS] == []


def test_the_cli_puts_a_refused_edit_first_in_the_diff(tmp_path):
    cache = real_charts_or_skip(plan_of(dev_config()))
    common = ["--render-charts", "--chart-cache", str(cache)]
    assert plan.main(["dev", "--out", str(tmp_path / "old"), *common], config=dev_config()) == 0
    assert plan.main(["dev", "--out", str(tmp_path / "new"), *common, "--diff-against",
                      str(tmp_path / "old" / "plan.json")], config=_extra_values({"size": "10Gi"})) == 0
    text = (tmp_path / "new" / "diff.md").read_text()
    section = text.split("## Changes a running site refuses or that lose state")[1].split("\n## ")[0]
    assert "cannot be applied to a running site as it is, or loses state (refused)" in text.split("\n## ")[0]
    assert "**Refused by the API server" in section
    assert ("team-nlp: StatefulSet vcluster-team-nlp/team-nlp (apps): "
            "`spec.volumeClaimTemplates[0].spec.resources.requests.storage` \"5Gi\" -> \"10Gi\"") in section


# --- every upgrade between accepted releases, with the program's values --------------------------------


@pytest.fixture(scope="module")
def every_release():
    return every_release_renders()


@pytest.mark.parametrize("chart", RELEASES)
def test_every_upgrade_between_accepted_releases_is_taken_by_a_running_site(chart, every_release):
    renders = every_release[chart]
    assert sorted(renders, key=versions.release_order) == list(RELEASES[chart]) and all(renders.values())
    trap: dict[tuple[str, str], list[str]] = {}
    for older, newer in itertools.combinations(RELEASES[chart], 2):
        findings = chart_findings(renders[older], renders[newer])
        assert [f for f in findings if f.category in SERIOUS] == [], f"{chart} {older} -> {newer}"
        trap[(older, newer)] = [f.subject for f in findings if f.category == "not applied"]
    # Every chart with CRDs applies them in a pre-upgrade hook Job allowed to write each and, where the Job names the
    # chart's CRD files, naming its file (kube-prometheus-stack with the program's crds.upgradeJob: by default an
    # upgrade would leave the first release's Prometheus-operator CRDs installed), but for the CRDs its table says
    # the hook leaves (tools/plan/chart_versions.py HOOK_LEAVES); vCluster ships none.
    for (older, newer), subjects in trap.items():
        assert {subject.split(" ")[2] for subject in subjects} <= HOOK_LEAVES.get(chart, {}).get(newer, set()), \
            (older, newer, subjects)
    if chart == "kube-prometheus-stack":
        first, last = (chart_objects(renders[release]) for release in (RELEASES[chart][0], RELEASES[chart][-1]))
        changed = [key for key in first if first[key].crd_file and key in last
                   and first[key].manifest != last[key].manifest]
        assert any(key[-1] == "prometheuses.monitoring.coreos.com" for key in changed), changed


# --- Pulumi replacements from config edits -----------------------------------------------------------


def _replacements(config: dict, stack: str = "dev", base: dict | None = None):
    old, new = plan_of(base or (dev_config() if stack == "dev" else eks_config()), stack), plan_of(config, stack)
    diff = diff_plans(old, new)
    diff.running_site = pulumi_findings(diff, old, new)
    return {(f.category, f.subject.split(" ", 1)[1], f.field) for f in diff.running_site}, render_diff(diff, "a", "b")


@pytest.mark.parametrize("key, value, field", [("namespace", "nlp", "namespace"),
                                               ("vclusterName", "nlp", "name")])
def test_a_namespace_forming_key_of_a_protected_team_stops_pulumi_up(key, value, field):
    config = dev_config()
    config["gpu-tenancy:teams"][0][key] = value
    found, text = _replacements(config)
    assert ("stops", "tenant-team-nlp-vcluster", field) in found
    assert ("stops", "tenant-team-nlp-namespace", "metadata.name") in found or key == "namespace"
    assert "**Stops `pulumi up`" in text


def test_an_unprotected_team_removed_loses_its_namespace_and_virtual_cluster():
    base = dev_config()
    base["gpu-tenancy:teams"][2]["protect"] = False
    config = dev_config()
    del config["gpu-tenancy:teams"][2]
    found, text = _replacements(config, base=base)
    assert {("lost", "tenant-team-recommender-namespace", "(the resource)"),
            ("lost", "tenant-team-recommender-vcluster", "(the resource)")} <= found
    assert "nothing is installed again" in text and "a vCluster's virtual cluster" in text


def test_a_time_slicing_change_on_a_box_is_told_by_its_new_key_not_as_a_harmless_replacement():
    # The ConfigMap holds nothing else, but nodes labelled by hand with the old key (tools/plan/sharing_profiles.py).
    config = dev_config()
    config["gpu-tenancy:gpuOperator"]["timeSlicing"]["replicas"] = 3
    found, _ = _replacements(config)
    assert {(category, field) for category, _, field in found} == {("disrupts", "nvidia.com/device-plugin.config")}


def test_a_cloud_resource_whose_rules_are_not_read_is_unknown_not_passed():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"][0]["instanceTypes"] = ["g5.xlarge"]
    found, text = _replacements(config, "eks")
    assert any(category == "unknown" and "gpu" in subject for category, subject, _ in found), found
    assert "pulumi preview --diff" in text


@pytest.mark.parametrize("version, why", [("1.35", "one minor version at a time"), ("1.32", "never downgrades")])
def test_an_eks_version_edit_eks_refuses_stops_pulumi_up(version, why):
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["kubernetesVersion"] = version
    found, text = _replacements(config, "eks")
    assert ("stops", "host-eks", "version") in found
    assert not any(category == "unknown" and subject == "host-eks" for category, subject, _ in found), found
    assert why in text and f'"1.33" -> "{version}"' in text


def test_an_eks_upgrade_by_one_minor_is_taken_and_replaces_every_node_groups_nodes():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["kubernetesVersion"] = "1.34"
    found, text = _replacements(config, "eks")
    assert {("disrupts", "host-eks", "version"), ("disrupts", "host-gpu-gpu", "version"),
            ("disrupts", "host-system", "version")} <= found
    assert not any(category in ("stops", "unknown") for category, *_ in found), found
    assert "replaces every node" in text


@pytest.mark.parametrize("key, value", [("cluster.eks.tags", {"cost-center": "ml"}), ("cluster.podPidsLimit", 8192)])
def test_a_new_launch_template_version_is_called_out_as_replacing_every_node_of_its_group(key, value):
    config = eks_config()
    block, _, name = key.rpartition(".")
    section = config["gpu-tenancy:cluster"]
    for step in block.split(".")[1:]:
        section = section[step]
    section[name] = value
    found, text = _replacements(config, "eks")
    assert {subject for category, subject, _ in found if category == "disrupts"} >= {
        "host-gpu-gpu-template", "host-system-template"}
    assert not any(category == "unknown" and subject.endswith("-template") for category, subject, _ in found), found
    assert "EKS replaces every node of the group with one started from it" in text


def test_node_groups_first_pinned_to_the_clusters_version_are_told_apart_from_an_upgrade():
    # A site planned before the node groups followed the cluster's version: their new pin changes nothing unless
    # the cluster was upgraded since, and the finding says so instead of announcing new nodes.
    old, new = plan_of(eks_config(), "eks"), plan_of(eks_config(), "eks")
    for resource in old["resources"]:
        if resource["type"] == "eks:index:ManagedNodeGroup":
            del resource["inputs"]["version"]
    diff = diff_plans(old, new)
    found = [f for f in pulumi_findings(diff, old, new) if f.field == "version"]
    assert {f.subject.split(" ", 1)[1] for f in found} == {"host-gpu-gpu", "host-system"}
    assert all(f.category == "disrupts" and "otherwise nothing changes" in f.why for f in found)


def test_a_pools_new_mig_layout_is_called_out_as_disrupting_its_running_work():
    base = prefixed(isolation_config())
    config = prefixed(isolation_config())
    config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"][0]["migConfig"] = "all-1g.10gb"
    config["gpu-tenancy:teams"][1]["isolation"]["migProfile"] = "1g.10gb"
    found, text = _replacements(config, "eks", base=base)
    assert ("disrupts", "host-gpu-h100", 'labels["nvidia.com/mig.config"]') in found
    assert '"all-balanced" -> "all-1g.10gb"' in text and "drain the pool's nodes" in text
    # Another change of the same pool is not a new layout.
    config = prefixed(isolation_config())
    config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"][0]["maxSize"] = 2
    found, _ = _replacements(config, "eks", base=base)
    assert not any(category == "disrupts" for category, *_ in found)


# --- the rules' semantics, on objects built for them -------------------------------------------------


def _manifests(*objects: dict, path: str = "templates/all.yaml") -> dict[str, str]:
    return {f"demo/{path}": yaml.safe_dump_all(objects)}


def _object(kind: str, spec: dict, api_version: str = "v1", **metadata) -> dict:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "ns", **metadata},
            "spec": spec}


def test_a_kind_without_a_rule_is_unknown():
    lease = lambda holder: _object("Lease", {"holderIdentity": holder}, "coordination.k8s.io/v1")  # noqa: E731
    [finding] = chart_findings(_manifests(lease("a")), _manifests(lease("b")))
    assert finding.category == "unknown" and "no update rule" in finding.why


@pytest.mark.parametrize("old, new, refused", [("5Gi", "6Gi", False), ("5Gi", "4Gi", True), ("1Gi", "1024Mi", False)])
def test_a_claim_may_grow_but_not_shrink(old, new, refused):
    claim = lambda size: _object("PersistentVolumeClaim", {"resources": {"requests": {"storage": size}}})  # noqa
    assert bool(chart_findings(_manifests(claim(old)), _manifests(claim(new)))) is refused


def test_a_default_stated_or_left_out_is_no_change_but_another_value_is_refused():
    statefulset = lambda **spec: _object("StatefulSet", {"serviceName": "s", **spec}, "apps/v1")  # noqa: E731
    assert chart_findings(_manifests(statefulset()), _manifests(statefulset(podManagementPolicy="OrderedReady"))) == []
    [finding] = chart_findings(_manifests(statefulset()), _manifests(statefulset(podManagementPolicy="Parallel")))
    assert finding.field == "spec.podManagementPolicy"


def test_a_service_may_leave_its_address_to_the_cluster_but_not_turn_headless():
    service = lambda **spec: _object("Service", {"ports": [{"port": 80}], **spec})  # noqa: E731
    assert chart_findings(_manifests(service()), _manifests(service(clusterIP="10.0.0.9"))) == []
    assert [f.field for f in chart_findings(_manifests(service()), _manifests(service(clusterIP="None")))] == [
        "spec.clusterIP"]


def test_a_custom_resource_is_judged_by_its_crd():
    crd = lambda rule: {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",  # noqa: E731
                        "metadata": {"name": "widgets.example.com"},
                        "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"},
                                 "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
                                     "x-kubernetes-validations": [{"rule": rule}]}}}]}}
    widget = lambda size: _object("Widget", {"size": size}, "example.com/v1")  # noqa: E731
    assert chart_findings(_manifests(crd("self.size > 0"), widget(1)), _manifests(crd("self.size > 0"), widget(2))) == []
    [finding] = chart_findings(_manifests(crd("self.size == oldSelf.size"), widget(1)),
                               _manifests(crd("self.size == oldSelf.size"), widget(2)))
    assert finding.category == "unknown" and "oldSelf" in finding.why
    [finding] = chart_findings(_manifests(widget(1)), _manifests(widget(2)))
    assert finding.category == "unknown" and "no CRD" in finding.why


def test_a_claim_the_upgrade_drops_is_lost_unless_helm_keeps_it():
    claim = _object("PersistentVolumeClaim", {"resources": {"requests": {"storage": "1Gi"}}})
    [finding] = chart_findings(_manifests(claim), {})
    assert finding.category == "lost" and "every file on it" in finding.why
    claim["metadata"]["annotations"] = {"helm.sh/resource-policy": "keep"}
    assert chart_findings(_manifests(claim), {}) == []


def _crd(version: str, name: str = "widgets.example.com") -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name}, "spec": {"versions": [{"name": version}]}}


def _upgrader(hook: str, verbs: list, resource_names: list | None, account: str = "upgrader") -> dict[str, str]:
    """A hook Job running as ``account``, and a ClusterRole on CRDs bound to the ``upgrader`` account."""
    job = _object("Job", {"template": {"spec": {"serviceAccountName": account, "containers": [{"image": "u:1"}]}}},
                  "batch/v1", annotations={"helm.sh/hook": hook})
    rule = {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": verbs,
            **({"resourceNames": resource_names} if resource_names is not None else {})}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "crd-writer"},
            "rules": [rule]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "crd-writer"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "crd-writer"},
               "subjects": [{"kind": "ServiceAccount", "name": "upgrader", "namespace": "ns"}]}
    return _manifests(job, role, binding, path="templates/hook.yaml")


def test_hooks_are_made_anew():
    hook = lambda image: _object("Job", {"template": {"spec": {"containers": [{"image": image}]}}},  # noqa
                                 "batch/v1", annotations={"helm.sh/hook": "post-install"})
    assert chart_findings(_manifests(hook("a")), _manifests(hook("b"))) == []


@pytest.mark.parametrize("hook, verbs, names, account, applied", [
    ("pre-install,pre-upgrade,pre-rollback", ["create", "patch"], ["widgets.example.com"], "upgrader", True),
    ("pre-upgrade", ["*"], None, "upgrader", True),  # a rule naming no CRD writes every one
    ("pre-upgrade", ["patch"], ["gadgets.example.com"], "upgrader", False),  # allowed other CRDs only
    ("pre-upgrade", ["get", "list"], None, "upgrader", False),  # may only read them
    ("pre-upgrade", ["patch"], None, "someone-else", False),  # the Job runs as another account
    ("post-upgrade", ["patch"], None, "upgrader", False),  # after the new objects, not before
    ("pre-install", ["patch"], None, "upgrader", False),  # never on an upgrade
])
def test_a_crd_is_upgraded_only_by_a_pre_upgrade_hook_allowed_to_write_it(hook, verbs, names, account, applied):
    old = _manifests(_crd("v1"), path="crds/w.yaml")
    new = {**_manifests(_crd("v2"), path="crds/w.yaml"), **_upgrader(hook, verbs, names, account)}
    findings = chart_findings(old, new)
    assert findings == [] if applied else [(f.category, f.subject) for f in findings] == [
        ("not applied", "demo: CustomResourceDefinition widgets.example.com (apiextensions.k8s.io)")]


def test_a_crd_new_in_the_upgrade_is_not_installed_by_helm_but_is_by_the_hook():
    old = _manifests(_crd("v1"), path="crds/w.yaml")
    both = _manifests(_crd("v1"), _crd("v1", "gadgets.example.com"), path="crds/w.yaml")
    [finding] = chart_findings(old, both)
    assert (finding.category, finding.old, finding.subject) == (
        "not applied", "absent", "demo: CustomResourceDefinition gadgets.example.com (apiextensions.k8s.io)")
    assert chart_findings(old, {**both, **_upgrader("pre-upgrade", ["patch"], None)}) == []


# --- the replacement rules are the Kubernetes provider's own ---------------------------------------------

PULUMI_KUBERNETES_TAG = "v4.32.0"


def test_the_replacement_rules_are_the_kubernetes_providers_own():
    """Every path pulumi-kubernetes' diff.go names for a replacement is in tools/plan/replacement.py and nothing
    else: a provider release that adds one turns this red."""
    tag = mirrored_tag("pulumi/pulumi-kubernetes", PULUMI_KUBERNETES_TAG)
    source = git("pulumi/pulumi-kubernetes", "show", f"{tag}:provider/pkg/provider/diff.go")
    upstream = set(re.findall(r'"\.([A-Za-z][\w.\[\]*]*)"', source))
    ours = {"metadata", "name", "namespace"}  # every object's metadata.name and metadata.namespace
    for paths in FORCE_NEW.values():
        for path in paths:
            containers, _, field = path.partition("[*].")
            ours |= {f"{containers}[*]", field} if field else {path}
    ours |= {name for names, _ in DATA_REPLACES.values() for name in names}
    # Sub-paths of fields matched as a whole here (a selector, a container's env).
    ours |= {"matchExpressions", "matchExpressions.key", "matchExpressions.operator", "matchExpressions.values",
             "matchLabels", "env.value"}
    ours.add("spec")  # policy/v1beta1 PodDisruptionBudget, a version the program never registers
    assert upstream == ours
    release = git("pulumi/pulumi-kubernetes", "show", f"{tag}:provider/pkg/provider/helm_release.go")
    assert 'forceNewFields := []string{".name", ".namespace"}' in release


@pytest.mark.parametrize("path", ["spec.containers[0].image", "spec.containers[name=app].image",
                                  'spec.initContainers[name="wait.x"].image'])
def test_a_container_named_in_the_diff_is_judged_like_one_at_a_position(path):
    """The plan diff names list elements by their name where it can; the replacement rules still apply to them."""
    pod = {"type": "kubernetes:core/v1:Pod", "options": {}}
    assert replacing_paths(pod, [path, "metadata.labels[\"app.kubernetes.io/name\"]"], {}) == [path]
