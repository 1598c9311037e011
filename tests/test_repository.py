"""The repository itself: what a fresh clone must hold for the CLI, a newcomer and CI to trust it.

- no merge-conflict marker in any tracked file (pre-commit-hooks' ``check-merge-conflict``);
- no path of a developer's machine;
- the README's quick start (a) needs only the runtime requirements;
- a test skips only for a missing external input, and says which variable supplies it.
- every Go harness is as gofmt writes it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tools.charts.cache import CACHE_ENV

ROOT = Path(__file__).resolve().parent.parent


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def check_merge_conflict(*files: Path) -> subprocess.CompletedProcess:
    # --assume-in-merge: the hook otherwise checks only while git is in the middle of a merge.
    tool = Path(sys.executable).parent / "check-merge-conflict"
    return subprocess.run([str(tool), "--assume-in-merge", *map(str, files)], capture_output=True, text=True)


# --- merge-conflict markers ----------------------------------------------------------------------


def test_no_tracked_file_holds_a_merge_conflict_marker():
    result = check_merge_conflict(*tracked_files())
    assert result.returncode == 0, result.stdout


def test_a_planted_marker_is_found(tmp_path):
    planted = tmp_path / "Pulumi.yaml"
    planted.write_text("name: x\n" + "<" * 7 + " HEAD\nruntime: python\n" + "=" * 7 + "\nruntime: go\n" + ">" * 7 + " h10\n")
    result = check_merge_conflict(planted)
    assert result.returncode == 1 and "Pulumi.yaml" in result.stdout


# --- no developer's paths ------------------------------------------------------------------------

MACHINE_PATH = re.compile(r"(?<![\w.])/(work|root|home/\w+|Users/\w+)/")


def test_no_tracked_file_names_a_path_of_a_developers_machine():
    found = [f"{path.relative_to(ROOT)}:{number}"
             for path in tracked_files() if path.suffix not in {".svg", ".png"}
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if MACHINE_PATH.search(line)]
    assert found == []


def test_the_path_check_sees_one():
    work, home = "/" + "work/.mirror/kai", "/" + "home/ana/x"
    assert MACHINE_PATH.search(f'Path("{work}")') and MACHINE_PATH.search(home)
    assert not MACHINE_PATH.search(".github/workflows/x.yml") and not MACHINE_PATH.search("a/work/b")


# --- quick start (a) with the runtime requirements only ------------------------------------------


def requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(re.split(r"[=<>!~\[ ;]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def dev_only_modules() -> set[str]:
    """Top-level modules of the packages requirements-dev.txt adds to requirements.txt."""
    dev_only = requirement_names(ROOT / "requirements-dev.txt") - requirement_names(ROOT / "requirements.txt")
    return {module for module, distributions in metadata.packages_distributions().items()
            if any(name.lower().replace("_", "-") in dev_only for name in distributions)}


BLOCKER = """
import importlib.abc, runpy, sys
blocked = set(sys.argv[1].split(","))
class DevOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (a dev-only requirement)")
sys.meta_path.insert(0, DevOnly())
sys.argv = ["tools.plan", *sys.argv[2:]]
runpy.run_module("tools.plan", run_name="__main__", alter_sys=True)
"""


def test_dev_only_modules_are_known():
    assert {"pytest", "jsonschema", "kubernetes_validate", "hypothesis"} <= dev_only_modules()
    assert not {"pulumi", "yaml", "ruamel"} & dev_only_modules()


@pytest.mark.parametrize("stack", ["dev", "eks"])
def test_the_offline_plan_runs_without_the_dev_requirements(stack, tmp_path):
    result = subprocess.run([sys.executable, "-c", BLOCKER, ",".join(sorted(dev_only_modules())), stack,
                             "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "plan.json").is_file() and (tmp_path / "summary.md").is_file()


def test_rendering_charts_without_the_dev_requirements_says_what_to_install(tmp_path):
    result = subprocess.run([sys.executable, "-c", BLOCKER, ",".join(sorted(dev_only_modules())), "dev",
                             "--out", str(tmp_path), "--render-charts"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2
    assert "requirements-dev.txt" in result.stderr and "Traceback" not in result.stderr


# --- honest skips --------------------------------------------------------------------------------

# The external inputs a test may skip without, each named by what supplies it.
EXTERNAL_INPUTS = ("GPU_TENANCY_MIRRORS", "MIRRORS_VARIABLE", "GPU_TENANCY_UPSTREAM", "CACHE_ENV", "$PATH", "GO_VARIABLE")


def skip_reasons(source: str) -> list[tuple[int, str]]:
    """Each skip in a test module, with the source of its reason."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name in {"pytest.skip", "pytest.mark.skipif", "pytest.importorskip"}:
            reason = [ast.unparse(arg) for arg in node.args[1 if name != "pytest.skip" else 0:]]
            reason += [ast.unparse(keyword.value) for keyword in node.keywords if keyword.arg in {"reason", "msg"}]
            found.append((node.lineno, name if name == "pytest.importorskip" else " ".join(reason)))
    return found


def test_every_skip_is_for_a_missing_external_input_and_names_its_variable():
    assert CACHE_ENV == "GPU_TENANCY_CHART_CACHE"
    offenders = [f"{path.name}:{line}: {reason}" for path in sorted((ROOT / "tests").glob("*.py"))
                 for line, reason in skip_reasons(path.read_text())
                 if reason == "pytest.importorskip" or not any(name in reason for name in EXTERNAL_INPUTS)]
    assert offenders == []


def test_the_skip_check_sees_a_dishonest_skip():
    source = 'import pytest\npytest.skip("tools.plan is not there yet")\nx = pytest.importorskip("grpc")\n'
    assert skip_reasons(source) == [(2, "'tools.plan is not there yet'"), (3, "pytest.importorskip")]


# --- CI runs the README's own commands -----------------------------------------------------------


def test_ci_runs_both_quick_start_commands_as_the_readme_writes_them():
    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        from readme_command import quick_start_command
    finally:
        sys.path.remove(str(ROOT / ".ci"))
    readme = (ROOT / "README.md").read_text()
    assert "tools.plan dev" in quick_start_command("a", readme)
    assert quick_start_command("b", readme).endswith("python -m pytest")
    script = (ROOT / ".ci" / "run").read_text()
    assert '"$(python3 .ci/readme_command.py a)"' in script and '"$(python3 .ci/readme_command.py b)"' in script
    with pytest.raises(SystemExit, match=r"no quick start \(c\)"):
        quick_start_command("c", readme)


# --- the Go harnesses are as gofmt writes them ---------------------------------------------------


def unformatted_go(*files: Path) -> list[str]:
    from tests.go_toolchain import go_binary
    gofmt = Path(go_binary()).with_name("gofmt")
    listed = subprocess.run([str(gofmt), "-l", *map(str, files)], capture_output=True, text=True, check=True).stdout
    return listed.split()


def test_every_go_harness_is_as_gofmt_writes_it():
    harnesses = [path for path in tracked_files() if path.suffix == ".go"]
    assert harnesses, "no Go harness is tracked"
    assert unformatted_go(*harnesses) == [], "run gofmt -w on these"


def test_the_format_check_sees_an_unformatted_file(tmp_path):
    planted = tmp_path / "main.go"
    planted.write_text("package main\n\nfunc main() {  }\n")
    assert unformatted_go(planted) == [str(planted)]
