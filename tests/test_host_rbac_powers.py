"""Spec of who on the host holds the powers that would undo the tenant boundary: read every Secret (each team's
vCluster credentials), write admission policies and webhooks (the boundary itself), write RBAC, impersonate, mint
service account tokens, create pods or workloads in any namespace, exec into any pod, relabel a namespace (its Pod
Security level) and reach kubelets.

Read from the real charts rendered with the program's values (skipping without the chart cache) for a MicroK8s site
and an EKS site with every component installed, and at every accepted release of every chart: each holder is a
platform component listed below with what it does with the power, no team's service account holds any, and a chart
upgrade that grants one more turns this red.
"""

from __future__ import annotations

import functools

import pytest

from config import load_platform, versions
from tests.host_rbac import Power, holders
from tests.release_renders import RELEASES, every_release_renders, site_with_every_chart
from tests.test_observability_discovery import eks_objects, objects  # noqa: F401 (fixtures)
from tools.charts.manifest_yaml import load_manifests

WRITE = ("create", "update", "patch", "delete", "deletecollection")
POWERS = {
    "read every Secret": Power(("",), ("secrets",), ("get", "list", "watch")),
    "write admission policies and webhooks": Power(("admissionregistration.k8s.io",), (
        "validatingadmissionpolicies", "validatingadmissionpolicybindings", "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings", "validatingwebhookconfigurations", "mutatingwebhookconfigurations"), WRITE),
    "write RBAC": Power(("rbac.authorization.k8s.io",), ("clusterroles", "clusterrolebindings", "roles",
                                                         "rolebindings"), (*WRITE, "bind", "escalate")),
    "impersonate": Power(("", "authentication.k8s.io"), ("users", "groups", "serviceaccounts", "uids", "userextras"),
                         ("impersonate",)),
    "mint service account tokens": Power(("",), ("serviceaccounts/token",), ("create",)),
    "create pods": Power(("",), ("pods",), ("create",)),
    "exec into pods": Power(("",), ("pods/exec", "pods/attach", "pods/portforward", "pods/ephemeralcontainers"),
                            ("create", "get", "update", "patch")),
    "write workloads": Power(("apps", "batch"), ("deployments", "daemonsets", "statefulsets", "replicasets", "jobs",
                                                 "cronjobs"), ("create", "update", "patch")),
    "relabel or delete namespaces": Power(("",), ("namespaces",), ("update", "patch", "delete")),
    "reach kubelets": Power(("",), ("nodes/proxy",), ("get", "create")),
}
_KAI_OPERATOR = "KAI's operator deploys and upgrades KAI's components (Deployments, their Secrets and webhooks)"
_PROMETHEUS_OPERATOR = ("the Prometheus operator runs Prometheus and Alertmanager (StatefulSets) and reads the Secrets "
                        "their resources name")
_GPU_OPERATOR = "the GPU Operator gives its operands their cluster roles and labels its namespace"
_NFD_WITH_OPERATOR = ("GPU Operator v24.9.0 to v24.9.2 bind the operator's ClusterRole to node-feature-discovery's "
                      "account too, whose worker runs on every node; v25.3.0 on, to the operator alone")
# Power -> service account -> what its component does with it. A component missing from a release is fine; one not
# listed fails.
HOLDERS = {
    "read every Secret": {"kai-operator": _KAI_OPERATOR, "kube-prometheus-stack-operator": _PROMETHEUS_OPERATOR},
    "write admission policies and webhooks": {
        "kai-operator": _KAI_OPERATOR + "; it may create any webhook configuration, change only its own four",
        "kube-prometheus-stack-admission": "kube-prometheus-stack's install hook writes its webhook's certificate "
                                           "into the webhook configurations",
        "gpu-operator": "GPU Operator v26.7.0 writes its DRA driver's ResourceSlice policy "
                        "(manifests/state-dra-driver); its ClusterRole grants every policy and binding, the platform's "
                        "among them",
    },
    "write RBAC": {
        "gpu-operator": _GPU_OPERATOR,
        "node-feature-discovery": _NFD_WITH_OPERATOR,
    },
    "create pods": {
        "binder": "KAI's binder creates the reservation pods that hold a shared GPU",
        "kai-operator": _KAI_OPERATOR,
        "node-scale-adjuster": "KAI's node-scale-adjuster creates the scaling pods an autoscaler sees for fractions",
        "pod-grouper": "KAI's pod-grouper (its controller's RBAC markers grant pods create, update, patch)",
        "gpu-operator": "GPU Operator v24.9.0 to v24.9.2 (their ClusterRole; v25.3.0 on, not cluster-wide)",
        "node-feature-discovery": _NFD_WITH_OPERATOR,
    },
    "write workloads": {"kai-operator": _KAI_OPERATOR, "kube-prometheus-stack-operator": _PROMETHEUS_OPERATOR},
    "relabel or delete namespaces": {"gpu-operator": _GPU_OPERATOR, "node-feature-discovery": _NFD_WITH_OPERATOR},
    "reach kubelets": {"node-feature-discovery": "the GPU Operator's node-feature-discovery (its chart's "
                                                 "ClusterRole)"},
}


