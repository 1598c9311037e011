"""What the EBS CSI driver does with the site's tags (``cluster.eks.tags``), read at the mirrored tag: the add-on's
``controller.extraVolumeTags`` becomes the controller's ``--extra-tags`` (the chart's helper), which the driver
checks before it starts (``pkg/driver/validation.go`` ``validateExtraTags``) and puts on every volume and snapshot
it creates, beside the claim's namespace when the provisioner passes it (``extraCreateMetadata``, on by default).

The keys the driver refuses are listed from its source: a form of refusal this test does not know turns it red,
so a driver that reserves more cannot take a site's volumes away unseen."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import yaml

from components.eks_resources import EBS_CSI_PROVISIONER
from config import ConfigError
from config.model_host import EBS_CSI_CLAIM_NAMESPACE_TAG, EBS_CSI_RESERVED_TAG_KEYS, EBS_CSI_RESERVED_TAG_PREFIXES
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, go_function, run
from tests.conftest import git as mirror_git
from tests.test_eks_tags import with_tags

DRIVER = "kubernetes-sigs/aws-ebs-csi-driver"
CHART = "charts/aws-ebs-csi-driver"
# The driver's flag types come from k8s.io/component-base (v0.36.3 in its go.mod at v1.64.0); the newest vCluster the
# config accepts vendors a copy (v0.36.0 at v0.36.1).
VCLUSTER, VCLUSTER_TAG = "loft-sh/vcluster", ACCEPTED_VCLUSTER_TAGS[-1]
MAP_STRING_STRING = "vendor/k8s.io/component-base/cli/flag/map_string_string.go"


def show(tag: str, path: str) -> str:
    return mirror_git(DRIVER, "show", f"{tag}:{path}")


def go_string_constant(tag: str, qualified: str) -> str:
    """The value of the Go string constant ``pkg.Name`` or ``Name`` (of package driver) as the driver declares it."""
    package, _, name = qualified.rpartition(".")
    source = show(tag, f"pkg/{package or 'driver'}/" + ("cloud.go" if package == "cloud" else "constants.go"))
    [value] = re.findall(rf"^\s*{name}\s*=\s*\"([^\"]*)\"", source, re.M)
    return value


def driver_name(tag: str) -> str:
    """The name ``util.GetDriverName()`` answers: the one cmd/main.go sets when no plugin names another."""
    [name] = re.findall(r'driverName := "([^"]+)"', show(tag, "cmd/main.go"))
    return name


def reserved_by_the_driver(tag: str) -> tuple[set[str], set[str]]:
    """The keys and key prefixes ``validateExtraTags`` refuses. Each condition of its check is one of two forms."""
    check = go_function(show(tag, "pkg/driver/validation.go"), "validateExtraTags")
    conditions = re.findall(r"\bif (.+?) \{", check.split("for k, v := range tags")[0])
    keys: set[str] = set()
    prefixes: set[str] = set()
    for condition in conditions:
        for term in condition.split(" || "):
            if found := re.fullmatch(r"k == ([\w.]+)", term):
                keys.add(go_string_constant(tag, found.group(1)))
            elif found := re.fullmatch(r"strings\.HasPrefix\(k, ([\w.]+)\)", term):
                prefixes.add(go_string_constant(tag, found.group(1)))
            elif re.fullmatch(r'strings\.HasPrefix\(k, util\.GetDriverName\(\)\+"/"\)', term):
                prefixes.add(driver_name(tag) + "/")
            else:
                raise AssertionError(f"aws-ebs-csi-driver {tag}: validateExtraTags refuses keys by {term!r}, which "
                                     "this test does not read: read it and refuse those keys in cluster.eks.tags")
    assert keys and prefixes, f"aws-ebs-csi-driver {tag}: no reserved key read from validateExtraTags"
    return keys, prefixes


def refusal(tags: dict) -> str:
    with pytest.raises(ConfigError) as error:
        run(with_tags(tags))
    [issue] = error.value.issues
    return issue.problem


@pytest.mark.parametrize("tag", MIRRORED_TAGS[DRIVER])
def test_the_program_refuses_the_keys_the_driver_refuses_and_no_other(tag):
    keys, prefixes = reserved_by_the_driver(tag)
    assert driver_name(tag) == EBS_CSI_PROVISIONER
    assert prefixes == set(EBS_CSI_RESERVED_TAG_PREFIXES)
    assert {key for key in keys if not key.startswith(tuple(prefixes))} == set(EBS_CSI_RESERVED_TAG_KEYS)
    for key in sorted(keys | {f"{prefix}team" for prefix in prefixes}):
        assert "reserved by the EBS CSI driver" in refusal({key: "x"}), key


@pytest.mark.parametrize("tag", MIRRORED_TAGS[DRIVER])
def test_the_chart_lists_the_tags_as_key_value_pairs_so_an_equals_sign_in_a_key_is_refused(tag):
    """The helper writes ``key=value`` pairs joined by commas into one argument; the driver splits at the first
    ``=``. A key holding one would tag the volumes with another key, a value holding a comma would break the list
    (AWS's characters leave commas out already)."""
    helper = show(tag, f"{CHART}/templates/_helpers.tpl")
    extra = helper[helper.index('define "aws-ebs-csi-driver.extra-volume-tags"'):]
    extra = extra[:extra.index("{{- end -}}\n{{- end -}}")]
    assert 'printf "%s=%v" $key $value' in extra and '(join "," $result.pairs)' in extra
    assert "holds '='" in refusal({"team=ml": "x"})
    assert "is not an AWS tag value" in refusal({"team": "ml,nlp"})


@pytest.mark.parametrize("tag", MIRRORED_TAGS[DRIVER])
def test_the_driver_splits_each_pair_at_its_first_equals_sign_and_trims_both_ends(tag):
    """``--extra-tags`` is a component-base MapStringString that splits (read in the copy vCluster vendors): a key
    or value with a space at an end would reach the volumes without it, so the config refuses one."""
    options = show(tag, "pkg/driver/options.go")
    assert re.search(r'f\.Var\(cliflag\.NewMapStringString\(&o\.ExtraTags\), "extra-tags"', options)
    parse = go_function(mirror_git(VCLUSTER, "show", f"{VCLUSTER_TAG}:{MAP_STRING_STRING}"),
                        "(m *MapStringString) Set")
    assert all(step in parse for step in ('strings.Split(value, ",")', 'strings.SplitN(s, "=", 2)',
                                          "k := strings.TrimSpace(arr[0])", "v := strings.TrimSpace(arr[1])"))
    assert "starts or ends with a space" in refusal({"team ": "x"})
    assert "starts or ends with a space" in refusal({"team": " x"})


@pytest.mark.parametrize("tag", MIRRORED_TAGS[DRIVER])
def test_the_programs_values_meet_the_charts_schema_and_the_claims_namespace_is_tagged(tag):
    """The add-on's configuration values as the program writes them pass the chart's values schema; the chart turns
    the provisioner's extra metadata on, and the driver tags each volume with the claim's namespace, the team's."""
    [addon] = run(with_tags({"cost-center": "ml-platform", "site": "lab east"}), stack="espoo").of_type(
        "aws:eks/addon:Addon")
    values = json.loads(addon.inputs["configurationValues"])
    schema = json.loads(show(tag, f"{CHART}/values.schema.json"))
    jsonschema.validate(values, schema)
    assert values["controller"]["extraVolumeTags"] == {"cost-center": "ml-platform", "gpu-tenancy/stack": "espoo",
                                                       "site": "lab east"}
    defaults = yaml.safe_load(show(tag, f"{CHART}/values.yaml"))["controller"]
    assert defaults["extraCreateMetadata"] is True
    # Off, so a team's claim annotations cannot have the driver take a tag off its volume (its modifier sidecar reads
    # them, and a modification may delete tags).
    assert defaults["volumeModificationFeature"] == {"enabled": False} and values["controller"].keys() == {
        "extraVolumeTags"}
    assert go_string_constant(tag, "PVCNamespaceTag") == EBS_CSI_CLAIM_NAMESPACE_TAG
    controller = show(tag, "pkg/driver/controller.go")
    assert re.search(r"case PVCNamespaceKey:\s*volumeTags\[PVCNamespaceTag\] = value", controller)
