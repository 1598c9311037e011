"""Every CEL expression of every host policy the program renders is short, since the API server compiles each of
them at start and serves no write until it has.

k8s.io/apiserver's policy plugin refuses every request it is asked to admit "not yet ready to handle request" until
its policy source has compiled every ValidatingAdmissionPolicy (pkg/admission/plugin/policy/generic plugin.go
``Dispatch``, policy_source.go ``HasSynced``), after waiting up to 10 s for it (pkg/admission/handler.go
``timeToWaitForReady``). Each team has its own policies, so what one team's take to compile is paid once per team
at every API server start. CEL's compile time grows faster than an expression's length: the sums of the two size
rules, written inline (pod-size 39,544 characters, pod-entry-size 69,681), took 0.74 s of the 0.77 s a team's pod
policy took to compile with the real plugin at 1.36; each sum as one variable per counted field of the pod spec,
0.19 s (docs/security-object-sizes.md, "Compiled once per team"). The cap below is the largest expression that
compiles in a few milliseconds; cel-go also refuses to parse one of more than 100,000 code points, which the inline
pod-entry-size was at 70% of.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from components.admission_pod_size import (
    SIZE_SUMS, pod_entry_bytes_of, pod_size_variables, pod_text_bytes_of, pod_text_items,
)
from tests.apiserver_vap import PINNED
from tests.conftest import COMMITTED_STACKS, dev_config, git, mirror, mirrored_tag, run
from tests.generated_sites import GENERATED_SITES, generated_sites, site_config  # noqa: F401 (fixture)
from tests.tenant_sim import POLICY, container, tenant_of
from tests.test_pod_sizes import service_links
from tests.test_pod_text_attacks import honest_pod

MAX_EXPRESSION_CHARS = 10_000
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


def test_the_size_sums_written_inline_would_be_found():
    """The negative control: the form the size rules had, each sum inline, is what the check finds."""
    inline = {"validations": [{"expression": f"{pod_text_items()} <= 1 && {pod_text_bytes_of()} <= 1"},
                              {"expression": f"{pod_entry_bytes_of()} <= {pod_entry_bytes_of('oldObject')}"}]}
    assert [where for where, _ in long_expressions("inline", inline)] == [
        "inline validations[0].expression", "inline validations[1].expression"]


def test_each_sum_is_a_variable_read_after_its_fields():
    names = [variable["name"] for variable in pod_size_variables()]
    for total in SIZE_SUMS:
        fields = [name for name in names if name.startswith(f"{total}_")]
        assert len(fields) > 5 and names.index(total) > max(map(names.index, fields))
        read = set(re.findall(r"variables\.(\w+)", next(v for v in pod_size_variables() if v["name"] == total)
                              ["expression"]))
        assert read == set(fields)


@pytest.fixture(scope="module")
def nlp(dev_run):
    return tenant_of(dev_run, dev_config(), "team-nlp")


def test_the_variables_sum_what_the_inline_sums_count(nlp):
    """On pods that fill many of the counted fields, each sum's variable equals the inline sum it replaces, for the
    pod and, on an update, for the old pod."""
    pods = [nlp.host_pod(honest_pod(nlp)), nlp.host_pod({"apiVersion": "v1", "kind": "Pod",
                                                         "metadata": {"name": "linked", "namespace": "default"},
                                                         "spec": {"containers": [container("side", env=service_links(20))]}})]
    for old, new in zip(pods, reversed(pods)):
        activation = nlp.admission.context(nlp.team.namespace, new, operation="UPDATE", old=old, user=nlp.syncer)
        variables = activation["variables"]
        for total, inline in (("podTextItems", pod_text_items()), ("podTextBytes", pod_text_bytes_of()),
                              ("podEntryBytes", pod_entry_bytes_of()),
                              ("oldPodEntryBytes", pod_entry_bytes_of("oldObject"))):
            assert int(variables[total]) == int(nlp.admission.evaluate(inline, activation)) > 0, total
    created = nlp.admission.context(nlp.team.namespace, pods[0], user=nlp.syncer)["variables"]
    assert int(created["oldPodEntryBytes"]) == 0 and int(created["podEntryBytes"]) > 0


def test_cel_go_refuses_to_parse_what_the_cap_keeps_far_from():
    """cel-go, as k8s.io/apiserver at the pin requires it, parses at most 100,000 code points of an expression, and
    the API server's CEL environment sets no other limit."""
    parser = git("google/cel-go", "show", f"{mirrored_tag('google/cel-go', CEL_GO_OF_PINNED_APISERVER)}:parser/parser.go")
    assert f"p.expressionSizeCodePointLimit = {CEL_PARSER_CODE_POINTS:_}" in parser
    go_mod = git("kubernetes/apiserver", "show", f"{mirrored_tag('kubernetes/apiserver', PINNED_APISERVER_TAG)}:go.mod")
    assert f"github.com/google/cel-go {CEL_GO_OF_PINNED_APISERVER}" in go_mod
    setting = subprocess.run(["git", "--git-dir", str(mirror("kubernetes/apiserver")), "grep", "-l", "-e",
                              "ParserExpressionSizeLimit", "-e", "ExpressionSizeCodePointLimit", PINNED_APISERVER_TAG,
                              "--", "pkg"], capture_output=True, text=True)
    assert (setting.returncode, setting.stdout) == (1, "")  # git grep: no match
    assert MAX_EXPRESSION_CHARS < CEL_PARSER_CODE_POINTS // 5
