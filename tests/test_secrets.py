"""Secrets are Pulumi secrets end to end, never printed or logged.

Each secret the program handles is followed through whole-program runs with a value recognisable wherever it
lands: the eight secret keys of the stack config (decrypted as the language host passes them to ``pulumi up``),
the kubeconfigs the providers answer with (the MicroK8s box's, the EKS cluster's, each vCluster's ``vc-*``
Secret: the mocks' token ``offline-plan-token``) and Grafana's generated admin password. Each reaches the one
input that needs it, as a secret, and appears nowhere else: no recorded input or output, plan, review summary,
warning or note. A value set with ``--secret`` under any other key would be read as plain config, so it is
refused, without being shown.
"""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from config import ConfigError
from tests.conftest import dev_config, eks_config
from tests.test_grafana_sign_in import SSO, login_config
from tools.offline.mockrun import run_program
from tools.offline.recording import REDACTED, ProgramRun
from tools.offline.sdk_internals import wait_for
from tools.plan.document import build_plan, render_plan_json
from tools.plan.summary import render_summary

PROVIDER = "pulumi:providers:kubernetes"
LOCAL_COMMAND, REMOTE_COMMAND = "command:local:Command", "command:remote:Command"
# Secrets the mocks make: every kubeconfig a provider answers with, Grafana's generated password and its hash.
MOCK_SECRETS = ("offline-plan-token", "offline-password-", "offline-bcrypt-")
KUBECONFIG = yaml.safe_dump({
    "apiVersion": "v1", "kind": "Config", "current-context": "site",
    "clusters": [{"name": "site", "cluster": {"server": "https://k8s.example:6443"}}],
    "contexts": [{"name": "site", "context": {"cluster": "site", "user": "admin"}}],
    "users": [{"name": "admin", "user": {"token": "kubeconfig-token-6d1e0b"}}],
})
DECRYPTED = {
    "sshPrivateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-key-3f9c1e\n-----END OPENSSH PRIVATE KEY-----\n",
    "kubeconfig": KUBECONFIG,
    "grafanaClientSecret": "grafana-client-secret-8b27d4",
    "alertReceiver": "https://hooks.slack.com/services/T000/B000/slack-token-5a0c93",
    "alertHeartbeat": "https://hc-ping.com/heartbeat-id-e41f7a",
    "teamAlertReceivers": "team-nlp: https://hooks.slack.com/services/T000/B000/team-token-c0d2b8\n",
    "backupAccessKeyId": "AKIAEXAMPLE7B3D9F2C1",
    "backupSecretAccessKey": "backup-secret-0e9a6c/wJalrXUtnFEMI+K7MDENG",
}
# The part of each value that must never be seen.
RECOGNISABLE = {"sshPrivateKey": "ssh-key-3f9c1e", "kubeconfig": "kubeconfig-token-6d1e0b",
                "grafanaClientSecret": "grafana-client-secret-8b27d4", "alertReceiver": "slack-token-5a0c93",
                "alertHeartbeat": "heartbeat-id-e41f7a", "teamAlertReceivers": "team-token-c0d2b8",
                "backupAccessKeyId": "AKIAEXAMPLE7B3D9F2C1", "backupSecretAccessKey": "backup-secret-0e9a6c"}


def with_secrets(config: dict, *names: str) -> tuple[dict, dict[str, str]]:
    """The site with these secret keys encrypted in its stack file, and what `pulumi up` decrypts them to."""
    for name in names:
        config[f"gpu-tenancy:{name}"] = {"secure": f"v1:ciphertext-of-{name}"}
    return config, {f"gpu-tenancy:{name}": DECRYPTED[name] for name in names}


def remote_observed_site() -> tuple[dict, dict[str, str]]:
    """A MicroK8s box driven over SSH, with Grafana's single sign-on, an alert receiver and a heartbeat."""
    config = login_config()
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "gpu-box.lab.example"
    config["gpu-tenancy:observability"]["alerting"] = {"receiver": "slack", "heartbeat": True}
    [nlp] = [team for team in config["gpu-tenancy:teams"] if team["name"] == "team-nlp"]
    nlp["alerting"] = {"receiver": "slack"}
    return with_secrets(config, "sshPrivateKey", "grafanaClientSecret", "alertReceiver", "alertHeartbeat",
                        "teamAlertReceivers")


