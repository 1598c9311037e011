"""tests/celgo_cost.py and tests/celgo/main.go are the API server's: its CEL limits and how it charges them, and
cel-go's prices, at every k8s.io/apiserver minor from the host floor to the pin and at the cel-go each requires."""

from __future__ import annotations

import re

import pytest

from tests.celgo import CEL_GO, CEL_GO_TAG, SOURCE, requirements
from tests.celgo_cost import MATCH_CONDITIONS_BUDGET, PER_CALL_LIMIT, RUNTIME_BUDGET
from tests.conftest import APISERVER_MINOR_TAGS, MIRRORED_TAGS, git, go_function, mirrored_tag

APISERVER = "kubernetes/apiserver"
PLUGIN = "pkg/admission/plugin"


def show(repository: str, tag: str, path: str) -> str:
    return git(repository, "show", f"{mirrored_tag(repository, tag)}:{path}")


@pytest.mark.parametrize("tag", APISERVER_MINOR_TAGS)
def test_the_limits_are_the_api_servers(tag):
    config = show(APISERVER, tag, "pkg/apis/cel/config.go")
    constants = dict(re.findall(r"^\s+(\w+) = (\d+)$", config, re.M))
    assert (int(constants["PerCallLimit"]), int(constants["RuntimeCELCostBudget"]),
            int(constants["RuntimeCELCostBudgetMatchConditions"])) == (
        PER_CALL_LIMIT, RUNTIME_BUDGET, MATCH_CONDITIONS_BUDGET)


@pytest.mark.parametrize("tag", APISERVER_MINOR_TAGS)
def test_each_expression_is_stopped_at_the_per_call_limit_and_presence_tests_are_free(tag):
    base = show(APISERVER, tag, "pkg/cel/environment/base.go")
    assert "cel.CostLimit(celconfig.PerCallLimit)" in base
    assert "interpreter.PresenceTestHasCost(false)" in base and "checker.PresenceTestHasCost(false)" in base


@pytest.mark.parametrize("tag", APISERVER_MINOR_TAGS)
def test_a_policy_is_charged_pass_by_pass(tag):
    # Match conditions against their own budget; validations against the runtime budget; message expressions
    # against what the validations left, and running out there fails every validation.
    matcher = show(APISERVER, tag, f"{PLUGIN}/webhook/matchconditions/matcher.go")
    assert "celconfig.RuntimeCELCostBudgetMatchConditions" in matcher
    assert "celconfig.RuntimeCELCostBudget," in show(APISERVER, tag, f"{PLUGIN}/policy/validating/dispatcher.go")
    validator = show(APISERVER, tag, f"{PLUGIN}/policy/validating/validator.go")
    assert "messageFilter.ForInput(ctx, versionedAttr, admissionRequest, expressionOptionalVars, ns, " \
           "remainingBudget)" in validator
    assert 'decision.Message = fmt.Sprintf("failed messageExpression: %s", err)' in validator
    # A variable is evaluated once per pass, when first used, and charged to that pass's budget.
    charged = [path for path in git(APISERVER, "grep", "-l", "remainingBudget -= compositionCost", tag, "--",
                                    f"{PLUGIN}/cel").split()]
    assert charged, "no pass charges the variables' cost"
    composition = show(APISERVER, tag, f"{PLUGIN}/cel/composition.go")
    # (the evaluator of a list of expressions is CompositedFilter up to 1.31, CompositedConditionEvaluator after)
    assert re.search(r"\nfunc \(f \*Composited(?:Filter|ConditionEvaluator)\) ForInput\([^\n]*\n\s+ctx = "
                     r"f\.\w+\.CreateContext\(ctx\)\n", composition), "a pass no longer gets fresh variables"
    assert "m.values[name] = v" in show(APISERVER, tag, "pkg/cel/lazy/lazy.go")


@pytest.mark.parametrize("tag", APISERVER_MINOR_TAGS)
def test_the_kubernetes_functions_are_priced_as_the_evaluator_prices_them(tag):
    cost = show(APISERVER, tag, "pkg/cel/library/cost.go")
    call_cost = go_function(cost, "(l *CostEstimator) CallCost")
    assert re.search(r'case [^\n]*"sum"[^\n]*:\n\s+var cost uint64\n\s+if len\(args\) > 0 \{\n\s+cost \+= '
                     r'traversalCost\(args\[0\]\)', call_cost)
    assert re.search(r'case [^\n]*"substring"[^\n]*:\n\s+if len\(args\) >= 1 \{\n\s+cost := uint64\(math\.Ceil\('
                     r'float64\(actualSize\(args\[0\]\)\) \* common\.StringTraversalCostFactor\)\)', call_cost)
    assert re.search(r'case "join":\n\s+if len\(args\) >= 1 \{\n\s+cost := uint64\(math\.Ceil\(float64\(actualSize\('
                     r'result\)\) \* 2 \* common\.StringTraversalCostFactor\)\)', call_cost)
    traversal = go_function(cost, "traversalCost")
    assert "return uint64(float64(len(string(vt))) * common.StringTraversalCostFactor)" in traversal
    main = SOURCE.read_text()
    assert "uint64(float64(len(string(v))) * 0.1)" in main and "float64(size(result)) * 2 * 0.1" in main


def cel_go_of(tag: str) -> str:
    return requirements(show(APISERVER, tag, "go.mod"))["github.com/google/cel-go"]


def cost_model(tag: str) -> tuple[str, str, str]:
    """cel-go's prices at ``tag``: each step's (the cost observer's switch), each call's, and the constants."""
    runtime = git(CEL_GO, "show", f"{mirrored_tag(CEL_GO, tag)}:interpreter/runtimecost.go")
    steps = runtime[runtime.index("switch t := programStep.(type) {"):runtime.index("tracker.stack.push(val, id)")]
    calls = go_function(runtime, "(c *CostTracker) costCall").replace("c.actualSize(", "actualSize(")

    def code(text: str) -> str:
        return "\n".join(line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("//"))
    return code(steps), code(calls), code(git(CEL_GO, "show", f"{tag}:common/cost.go"))


@pytest.mark.parametrize("tag", APISERVER_MINOR_TAGS)
def test_every_api_server_prices_as_the_cel_go_the_evaluator_is_built_from(tag):
    required = cel_go_of(tag)
    assert required in MIRRORED_TAGS[CEL_GO], f"add cel-go {required} (k8s.io/apiserver {tag}) to MIRRORED_TAGS"
    assert cost_model(required) == cost_model(CEL_GO_TAG)


def test_the_evaluator_sets_cel_go_up_as_the_pinned_api_server_does():
    def code(text: str) -> str:
        return re.sub(r"\s+", "", re.sub(r"//[^\n]*", "", text)).replace(",)", ")")
    base = code(show(APISERVER, APISERVER_MINOR_TAGS[-1], "pkg/cel/environment/base.go"))
    main = code(SOURCE.read_text())
    environment = main[main.index("funcenvironment()"):main.index("constvariablesType")]
    options = re.findall(r"\b((?:cel|ext)\.[A-Z]\w*\((?:[^()]|\([^()]*\))*\))", environment)
    declarations = [option for option in options if option.startswith((
        "cel.Variable", "cel.Function", "cel.MemberOverload", "cel.NewEnv", "cel.CustomTypeProvider"))]
    assert len(options) - len(declarations) == 11
    missing = [option for option in options if option not in declarations and option not in base]
    assert missing == []
    program = ["cel.EvalOptions(cel.OptOptimize,cel.OptTrackCost)", "interpreter.PresenceTestHasCost(false)"]
    assert all(option in main and option in base for option in program)
