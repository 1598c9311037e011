"""Random and hostile stack configs (hypothesis).

Whatever the config, the program either renders a consistent platform (every team has a leaf
queue under an existing parent, a tenant and an admission policy; the quotas add up) or stops
with a ``ConfigError`` whose every issue names a config key, before registering anything. It
never dies with another exception.
"""

from __future__ import annotations

import copy
import json
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from config import ConfigError, load_platform
from config.load import STACK_CONFIG
from config.key_types import READ_AS_TEXT_BY_HELM
from config.load_teams import VCLUSTER_NAME_LENGTH
from config.secrets import SECRET_KEYS
from config.tenant_budget import dns_budget
from tests.conftest import dev_config, eks_config, whole_program_examples
from config.stack_file import StackFileError, parse_document
from tools.deployability import names
from tools.deployability.inputs import program_objects
from tools.offline.mockrun import run_program
from tools.offline.recording import ProgramRun
from tools.plan.document import build_plan
from ops.stack_edit import dump_yaml

QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"

# DNS-1123 labels Helm's YAML reads as text (config/key_types.py READ_AS_TEXT_BY_HELM: not yes, n, off, ...).
dns_label = st.from_regex(r"[a-z]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True).filter(READ_AS_TEXT_BY_HELM.passes)
# Team names up to the longest the config takes (63), whose derived vCluster names (cut to 52) must differ.
team_name = st.one_of(dns_label, st.from_regex(r"[a-z][a-z0-9-]{45,61}[a-z0-9]", fullmatch=True))

json_scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), st.text(alphabet="éüñ日本語🚀-_. ", max_size=10),
)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)


@st.composite
def valid_configs(draw):
    """A valid stack: dev- or EKS-shaped, 1-6 teams whose GPU quotas fit in the org's."""
    config = dev_config() if draw(st.booleans()) else eks_config()
    org_quota = draw(st.sampled_from([1, 2, 4, 8, -1]))
    config["gpu-tenancy:organization"] = {"name": draw(dns_label.filter(lambda n: not n.startswith("default"))),
                                          "resources": {"gpu": {"quota": org_quota, "limit": -1}}}
    names = draw(st.lists(team_name, min_size=1, max_size=6,
                          unique_by=lambda name: name[:VCLUSTER_NAME_LENGTH].rstrip("-")).filter(
        lambda names: config["gpu-tenancy:organization"]["name"] not in names
        and not any(n.startswith("default") for n in names)))
    budget = org_quota if org_quota != -1 else 8
    teams = []
    for name in names:
        quota = draw(st.floats(min_value=0, max_value=budget / len(names), allow_nan=False)) // 0.01 * 0.01
        limit = draw(st.sampled_from([-1, round(quota, 2), round(quota, 2) + 1]))
        team = {"name": name, "resources": {"gpu": {"quota": round(quota, 2), "limit": limit,
                                                    "overQuotaWeight": draw(st.integers(0, 5))}},
                "priority": draw(st.integers(0, 1000))}
        if draw(st.booleans()):
            # At least the team's DNS pod, which KAI runs only within quota (config/dns_guarantee.py).
            team["resources"]["cpu"] = {"quota": draw(st.integers(dns_budget().millicores, 64000)), "limit": -1}
        teams.append(team)
    config["gpu-tenancy:teams"] = teams
    return config


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


@st.composite
def hostile_configs(draw):
    """A valid config with a few random edits: wrong types, odd numbers, unknown or missing keys."""
    config = copy.deepcopy(draw(valid_configs()))
    for _ in range(draw(st.integers(1, 3))):
        paths = [path for path in _paths(config) if path]
        path = draw(st.sampled_from(paths))
        parent = config
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "unknown", "number", "list", "empty"]))
        last = path[-1]
        if action == "delete" and isinstance(parent, dict):
            del parent[last]
        elif action == "unknown" and isinstance(parent, dict):
            parent[draw(st.text(alphabet=string.ascii_letters, min_size=1, max_size=12))] = draw(json_values)
        elif action == "number":
            parent[last] = draw(st.sampled_from([-1, -2, 0, 10 ** 13, -(10 ** 40), 0.5, 1e308, -0.0]))
        elif action == "list":
            parent[last] = [parent[last]]
        elif action == "empty":
            parent[last] = draw(st.sampled_from([[], {}, ""]))
        else:
            parent[last] = draw(json_values)
    return config


