"""Contracts of the host's audit log, read from upstream at the mirrored tags.

MicroK8s (canonical/microk8s, every track a site may run): kubelite reads the API server's flags from the file the
step edits, with the reader tests/test_node_pids_contract.py checks; the snap's own file sets no audit flag and
round-trips through the step; the snap's argument clean-up at each start keeps the step's lines; the identities the
policy leaves lease renewals to are the ones MicroK8s issues. Kubernetes' audit API (k8s.io/apiserver, vendored in
vCluster at each Kubernetes minor a site may run): the levels, stages and fields the policy uses are the API's, the
flags are the API server's, and the pinned release's own code loads the policy and judges tests/
apiserver_audit_readers.py's requests as tests/test_apiserver_audit.py expects.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from components.apiserver_audit import (
    AUDIT_FLAGS, AUDIT_API_VERSION, CONTROL_PLANE_USERS, MICROK8S_APISERVER_ARGS, NODES_GROUP, audit_flag_lines,
    audit_policy, audit_policy_text,
)
from config.model_host import AuditLog
from tests.apiserver_audit_readers import REQUESTS, AuditBox, audit_flags, flag_values, other_args
from tests.apiserver_vap import PINNED, RELEASES, VCLUSTER
from tests.conftest import MIRRORED_TAGS, git, mirror, mirrored_tag
from tests.go_toolchain import built_in_tree
from tests.node_pid_readers import MICROK8S, kubelite_args

AUDIT = "vendor/k8s.io/apiserver/pkg/apis/audit"
HARNESS = Path(__file__).with_name("apiserver_audit") / "main.go"


def kubelite_patch(tag: str) -> str:
    patches = git(MICROK8S, "ls-tree", "-r", "--name-only", tag, "build-scripts/components/kubernetes/patches")
    return git(MICROK8S, "show", f"{tag}:" + sorted(p for p in patches.split()
                                                    if p.endswith("Kubelite-integration.patch"))[-1])


def shell_function(source: str, name: str) -> str:
    body = source[source.index(f"{name}() {{"):]
    return body[:body.index("\n}\n")]


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_kubelite_reads_the_api_servers_flags_from_the_file_the_step_edits_when_it_starts(tag):
    tag = mirrored_tag(MICROK8S, tag)
    kubelite = git(MICROK8S, "show", f"{tag}:microk8s-resources/default-args/kubelite")
    assert "--apiserver-args-file=$SNAP_DATA/args/kube-apiserver" in kubelite.splitlines()
    assert MICROK8S_APISERVER_ARGS == "/var/snap/microk8s/current/args/kube-apiserver"
    patch = kubelite_patch(tag)
    # The one reader of every component's file (its parsing: tests/test_node_pids_contract.py), once, at start.
    assert patch.count("func ReadArgsFromFile(") == 1
    assert "apiserverArgs := options.ReadArgsFromFile(opts.APIServerArgsFile)" in patch


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_the_snaps_own_api_server_args_audit_nothing_and_the_step_round_trips_them(tag, tmp_path):
    tag = mirrored_tag(MICROK8S, tag)
    default = git(MICROK8S, "show", f"{tag}:microk8s-resources/default-args/kube-apiserver")
    assert not [arg for arg in kubelite_args(default) if arg.startswith("--audit-")], \
        "the snap now audits on its own: weigh its flags against the step's"
    box = AuditBox(tmp_path, default)
    assert box.set().returncode == 0 and box.restarts == 1
    after = box.args.read_text()
    assert audit_flags(after) == dict(line.split("=", 1) for line in audit_flag_lines(AuditLog(), str(box.policy)))
    assert all(len(values) == 1 for values in flag_values(after).values())
    assert other_args(after) == other_args(default)
    assert box.set().returncode == 0 and box.restarts == 0 and box.args.read_text() == after
    assert box.remove().returncode == 0 and box.restarts == 1
    assert box.args.read_text() == default and not box.policy.exists()


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_the_snaps_argument_clean_up_at_each_start_keeps_the_steps_lines(tag):
    """run-kubelite-with-args deletes retired flags before kubelite starts, each with sed '/--<flag>[= ]/d' on the
    whole line wherever the text stands: none of them may appear in a line the step writes."""
    tag = mirrored_tag(MICROK8S, tag)
    start = git(MICROK8S, "show", f"{tag}:microk8s-resources/wrappers/run-kubelite-with-args")
    assert "sanitise_args_kubeapi_server" in start
    utils = git(MICROK8S, "show", f"{tag}:microk8s-resources/actions/common/utils.sh")
    sanitise = shell_function(utils, "sanitise_args_kubeapi_server")
    retired = re.findall(r'^\s*"([^"]+)"', sanitise, re.MULTILINE)
    assert "insecure-port" in retired and 'remove_args "kube-apiserver"' in sanitise
    assert """sed" -i '/'"$opt[= ]"'/d'""" in shell_function(utils, "skip_opt_in_local_config")
    lines = audit_flag_lines(AuditLog(max_age_days=3650, max_backups=100, max_size_megabytes=1024))
    for flag in retired:
        assert not [line for line in lines if re.search(f"--{re.escape(flag)}[= ]", line)], flag
    # Configuring the snap edits the file in place, never copies the default over it.
    configure = git(MICROK8S, "show", f"{tag}:snap/hooks/configure")
    assert not re.search(r"cp \S*default-args/kube-apiserver\s", configure)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[MICROK8S])
def test_the_identities_whose_lease_renewals_are_left_out_are_the_ones_microk8s_issues(tag):
    tag = mirrored_tag(MICROK8S, tag)
    utils = git(MICROK8S, "show", f"{tag}:microk8s-resources/actions/common/utils.sh")
    for name in CONTROL_PLANE_USERS:
        assert f"generate_csr /CN={name} " in utils
    assert f'"/CN=system:node:$hostname/O={NODES_GROUP}"' in utils


