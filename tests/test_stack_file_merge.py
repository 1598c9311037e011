"""Spec of merge keys (``<<: *defaults``) in a stack file: read as the Pulumi CLI reads them.

The CLI reads a stack file with gopkg.in/yaml.v3 into plain maps (pulumi/pulumi v3.259.0: ``LoadProjectStack`` in
sdk/go/common/workspace/loaders.go, through the YAML marshaler of sdk/go/common/encoding/marshal.go; v3.0.1 in its
sdk/go.mod), and that reader takes an unquoted ``<<`` key as a merge of the maps it names. So a site may share a
team's settings with an anchor and a merge key, and every offline tool must read the file as ``pulumi up`` will.
"""

from __future__ import annotations

import pytest
import yaml

from config import ConfigError, load_platform
from config.stack_file import read_stack_file
from tests.config_spec import dev_config
from tests.conftest import git, go_function, mirrored_tag

TEAMS = """\
  gpu-tenancy:teams:
    - &team
      name: team-a
      resources: {gpu: {quota: 0.5, limit: 1}}
    - <<: *team
      name: team-b
"""


def _stack_file(tmp_path, body: str):
    path = tmp_path / "Pulumi.site.yaml"
    path.write_text("config:\n" + body)
    return path


def test_a_team_merged_from_another_keeps_its_own_name_and_takes_the_rest(tmp_path):
    teams = read_stack_file(_stack_file(tmp_path, TEAMS))["config"]["gpu-tenancy:teams"]
    assert teams == [{"name": "team-a", "resources": {"gpu": {"quota": 0.5, "limit": 1}}},
                     {"name": "team-b", "resources": {"gpu": {"quota": 0.5, "limit": 1}}}]
    config = {**dev_config(), "teams": teams}
    assert [team.name for team in load_platform(config).teams] == ["team-a", "team-b"]


@pytest.mark.parametrize("body", [
    TEAMS,
    "  gpu-tenancy:x:\n    <<: [{p: 1, q: 2}, {q: 3, r: 4}]\n    r: 9\n",
    "  gpu-tenancy:x:\n    r: 9\n    <<: [{p: 1, q: 2}, {q: 3, r: 4}]\n",
    "  base: &b {a: {c: 1}, d: 2}\n  gpu-tenancy:x:\n    <<: *b\n    a: {e: 3}\n",
    "  base: &b {a: 1}\n  mid: &m {<<: *b, c: 2}\n  gpu-tenancy:x: {<<: *m, d: 3}\n",
    "  gpu-tenancy:x:\n    '<<': {a: 1}\n",
])
def test_merges_mean_what_a_yaml_merge_reader_makes_of_them(tmp_path, body):
    # A map's own keys win wherever they stand, the first merged map wins over later ones, a merged map's keys are
    # taken whole (no deep merge), and a quoted '<<' is an ordinary key: as PyYAML's merge reads them too.
    path = _stack_file(tmp_path, body)
    assert read_stack_file(path) == yaml.safe_load(path.read_text())


def test_a_merge_key_naming_no_map_is_a_config_error_with_the_fix(tmp_path):
    with pytest.raises(ConfigError) as raised:
        read_stack_file(_stack_file(tmp_path, "  gpu-tenancy:organization:\n    <<: [1, 2]\n    name: a\n"))
    issue = raised.value.issues[0]
    assert raised.value.keys == ["organization"] and "merge key (<<)" in issue.problem and "*defaults" in issue.fix


def test_pulumi_reads_stack_files_with_go_yaml_v3_which_merges_as_the_tools_do():
    pulumi = mirrored_tag("pulumi/pulumi", "v3.259.0")
    assert "gopkg.in/yaml.v3 v3.0.1" in git("pulumi/pulumi", "show", f"{pulumi}:sdk/go.mod")
    assert 'yaml "gopkg.in/yaml.v3"' in git("pulumi/pulumi", "show", f"{pulumi}:sdk/go/common/encoding/marshal.go")
    loaders = git("pulumi/pulumi", "show", f"{pulumi}:sdk/go/common/workspace/loaders.go")
    assert "marshaller.Unmarshal(b, &projectStackRaw)" in go_function(loaders, "LoadProjectStackBytes")
    decode = git("yaml/go-yaml", "show", f"{mirrored_tag('yaml/go-yaml', 'v3.0.1')}:decode.go")
    # An unquoted '<<' (no tag, or the merge tag) merges; a quoted one is a string key.
    assert 'n.Value == "<<" && (n.Tag == "" || n.Tag == "!" || shortTag(n.Tag) == mergeTag)' in decode
    merge = go_function(decode, "(d *decoder) merge")
    # The map's own keys are marked first, so merged entries never replace them; a list is merged in order and its
    # keys are marked as they are set, so an earlier map wins; anything but a map or a list of maps is an error.
    assert "for i := 0; i < len(parent.Content); i += 2" in merge and "d.mergedFields[k.Interface()] = true" in merge
    assert "case SequenceNode:" in merge and "failWantMap()" in merge
    assert "if mergedFields[ki] {\n\t\t\t\t\tcontinue" in go_function(decode, "(d *decoder) mapping")
