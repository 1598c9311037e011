"""Every version the config accepts works: the releases of config/versions.py, from each floor to each pin.

The config refuses a version older than each component's floor or newer than its pin, naming the key, the
version and the one to pin, and between them anything but a release of the chart. Each chart's list of
releases is every release tag of its upstream repository from the floor to the pin. Every one of them is
rendered with Helm (helm-python-sdk) from the real chart at its release tag (tests/mirror_charts.py), with the
values the program gives that release on the committed stacks and on the variants that change those values;
Helm checks them against the chart's values schema (and its sub-charts'), and a chart that ships none must at
least know every value the program sets (Helm would ignore a value the chart does not read).
"""

from __future__ import annotations

import tarfile

import pytest
import yaml

from config import load_platform, versions
from config.merge import deep_merge
from config.vocabulary import EXACT_VERSION
from tests import config_spec
from tests.conftest import MIRRORED_TAGS, dev_config, eks_config, run, upstream_tags
from tests.mirror_charts import CHART_SOURCES, add_from_mirror
from tests.test_contracts import GPU_OPERATOR_COMMENTED_KEYS, leaf_paths, releases
from tools.charts.cache import chart_contracts
from tools.charts.manifest_yaml import load_manifests
from tools.charts.pins import pinned_chart_key
from tools.charts.render import render_release
from tools.deployability import names, resources, workloads
from tools.deployability.findings import ERROR
from tools.deployability.inputs import K8sObject, crds_of, helm_kube_version, site_from_plan
from tools.deployability.schemas import check_schemas
from tools.offline.recording import integral_numbers
from tools.plan.document import build_plan

# Chart -> (its floor, its default, every release the config accepts, the stack-config key that pins it).
CHARTS = {
    versions.VCLUSTER_CHART: (versions.VCLUSTER_MINIMUM_VERSION, versions.VCLUSTER_VERSION,
                              versions.VCLUSTER_RELEASES, "vcluster"),
    "kai-scheduler": (versions.KAI_MINIMUM_VERSION, versions.KAI_VERSION, versions.KAI_RELEASES, "kaiScheduler"),
    versions.GPU_OPERATOR_CHART: (versions.GPU_OPERATOR_MINIMUM_VERSION, versions.GPU_OPERATOR_VERSION,
                                  versions.GPU_OPERATOR_RELEASES, "gpuOperator"),
    versions.KUBE_PROMETHEUS_STACK_CHART: (versions.KUBE_PROMETHEUS_STACK_MINIMUM_VERSION,
                                           versions.KUBE_PROMETHEUS_STACK_VERSION,
                                           versions.KUBE_PROMETHEUS_STACK_RELEASES, "observability"),
}
ACCEPTED = [(chart, release) for chart, (_, _, releases, _) in CHARTS.items() for release in releases]


# --- the config refuses what is older than a floor ---------------------------------------------------


def _eks() -> dict:
    return config_spec.eks_config()


def _eks_without_containerd_cdi() -> dict:
    return config_spec.put(_eks(), "gpuOperator.version", versions.GPU_OPERATOR_NEWEST_ENVVAR_DEVICE_LIST)


def _kubeconfig() -> dict:
    config = config_spec.dev_config()
    config["cluster"] = {"kind": "kubeconfig"}
    config["gpuOperator"] = {"mode": "external"}
    return config


BELOW_THE_FLOOR = [
    (config_spec.dev_config, "vcluster.version", "0.34.7", versions.VCLUSTER_MINIMUM_VERSION),
    (config_spec.dev_config, "teams[1].vcluster.version", "0.27.0", versions.VCLUSTER_MINIMUM_VERSION),
    (config_spec.dev_config, "vcluster.version", f"{versions.VCLUSTER_MINIMUM_VERSION}-rc.1",
     versions.VCLUSTER_MINIMUM_VERSION),
    (config_spec.dev_config, "kaiScheduler.version", "v0.15.3", versions.KAI_MINIMUM_VERSION),
    (_eks, "gpuOperator.version", "v24.6.2", versions.GPU_OPERATOR_MINIMUM_VERSION),
    (config_spec.dev_config, "cluster.microk8s.nvidiaAddonOperatorVersion", "v24.6.2",
     versions.GPU_OPERATOR_MINIMUM_VERSION),
    (config_spec.dev_config, "observability.chartVersion", "87.1.0", versions.KUBE_PROMETHEUS_STACK_MINIMUM_VERSION),
    (_eks_without_containerd_cdi, "cluster.eks.kubernetesVersion", "1.29", versions.KUBERNETES_MINIMUM_VERSION),
    (config_spec.dev_config, "cluster.microk8s.kubernetesVersion", "1.29", versions.KUBERNETES_MINIMUM_VERSION),
    (_kubeconfig, "cluster.kubeconfig.kubernetesVersion", "1.29", versions.KUBERNETES_MINIMUM_VERSION),
]


