"""Every CEL expression of every host policy the program renders is short, since the API server compiles each of
them at start and serves no write until it has.

k8s.io/apiserver's policy plugin refuses every request it is asked to admit "not yet ready to handle request" until
its policy source has compiled every ValidatingAdmissionPolicy (pkg/admission/plugin/policy/generic plugin.go
``Dispatch``, policy_source.go ``HasSynced``), after waiting up to 10 s for it (pkg/admission/handler.go
``timeToWaitForReady``). What each team's own policies take to compile is paid once per team at every API server
start, and the site's once. CEL's compile time grows faster than an expression's length: the sums of the two size
rules, written inline (pod-size 39,544 characters, pod-entry-size 69,681), took 0.74 s of the 0.77 s a team's pod
policy took to compile with the real plugin at 1.36; as variables, the byte sum one per counted field of the pod
spec, 0.26 s (docs/security-object-sizes.md, "Compiled once for the site"). The cap is the entry sums' length (19,000
characters, 0.05 s each); the byte sum took 0.11 s at 26,000 and 0.04 s as sixteen variables of at most 6,900.
cel-go also refuses to parse an expression of more than 100,000 code points: the inline pod-entry-size was at 70%.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from components.admission_pod_size import SIZE_SUMS, pod_size_variables
from components.pod_size_admission import pod_size_policy_spec
from config.review_notes import ADMISSION_READY_WAIT_SECONDS
from tests.apiserver_vap import PINNED
from tests.conftest import (
    APISERVER_MINOR_TAGS, COMMITTED_STACKS, dev_config, git, go_function, mirror, mirrored_tag, run,
)
from tests.generated_sites import GENERATED_SITES, generated_sites, site_config  # noqa: F401 (fixture)
from tests.tenant_sim import POLICY, container, platform_of, tenant_of
from tests.test_pod_sizes import entries, service_links, text_bytes
from tests.test_pod_text_attacks import honest_pod

MAX_EXPRESSION_CHARS = 20_000
# cel-go's parser refuses a longer expression unless its environment sets another limit (parser/parser.go).
CEL_PARSER_CODE_POINTS = 100_000
CEL_GO_OF_PINNED_APISERVER = "v0.26.0"
PINNED_APISERVER_TAG = f"v0.{PINNED.split('.')[1]}.0"
EXPRESSION_FIELDS = {"matchConditions": ("expression",), "variables": ("expression",),
                     "validations": ("expression", "messageExpression"), "auditAnnotations": ("valueExpression",)}


def long_expressions(name: str, spec: dict, cap: int = MAX_EXPRESSION_CHARS) -> list[tuple[str, int]]:
    """Where a policy holds an expression longer than ``cap``, and how long it is."""
    return [(f"{name} {block}[{index}].{field}", len(entry[field]))
            for block, fields in EXPRESSION_FIELDS.items() for index, entry in enumerate(spec.get(block, []))
            for field in fields if len(entry.get(field, "")) > cap]


@pytest.mark.parametrize("stack", COMMITTED_STACKS + sorted(GENERATED_SITES))
def test_no_host_policy_of_any_site_holds_a_long_expression(stack, generated_sites):  # noqa: F811
    program = run(site_config(stack), stack=stack)
    policies = program.of_type(POLICY)
    assert policies
    assert [found for policy in policies
            for found in long_expressions(policy.inputs["metadata"]["name"], policy.inputs["spec"])] == []


def inlined(expression: str, variables: dict[str, str]) -> str:
    """``expression`` with each variable it reads written out, as the size rules were before their sums were
    variables."""
    while (found := re.search(r"variables\.(\w+)", expression)):
        expression = expression.replace(found.group(0), f"({variables[found.group(1)]})", 1)
    return expression


def test_the_size_sums_written_inline_would_be_found():
    """The negative control: the form the size rules had, each sum inline, is what the check finds."""
    spec = pod_size_policy_spec(platform_of(dev_config()).teams)
    variables = {variable["name"]: variable["expression"] for variable in spec["variables"]}
    inline = {"validations": [{"expression": inlined(validation["expression"], variables)}
                              for validation in spec["validations"]]}
    assert [where for where, _ in long_expressions("inline", inline)] == [
        "inline validations[0].expression", "inline validations[1].expression"]
    assert long_expressions("as written", spec) == []


def test_each_sum_is_a_variable_and_the_byte_sum_reads_one_per_field():
    variables = {variable["name"]: variable["expression"] for variable in pod_size_variables()}
    names = list(variables)
    for total, (_, _, per_field) in SIZE_SUMS.items():
        fields = [name for name in names if name.startswith(f"{total}_")]
        assert (len(fields) > 5) == per_field, total
        if per_field:
            assert names.index(total) > max(map(names.index, fields))
            assert set(re.findall(r"variables\.(\w+)", variables[total])) == set(fields)
    assert [total for total, (_, _, per_field) in SIZE_SUMS.items() if per_field] == ["podTextBytes"]


@pytest.fixture(scope="module")
def nlp(dev_run):
    return tenant_of(dev_run, dev_config(), "team-nlp")


def test_the_size_variables_count_what_a_walk_of_the_pod_counts(nlp):
    """On pods that fill many of the counted fields, the entries and bytes the variables sum are what a walk of the
    pod's JSON counts (tests/test_pod_sizes.py), and on an update the old pod's entry bytes are what the same pod's
    count as the new one: 0 on CREATE, where there is no old pod."""
    linked = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "linked", "namespace": "default"},
              "spec": {"containers": [container("side", env=service_links(20))]}}
    pods = [nlp.host_pod(honest_pod(nlp)), nlp.host_pod(linked)]
    sizes = nlp.size_admission
    created = [sizes.context(nlp.team.namespace, pod, user=nlp.syncer)["variables"] for pod in pods]
    for pod, variables in zip(pods, created):
        assert int(variables["podTextItems"]) == entries(pod["spec"]) > 0
        assert int(variables["podTextBytes"]) == text_bytes(pod["spec"]) > 0
        assert int(variables["oldPodEntryBytes"]) == 0 < int(variables["podEntryBytes"])
    assert created[0]["podEntryBytes"] != created[1]["podEntryBytes"]
    for old, new in ((0, 1), (1, 0)):
        updated = sizes.context(nlp.team.namespace, pods[new], operation="UPDATE", old=pods[old],
                                user=nlp.syncer)["variables"]
        assert updated["oldPodEntryBytes"] == created[old]["podEntryBytes"]
        assert updated["podEntryBytes"] == created[new]["podEntryBytes"]


def test_cel_go_parses_at_most_100000_code_points_and_the_api_server_keeps_that_limit():
    """cel-go, as k8s.io/apiserver at the pin requires it, parses at most 100,000 code points of an expression, and
    the API server's CEL environment sets no other limit."""
    cel_go = mirrored_tag("google/cel-go", CEL_GO_OF_PINNED_APISERVER)
    parser = git("google/cel-go", "show", f"{cel_go}:parser/parser.go")
    assert f"p.expressionSizeCodePointLimit = {CEL_PARSER_CODE_POINTS:_}" in parser
    go_mod = git("kubernetes/apiserver", "show", f"{mirrored_tag('kubernetes/apiserver', PINNED_APISERVER_TAG)}:go.mod")
    assert f"github.com/google/cel-go {CEL_GO_OF_PINNED_APISERVER}" in go_mod
    setting = subprocess.run(["git", "--git-dir", str(mirror("kubernetes/apiserver")), "grep", "-l", "-e",
                              "ParserExpressionSizeLimit", "-e", "ExpressionSizeCodePointLimit", PINNED_APISERVER_TAG,
                              "--", "pkg"], capture_output=True, text=True)
    assert (setting.returncode, setting.stdout) == (1, "")  # git grep: no match
    assert MAX_EXPRESSION_CHARS < CEL_PARSER_CODE_POINTS


