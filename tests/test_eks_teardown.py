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
# Prints what the test put in $STATE for the resource asked about; records deletes.
echo "$*" >> "$STATE/calls"
case "$1 $2" in
  "get namespaces") cat "$STATE/leaving" ;;
  "get services") cat "$STATE/load-balancers" ;;
  "get persistentvolumes") cat "$STATE/volumes" ;;
  "delete service") : > "$STATE/load-balancers"; : > "$STATE/leaving" ;;
esac
"""


def _run(tmp_path: Path, leaving: str, load_balancers: str, volumes: str, timeout: int = 0):
    state = tmp_path / "state"
    state.mkdir()
    for name, text in (("leaving", leaving), ("load-balancers", load_balancers), ("volumes", volumes)):
        (state / name).write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text(FAKE_KUBECTL)
    (bin_dir / "kubectl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE": str(state),
           KUBECONFIG_VARIABLE: "apiVersion: v1\nkind: Config\n"}
    result = subprocess.run(["/bin/bash", "-c", teardown_script(timeout, 0)], env=env, capture_output=True,
                            text=True, timeout=60)
    return result, (state / "calls").read_text().splitlines()


def test_load_balancers_of_leaving_tenants_are_deleted_and_waited_for(tmp_path):
    result, calls = _run(tmp_path, "vcluster-a\n", "vcluster-a web-lb\n", "")
    assert result.returncode == 0, result.stderr
    assert "delete service -n vcluster-a web-lb --wait=false" in calls


def test_ebs_volumes_released_by_deleted_claims_stop_the_destroy_before_the_cluster_goes(tmp_path):
    result, _ = _run(tmp_path, "", "", "pvc-1 Released ebs.csi.aws.com\npvc-2 Bound ebs.csi.aws.com\n"
                                       "pvc-3 Released other.csi.example\n")
    assert result.returncode == 1
    assert "pvc-1" in result.stderr and "pvc-2" not in result.stderr and "pvc-3" not in result.stderr


def test_nothing_left_means_nothing_to_wait_for(tmp_path):
    result, calls = _run(tmp_path, "", "", "pvc-2 Bound ebs.csi.aws.com\n")
    assert result.returncode == 0, result.stderr
    assert not [c for c in calls if c.startswith("delete")]