def existing_cluster_site() -> tuple[dict, dict[str, str]]:
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"gpus": 1}}
    config["gpu-tenancy:gpuOperator"] = {"mode": "install"}
    return with_secrets(config, "kubeconfig")


def eks_site() -> tuple[dict, dict[str, str]]:
    """The committed EKS site, snapshotting its teams to S3 (gpu-tenancy:backup) with the bucket's key."""
    config = eks_config()
    config["gpu-tenancy:backup"] = {"url": "s3://rag-platform-backups/eks", "region": "us-east-2"}
    return with_secrets(config, "backupAccessKeyId", "backupSecretAccessKey")


SITES = {"remote-observed": remote_observed_site, "existing-cluster": existing_cluster_site, "eks": eks_site}


@pytest.fixture(scope="module")
def site_runs() -> dict[str, tuple[dict[str, str], ProgramRun]]:
    """Each site run as `pulumi up` runs it (no offline placeholder for an unset secret), with its decrypted secrets."""
    runs = {}
    for site, make in SITES.items():
        config, decrypted = make()
        runs[site] = decrypted, run_program(config, stack=site, secret_placeholders=False, decrypted=decrypted)
    return runs


def raw_input(program: ProgramRun, resource_type: str, *path: str, name_contains: str = ""):
    """The unredacted input at ``path`` of each resource of this type, and whether the plan shows it redacted."""
    found = []
    for resource in program.of_type(resource_type):
        if name_contains not in resource.name:
            continue
        raw, shown = resource.raw_inputs, resource.inputs
        for step in path:
            raw, shown = raw[step], shown if shown == REDACTED else shown[step]
        found.append((raw, shown == REDACTED))
    return found


def received(program: ProgramRun, secret: str) -> list:
    """What each input meant for this secret key received, and whether the plan shows it redacted."""
    receiver = ("kubernetes:core/v1:Secret", "stringData")
    return {
        # Every command on the box goes over SSH with the key.
        "sshPrivateKey": raw_input(program, REMOTE_COMMAND, "connection", "privateKey"),
        "kubeconfig": raw_input(program, PROVIDER, "kubeconfig"),
        "grafanaClientSecret": raw_input(program, SSO, "oauth2Settings", "clientSecret"),
        "alertReceiver": raw_input(program, *receiver, "receiver", name_contains="alert-receiver"),
        "alertHeartbeat": raw_input(program, *receiver, "heartbeat", name_contains="alert-receiver"),
        # The map's one address, under its team's key.
        "teamAlertReceivers": [(f"team-nlp: {address}\n", redacted) for address, redacted in raw_input(
            program, *receiver, "team-team-nlp", name_contains="alert-receiver")],
        # Every team's every slot of snapshot options (components/tenant_backup.py), base64 of their JSON.
        **{name: [(json.loads(base64.b64decode(options))["s3"][field], redacted)
                  for slots, redacted in raw_input(program, *receiver, name_contains="backup-options")
                  for options in slots.values()]
           for name, field in (("backupAccessKeyId", "access-key-id"),
                               ("backupSecretAccessKey", "secret-access-key"))},
    }[secret]


@pytest.mark.parametrize("secret", sorted(DECRYPTED))
def test_each_secret_reaches_the_input_that_needs_it_and_only_as_a_secret(site_runs, secret):
    [(decrypted, program)] = [run for run in site_runs.values() if f"gpu-tenancy:{secret}" in run[0]]
    inputs = received(program, secret)
    assert inputs, f"nothing received {secret}"
    assert inputs == [(decrypted[f"gpu-tenancy:{secret}"], True)] * len(inputs)