@pytest.mark.parametrize("tag", APISERVER_MINOR_TAGS)
def test_the_api_server_refuses_what_it_admits_until_every_policy_is_compiled(tag):
    """At every Kubernetes a site may run: a request the policy plugin admits waits for the plugin to be ready,
    ``ADMISSION_READY_WAIT_SECONDS`` at most, and is refused if it is not; the plugin is ready once its source holds
    the compiled hooks of every policy (config/review_notes.py tells a site whose teams take longer)."""
    def source(path: str) -> str:
        return git("kubernetes/apiserver", "show", f"{mirrored_tag('kubernetes/apiserver', tag)}:pkg/admission/{path}")
    assert f"timeToWaitForReady = {ADMISSION_READY_WAIT_SECONDS} * time.Second" in source("handler.go")
    dispatch = go_function(source("plugin/policy/generic/plugin.go"), "(c *Plugin[H]) Dispatch")
    assert 'if !c.WaitForReady() {\n\t\treturn admission.NewForbidden(a, fmt.Errorf("not yet ready to handle request"))' \
        in dispatch
    policies = source("plugin/policy/generic/policy_source.go")
    assert "return s.Hooks() != nil" in go_function(policies, "(s *policySource[P, B, E]) HasSynced")
    assert "s.policies.Store(&policies)" in go_function(policies, "(s *policySource[P, B, E]) refreshPolicies")
