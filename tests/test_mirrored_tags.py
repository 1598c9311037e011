"""The tags mirrored of each repository whose releases the config accepts: those releases' and declared others.

tests/conftest.py MIRRORED_TAGS is what the PR workflow fetches; ACCEPTED_TAGS is the tag of every release the config
accepts of each chart. Once MIRRORED_TAGS["loft-sh/vcluster"] also held older tags, mirrored only to build the
admission plugin harness at each host Kubernetes, the tests that iterated it as "every accepted vCluster" read
releases the config refuses. So a tag mirrored of such a repository beyond its accepted ones is declared with its
purpose in EXTRA_MIRRORED_TAGS, each purpose is held to what it names, and no test reads such a repository's
MIRRORED_TAGS by the repository's name: it reads ACCEPTED_TAGS or EXTRA_MIRRORED_TAGS.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from config import versions
from tests.apiserver_vap import RELEASES
from tests.conftest import ACCEPTED_TAGS, EXTRA_MIRRORED_TAGS, MIRRORED_TAGS, git, mirrored_tag
from tests.mirror_charts import CHART_SOURCES, DEPENDENCY_MIRRORS, dependency_tag

TESTS = Path(__file__).parent
VCLUSTER, CHARTS = "loft-sh/vcluster", "prometheus-community/helm-charts"


def mirrored_tag_problems(mirrored: dict, accepted: dict, extra: dict) -> list[str]:
    """What keeps each accepted repository's ``mirrored`` tags from being its ``accepted`` ones and its ``extra``
    ones (tag -> why it is mirrored), each once."""
    problems = [f"{repository}: tags mirrored beside the accepted ones of a repository the config accepts no release "
                "of" for repository in sorted(set(extra) - set(accepted))]
    for repository, tags in accepted.items():
        have, declared = mirrored.get(repository, ()), extra.get(repository, {})
        problems += [f"{repository}: {tag} is mirrored and neither accepted nor declared in EXTRA_MIRRORED_TAGS"
                     for tag in sorted(set(have) - set(tags) - set(declared))]
        problems += [f"{repository}: accepted {tag} is not mirrored" for tag in sorted(set(tags) - set(have))]
        problems += [f"{repository}: declared {tag} is not mirrored" for tag in sorted(set(declared) - set(have))]
        problems += [f"{repository}: {tag} is accepted and declared for another purpose"
                     for tag in sorted(set(declared) & set(tags))]
        problems += [f"{repository}: {tag} is declared without a purpose" for tag, why in declared.items()
                     if not why.strip()]
        if len(set(have)) != len(have):
            problems.append(f"{repository}: a tag is mirrored twice")
    return problems


def test_each_accepted_repositorys_mirrored_tags_are_its_accepted_and_declared_ones():
    assert mirrored_tag_problems(MIRRORED_TAGS, ACCEPTED_TAGS, EXTRA_MIRRORED_TAGS) == []


PLANTED = {"kai": ("v1", "v2"), "vc": ("v0", "v1", "v2")}
PLANTINGS = [
    ({**PLANTED, "kai": ("v0", "v1", "v2")}, {"kai": ("v1", "v2")}, {}, "kai: v0 is mirrored and neither accepted"),
    (PLANTED, {"kai": ("v1", "v2", "v3")}, {}, "kai: accepted v3 is not mirrored"),
    (PLANTED, {"vc": ("v1", "v2")}, {"vc": {"v0": "harness", "v9": "harness"}}, "vc: declared v9 is not mirrored"),
    (PLANTED, {"vc": ("v0", "v1", "v2")}, {"vc": {"v0": "harness"}}, "vc: v0 is accepted and declared"),
    (PLANTED, {"vc": ("v1", "v2")}, {"vc": {"v0": " "}}, "vc: v0 is declared without a purpose"),
    (PLANTED, {"kai": ("v1", "v2")}, {"vc": {"v0": "harness"}}, "vc: tags mirrored beside the accepted ones of a"),
    ({"kai": ("v1", "v1", "v2")}, {"kai": ("v1", "v2")}, {}, "kai: a tag is mirrored twice"),
]


@pytest.mark.parametrize("mirrored, accepted, extra, problem", PLANTINGS, ids=[case[3] for case in PLANTINGS])
def test_a_tag_mirrored_undeclared_or_declared_amiss_is_named(mirrored, accepted, extra, problem):
    assert [found for found in mirrored_tag_problems(mirrored, accepted, extra) if found.startswith(problem)]
    # The same repository, declared as it is mirrored, passes: the planting alone is refused.
    assert mirrored_tag_problems(PLANTED, {"kai": ("v1", "v2"), "vc": ("v1", "v2")}, {"vc": {"v0": "harness"}}) == []


def test_every_list_of_releases_the_config_accepts_is_a_repositorys_accepted_tags():
    """Each *_RELEASES of config/versions.py, tagged as its chart's repository tags it."""
    lists = sorted(value for name, value in vars(versions).items() if name.endswith("_RELEASES"))
    assert set(ACCEPTED_TAGS) == {repository for repository, _, _ in CHART_SOURCES.values()}
    untagged = []
    for repository, tag, _ in CHART_SOURCES.values():
        before, after = tag.split("{version}")
        assert all(name.startswith(before) and name.endswith(after) for name in ACCEPTED_TAGS[repository])
        untagged.append(tuple(name[len(before):len(name) - len(after)] for name in ACCEPTED_TAGS[repository]))
    assert sorted(untagged) == lists