def found(manifests) -> dict[str, dict[str, str]]:
    """Power -> ``namespace/name`` -> the ClusterRole granting it."""
    manifests = list(manifests)
    return {power: holders(manifests, grant) for power, grant in POWERS.items()}


def account(holder: str) -> str:
    return holder.rpartition("/")[2]


def team_namespaces(rendered) -> set[str]:
    """The host namespaces of the site's teams: where the vCluster chart's objects are."""
    return {obj.namespace for obj in rendered if obj.namespace and obj.origin.startswith("chart vcluster")}


def check(held: dict[str, dict[str, str]], team_namespaces: set[str]) -> None:
    for power, by_holder in held.items():
        unknown = {holder: role for holder, role in by_holder.items() if account(holder) not in HOLDERS.get(power, {})}
        assert not unknown, (power, unknown)
        tenants = {holder for holder in by_holder if holder.partition("/")[0] in team_namespaces}
        assert not tenants, (power, tenants)


@pytest.mark.parametrize("site_objects", ["objects", "eks_objects"])
def test_only_the_listed_platform_components_hold_a_power_over_the_whole_host(site_objects, request):
    rendered = request.getfixturevalue(site_objects)
    held = found(obj.manifest for obj in rendered)
    teams = team_namespaces(rendered)
    assert teams
    check(held, teams)


def test_each_listed_holder_holds_its_power_on_a_site_or_at_an_accepted_release(objects, eks_objects):
    """The lists hold no stale entry."""
    held = [found(obj.manifest for obj in rendered) for rendered in (objects, eks_objects)]
    held += [found(release_manifests(position)) for position in POSITIONS]
    for power, listed in HOLDERS.items():
        assert {account(holder) for by_site in held for holder in by_site[power]} == set(listed), power


def test_no_team_holds_any_power_and_the_check_sees_a_teams_binding(objects):
    """A team's syncer service account, bound as the tenant would bind it had it the rights: each power is seen."""
    team = sorted(team_namespaces(objects))[0]
    role = {"kind": "ClusterRole", "metadata": {"name": "take-over"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    binding = {"kind": "ClusterRoleBinding", "metadata": {"name": "take-over"},
               "roleRef": {"kind": "ClusterRole", "name": "take-over"},
               "subjects": [{"kind": "ServiceAccount", "namespace": team, "name": "vc-take-over"}]}
    held = found([*(obj.manifest for obj in objects), role, binding])
    assert all(f"{team}/vc-take-over" in by_holder for by_holder in held.values())
    with pytest.raises(AssertionError):
        check(held, {team})
    # A rule naming its objects grants no power over every object of the kind.
    named = {**role, "rules": [{**role["rules"][0], "resourceNames": ["one"]}]}
    assert not any(f"{team}/vc-take-over" in by_holder for by_holder in found([named, binding]).values())


POSITIONS = range(max(len(releases) for releases in RELEASES.values()))


@functools.lru_cache(maxsize=None)
def release_manifests(position: int) -> tuple[dict, ...]:
    """Every object of the EKS site with every chart at its release of ``position`` in the accepted lists."""
    manifests = []
    for releases in every_release_renders().values():
        ordered = list(releases.values())
        for text in ordered[min(position, len(ordered) - 1)].values():
            manifests += [document for document in load_manifests(text) if isinstance(document, dict)]
    return tuple(manifests)


@pytest.mark.parametrize("position", POSITIONS)
def test_at_every_accepted_release_the_holders_are_listed(position):
    config = {key.partition(":")[2]: value for key, value in site_with_every_chart(position).items()}
    check(found(release_manifests(position)), {team.namespace for team in load_platform(config).teams})


@pytest.mark.parametrize("release", versions.GPU_OPERATOR_RELEASES)
def test_node_feature_discovery_shares_the_operators_role_exactly_below_the_release_the_config_warns_from(release):
    """config/load_operators.py warns a site of these releases (tests/test_gpu_operator.py)."""
    bound = set()
    for text in every_release_renders()["gpu-operator"][release].values():
        for document in load_manifests(text):
            if isinstance(document, dict) and document.get("kind") == "ClusterRoleBinding" \
                    and document["roleRef"]["name"] == "gpu-operator":
                bound |= {subject["name"] for subject in document.get("subjects") or []}
    numbers = versions.release_numbers
    shared = numbers(release) < numbers(versions.GPU_OPERATOR_OWN_CLUSTER_ROLE)
    assert bound == ({"gpu-operator", "node-feature-discovery"} if shared else {"gpu-operator"})


@pytest.mark.parametrize("site_objects", ["objects", "eks_objects"])
def test_a_teams_namespace_binds_only_its_own_accounts_and_no_other_namespace_binds_them(site_objects, request):
    rendered = request.getfixturevalue(site_objects)
    teams = team_namespaces(rendered)
    bindings = [obj for obj in rendered if obj.kind == "RoleBinding"]
    assert any(obj.namespace in teams for obj in bindings)
    for obj in bindings:
        for subject in obj.manifest.get("subjects") or []:
            if obj.namespace in teams:
                assert (subject.get("kind"), subject.get("namespace")) == ("ServiceAccount", obj.namespace), \
                    obj.describe()
            if subject.get("namespace") in teams:
                assert obj.namespace == subject["namespace"], obj.describe()
