"""What expires, seen from the stack outputs: the program exports when each team's admin kubeconfig ends, and
ops.expiry says, offline, which exported kubeconfig stops working when and what to do.

The certificates are of the real X.509 form (tools/offline/fake_certificates.py); OpenSSL, through the standard
library's ssl module, reads the same dates as config/certificates.py.
"""

from __future__ import annotations

import base64
import json
import ssl
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from config.certificates import CertificateError, client_certificate_expiry, kubeconfig_certificates, validity
from config.credential_lifetimes import VCLUSTER_LEAF_VALIDITY, VCLUSTER_RENEWAL_WINDOW
from ops import expiry
from tests.conftest import dev_config
from tools.offline.fake_certificates import fake_certificate_der, fake_certificate_pem
from tools.offline.mocks import MOCK_CERTIFICATE_ISSUED

ISSUED = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
ADMIN_ENDS = ISSUED + VCLUSTER_LEAF_VALIDITY
CA_ENDS = ISSUED + timedelta(days=3650)


def encoded(not_before: datetime, not_after: datetime) -> str:
    return base64.b64encode(fake_certificate_pem(not_before, not_after).encode()).decode()


def kubeconfig(client_ends: datetime | None = ADMIN_ENDS, ca_ends: datetime | None = CA_ENDS,
               exec_user: bool = False) -> str:
    user: dict = {"exec": {"command": "kubectl"}} if exec_user else {"token": "t"}
    if client_ends:
        user["client-certificate-data"] = encoded(ISSUED, client_ends)
    cluster: dict = {"server": "https://example.invalid:443"}
    if ca_ends:
        cluster["certificate-authority-data"] = encoded(ISSUED, ca_ends)
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "vc",
        "clusters": [{"name": "other", "cluster": {}}, {"name": "vc", "cluster": cluster}],
        "contexts": [{"name": "vc", "context": {"cluster": "vc", "user": "admin"}}],
        "users": [{"name": "admin", "user": user}]})


def outputs(**overrides) -> dict:
    base = {
        "tenants": {"team-a": {"namespace": "vcluster-team-a", "queue": "team-a", "vcluster": "team-a"}},
        "tenantKubeconfigs": {"team-a": kubeconfig()},
        "hostKubeconfig": kubeconfig(client_ends=None, ca_ends=None),
    }
    return {**base, **overrides}


# --- reading a certificate's dates ------------------------------------------------------------------


