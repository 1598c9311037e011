"""ops.new_site: how a --set is read (YAML 1.2 values, paths) and what is refused with exit 2, nothing written:
an existing stack, an invalid result, bad --set syntax, a path through the wrong kind of value, an unknown source
stack, an invalid site name. The stack files written: tests/test_new_site.py."""

from __future__ import annotations

import pytest

from ops import new_site
from tests.test_new_site import new, project, stack_config, stack_files  # noqa: F401 (project: the fixture)


# --- how a --set is read ----------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [
    ("x=0.5", 0.5), ("x=2", 2), ("x=true", True), ("x=[a, b]", ["a", "b"]), ("x={a: 1}", {"a": 1}),
    ("x=plain text", "plain text"), ('x="1.33"', "1.33"), ('x="yes"', "yes"), ("x='2024-01-01'", "2024-01-01"),
    ("x=''", ""), ("x=a=b", "a=b"), ("x=1.0e+3", 1000.0),
])
def test_values_are_yaml(text, value):
    assert new_site.parse_assignment(text).value == value


@pytest.mark.parametrize("text, fix", [
    ("teams[0].protect=yes", "write true for a boolean"), ("x=off", "write false for a boolean"),
    ("teams[0].displayName=2024-01-01", 'quote it ("2024-01-01")'), ("x=010", 'quote it ("010")'),
    ("x=1e3", 'quote it ("1e3")'),
])
def test_values_yaml_1_1_reads_differently_are_refused_with_the_fix(text, fix):
    with pytest.raises(new_site.UsageError) as raised:
        new_site.parse_assignment(text)
    assert fix in str(raised.value) and "YAML 1.2" in str(raised.value)
    # The quotes the fix asks for must survive the shell: a trial's `--set x="010"` reached YAML as 010 again.
    path, _, value = text.partition("=")
    assert f"""--set '{path}="{value}"'""" in str(raised.value)
    assert new_site.parse_assignment(f'{path}="{value}"').value == value


def test_a_value_the_config_wants_as_text_is_told_how_to_quote_it_past_the_shell(project, capsys):
    # YAML reads 1.30 as the number 1.3: the fix quotes the text as written, never the number.
    assert new(project, "k130", "eks", "cluster.eks.kubernetesVersion=1.30") == 2
    err = capsys.readouterr().err
    assert ("Fix: quote it so YAML keeps it as written; the shell takes the quotes off before YAML reads the value, "
            """so write --set 'cluster.eks.kubernetesVersion="1.30"'""") in err
    assert '"1.3"' not in err and "k130" not in stack_files(project)
    # Quoted so, it is read as text (and refused for what 1.30 lacks, not for its type).
    assert new(project, "k130", "eks", 'cluster.eks.kubernetesVersion="1.30"') == 2
    err = capsys.readouterr().err
    assert "kubernetesVersion = '1.30'" in err and "expected a string" not in err
    assert new(project, "k134", "eks", 'cluster.eks.kubernetesVersion="1.34"') == 0


@pytest.mark.parametrize("text", ["observability.alerting.slackChannel=#gpu-platform", "x= # note"])
def test_a_value_yaml_reads_as_nothing_is_refused_with_the_quoted_form(text):
    """YAML starts a comment at '#': a Slack channel given bare would silently be written as nothing."""
    with pytest.raises(new_site.UsageError) as raised:
        new_site.parse_assignment(text)
    path, value = text.split("=", 1)
    assert "as nothing" in str(raised.value) and f"--set '{path}=\"{value}\"'" in str(raised.value)
    assert new_site.parse_assignment(f'{path}="{value}"').value == value


def test_null_written_on_purpose_is_kept():
    assert new_site.parse_assignment("x=null").value is None and new_site.parse_assignment("x=~").value is None


@pytest.mark.parametrize("text, path", [
    ("teams[0].resources.gpu.quota=1", ["gpu-tenancy:teams", 0, "resources", "gpu", "quota"]),
    ('vcluster.nodeLabels["gpu-tenancy/pool"]=gpu', ["gpu-tenancy:vcluster", "nodeLabels", "gpu-tenancy/pool"]),
    ("vcluster.nodeLabels['a=b.c']=x", ["gpu-tenancy:vcluster", "nodeLabels", "a=b.c"]),
    ("aws:region=eu-west-1", ["aws:region"]),
    ("aws:tags.team=ml", ["aws:tags", "team"]),
    ("teams[0][1]=x", ["gpu-tenancy:teams", 0, 1]),
])
def test_paths(text, path):
    assert new_site.parse_assignment(text).path == path
    assert new_site.parse_path(new_site.format_path(path), stop_at_equals=False)[0] == path


# --- refusals: exit 2, nothing written --------------------------------------------------------


def test_refuses_to_overwrite(project, capsys):
    before = (project / "Pulumi.eks.yaml").read_bytes()
    assert new(project, "eks", "dev") == 2
    assert "already exists" in capsys.readouterr().err
    assert (project / "Pulumi.eks.yaml").read_bytes() == before
    assert new(project, "lab2", "dev") == 0
    assert new(project, "lab2", "dev", "organization.name=other") == 2
    assert stack_config(project, "lab2") == stack_config(project, "dev")


def test_invalid_result_writes_nothing(project, capsys):
    files = stack_files(project)
    assert new(project, "lab-bad", "dev", "teams[0].resources.gpu.limit=0.1") == 2
    err = capsys.readouterr().err
    assert "teams[0].resources.gpu.limit" in err
    assert "below the quota" in err
    assert stack_files(project) == files


@pytest.mark.parametrize("bad", [
    "teams[0].resources.gpu.quota",  # no '='
    "=1", "teams..name=x", "teams.=x", "teams[x].name=a", "teams[0.name=a", "teams[-1].name=a",
    'vcluster.nodeLabels["open=x', "teams[0]]=1", "[0]=1", ":region=x", "x=[a, b", "x=",
])
def test_bad_set_syntax(project, capsys, bad):
    files = stack_files(project)
    assert new(project, "lab-bad", "dev", bad) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and repr(bad) in err
    assert stack_files(project) == files


def test_missing_equals_is_explained(project, capsys):
    assert new(project, "lab-bad", "dev", "teams[0].resources.gpu.quota") == 2
    assert "no '='" in capsys.readouterr().err


def test_index_out_of_range(project, capsys):
    assert new(project, "lab-bad", "dev", "teams[4]={name: team-x}") == 2
    err = capsys.readouterr().err
    assert "out of range" in err and "teams[4]" in err and "[3] to append" in err
    assert not (project / "Pulumi.lab-bad.yaml").exists()


@pytest.mark.parametrize("bad, words", [
    ("organization.name.first=x", "not a map"),
    ("teams.name=x", "use an index"),
    ("organization[0]=x", "not a list"),
])
def test_paths_through_the_wrong_kind_of_value(project, capsys, bad, words):
    assert new(project, "lab-bad", "dev", bad) == 2
    assert words in capsys.readouterr().err
    assert not (project / "Pulumi.lab-bad.yaml").exists()


def test_unknown_source_stack(project, capsys):
    assert new(project, "lab-x", "nope") == 2
    err = capsys.readouterr().err
    assert "Pulumi.nope.yaml" in err and "dev" in err and "eks" in err


@pytest.mark.parametrize("site", ["../evil", "a b", "", "x/y"])
def test_invalid_site_names(project, capsys, site):
    files = stack_files(project)
    assert new(project, site, "dev") == 2
    assert "stack name" in capsys.readouterr().err
    assert stack_files(project) == files
