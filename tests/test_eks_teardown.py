"""`pulumi destroy` on EKS: tenants' load balancers and volumes go before the cluster and the VPC; the EBS CSI
add-on build is looked up for the cluster's Kubernetes version unless the site pins one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from components.eks_teardown import KUBECONFIG_VARIABLE, teardown_script
from tests.conftest import destroy_order, eks_config, run
from tools.offline.mocks import MOCK_ADDON_VERSION

TEARDOWN = "host-tenant-teardown"


def test_tenants_go_first_then_the_teardown_then_the_nodes_cluster_and_vpc(eks_run):
    order = destroy_order(eks_run)
    step = order.index(TEARDOWN)
    kubernetes = [r.name for r in eks_run.resources if r.type.startswith("kubernetes:") and not r.read]
    assert "tenant-team-legal-namespace" in kubernetes and "tenant-team-legal-vcluster" in kubernetes
    assert all(order.index(name) < step for name in kubernetes), "every Kubernetes object is gone first"
    after = [r.name for r in eks_run.resources
             if r.type.startswith(("eks:", "aws:eks/addon", "aws:ec2/vpc:", "aws:ec2/subnet:", "aws:ec2/natGateway"))]
    assert {"host-eks", "host-ebs-csi-driver", "host-system", "host-gpu-gpu"} <= set(after)
    assert all(order.index(name) > step for name in after), "nodes, CSI driver, cluster and VPC go after it"


def test_the_teardown_is_a_destroy_only_step_with_a_secret_kubeconfig(eks_run):
    step = eks_run.named(TEARDOWN)
    assert "create" not in step.inputs and "update" not in step.inputs
    assert step.inputs["delete"] == teardown_script()
    assert step.inputs["environment"] == "[secret]"
    assert '"kind": "Config"' in step.raw_inputs["environment"][KUBECONFIG_VARIABLE]


def test_only_eks_sites_get_the_teardown(dev_run):
    assert not [r for r in dev_run.resources if r.name == TEARDOWN]


def test_the_ebs_csi_build_is_looked_up_for_the_clusters_version_unless_pinned(eks_run):
    addon = next(r for r in eks_run.resources if r.type == "aws:eks/addon:Addon")
    assert addon.inputs["addonVersion"] == MOCK_ADDON_VERSION
    assert addon.options["ignoreChanges"] == ["addonVersion"], "a newer build later does not churn the add-on"
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["ebsCsiAddonVersion"] = "v1.50.1-eksbuild.2"
    pinned = next(r for r in run(config, stack="eks").resources if r.type == "aws:eks/addon:Addon")
    assert pinned.inputs["addonVersion"] == "v1.50.1-eksbuild.2" and "ignoreChanges" not in pinned.options


def test_the_lookup_asks_for_the_newest_build_of_the_clusters_kubernetes(monkeypatch):
    from tools.offline import mocks

    calls = []
    answer = mocks.PlatformMocks.call

    def recording(self, args):
        calls.append((args.token, dict(args.args)))
        return answer(self, args)

    monkeypatch.setattr(mocks.PlatformMocks, "call", recording)
    run(eks_config(), stack="eks")
    lookups = [a for token, a in calls if token == "aws:eks/getAddonVersion:getAddonVersion"]
    assert lookups == [{"addonName": "aws-ebs-csi-driver", "kubernetesVersion": "1.33", "mostRecent": True}]


# --- the script, run against a stand-in kubectl --------------------------------------------------------

FAKE_KUBECTL = """#!/bin/bash
# Prints what the test put in $STATE for the resource asked about; records deletes. The n-th volume list
# is volumes.n, or the last one there is.
echo "$*" >> "$STATE/calls"
case "$1 $2" in
  "get namespaces") cat "$STATE/leaving" ;;
  "get services") cat "$STATE/load-balancers" ;;
  "get persistentvolumeclaims") cat "$STATE/claims" ;;
  "get persistentvolumes")
    n=$(grep -c '^get persistentvolumes ' "$STATE/calls")
    while [ ! -e "$STATE/volumes.$n" ]; do n=$((n - 1)); done
    cat "$STATE/volumes.$n" ;;
  "delete service") : > "$STATE/load-balancers"; : > "$STATE/leaving" ;;