def test_the_vcluster_tags_mirrored_beside_the_accepted_ones_are_the_admission_harness_releases():
    assert set(EXTRA_MIRRORED_TAGS[VCLUSTER]) == {tag for tag, *_ in RELEASES.values()} - set(ACCEPTED_TAGS[VCLUSTER])


def test_the_chart_tags_mirrored_beside_kube_prometheus_stack_are_its_sub_charts_at_the_accepted_releases():
    chart = CHART_SOURCES[versions.KUBE_PROMETHEUS_STACK_CHART][2]
    used = set()
    for tag in ACCEPTED_TAGS[CHARTS]:
        metadata = yaml.safe_load(git(CHARTS, "show", f"{mirrored_tag(CHARTS, tag)}:{chart}/Chart.yaml"))
        used |= {dependency_tag(CHARTS, dependency["name"], str(dependency["version"]))
                 for dependency in metadata["dependencies"]
                 if DEPENDENCY_MIRRORS.get(dependency.get("repository")) == CHARTS}
    assert used == set(EXTRA_MIRRORED_TAGS[CHARTS])


# --- no test reads an accepted repository's mirrored tags by its name -----------------------------------------


def module_names(path: Path, seen: frozenset = frozenset()) -> dict[str, str]:
    """The module-level string constants of a tests/ module, with those it imports from other tests/ modules."""
    names: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:  # NAME = "..." and NAME, OTHER = "...", "..."
                pairs = zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple) and isinstance(
                    node.value, ast.Tuple) else [(target, node.value)]
                names.update((name.id, value.value) for name, value in pairs if isinstance(name, ast.Name)
                             and isinstance(value, ast.Constant) and isinstance(value.value, str))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.") and path not in seen:
            source = TESTS / f"{node.module.split('.', 1)[1]}.py"
            if source.is_file():
                imported = module_names(source, seen | {path})
                names.update((alias.asname or alias.name, imported[alias.name]) for alias in node.names
                             if alias.name in imported)
    return names


def reads_by_name(source: str, names: dict[str, str], repositories) -> list[tuple[int, str]]:
    """Each ``MIRRORED_TAGS[...]`` of ``source`` whose key is one of ``repositories``, written out or as a name
    ``names`` binds to it: (line, repository). A key computed at run time (a helper's parameter) is not one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "MIRRORED_TAGS":
            key = node.slice
            repository = key.value if isinstance(key, ast.Constant) else \
                names.get(key.id) if isinstance(key, ast.Name) else None
            if repository in repositories:
                found.append((node.lineno, repository))
    return found


def test_no_test_reads_an_accepted_repositorys_mirrored_tags_by_its_name():
    reads = [f"{path.name}:{line} MIRRORED_TAGS[{repository!r}]" for path in sorted(TESTS.glob("*.py"))
             for line, repository in reads_by_name(path.read_text(), module_names(path), ACCEPTED_TAGS)]
    assert reads == [], "read ACCEPTED_TAGS (every accepted release) or EXTRA_MIRRORED_TAGS (what else is mirrored)"


PLANTED_READS = '''
from tests.test_admission_honest import KAI
CHARTS = "prometheus-community/helm-charts"
VCLUSTER, API = "loft-sh/vcluster", "kubernetes/api"

@pytest.mark.parametrize("tag", MIRRORED_TAGS[KAI])
def test_a(tag): ...

def test_b():
    assert [tag for tag in MIRRORED_TAGS[CHARTS]] and MIRRORED_TAGS["loft-sh/vcluster"][-1]
    assert MIRRORED_TAGS[VCLUSTER]

def helper(repository):
    return MIRRORED_TAGS[repository], MIRRORED_TAGS["kubernetes/api"], MIRRORED_TAGS[API]
'''


def test_a_read_of_an_accepted_repositorys_mirrored_tags_is_found_written_out_bound_or_imported(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text(PLANTED_READS)
    names = module_names(planted)
    assert names["KAI"] == "kai-scheduler/KAI-Scheduler"  # through tests/test_admission_honest.py
    assert sorted(reads_by_name(PLANTED_READS, names, ACCEPTED_TAGS)) == [
        (6, "kai-scheduler/KAI-Scheduler"), (10, VCLUSTER), (10, CHARTS), (11, VCLUSTER)]