def _raw(config: dict) -> dict:
    # What the program sees after Pulumi's JSON round trip.
    return {key.split(":", 1)[-1]: json.loads(json.dumps(value)) for key, value in config.items()}


def assert_consistent(program: ProgramRun, config: dict) -> None:
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in program.of_type(QUEUE)}
    org = config["gpu-tenancy:organization"]["name"]
    teams = [team["name"] for team in config["gpu-tenancy:teams"]]
    assert "parentQueue" not in queues[org]
    assert set(queues) == {org, *teams}
    for team in teams:
        assert queues[team]["parentQueue"] in queues
        assert team in program.outputs["tenants"]
    policies = {p.inputs["metadata"]["name"] for p in program.of_type(POLICY)}
    assert policies == {name for team in teams for name in (f"gpu-tenancy-{team}",
                                                             f"gpu-tenancy-{team}-synced-objects",
                                                             f"gpu-tenancy-{team}-deletion")} | {"gpu-tenancy-pod-size"}
    # The site's pod-size policy is bound once per team.
    assert sorted(b.inputs["metadata"]["name"] for b in program.of_type(BINDING)
                  if b.inputs["spec"]["policyName"] == "gpu-tenancy-pod-size") == \
        sorted(f"gpu-tenancy-pod-size-{team}" for team in teams)
    # Every object the program sends is named and labelled as the API server and its controllers take it.
    objects = program_objects(build_plan(program, "fuzz")["resources"])
    assert not names.check_names(objects), names.check_names(objects)
    org_quota = queues[org]["resources"]["gpu"]["quota"]
    if org_quota != -1:
        assert sum(queues[team]["resources"]["gpu"]["quota"] for team in teams) <= org_quota + 1e-9
    for spec in queues.values():
        for resource in spec["resources"].values():
            limit = resource["limit"]
            assert limit == -1 or limit >= resource["quota"]


def assert_names_keys(error: ConfigError) -> None:
    assert error.issues
    known_roots = set(STACK_CONFIG.names) | set(SECRET_KEYS)
    for issue in error.issues:
        assert issue.key and issue.fix and issue.problem
        root = issue.key.split(".")[0].split("[")[0]
        assert root in known_roots or issue.problem == "unknown key", issue


# Example counts come from the Hypothesis profile (tests/conftest.py).
FAST = settings()
PROGRAM = whole_program_examples()


@FAST
@given(valid_configs())
def test_valid_configs_always_load(config):
    platform = load_platform(_raw(config))
    assert [team.name for team in platform.teams] == [team["name"] for team in config["gpu-tenancy:teams"]]


@FAST
@given(hostile_configs())
def test_hostile_configs_load_or_fail_with_a_named_key(config):
    try:
        load_platform(_raw(config))
    except ConfigError as error:
        assert_names_keys(error)


@PROGRAM
@given(valid_configs())
def test_valid_configs_render_a_consistent_platform(config):
    assert_consistent(run_program(config, stack="fuzz"), config)


@PROGRAM
@given(hostile_configs())
def test_hostile_configs_render_consistently_or_stop_before_registering_anything(config):
    record = ProgramRun()
    try:
        run_program(config, stack="fuzz", record=record)
    except ConfigError as error:
        assert_names_keys(error)
        assert record.resources == []
    else:
        assert_consistent(record, config)


# --- stack files: written by tools.new_site, read by every tool ------------------------------------

stack_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
              st.floats(allow_nan=False), st.text(max_size=20),
              st.sampled_from(["yes", "off", "2026-01-01", "010", "1e3", "1_000", "0o17", "~", "<<", "=", ".inf"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)


@FAST
@given(st.dictionaries(st.text(min_size=1, max_size=12), stack_values, max_size=4))
def test_what_new_site_writes_reads_back_the_same(config):
    text = dump_yaml({"config": config}, default_flow_style=False)
    assert parse_document(text, where="Pulumi.site.yaml") == {"config": config}


@FAST
@given(st.text(max_size=80))
def test_any_text_reads_or_fails_with_a_stack_file_or_config_error(text):
    try:
        parse_document(text, where="Pulumi.site.yaml")
    except ConfigError as error:
        assert all(issue.key and issue.fix for issue in error.issues)
    except StackFileError as error:
        assert str(error).startswith("Pulumi.site.yaml")