esac
"""


def _run(tmp_path: Path, leaving: str, load_balancers: str, volumes: str | list[str], claims: str = "",
         timeout: int = 0):
    """``volumes``: the volume list (``name phase driver claimNamespace/claimName``), or one per poll."""
    state = tmp_path / "state"
    state.mkdir()
    for name, text in (("leaving", leaving), ("load-balancers", load_balancers), ("claims", claims)):
        (state / name).write_text(text)
    for poll, text in enumerate([volumes] if isinstance(volumes, str) else volumes, start=1):
        (state / f"volumes.{poll}").write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text(FAKE_KUBECTL)
    (bin_dir / "kubectl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE": str(state),
           KUBECONFIG_VARIABLE: "apiVersion: v1\nkind: Config\n"}
    result = subprocess.run(["/bin/bash", "-c", teardown_script(timeout, 0)], env=env, capture_output=True,
                            text=True, timeout=60)
    return result, (state / "calls").read_text().splitlines()


def _volume_polls(calls: list[str]) -> int:
    return len([c for c in calls if c.startswith("get persistentvolumes ")])


def test_load_balancers_of_leaving_tenants_are_deleted_and_waited_for(tmp_path):
    result, calls = _run(tmp_path, "vcluster-a\n", "vcluster-a web-lb\n", "")
    assert result.returncode == 0, result.stderr
    assert "delete service -n vcluster-a web-lb --wait=false" in calls


def test_ebs_volumes_released_by_deleted_claims_stop_the_destroy_before_the_cluster_goes(tmp_path):
    result, _ = _run(tmp_path, "", "", "pvc-1 Released ebs.csi.aws.com vcluster-a/data\n"
                                       "pvc-2 Bound ebs.csi.aws.com vcluster-b/data\n"
                                       "pvc-3 Released other.csi.example vcluster-a/scratch\n",
                     claims="vcluster-b/data\n")
    assert result.returncode == 1
    assert "pvc-1" in result.stderr and "pvc-2" not in result.stderr and "pvc-3" not in result.stderr


def test_nothing_left_means_nothing_to_wait_for(tmp_path):
    result, calls = _run(tmp_path, "", "", "pvc-2 Bound ebs.csi.aws.com vcluster-b/data\n",
                         claims="vcluster-b/data\n")
    assert result.returncode == 0, result.stderr
    assert not [c for c in calls if c.startswith("delete")]


def test_a_volume_still_bound_to_a_deleted_claim_is_waited_for_until_it_is_gone(tmp_path):
    # The PV controller marks the volume released only some seconds after the claim goes.
    bound = "pvc-prometheus Bound ebs.csi.aws.com monitoring/prometheus-db-0\n"
    result, calls = _run(tmp_path, "", "", [bound, bound, "pvc-prometheus Released ebs.csi.aws.com "
                                            "monitoring/prometheus-db-0\n", ""], timeout=60)
    assert result.returncode == 0, result.stderr
    assert _volume_polls(calls) == 4, "waited through bound, bound, released, then gone"


def test_volumes_bound_to_claims_that_still_exist_do_not_hold_the_destroy(tmp_path):
    result, calls = _run(tmp_path, "", "", "pvc-a Bound ebs.csi.aws.com team-stays/data\n"
                                           "pvc-b Bound ebs.csi.aws.com kube-system/cache\n"
                                           "pvc-c Pending ebs.csi.aws.com team-stays/new\n"
                                           "pvc-d Pending ebs.csi.aws.com /\n",
                         claims="team-stays/data\nteam-stays/new\nkube-system/cache\n")
    assert result.returncode == 0, result.stderr
    assert _volume_polls(calls) == 1


def test_other_drivers_and_retained_volumes_are_not_waited_for(tmp_path):
    result, calls = _run(tmp_path, "", "", "pvc-efs Bound efs.csi.aws.com vcluster-a/shared\n"
                                           "pvc-intree Bound  vcluster-a/old\n")
    assert result.returncode == 0, result.stderr
    volumes = next(c for c in calls if c.startswith("get persistentvolumes "))
    assert '?(@.spec.persistentVolumeReclaimPolicy=="Delete")' in volumes, "Retain volumes are never listed"


def test_a_timeout_names_the_volume_whose_claim_is_gone(tmp_path):
    result, _ = _run(tmp_path, "", "", "pvc-grafana Bound ebs.csi.aws.com monitoring/grafana\n"
                                       "pvc-kept Bound ebs.csi.aws.com team-stays/data\n",
                     claims="team-stays/data\n")
    assert result.returncode == 1
    assert "pvc-grafana" in result.stderr.splitlines() and "pvc-kept" not in result.stderr


def test_a_timeout_lists_each_tenant_and_volume_left_on_its_own_line(tmp_path):
    result, _ = _run(tmp_path, "vcluster-a\n", "", "pvc-1 Released ebs.csi.aws.com vcluster-a/data\n")
    assert result.returncode == 1
    assert {"vcluster-a", "pvc-1"} <= set(result.stderr.splitlines())