@pytest.mark.parametrize("site, path, older, floor", BELOW_THE_FLOOR,
                         ids=[f"{case[1]}={case[2]}" for case in BELOW_THE_FLOOR])
def test_a_version_below_the_floor_is_refused_and_the_floor_passes(site, path, older, floor):
    found = config_spec.assert_rejected(config_spec.put(site(), path, older), path, older, fix=f"pin {floor} or later")
    assert f"releases before {floor} are not supported: " in found.problem
    secrets = ("kubeconfig",) if path.startswith("cluster.kubeconfig") else ()
    load_platform(config_spec.put(site(), path, floor), secrets_set=secrets)


# Newer than the pin: KAI's v0.20.1 tag (November 2025) is numbered above the pin but predates the floor, and
# vCluster's 0.37.0-rc.1 is a pre-release of the next minor; both are real tags. The others are the next releases.
ABOVE_THE_PIN = [
    (config_spec.dev_config, "kaiScheduler.version", "v0.20.1", versions.KAI_VERSION),
    (config_spec.dev_config, "vcluster.version", "0.37.0-rc.1", versions.VCLUSTER_VERSION),
    (config_spec.dev_config, "teams[1].vcluster.version", "0.36.2", versions.VCLUSTER_VERSION),
    (_eks, "gpuOperator.version", "v26.7.1", versions.GPU_OPERATOR_VERSION),
    (config_spec.dev_config, "cluster.microk8s.nvidiaAddonOperatorVersion", "v27.0.0",
     versions.GPU_OPERATOR_VERSION),
    (config_spec.dev_config, "observability.chartVersion", "89.0.0", versions.KUBE_PROMETHEUS_STACK_VERSION),
]


@pytest.mark.parametrize("site, path, newer, pin", ABOVE_THE_PIN,
                         ids=[f"{case[1]}={case[2]}" for case in ABOVE_THE_PIN])
def test_a_version_newer_than_the_pin_is_refused_and_the_pin_passes(site, path, newer, pin):
    # The boundary and the values were checked up to the pin; a later release is unchecked.
    found = config_spec.assert_rejected(config_spec.put(site(), path, newer), path, newer, fix=f"pin {pin} or older")
    assert f"releases after {pin} are not supported: " in found.problem
    load_platform(config_spec.put(site(), path, pin))


# --- between them, the config accepts the chart's releases and nothing else ---------------------------


@pytest.mark.parametrize("chart", CHARTS)
def test_each_chart_accepts_its_releases_from_the_floor_to_the_pin_each_mirrored(chart):
    floor, default, releases, _ = CHARTS[chart]
    assert (releases[0], releases[-1]) == (floor, default)
    assert list(releases) == sorted(set(releases), key=versions.release_order), "oldest first, each once"
    repository, tag, _ = CHART_SOURCES[chart]
    for release in releases:
        assert tag.format(version=release) in MIRRORED_TAGS[repository], f"{chart} {release} is not mirrored"


@pytest.mark.parametrize("chart", CHARTS)
def test_each_charts_releases_are_every_release_its_repository_tagged_from_the_floor_to_the_pin(chart):
    floor, default, releases, _ = CHARTS[chart]
    repository, tag, _ = CHART_SOURCES[chart]
    before, after = tag.split("{version}")
    tagged = [name[len(before):len(name) - len(after)] for name in upstream_tags(repository)
              if name.startswith(before) and name.endswith(after)]
    in_range = [version for version in tagged if EXACT_VERSION.fullmatch(version) and not any(
        mark in version for mark in "-+") and versions.release_order(floor) <= versions.release_order(version)
        <= versions.release_order(default)]
    assert sorted(in_range, key=versions.release_order) == list(releases), \
        f"{chart}: list exactly the releases {repository} tagged from {floor} to {default}"


