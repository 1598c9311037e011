"""An EKS site keeps its control plane's logs in CloudWatch (``cluster.eks.controlPlaneLogs``): the API server's audit
log is the record of what each team's vCluster syncer, and everyone else, did on the host.

EKS writes every log type to one log group, ``/aws/eks/<cluster>/cluster``, and creates it keeping everything forever
when it does not exist; so the program creates it first, with the site's retention, and leaves it in place on
destroy, as EKS leaves its own. The log types and retention periods the config takes are the ones the pinned
pulumi-eks and pulumi-aws document."""

from __future__ import annotations

import importlib.metadata
import re

import pulumi_aws
import pulumi_eks
import pytest

from config import ConfigError
from config.model_host import EKS_LOG_TYPES, LOG_RETENTION_DAYS
from config.review_notes import review_notes
from tests.conftest import eks_config, run
from tests.tenant_sim import platform_of
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
CLUSTER = "eks:index:Cluster"


def with_logs(config: dict, **logs) -> dict:
    config["gpu-tenancy:cluster"]["eks"]["controlPlaneLogs"] = logs
    return config


def refusal(config: dict, key: str):
    with pytest.raises(ConfigError) as error:
        run(config)
    issues = [issue for issue in error.value.issues if issue.key == key]
    assert issues, error.value.keys
    return issues[0]


def test_the_log_types_are_the_ones_the_pinned_pulumi_eks_sends():
    doc = pulumi_eks.ClusterArgs.__init__.__doc__ or pulumi_eks.Cluster.__init__.__doc__
    documented = re.search(r"enabled_cluster_log_types: .*?Possible list of values are: \[([^\]]*)\]", doc, re.S)
    assert documented, f"pulumi-eks {importlib.metadata.version('pulumi-eks')} no longer documents the log types"
    assert tuple(re.findall(r'"(\w+)"', documented.group(1))) == EKS_LOG_TYPES


def test_the_retention_periods_are_the_ones_the_pinned_pulumi_aws_takes():
    doc = pulumi_aws.cloudwatch.LogGroupArgs.__init__.__doc__
    documented = re.search(r"retention_in_days: .*?Possible values are: ([\d, and]+)\.", doc, re.S)
    assert documented, f"pulumi-aws {importlib.metadata.version('pulumi-aws')} no longer documents the periods"
    assert tuple(int(days) for days in re.findall(r"\d+", documented.group(1))) == LOG_RETENTION_DAYS


def test_an_eks_site_keeps_its_audit_log_ninety_days_in_a_group_made_before_the_cluster(eks_run):
    group = eks_run.named("host-control-plane-logs")
    assert group.type == LOG_GROUP
    cluster = eks_run.of_type(CLUSTER)[0]
    assert group.inputs == {"name": f"/aws/eks/{cluster.inputs['name']}/cluster", "retentionInDays": 90,
                            "skipDestroy": True}
    assert cluster.inputs["enabledClusterLogTypes"] == ["audit", "authenticator"]
    assert group.urn in cluster.dependencies
    # The group is the host's child, in the site's region, as the cluster is.
    assert group.parent == cluster.parent
    assert group.provider == eks_run.of_type("pulumi:providers:aws")[0].urn


def test_the_site_picks_the_types_and_the_retention():
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["name"] = "lab-east"
    program = run(with_logs(config, types=["api", "audit"], retentionDays=365))
    assert program.named("host-control-plane-logs").inputs["name"] == "/aws/eks/lab-east/cluster"
    assert program.named("host-control-plane-logs").inputs["retentionInDays"] == 365
    assert program.of_type(CLUSTER)[0].inputs["enabledClusterLogTypes"] == ["api", "audit"]


def test_a_site_that_sends_no_logs_gets_no_group_and_is_told_nothing_records_what_happened():
    config = with_logs(eks_config(), types=[])
    program = run(config)
    assert program.of_type(LOG_GROUP) == []
    cluster = program.of_type(CLUSTER)[0]
    assert cluster.inputs["enabledClusterLogTypes"] == []
    assert not any(dependency.endswith("::host-control-plane-logs") for dependency in cluster.dependencies)
    assert [note for note in review_notes(platform_of(config)) if "leaves out audit" in note]


def test_the_plan_notes_a_site_without_audit_and_one_that_keeps_its_logs_forever():
    def notes(config):
        return [note for note in review_notes(platform_of(config)) if "controlPlaneLogs" in note]

    assert notes(eks_config()) == []
    assert len(notes(with_logs(eks_config(), types=["api", "authenticator"]))) == 1
    forever = notes(with_logs(eks_config(), retentionDays=0))
    assert len(forever) == 1 and "/aws/eks/vcluster-gpu/cluster forever" in forever[0]


@pytest.mark.parametrize("types, problem", [
    (["audit", "Audit"], "'Audit' is not a control plane log type EKS sends"),
    (["kube-apiserver"], "'kube-apiserver' is not a control plane log type EKS sends"),
    (["audit", "authenticator", "audit"], "lists 'audit' more than once"),
    ("audit", "expected a list of strings"),
])
def test_a_bad_log_type_list_is_refused_naming_the_key_and_the_fix(types, problem):
    issue = refusal(with_logs(eks_config(), types=types), "cluster.eks.controlPlaneLogs.types")
    assert problem in issue.problem
    assert issue.value == types
    assert issue.fix


@pytest.mark.parametrize("days, fix", [(2, "1 or 3"), (100, "90 or 120"), (10_000, "3288 or 3653"), (-1, "0 or 1")])
def test_a_retention_cloudwatch_does_not_take_is_refused_with_the_nearest_it_does(days, fix):
    issue = refusal(with_logs(eks_config(), retentionDays=days), "cluster.eks.controlPlaneLogs.retentionDays")
    assert issue.value == days
    assert issue.problem.startswith("must be one of 1, 3, 5, 7, 14, 30")
    assert fix in issue.fix


def plan_summary(program) -> str:
    return render_summary(build_plan(program, "test"))


def test_the_plan_summary_shows_what_the_site_keeps_and_where(eks_run):
    summary = plan_summary(eks_run)
    assert ("- Control plane logs to CloudWatch: `audit`, `authenticator`, in `/aws/eks/vcluster-gpu/cluster`, "
            "kept 90 days and left in place by `pulumi destroy`") in summary
    assert "- Control plane logs: **none** sent to CloudWatch" in plan_summary(run(with_logs(eks_config(), types=[])))

