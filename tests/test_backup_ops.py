"""ops.backup: the commands that snapshot or restore one team, and whether the site's NetworkPolicies let the
control plane (which uploads a snapshot) and vCluster's restore pod (which reads one) reach the store.

The policies are the program's own (components/tenant_network.py) and are judged with the same evaluation as the
tenant network attacks (tests/test_tenant_network.py ``reaches``), at a public address and at a LAN address.
"""

from __future__ import annotations

import base64

import pytest

from components.tenant_network import tenant_network_policies
from config.snapshots import snapshot_url_problem, store_port
from ops import backup
from ops.sites import platform_of
from tests.conftest import stack_config
from tests.test_tenant_network import Target, reaches
from tools.deployability.network_ingress import Pod

PUBLIC_STORE, LAN_STORE = "52.95.110.1", "192.168.1.20"


def minio(endpoint: str) -> str:
    return f"s3://backups/team/snap.tar.gz?url={base64.b64encode(endpoint.encode()).decode()}&force-path-style=true"


def team_of(stack: str, index: int = 0):
    return platform_of(stack_config(stack), stack).teams[index]


def pod(team, labels: dict) -> Pod:
    return Pod(namespace=team.namespace, labels=labels)


@pytest.mark.parametrize("url, problem", [
    ("container:///data/snap.tar.gz", "on the data volume whose loss it must outlive"),
    ("ftp://host/snap.tar.gz", "vCluster takes oci, s3, container, https only"),
    ("s3://bucket", "names no key or repository"),
    ("s3:///key", "names no bucket"),
    ("team-nlp.tar.gz", "is not a URL"),
])
def test_a_url_no_snapshot_survives_the_volume_at_is_refused_with_the_fix(url, problem):
    found = snapshot_url_problem(url)
    assert found is not None and problem in found[0]
    assert "s3://BUCKET/KEY" in found[1]
    assert backup.main(["eks", "team-legal", "snapshot", url]) == 2


@pytest.mark.parametrize("url", ["s3://bucket/team-nlp/1.tar.gz", "oci://ghcr.io/corp/backups:team-nlp",
                                 "https://account.blob.core.windows.net/backups/team-nlp.tar.gz"])
def test_a_store_off_the_volume_is_taken(url):
    assert snapshot_url_problem(url) is None


def test_the_stores_port_is_its_endpoints():
    assert store_port("s3://bucket/key") == 443
    assert store_port(minio("http://192.168.1.20:9000")) == 9000
    assert store_port(minio("http://minio.lab")) == 80
    assert store_port("oci://registry.lab:5000/backups:one") == 5000


def test_on_eks_the_control_plane_and_the_restore_pod_reach_the_store_and_nothing_new(capsys):
    """The API server's port is 443 there, which the program opens to every address: the store is reachable,
    ops.backup prints the commands and succeeds."""
    team = team_of("eks")
    policies = list(tenant_network_policies(team).values())
    for labels in ({"release": team.vcluster_name}, {"app": "vcluster-snapshot"}):
        assert reaches(policies, pod(team, labels), Target("S3", PUBLIC_STORE, 443))
        assert not reaches(policies, pod(team, labels), Target("a LAN MinIO", LAN_STORE, 9000))
    assert backup.main(["eks", team.name, "restore", f"s3://bucket/{team.vcluster_name}/1.tar.gz"]) == 0
    out, err = capsys.readouterr()
    assert f"vcluster restore {team.vcluster_name} s3://bucket/{team.vcluster_name}/1.tar.gz " \
           f"--namespace {team.namespace}" in out.splitlines()
    assert err == ""


