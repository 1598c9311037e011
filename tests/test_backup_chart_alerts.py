"""Which of kube-prometheus-stack's own alerts a team's snapshot Job or its pod can fire, and who hears them.

The chart's rules, rendered with the program's values at every accepted release, are run by the real promtool over
what kube-state-metrics and cAdvisor report of snapshot runs gone wrong next to a tenant's pod gone wrong the same
ways: a snapshot pod that cannot pull its image until the Job's deadline, one whose sidecar crash-loops and is
CPU-throttled, a Job that failed. The alerts that fire are routed by amtool through the Alertmanager configuration
the program writes for a team hearing of its own namespace (``alerts: all``): the snapshot ones reach the site's
receiver (with the site's ``alerts: all``; none with ``platform``) and never the team, the tenant's reach the team.
No name a tenant's pod can get on the host (vCluster's translation, read at every accepted tag) passes for a
snapshot pod's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import subprocess

import pytest
import yaml

from components import observability_alerting as alerting
from components import observability_backup_rules as backup_rules
from components.observability_alerting import alertmanager_config
from components.tenant_backup import RUN_SECONDS, job_name_pattern, pod_name_pattern
from config import SECRET_KEYS, load_platform, versions
from config.snapshots import (BACKUP_NAME_MAX, GENERATED_SUFFIX_ALPHABET, GENERATED_SUFFIX_LENGTH, MAX_GENERATED_NAME,
                              SCHEDULED_MINUTE_DIGITS, backup_name)
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, git, mirrored_tag
from tests.local_alertmanager import needs_amtool
from tests.release_renders import every_release_renders
from tests.test_backup_alerts import BACKUP
from tests.test_observability_alerting import amtool
from tests.test_observability_rules import needs_promtool, promtool
from tests.test_observability_team_alerting import WITH_NAMESPACE_ALERTS, team_site
from tests.test_observability_team_routing import receivers_of
from tests.vcluster_names import host_object_name
from tools.charts.manifest_yaml import load_manifests

# The chart's alerts that read a pod's, a container's or a Job's own series, so may name a snapshot pod or Job.
POD_AND_JOB_ALERTS = {"KubePodCrashLooping", "KubePodNotReady", "KubeContainerWaiting", "KubeJobNotCompleted",
                      "KubeJobFailed", "CPUThrottlingHigh"}
OWN_SERIES = re.compile(r"\b(kube_pod_\w+|kube_job_\w+|container_\w+)\{")
NAMESPACE = "vcluster-alpha"
CRONJOB = "alpha-backup"
KSM = {"job": "kube-state-metrics", "namespace": NAMESPACE}
# Two snapshot runs (their scheduled minutes) and the tenant's pod, as the host names them.
STUCK_JOB, CRASHING_JOB = f"{CRONJOB}-29441520", f"{CRONJOB}-29441880"
STUCK_POD, CRASHING_POD = f"{STUCK_JOB}-bcdfg", f"{CRASHING_JOB}-x7k2p"
TENANT_POD = "train-x-default-x-alpha"
DEADLINE = RUN_SECONDS // 60
END = 80


def chart_rules(manifests: dict[str, str]) -> dict:
    """The release's rule groups, without annotations (promtool compares those of a firing alert)."""
    groups = [{**group, "rules": [{key: value for key, value in rule.items() if key != "annotations"}
                                  for rule in group["rules"]]}
              for text in manifests.values() for document in load_manifests(text)
              if isinstance(document, dict) and document.get("kind") == "PrometheusRule"
              for group in document["spec"]["groups"]]
    return {"groups": groups}


@pytest.fixture(scope="module")
def rendered_rules() -> dict[str, dict]:
    return {release: chart_rules(manifests)
            for release, manifests in every_release_renders()["kube-prometheus-stack"].items()}


def alerts_of(rules: dict) -> dict[str, dict]:
    return {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule}


def seconds(duration: str) -> int:
    return sum(int(value) * {"s": 1, "m": 60, "h": 3600}[unit] for value, unit in re.findall(r"(\d+)([smh])", duration))


@pytest.mark.parametrize("release", versions.KUBE_PROMETHEUS_STACK_RELEASES)
def test_these_are_the_charts_alerts_on_a_pod_or_a_job_and_one_outlasts_a_snapshot_run(rendered_rules, release):
    alerts = alerts_of(rendered_rules[release])
    assert {name for name, rule in alerts.items() if OWN_SERIES.search(rule["expr"])} == POD_AND_JOB_ALERTS
    # A pod owned by a Job is never "not ready" (pending pods are a Job's normal wait), a tenant's pod is.
    assert 'kube_pod_owner{owner_kind!="Job"}' in alerts["KubePodNotReady"]["expr"]
    # A container waiting (its image not pulled, its Secret missing) alerts after longer than a snapshot Job may run.
    assert seconds(alerts["KubeContainerWaiting"]["for"]) > RUN_SECONDS
    assert re.search(r"\) > 43200$", alerts["KubeJobNotCompleted"]["expr"]) and RUN_SECONDS < 43200


