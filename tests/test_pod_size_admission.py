"""One host policy judges every team's pod sizes (components/pod_size_admission.py): compiled once for the site,
each team held to its own cap, which it reads from the team's host namespace.

- Shape: whatever the number of teams, one policy holds the size sums; no team's own policy holds any of them.
- Per team: the cap is the team's namespace annotation; a pod past one team's cap is refused there and admitted in
  the namespace of a team with a larger one (tests/test_pod_sizes.py ``test_the_cap_is_per_team``); a namespace
  without the annotation admits no synced pod.
- Match: every write the team's own pod policy judges, this one judges too; the control plane's pod and pods of
  other namespaces it leaves alone.
- Plan: every team's guardrails name the site's policy and the team's own cap.
- Order: a team's pod policy, which no longer judges sizes, changes only after its namespace carries the cap and
  the site's policy is bound, so an upgrade leaves no pod unjudged in between.
- The real plugin reaches the same verdicts, each team's cap read from its namespace.
- The tenant cannot write its namespace: tests/test_synced_kinds_contract.py.
"""

from __future__ import annotations

import pytest

from components.admission_pod_size import MISSING_CAP, SIZE_SUMS
from components.admission import team_namespace_selector
from components.pod_size_admission import POD_SIZE_POLICY, namespace_annotations, pod_size_binding_name
from config.synced_data import pod_text_bytes
from config.vocabulary import NAMESPACE, POD_TEXT_BYTES_ANNOTATION, TEAM_LABEL, VCLUSTER_MANAGED_BY_LABEL
from tests.apiserver_vap import api_request, disagreements, harness, judge, plugin_verdicts, policies_of, recorded
from tests.config_spec import put
from tests.conftest import dev_config, run
from tests.tenant_sim import (
    BINDING, KAI_BINDER, KAI_SCHEDULER, POLICY, Admission, namespace_object, platform_of, tenant_of, virtual_pod,
)
from tests.test_pod_sizes import CAP, padded, refused_for_size
from tools.offline.benchmark import site_with_teams
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

TEAM = "team-nlp"
STATEFULSET_CONTROLLER = "system:serviceaccount:kube-system:statefulset-controller"


@pytest.fixture(scope="module")
def nlp(dev_run):
    return tenant_of(dev_run, dev_config(), TEAM)


def size_variables(spec: dict) -> list[str]:
    return [variable["name"] for variable in spec.get("variables", [])
            if variable["name"].partition("_")[0] in SIZE_SUMS]


@pytest.mark.parametrize("teams", [1, 12])
def test_one_policy_holds_the_size_sums_whatever_the_number_of_teams(teams):
    program = run(site_with_teams(teams), stack="dev")
    holding = {policy.inputs["metadata"]["name"]: size_variables(policy.inputs["spec"])
               for policy in program.of_type(POLICY)}
    assert [name for name, variables in holding.items() if variables] == [POD_SIZE_POLICY]
    assert len(holding[POD_SIZE_POLICY]) > len(SIZE_SUMS)
    site = platform_of(site_with_teams(teams)).teams
    [policy] = [p for p in program.of_type(POLICY) if p.inputs["metadata"]["name"] == POD_SIZE_POLICY]
    assert policy.inputs["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"] == \
        sorted(team.namespace for team in site)


def test_each_team_binds_the_policy_to_its_own_namespace(dev_run):
    """One binding a team, so the API server's refusal metrics, which name the binding, tell the teams apart."""
    bindings = {b.inputs["metadata"]["name"]: b.inputs for b in dev_run.of_type(BINDING)
                if b.inputs["spec"]["policyName"] == POD_SIZE_POLICY}
    teams = platform_of(dev_config()).teams
    assert sorted(bindings) == sorted(pod_size_binding_name(team) for team in teams)
    for team in teams:
        binding = bindings[pod_size_binding_name(team)]
        assert binding["metadata"]["labels"][TEAM_LABEL] == team.name
        assert binding["spec"]["validationActions"] == ["Deny"]
        assert binding["spec"]["matchResources"]["namespaceSelector"] == team_namespace_selector(team)