@pytest.mark.parametrize("action, role", [("snapshot", "control-plane"), ("restore", "snapshot")])
def test_on_microk8s_the_store_is_out_of_reach_and_ops_backup_says_so(action, role, capsys):
    """The API server's port is 16443 there: neither pod may open 443 or a LAN store's port, as the attack
    evaluation agrees, so the snapshot or restore would fail; ops.backup names the policy and exits 1."""
    team = team_of("dev")
    policies = list(tenant_network_policies(team).values())
    labels = {"release": team.vcluster_name} if role == "control-plane" else {"app": "vcluster-snapshot"}
    for target in (Target("S3", PUBLIC_STORE, 443), Target("a LAN MinIO", LAN_STORE, 9000)):
        assert not reaches(policies, pod(team, labels), target)
    for url, port in ((f"s3://bucket/{team.vcluster_name}/1.tar.gz", 443), (minio("http://192.168.1.20:9000"), 9000)):
        assert backup.main(["dev", team.name, action, url]) == 1
        err = capsys.readouterr().err
        assert f"may not open TCP {port} to the store under the NetworkPolicy {team.vcluster_name}-{role}" in err


def test_a_team_without_network_policy_reaches_any_store():
    config = stack_config("dev")
    config["gpu-tenancy:teams"][0].setdefault("vcluster", {})["networkPolicy"] = False
    commands, problems = backup.plan("dev", "team-nlp", "snapshot", "s3://bucket/team-nlp/1.tar.gz", config=config)
    assert problems == []
    assert commands[0] == ["vcluster", "snapshot", "create", "team-nlp", "s3://bucket/team-nlp/1.tar.gz",
                           "--namespace", "vcluster-team-nlp"]


def test_a_lost_volume_is_replaced_by_an_empty_claim_before_the_restore():
    team = team_of("eks")
    commands = backup.restore_commands(team, "s3://bucket/key", volume_lost=True)
    claim = next(index for index, command in enumerate(commands) if "persistentvolumeclaim" in command)
    restore = next(index for index, command in enumerate(commands) if command[:2] == ["vcluster", "restore"])
    assert commands[claim][-2:] == [f"data-{team.vcluster_name}-0", "--wait=false"]
    assert claim < restore
    assert not any("persistentvolumeclaim" in command for command in
                   backup.restore_commands(team, "s3://bucket/key", volume_lost=False))


def test_an_unknown_team_is_refused_with_the_sites_teams(capsys):
    assert backup.main(["eks", "team-nobody", "snapshot", "s3://bucket/key"]) == 2
    assert "its teams: team-legal, team-support" in capsys.readouterr().err


BACKED_UP = {"url": "s3://lab-backups/gpu", "endpoint": "http://192.168.1.20:9000", "region": "us-east-1", "keep": 3}


def backed_up_dev() -> dict:
    config = stack_config("dev")
    config["gpu-tenancy:backup"] = dict(BACKED_UP)
    return config


def test_the_scheduled_slots_are_listed_as_the_cli_takes_them():
    team = backup.site_team("dev", "team-nlp", backed_up_dev())
    urls = backup.slot_urls(team)
    assert len(urls) == 3
    for slot, url in enumerate(urls):
        assert snapshot_url_problem(url) is None
        assert url.startswith(f"s3://lab-backups/gpu/{team.namespace}/{team.vcluster_name}/{slot}.tar.gz?")
        assert store_port(url) == 9000
    commands, problems = backup.plan("dev", "team-nlp", "restore", "slot:2", config=backed_up_dev())
    assert commands[0] == ["vcluster", "restore", team.vcluster_name, urls[2], "--namespace", team.namespace]
    # The site's backup block opens the store to the restore pod.
    assert problems == []


@pytest.mark.parametrize("url", ["slot:3", "slot:x"])
def test_a_slot_the_site_does_not_keep_is_refused(url):
    with pytest.raises(backup.BackupError, match="keeps slots 0 to 2"):
        backup.plan("dev", "team-nlp", "restore", url, config=backed_up_dev())


def test_a_site_without_scheduled_snapshots_has_no_slots(capsys):
    assert backup.main(["dev", "team-nlp", "slots"]) == 2
    assert "its `backup` block is left out or empty" in capsys.readouterr().err