def series(metric: str, values: str, **labels: str) -> dict:
    return {"series": metric + "{" + ",".join(f'{key}="{value}"' for key, value in labels.items()) + "}",
            "values": values}


def until(minute: int, value: str = "1") -> str:
    """``value`` from minute 0 to ``minute``, absent after (kube-state-metrics dropped the pod or the Job)."""
    return f"{value}x{minute} _x{END - minute}"


def story() -> list[dict]:
    """Minute 0: two snapshot runs start and the tenant's pod is created. The stuck run's pod waits for its image
    until the Job's deadline deletes it; the other's sidecar crash-loops and its shell is throttled, and that Job
    fails. The tenant's pod waits for its image all along."""
    out = []
    for pod, job in ((STUCK_POD, STUCK_JOB), (CRASHING_POD, CRASHING_JOB)):
        out.append(series("kube_pod_owner", until(DEADLINE), **KSM, pod=pod, owner_kind="Job", owner_name=job,
                          owner_is_controller="true"))
    out += [series("kube_pod_owner", until(END), **KSM, pod=TENANT_POD, owner_kind="<none>", owner_name="<none>",
                   owner_is_controller="<none>"),
            series("kube_pod_status_phase", until(DEADLINE), **KSM, pod=STUCK_POD, phase="Pending"),
            series("kube_pod_status_phase", until(END), **KSM, pod=TENANT_POD, phase="Pending"),
            series("kube_pod_container_status_waiting_reason", until(DEADLINE), **KSM, pod=STUCK_POD,
                   container="snapshot", reason="ImagePullBackOff"),
            series("kube_pod_container_status_waiting_reason", until(END), **KSM, pod=TENANT_POD,
                   container="train", reason="ImagePullBackOff"),
            series("kube_pod_container_status_waiting_reason", until(DEADLINE), **KSM, pod=CRASHING_POD,
                   container="api-proxy", reason="CrashLoopBackOff"),
            series("kube_job_status_start_time", until(DEADLINE, "0"), **KSM, job_name=STUCK_JOB),
            series("kube_job_status_active", until(DEADLINE), **KSM, job_name=STUCK_JOB),
            series("kube_job_failed", "1x80", **KSM, job_name=CRASHING_JOB, condition="true")]
    cadvisor = {"job": "kubelet", "metrics_path": "/metrics/cadvisor", "namespace": NAMESPACE, "pod": CRASHING_POD,
                "container": "snapshot"}
    # Throttled in half its CFS periods.
    out += [series("container_cpu_cfs_periods_total", f"0+600x{DEADLINE}", **cadvisor),
            series("container_cpu_cfs_throttled_periods_total", f"0+300x{DEADLINE}", **cadvisor)]
    return out


def fired(name: str, at: int, *alerts: dict) -> dict:
    return {"alertname": name, "eval_time": f"{at}m", "exp_alerts": [{"exp_labels": labels} for labels in alerts]}


# What fires, by the labels each chart rule keeps.
CRASH_LOOPING = {**KSM, "pod": CRASHING_POD, "container": "api-proxy", "reason": "CrashLoopBackOff",
                 "severity": "warning"}
JOB_FAILED = {**KSM, "job_name": CRASHING_JOB, "condition": "true", "severity": "warning"}
THROTTLED = {"namespace": NAMESPACE, "pod": CRASHING_POD, "container": "snapshot", "severity": "info"}
TENANT_NOT_READY = {**KSM, "pod": TENANT_POD, "severity": "warning"}
TENANT_WAITING = {**KSM, "pod": TENANT_POD, "container": "train", "reason": "ImagePullBackOff", "severity": "warning"}


def story_checks() -> list[dict]:
    return [
        # 30 minutes in: the snapshot pod pending as long as the tenant's is not "not ready"; the sidecar's crash
        # loop, the failed Job and the throttled shell alert, naming the snapshot pod or Job.
        fired("KubePodNotReady", 30, TENANT_NOT_READY),
        fired("KubePodCrashLooping", 30, CRASH_LOOPING),
        fired("KubeJobFailed", 30, JOB_FAILED),
        fired("CPUThrottlingHigh", 30, THROTTLED),
        # Past an hour: the tenant's container still waits; the snapshot pod's was deleted at the Job's deadline,
        # before its wait could alert, and that Job never ran long enough to be "not completed".
        fired("KubeContainerWaiting", END - 5, TENANT_WAITING),
        fired("KubeJobNotCompleted", END - 5),
    ]