@pytest.mark.parametrize("not_after", [datetime(2027, 1, 1, tzinfo=timezone.utc),
                                       datetime(2049, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
                                       datetime(2050, 1, 1, tzinfo=timezone.utc),
                                       datetime(2126, 3, 1, tzinfo=timezone.utc)])
def test_dates_read_are_the_dates_openssl_reads(not_after, tmp_path):
    path = tmp_path / "certificate.pem"
    path.write_text(fake_certificate_pem(ISSUED, not_after))
    decoded = ssl._ssl._test_decode_cert(str(path))
    read = validity(fake_certificate_der(ISSUED, not_after))
    assert read.not_after == not_after
    assert read.not_after == datetime.strptime(decoded["notAfter"], "%b %d %H:%M:%S %Y %Z").replace(
        tzinfo=timezone.utc)
    assert read.not_before == ISSUED


@pytest.mark.parametrize("der", [b"", b"\x30\x03\x02\x01\x01", b"\x30\x82\xff\xff", b"\x04\x02ab"])
def test_what_is_not_a_certificate_is_refused(der):
    with pytest.raises(CertificateError):
        validity(der)


def test_the_current_contexts_certificates_are_read():
    read = kubeconfig_certificates(kubeconfig())
    assert (read.client.not_after, read.authority.not_after) == (ADMIN_ENDS, CA_ENDS)
    assert client_certificate_expiry(kubeconfig()) == "2027-03-01T12:00:00Z"
    tokens_only = kubeconfig(client_ends=None, ca_ends=None)
    assert kubeconfig_certificates(tokens_only).client is None and client_certificate_expiry(tokens_only) is None
    # The program does not refuse a kubeconfig it cannot read; ops.expiry does.
    assert client_certificate_expiry("{not yaml") is None
    with pytest.raises(CertificateError):
        kubeconfig_certificates("users: [{name: u, user: {client-certificate-data: '!!'}}]\n"
                                "contexts: [{name: c, context: {user: u}}]")


# --- the program's output ---------------------------------------------------------------------------


def test_program_exports_when_each_admin_kubeconfig_ends_in_the_clear(dev_run):
    ends = (MOCK_CERTIFICATE_ISSUED + VCLUSTER_LEAF_VALIDITY).strftime("%Y-%m-%dT%H:%M:%SZ")
    teams = {team["name"] for team in dev_config()["gpu-tenancy:teams"]}
    assert dev_run.outputs["tenantKubeconfigExpiry"] == dict.fromkeys(teams, ends)
    assert "tenantKubeconfigExpiry" not in dev_run.secret_outputs
    assert "tenantKubeconfigs" in dev_run.secret_outputs


# --- ops.expiry ----------------------------------------------------------------------------------------


def test_a_fresh_site_needs_nothing():
    text, due = expiry.report(outputs(), ISSUED + timedelta(days=30), VCLUSTER_RENEWAL_WINDOW)
    assert not due
    assert "ok      team-a: admin client certificate (tenantKubeconfigs) ends 2027-03-01T12:00:00Z (335 days)" in text


def test_day_275_says_pulumi_up_and_hand_out_the_renewed_kubeconfig():
    now = ISSUED + VCLUSTER_LEAF_VALIDITY - VCLUSTER_RENEWAL_WINDOW + timedelta(days=1)
    text, due = expiry.report(outputs(), now, VCLUSTER_RENEWAL_WINDOW)
    assert due
    assert "SOON    team-a: admin client certificate (tenantKubeconfigs) ends 2027-03-01T12:00:00Z (89 days)" in text
    assert "Secret vcluster-team-a/vc-team-a" in text and "run `pulumi up`" in text
    assert "vCluster CA" in text and "SOON    team-a: vCluster CA" not in text


DUE = {
    "a lapsed admin certificate, and a CA near its end needing rotate-ca": (
        {"tenantKubeconfigs": {"team-a": kubeconfig(ca_ends=ISSUED + timedelta(days=400))}}, 366,
        ["EXPIRED team-a: admin client certificate",
         "SOON    team-a: vCluster CA ends 2027-04-05T12:00:00Z (34 days)", "vcluster certs rotate-ca"]),
    "the CA an OIDC kubeconfig pins, and the host kubeconfig's certificate": (
        {"teamKubeconfigs": {"team-a": kubeconfig(client_ends=None, ca_ends=ISSUED + timedelta(days=100),
                                                  exec_user=True)},
         "hostKubeconfig": kubeconfig(client_ends=ISSUED + timedelta(days=50), ca_ends=None)}, 20,
        ["SOON    team-a: vCluster CA ends 2026-06-09T12:00:00Z (80 days)",
         "SOON    host: host kubeconfig client certificate ends 2026-04-20T12:00:00Z (30 days)",
         "microk8s refresh-certs"]),
}


@pytest.mark.parametrize("overrides, day, expected", DUE.values(), ids=DUE.keys())
def test_what_ends_soon_or_has_ended_is_listed_with_its_fix(overrides, day, expected):
    text, due = expiry.report(outputs(**overrides), ISSUED + timedelta(days=day), VCLUSTER_RENEWAL_WINDOW)
    assert due
    for line in expected:
        assert line in text


def test_hidden_or_missing_outputs_are_refused_with_the_fix():
    with pytest.raises(expiry.ExpiryError, match="--show-secrets"):
        expiry.findings(outputs(tenantKubeconfigs="[secret]"))
    with pytest.raises(expiry.ExpiryError, match="--show-secrets"):
        expiry.findings(outputs(hostKubeconfig="[secret]"))
    with pytest.raises(expiry.ExpiryError, match="no tenants"):
        expiry.findings({"tenants": {}})
    with pytest.raises(expiry.ExpiryError, match="tenantKubeconfigs.team-a"):
        expiry.findings(outputs(tenantKubeconfigs={"team-a": "contexts: [{name: c, context: {user: admin}}]\n"
                                                   "users: [{name: admin, user: "
                                                   "{client-certificate-data: 'bm90IGEgY2VydA=='}}]"}))


def test_command_exit_status_follows_the_findings(tmp_path, capsys):
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs()))
    assert expiry.main(["dev", "--outputs", str(path), "--now", "2026-04-01T00:00:00Z"]) == 0
    assert expiry.main(["dev", "--outputs", str(path), "--now", "2027-01-01T00:00:00Z"]) == 1
    assert expiry.main(["dev", "--outputs", str(path), "--now", "2027-01-01T00:00:00Z", "--days", "30"]) == 0
    assert expiry.main(["dev", "--outputs", str(path), "--now", "next tuesday"]) == 2
    assert "write it as 2027-09-01T00:00:00Z" in capsys.readouterr().err