def test_each_team_namespace_states_the_teams_cap(dev_run):
    for team in platform_of(dev_config()).teams:
        [namespace] = [n for n in dev_run.of_type(NAMESPACE) if n.inputs["metadata"]["name"] == team.namespace]
        annotations = namespace.inputs["metadata"]["annotations"]
        assert annotations == namespace_annotations(team)
        assert int(annotations[POD_TEXT_BYTES_ANNOTATION]) == pod_text_bytes(team.vcluster) == CAP


def test_the_refusal_names_the_teams_own_cap(nlp):
    [message] = [m for m in nlp.create(padded(nlp, CAP + 1)) if m.startswith("[pod-size]")]
    assert f"at most {CAP} bytes" in message
    assert nlp.create(padded(nlp, CAP)) == []


def test_a_namespace_without_the_cap_admits_no_synced_pod(nlp):
    """A namespace the policy selects whose annotation was removed by hand: every synced pod is refused, and the
    message says why; with the annotation back, the same pod passes."""
    sizes = nlp.size_admission
    bare = Admission(sizes.spec, sizes.binding, {nlp.team.namespace: namespace_object(nlp.team.namespace)})
    host = nlp.host_pod(virtual_pod(queue=nlp.team.queue_name, scheduler=KAI_SCHEDULER))
    assert bare.review(nlp.team.namespace, host, user=nlp.syncer) == [MISSING_CAP]
    assert sizes.review(nlp.team.namespace, host, user=nlp.syncer) == []


def writes(nlp) -> list[tuple[str, str, dict, str]]:
    """(namespace, user, pod, operation) of writes to pods on the host: the syncer's, KAI's, the control plane's,
    other namespaces'."""
    host = nlp.host_pod(virtual_pod(queue=nlp.team.queue_name, scheduler=KAI_SCHEDULER))
    unlabelled = {**host, "metadata": {**host["metadata"], "labels": {
        key: value for key, value in host["metadata"]["labels"].items() if key != VCLUSTER_MANAGED_BY_LABEL}}}
    found = []
    for namespace in (nlp.team.namespace, "vcluster-team-vision", "kube-system"):
        for user in (nlp.syncer, KAI_BINDER, STATEFULSET_CONTROLLER, f"system:serviceaccount:{namespace}:vc-other"):
            for pod in (host, unlabelled):
                found.append((namespace, user, pod, "CREATE"))
    return found


def test_the_sites_policy_judges_every_write_the_teams_own_policy_judges(nlp):
    judged_by_team = 0
    for namespace, user, pod, operation in writes(nlp):
        by_team = nlp.admission.matches(namespace, pod, operation=operation, user=user)
        judged_by_team += by_team
        assert not by_team or nlp.size_admission.matches(namespace, pod, operation=operation, user=user), \
            (namespace, user)
    assert judged_by_team >= 4


def test_the_control_plane_and_other_namespaces_are_left_alone(nlp):
    host = nlp.host_pod(virtual_pod(queue=nlp.team.queue_name, scheduler=KAI_SCHEDULER))
    control_plane = {**host, "metadata": {"name": "nlp-0", "namespace": nlp.team.namespace,
                                          "labels": {"app": "vcluster"}}}
    sizes = nlp.size_admission
    assert not sizes.matches(nlp.team.namespace, control_plane, user=STATEFULSET_CONTROLLER)
    assert sizes.matches(nlp.team.namespace, host, user=nlp.syncer)
    for namespace in ("kube-system", "kai-scheduler", "default"):
        assert not sizes.matches(namespace, host, user=nlp.syncer)