@needs_promtool
@pytest.mark.parametrize("release", versions.KUBE_PROMETHEUS_STACK_RELEASES)
def test_a_snapshot_run_gone_wrong_fires_these_chart_alerts_and_not_the_others(rendered_rules, release, tmp_path):
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rendered_rules[release], sort_keys=False))
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m",
             "tests": [{"interval": "1m", "input_series": story(), "alert_rule_test": story_checks()}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert {check["alertname"] for check in story_checks()} == POD_AND_JOB_ALERTS


def alertmanager_file(tmp_path, site_alerts: str):
    config = {**team_site(receivers=WITH_NAMESPACE_ALERTS), "backup": BACKUP}
    config["observability"]["alerting"]["alerts"] = site_alerts
    platform = load_platform(config, placeholders=SECRET_KEYS)
    path = tmp_path / f"alertmanager-{site_alerts}.yaml"
    path.write_text(yaml.safe_dump(alertmanager_config(platform.observability.alerting, platform.teams)))
    assert "SUCCESS" in amtool("check-config", str(path))
    return path


def routed(path, labels: dict) -> set[str]:
    return receivers_of(path, *(f"{key}={value}" for key, value in labels.items()))


@needs_amtool
@pytest.mark.parametrize("site_alerts", ["all", "platform"])
def test_the_snapshot_runs_alerts_reach_the_site_and_the_tenants_reach_the_team(tmp_path, site_alerts):
    """Every alert the story fires, as promtool saw it: the snapshot pod's and Job's go where the site's choice
    sends the chart's alerts (its receiver with ``all``, nowhere with ``platform``), never to alpha, who asked for
    its namespace's; the tenant's pod's go to alpha."""
    path = alertmanager_file(tmp_path, site_alerts)
    site = {alerting.RECEIVER} if site_alerts == "all" else {"null"}
    for name, labels in (("KubePodCrashLooping", CRASH_LOOPING), ("KubeJobFailed", JOB_FAILED),
                         ("CPUThrottlingHigh", THROTTLED)):
        assert routed(path, {"alertname": name, **labels}) == site, name
    # What the snapshot pod would fire if its run outlived the chart's waits, and a run made by hand.
    for labels in ({"alertname": "KubeContainerWaiting", **KSM, "pod": STUCK_POD, "container": "snapshot",
                    "severity": "warning"},
                   {"alertname": "KubeJobNotCompleted", **KSM, "job_name": STUCK_JOB, "severity": "warning"},
                   {"alertname": "KubePodCrashLooping", **CRASH_LOOPING, "pod": f"{CRONJOB}-29442013-2z9vq"}):
        assert routed(path, labels) == site, labels
    tenant = {"gpu-tenancy-team-alpha"} | ({"null"} if site_alerts == "all" else set())
    for name, labels in (("KubePodNotReady", TENANT_NOT_READY), ("KubeContainerWaiting", TENANT_WAITING)):
        assert routed(path, {"alertname": name, **labels}) == tenant, name
    # A tenant's pod named like a snapshot pod reaches the host under another name, still alpha's.
    for virtual in (CRASHING_POD, f"{CRASHING_POD}-{'b' * 40}"):
        host = host_object_name(virtual, "default", "alpha")
        assert routed(path, {"alertname": "KubePodCrashLooping", **CRASH_LOOPING, "pod": host}) == tenant, host


# --- no tenant pod passes for a snapshot pod ---------------------------------------------------------------------


def test_no_host_name_of_a_tenants_pod_is_a_snapshot_pods():
    """vCluster names a tenant's pod ``<name>-x-<namespace>-x-<vcluster>`` (two dashes too many after the CronJob's
    name) or, past 63 characters, a 52-character prefix, a dash and ten hex digits (a last part of ten characters,
    a snapshot pod's has five): tried with names built to look like a snapshot pod's, and a search for a hash that
    would pass."""
    platform = load_platform({**team_site(receivers=WITH_NAMESPACE_ALERTS), "backup": BACKUP},
                             placeholders=SECRET_KEYS)
    for team in platform.teams:
        pattern = re.compile(pod_name_pattern(backup_name(team)))
        snapshot_pod = f"{backup_name(team)}-29441520-bcdfg"
        assert pattern.fullmatch(snapshot_pod)
        for virtual in (snapshot_pod, snapshot_pod + "-" + "b" * 30, snapshot_pod.ljust(52, "2"),
                        backup_name(team).ljust(60, "9")):
            for namespace in ("default", "x", "29441520-bcdfg"):
                host = host_object_name(virtual, namespace, team.vcluster_name)
                assert not pattern.fullmatch(host), host
        # Whatever a long name hashes to, its last part is ten characters.
        for index in range(2000):
            host = host_object_name(f"{snapshot_pod}-{index:0>40}", "default", team.vcluster_name)
            assert len(host.rsplit("-", 1)[1]) == 10 and not pattern.fullmatch(host), host


def test_a_snapshot_pods_name_is_never_cut_however_long_the_vcluster_name():
    """The pods' prefix, ``<cronjob>-<minute>-``, fits what the API server keeps whole, for the longest vcluster name
    (53 characters): so the pattern, not a cut name, is what the pods are called."""
    [team, *_] = load_platform(team_site(), placeholders=SECRET_KEYS).teams
    for length in range(1, 54):
        name = backup_name(dataclasses.replace(team, vcluster_name="v" * (length - 1) + "w"))
        assert len(name) <= BACKUP_NAME_MAX and name.endswith("-backup") and "--" not in name
        assert len(f"{name}-{'9' * SCHEDULED_MINUTE_DIGITS}-") <= MAX_GENERATED_NAME


def test_the_run_the_runbook_makes_by_hand_is_named_like_the_cronjobs_own():
    """The backup alerts' runbook names the Job it creates after the minute, so its Job and pods are the platform's
    too (and it writes the current interval's slot): the name, as a shell makes it, matches the patterns."""
    platform = load_platform({**team_site(), "backup": BACKUP}, placeholders=SECRET_KEYS)
    made = re.compile(r"create job --from=cronjob/\{\{ \$labels\.cronjob \}\} (\{\{ \$labels\.cronjob \}\}\S*"
                      r"(?: [^ ]+)*? \)\))")
    [command] = {made.search(rule["annotations"]["runbook"]).group(1) for rule in backup_rules.alert_rules(platform)}
    name = subprocess.run(["sh", "-c", "echo " + command.replace("{{ $labels.cronjob }}", CRONJOB)],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert re.fullmatch(job_name_pattern(CRONJOB), name), name
    assert re.fullmatch(pod_name_pattern(CRONJOB), f"{name}-{GENERATED_SUFFIX_ALPHABET[:GENERATED_SUFFIX_LENGTH]}")


APISERVER, APIMACHINERY, VCLUSTER = "kubernetes/apiserver", "kubernetes/apimachinery", "loft-sh/vcluster"


@pytest.mark.parametrize("tag", MIRRORED_TAGS[APISERVER])
def test_a_generated_name_is_its_prefix_cut_to_58_and_five_random_characters(tag):
    source = git(APISERVER, "show", f"{mirrored_tag(APISERVER, tag)}:pkg/storage/names/generate.go")
    assert re.search(r"maxNameLength\s*=\s*63", source) and re.search(r"randomLength\s*=\s*5", source)
    assert re.search(r"MaxGeneratedNameLength\s*=\s*maxNameLength - randomLength", source)
    assert "base = base[:MaxGeneratedNameLength]" in source and "utilrand.String(randomLength)" in source
    assert MAX_GENERATED_NAME == 63 - 5 and GENERATED_SUFFIX_LENGTH == 5


@pytest.mark.parametrize("tag", MIRRORED_TAGS[APIMACHINERY])
def test_the_random_suffix_is_drawn_from_the_alphabet_the_pattern_names(tag):
    source = git(APIMACHINERY, "show", f"{mirrored_tag(APIMACHINERY, tag)}:pkg/util/rand/rand.go")
    assert f'alphanums = "{GENERATED_SUFFIX_ALPHABET}"' in source


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_names_a_tenants_pod_as_the_simulator_does(tag):
    translate = f"{mirrored_tag(VCLUSTER, tag)}:pkg/util/translate"
    concat = git(VCLUSTER, "show", f"{translate}/translate.go")
    assert 'fullPath := strings.Join(name, "-")' in concat and "if len(fullPath) > 63 {" in concat
    assert 'fullPath[0:52]+"-"+hex.EncodeToString(digest[0:])[0:10], ".-", "-")' in concat
    single = git(VCLUSTER, "show", f"{translate}/single_namespace.go")
    assert 'SafeConcatName(name, "x", namespace, "x", suffix)' in single
    assert "Name:      SingleNamespaceHostName(vName, vNamespace, VClusterName)," in single
    full = "p" * 60 + "-x-default-x-alpha"
    assert host_object_name("p" * 60, "default", "alpha") == \
        full[:52] + "-" + hashlib.sha256(full.encode()).hexdigest()[:10]