def release_tags() -> list[str]:
    return [tag for tag, *_ in RELEASES.values()]


def struct_fields(source: str, name: str) -> set[str]:
    body = source[source.index(f"type {name} struct {{"):]
    return set(re.findall(r'`json:"([^,"]+)', body[:body.index("\n}\n")]))


@pytest.mark.parametrize("tag", release_tags())
def test_the_policy_uses_the_audit_apis_own_version_levels_stages_and_fields(tag):
    """The API server decodes the policy strictly and falls back to lenient decoding with only a warning: a field
    it does not declare would be dropped unseen, and with it the rule's limit."""
    tag = mirrored_tag(VCLUSTER, tag)
    register = git(VCLUSTER, "show", f"{tag}:{AUDIT}/v1/register.go")
    assert 'GroupName = "audit.k8s.io"' in register and 'Version: "v1"' in register
    assert AUDIT_API_VERSION == "audit.k8s.io/v1"
    types = git(VCLUSTER, "show", f"{tag}:{AUDIT}/v1/types.go")
    levels = dict(re.findall(r'\bLevel(\w+)\s+Level\s*=\s*"(\w+)"', types))
    stages = dict(re.findall(r'\bStage(\w+)\s+Stage\s*=\s*"(\w+)"', types))
    assert levels == {"None": "None", "Metadata": "Metadata", "Request": "Request",
                      "RequestResponse": "RequestResponse"}
    policy = audit_policy()
    assert {rule["level"] for rule in policy["rules"]} <= {levels["None"], levels["Metadata"]}
    assert set(policy["omitStages"]) <= set(stages.values()) and stages["RequestReceived"] == "RequestReceived"
    assert set(policy) - {"apiVersion", "kind"} <= struct_fields(types, "Policy")
    assert set().union(*policy["rules"]) <= struct_fields(types, "PolicyRule")
    assert set().union(*(entry for rule in policy["rules"] for entry in rule.get("resources", []))) <= \
        struct_fields(types, "GroupResources")
    validation = git(VCLUSTER, "show", f"{tag}:{AUDIT}/validation/validation.go")
    assert "rules cannot apply to both regular resources and non-resource URLs" in validation
    assert not [rule for rule in policy["rules"] if rule.get("nonResourceURLs") and
                (rule.get("resources") or rule.get("namespaces"))]
    reader = git(VCLUSTER, "show", f"{tag}:vendor/k8s.io/apiserver/pkg/audit/policy/reader.go")
    assert "serializer.EnableStrict" in reader and 'loaded illegal policy with 0 rules' in reader


@pytest.mark.parametrize("tag", release_tags())
def test_the_flags_are_the_api_servers_and_its_log_file_is_root_only(tag):
    tag = mirrored_tag(VCLUSTER, tag)
    options = git(VCLUSTER, "show", f"{tag}:vendor/k8s.io/apiserver/pkg/server/options/audit.go")
    declared = set(re.findall(r'fs\.\w+Var\(&o\.\w+, "([a-z-]+)"', options))
    assert {flag.removeprefix("--") for flag in AUDIT_FLAGS} <= declared
    # Without the rotation flags the log is unbounded before 1.36 (files of 100 MB, lumberjack's default size, every
    # one kept forever) and from 1.36 takes up to 100 files of 100 MB, kept a year, where a size of 0 never rotates.
    defaults = re.search(r"LogOptions: AuditLogOptions\{\s*MaxSize:\s*(\d+),\s*MaxAge:\s*(\d+),\s*"
                         r"MaxBackups:\s*(\d+)", options)
    since_136 = tag == RELEASES["1.36"][0]
    assert (defaults.groups() if defaults else None) == (("100", "366", "100") if since_136 else None)
    assert ("if o.MaxSize == 0 {" in options) == since_136
    # The API server makes the folder (0700) and the file (0600) itself: nothing for the step to create.
    assert "os.MkdirAll(filepath.Dir(o.Path), 0700)" in options and "os.FileMode(0600)" in options


def test_the_pinned_api_server_loads_the_policy_strictly_and_judges_each_request_as_expected(tmp_path):
    tag, *_ = RELEASES[PINNED]
    binary = built_in_tree(mirror(VCLUSTER), mirrored_tag(VCLUSTER, tag), {HARNESS: "cmd/gpu-tenancy-audit-policy"},
                           "cmd/gpu-tenancy-audit-policy", "audit-policy")
    policy = tmp_path / "policy.yaml"
    policy.write_text(audit_policy_text())
    requests = [{"user": user, "groups": list(groups), "verb": verb, "apiGroup": group, "resource": resource,
                 "subresource": subresource, "namespace": namespace, "name": name, "path": path}
                for (user, groups), verb, group, resource, subresource, namespace, name, path, _ in REQUESTS]
    result = subprocess.run([str(binary), str(policy)], input=json.dumps(requests), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    verdicts = json.loads(result.stdout)
    assert [verdict["level"] for verdict in verdicts] == [request[-1] for request in REQUESTS]
    assert all(verdict["omitStages"] == ["RequestReceived"] for verdict in verdicts if verdict["level"] != "None")
    # The harness refuses what the API server would: a misspelt field, an unknown level.
    for broken in (audit_policy_text().replace("omitStages", "omitStage"),
                   audit_policy_text().replace("level: Metadata", "level: Everything")):
        policy.write_text(broken)
        assert subprocess.run([str(binary), str(policy)], input="[]", capture_output=True, text=True).returncode == 2
    assert yaml.safe_load(audit_policy_text()) == audit_policy()