def test_a_teams_pod_policy_changes_only_after_its_namespace_and_the_sites_policy(dev_run):
    """After its namespace, the site's policy and the team's own binding of it: not after the other teams' bindings,
    which would make every team's resources wait on every team's and grow each one's dependencies with the site."""
    [policy] = [r.urn for r in dev_run.of_type(POLICY) if r.inputs["metadata"]["name"] == POD_SIZE_POLICY]
    bindings = {r.inputs["metadata"]["name"]: r.urn for r in dev_run.of_type(BINDING)
                if r.inputs["spec"]["policyName"] == POD_SIZE_POLICY}
    for team in platform_of(dev_config()).teams:
        [namespace] = [n.urn for n in dev_run.of_type(NAMESPACE) if n.inputs["metadata"]["name"] == team.namespace]
        own = bindings[pod_size_binding_name(team)]
        others = set(bindings.values()) - {own}
        for kind in (POLICY, BINDING):
            [resource] = [r for r in dev_run.of_type(kind)
                          if r.inputs["metadata"]["name"] == f"gpu-tenancy-{team.name}"]
            assert {policy, own, namespace} <= set(resource.dependencies), (team.name, kind)
            assert not others & set(resource.dependencies), (team.name, kind)


def test_a_pod_past_one_teams_cap_is_refused_only_there():
    """The same policy text for both teams, each held to its namespace's figure."""
    config = put(dev_config(), "gpu-tenancy:teams[0].vcluster.resourceQuota.syncedPodTextBytes", "64Ki")
    program = run(config, stack="pod-text")
    small, large = tenant_of(program, config, "team-nlp"), tenant_of(program, config, "team-vision")
    assert small.size_admission.spec == large.size_admission.spec
    assert refused_for_size(small.create(padded(small, 64 * 2 ** 10 + 1)))
    assert large.create(padded(large, 64 * 2 ** 10 + 1)) == []


def test_the_real_plugin_holds_each_team_to_the_cap_its_namespace_states():
    """k8s.io/apiserver's own plugin (tests/apiserver_vap.py) with every policy, binding and namespace of the run:
    the same policy refuses a pod past the small team's cap in its namespace and admits it in the large team's, as
    tenant_sim does, and refuses it in a namespace without the annotation, saying why."""
    harness()  # the skip naming what is missing, before the runs are made for nothing
    config = put(dev_config(), "gpu-tenancy:teams[0].vcluster.resourceQuota.syncedPodTextBytes", "64Ki")
    program = run(config, stack="pod-text")
    small, large = tenant_of(program, config, "team-nlp"), tenant_of(program, config, "team-vision")
    with recorded() as reviews:
        assert refused_for_size(small.create(padded(small, 64 * 2 ** 10 + 1)))
        assert large.create(padded(large, 64 * 2 ** 10 + 1)) == []
    judged = plugin_verdicts(reviews, program)
    assert disagreements(judged) == []
    sizes = {review.inputs["request"]["namespace"]: (review, verdict) for name, review, verdict in judged
             if name == POD_SIZE_POLICY}
    [message] = sizes[small.team.namespace][1].of(POD_SIZE_POLICY)
    assert f"at most {64 * 2 ** 10} bytes" in message and not sizes[small.team.namespace][1].allowed
    review, verdict = sizes[large.team.namespace]
    assert verdict.allowed
    [bare] = judge(policies_of(program), [api_request(review.inputs)],
                   namespaces={large.team.namespace: namespace_object(large.team.namespace)})
    assert bare.of(POD_SIZE_POLICY) == [MISSING_CAP] and not bare.allowed


def test_the_plan_shows_every_team_judged_by_the_sites_policy_with_its_own_cap():
    config = put(dev_config(), "gpu-tenancy:teams[0].vcluster.resourceQuota.syncedPodTextBytes", "64Ki")
    summary = render_summary(build_plan(run(config, stack="pod-text"), "pod-text"))
    lines = summary.splitlines()
    rows = {team.name: next(line for line in lines if line.startswith(f"| `{team.name}` | `gpu-tenancy-"))
            for team in platform_of(config).teams}
    assert set(rows) == {"team-nlp", "team-vision", "team-recommender"}
    for name, row in rows.items():
        assert f"`gpu-tenancy-{name}` (Deny), `{POD_SIZE_POLICY}` (Deny)" in row, name
        assert f"pod-size (≤ {'64Ki' if name == 'team-nlp' else '256Ki'}), pod-entry-size" in row, name