# In range but not a release: real pre-release tags, numbers no release carries, build metadata.
NOT_RELEASES = [
    (config_spec.dev_config, "vcluster.version", "0.36.1-rc.2", versions.VCLUSTER_RELEASES),
    (config_spec.dev_config, "teams[0].vcluster.version", "0.36.0-next.internal.0", versions.VCLUSTER_RELEASES),
    (config_spec.dev_config, "vcluster.version", "0.35.4", versions.VCLUSTER_RELEASES),
    (config_spec.dev_config, "vcluster.version", f"{versions.VCLUSTER_VERSION}+build.7", versions.VCLUSTER_RELEASES),
    (config_spec.dev_config, "kaiScheduler.version", f"{versions.KAI_VERSION}-rc.1", versions.KAI_RELEASES),
    (config_spec.dev_config, "kaiScheduler.version", "v0.16.9", versions.KAI_RELEASES),
    (_eks, "gpuOperator.version", "v25.3.5", versions.GPU_OPERATOR_RELEASES),
    (config_spec.dev_config, "cluster.microk8s.nvidiaAddonOperatorVersion", "v26.1.0", versions.GPU_OPERATOR_RELEASES),
    (config_spec.dev_config, "observability.chartVersion", "88.1.7", versions.KUBE_PROMETHEUS_STACK_RELEASES),
]


@pytest.mark.parametrize("site, path, version, accepted", NOT_RELEASES,
                         ids=[f"{case[1]}={case[2]}" for case in NOT_RELEASES])
def test_a_version_between_the_floor_and_the_pin_that_is_not_a_release_is_refused(site, path, version, accepted):
    found = config_spec.assert_rejected(config_spec.put(site(), path, version), path, version,
                                        fix="pin one of " + ", ".join(accepted))
    assert found.problem.startswith(f"is not a release from {accepted[0]} to {accepted[-1]}: ")
    assert "pre-release" in found.problem


# --- every accepted release of every chart renders with the program's values -------------------------


@pytest.fixture(scope="module")
def mirror_cache(tmp_path_factory):
    """A chart cache holding every accepted release of every chart, from the mirrors."""
    cache = tmp_path_factory.mktemp("mirror-charts")
    for chart, release in ACCEPTED:
        add_from_mirror(chart, release, cache)
    return cache


def _with_gpu_operator_installed() -> dict:
    config = dev_config()
    config["gpu-tenancy:gpuOperator"]["mode"] = "install"
    return config


def _restricted_without_network_policy() -> dict:
    config = dev_config()
    config["gpu-tenancy:vcluster"].update(podSecurity="restricted", networkPolicy=False)
    return config


def _with_observability() -> dict:
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install"}
    return config


def _with_alerts_to_slack() -> dict:
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install",
                                           "alerting": {"receiver": "slack", "slackChannel": "#gpu"}}
    return config


# The configurations whose values differ for each chart.
SITES = {
    versions.VCLUSTER_CHART: (dev_config, eks_config, _restricted_without_network_policy),
    "kai-scheduler": (dev_config, eks_config),
    versions.GPU_OPERATOR_CHART: (eks_config, _with_gpu_operator_installed),
    versions.KUBE_PROMETHEUS_STACK_CHART: (_with_observability, _with_alerts_to_slack),
}