@pytest.mark.parametrize("site", sorted(SITES))
def test_what_the_providers_answer_with_is_secret_wherever_the_program_passes_it(site_runs, site):
    _, program = site_runs[site]
    [provider] = raw_input(program, PROVIDER, "kubeconfig")
    if site != "existing-cluster":
        assert "offline-plan-token" in provider[0] and provider[1]
    if site == "eks":
        # The destroy-time step gets the cluster's kubeconfig in its environment.
        [(environment, redacted)] = raw_input(program, LOCAL_COMMAND, "environment", name_contains="teardown")
        assert "offline-plan-token" in environment["GPU_TENANCY_KUBECONFIG"] and redacted
    if site == "remote-observed":
        # The program signs in to Grafana with the admin password pulumi-random generated.
        [(auth, redacted)] = raw_input(program, "pulumi:providers:grafana", "auth")
        assert auth.startswith("admin:offline-password-") and redacted
    assert {"hostKubeconfig", "tenantKubeconfigs"} <= program.secret_outputs
    live = program.program_globals
    assert wait_for(live["host"].kubeconfig.is_secret())
    for tenant in live["tenants"].values():
        assert "offline-plan-token" in wait_for(tenant.kubeconfig.future())
        assert wait_for(tenant.kubeconfig.is_secret())


@pytest.mark.parametrize("site", sorted(SITES))
def test_no_secret_is_in_the_plan_the_review_summary_the_outputs_or_the_log(site_runs, site):
    decrypted, program = site_runs[site]
    plan = build_plan(program, site)
    seen = {"plan": render_plan_json(plan), "review summary": render_summary(plan),
            "warnings and notes": "\n".join(program.warnings + program.notes)}
    hidden = [RECOGNISABLE[key.split(":", 1)[1]] for key in decrypted] + list(MOCK_SECRETS)
    assert [(secret, where) for secret in hidden for where, text in seen.items() if secret in text] == []
    # What a team member gets is the one kubeconfig that is not a secret: it carries the vCluster's CA, no token.
    for kubeconfig in (plan["outputs"].get("teamKubeconfigs") or {}).values():
        assert "certificate-authority-data" in kubeconfig and "token" not in yaml.safe_load(kubeconfig)["users"][0]


# --- a value encrypted under a key the program reads as plain config ---------------------------


UNSEEN = "value-only-pulumi-up-sees"


@pytest.mark.parametrize("key, stored, decrypted, advice", [
    ("gpu-tenancy:alertreceiver", {"secure": "v1:abc"}, UNSEEN, "gpu-tenancy:alertReceiver"),
    ("gpu-tenancy:kaiScheduler", {"secure": "v1:abc"}, json.dumps({"version": UNSEEN}), "without --secret"),
    ("gpu-tenancy:vcluster", {"version": "0.36.1", "extraValues": {"sync": {"token": {"secure": "v1:abc"}}}},
     json.dumps({"version": "0.36.1", "extraValues": {"sync": {"token": UNSEEN}}}), "without --secret"),
], ids=["misspelt-secret-key", "known-key", "nested-in-a-known-key"])
def test_a_value_set_with_secret_under_any_other_key_is_refused_without_being_shown(key, stored, decrypted, advice):
    config = dev_config()
    config[key] = stored
    record = ProgramRun()
    with pytest.raises(ConfigError) as raised:
        run_program(config, stack="site", record=record, decrypted={key: decrypted})
    message = str(raised.value)
    assert raised.value.keys == [key.split(":", 1)[1]]
    assert UNSEEN not in message and "offline-plan-placeholder" not in message
    assert "--secret" in message and advice in message
    assert record.resources == []


def test_a_secret_key_set_in_plain_text_is_refused_without_being_shown():
    # It would sit unencrypted in the stack file, in every clone of the repository.
    config = dev_config()
    config["gpu-tenancy:sshPrivateKey"] = DECRYPTED["sshPrivateKey"]
    record = ProgramRun()
    with pytest.raises(ConfigError) as raised:
        run_program(config, stack="site", record=record)
    message = str(raised.value)
    assert raised.value.keys == ["sshPrivateKey"]
    assert "is set without encryption" in message and "pulumi config set --secret gpu-tenancy:sshPrivateKey" in message
    assert RECOGNISABLE["sshPrivateKey"] not in message
    assert record.resources == []