@pytest.mark.parametrize("chart, version", ACCEPTED)
def test_every_accepted_release_of_every_chart_renders_with_the_programs_values(chart, version, mirror_cache):
    key = CHARTS[chart][-1]
    contracts = chart_contracts(pinned_chart_key(chart, version), mirror_cache)
    assert contracts is not None
    if chart == versions.VCLUSTER_CHART:
        assert contracts.schema, "the vCluster chart ships a values schema, which Helm checks the values against"
    for make_site in SITES[chart]:
        config = make_site()
        config.setdefault(f"gpu-tenancy:{key}", {})["chartVersion" if key == "observability" else "version"] = version
        program = run(config)
        plan = build_plan(program, "site")
        site = site_from_plan(plan)
        found = releases(program, chart)
        assert found and all(release.inputs["version"] == version for release in found)
        for release in found:  # each tenant's vCluster
            values = integral_numbers(release.inputs["values"])
            rendered = render_release(contracts.path, release.inputs["name"], release.inputs["namespace"], values,
                                      kube_version=helm_kube_version(plan))
            assert any("/templates/" in path for path in rendered)
            documents = []
            for path, text in rendered.items():  # as Helm reads it (kube-prometheus-stack's CRDs hold `- =`)
                documents.extend(load_manifests(text))
                assert all(isinstance(document, (dict, type(None))) for document in load_manifests(text)), path
            # What the release puts in the cluster, as the site's API server takes it: each custom resource
            # against the release's own CRD, each built-in object against the site's Kubernetes, every name and
            # label, every container's requests and limits and every LimitRange, every workload's selector and
            # mounts.
            objects = [K8sObject(document, f"{chart} {version}") for document in documents if document]
            refused = [finding for finding in check_schemas(objects, site, crds_of(objects))
                       if finding.severity == ERROR]
            refused += (names.check_names(objects) + resources.check_resources(objects)
                        + workloads.check_workloads(objects))
            assert not refused, "\n".join(map(str, refused))
            if not contracts.schema:
                defaults = _defaults_with_sub_charts(contracts.path)
                unknown = [".".join(path) for path in leaf_paths(values) if not _known(defaults, path)
                           and tuple(path) not in GPU_OPERATOR_COMMENTED_KEYS
                           and tuple(path) not in COMMENTED_KEYS
                           and tuple(path[:2]) not in WRITTEN_WHOLE]
                assert not unknown, f"{chart} {version} has no value {unknown}"
                for path in leaf_paths(values):
                    if tuple(path) in COMMENTED_KEYS:
                        template, reference = COMMENTED_KEYS[tuple(path)]
                        assert reference in _chart_file(contracts.path, template), \
                            f"{chart} {version}: {template} no longer reads {'.'.join(path)}"
                _assert_written_whole(values, rendered)


# Keys a chart's templates read but its values.yaml only shows commented out: the template that reads each.
COMMENTED_KEYS = {("grafana", "persistence", "storageClassName"):
                  ("charts/grafana/templates/statefulset.yaml", "storageClassName: {{ .Values.persistence.storageClassName }}"),
                  ("alertmanager", "alertmanagerSpec", "configSecret"):
                  ("templates/alertmanager/alertmanager.yaml",
                   "configSecret: {{ .Values.alertmanager.alertmanagerSpec.configSecret }}")}


# Maps a chart writes into an application's own config file key by key, whatever the keys (Grafana's chart
# renders every section and setting of `grafana.ini`): the rendered file must hold each value the program sets.
WRITTEN_WHOLE = {("grafana", "grafana.ini"): "grafana.ini"}


def _assert_written_whole(values: dict, rendered: dict) -> None:
    for prefix, data_key in WRITTEN_WHOLE.items():
        settings = [path[len(prefix):] for path in leaf_paths(values) if tuple(path[:len(prefix)]) == prefix]
        if not settings:
            continue
        files = [document["data"][data_key] for text in rendered.values() for document in load_manifests(text)
                 if isinstance(document, dict) and document.get("kind") == "ConfigMap"
                 and data_key in (document.get("data") or {})]
        assert len(files) == 1, f"one ConfigMap holds {data_key}"
        for section, *rest in settings:
            assert f"[{section}]" in files[0] and f"{rest[-1]} =" in files[0], f"{data_key} lacks {section}.{rest}"


def _defaults_with_sub_charts(archive) -> dict:
    """A packaged chart's default values with each sub-chart's under its name, as Helm coalesces them."""
    with tarfile.open(archive) as tar:
        files = {member.name: member for member in tar.getmembers() if member.name.endswith("/values.yaml")}
        read = lambda name: yaml.safe_load(tar.extractfile(files[name]).read()) or {}  # noqa: E731
        [top] = [name for name in files if name.count("/") == 1]
        chart = top.split("/")[0]
        subcharts = {name.split("/")[2]: read(name) for name in files if name.count("/") == 3
                     and name.startswith(f"{chart}/charts/")}
        return deep_merge(subcharts, read(top))


def _chart_file(archive, relative: str) -> str:
    """One file of a packaged chart, by its path inside the chart."""
    with tarfile.open(archive) as tar:
        [member] = [m for m in tar.getmembers() if m.name.split("/", 1)[-1] == relative]
        return tar.extractfile(member).read().decode()


def _known(defaults: dict, path: tuple) -> bool:
    """The chart has the value, or it sits in a map the chart passes on whole (``storageSpec: {}``)."""
    node = defaults
    for key in path:
        if node == {}:
            return True
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True
