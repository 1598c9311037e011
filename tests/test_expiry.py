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

from config.certificates import (
    CertificateError, bundle_expiry, client_certificate_expiry, kubeconfig_certificates, validity,
)
from config.credential_lifetimes import (
    MICROK8S_CLIENT_VALIDITY, MICROK8S_SERVING_CERTIFICATES, MICROK8S_SERVING_VALIDITY, VCLUSTER_LEAF_VALIDITY,
    VCLUSTER_RENEWAL_WINDOW,
)
from ops import expiry
from tests.conftest import dev_config
from tools.offline.fake_certificates import fake_certificate_der, fake_certificate_pem
from tools.offline.mocks import MOCK_CERTIFICATE_ISSUED, fake_microk8s_serving_certificates

ISSUED = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
ADMIN_ENDS = ISSUED + VCLUSTER_LEAF_VALIDITY
CA_ENDS = ISSUED + timedelta(days=3650)
MICROK8S_ENDS = ISSUED + MICROK8S_SERVING_VALIDITY


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


def microk8s_outputs(**ends: datetime | None) -> dict:
    """A MicroK8s site's outputs, its one-year certificates issued with the CA (``ends`` by file, None: not read)."""
    found = {"server.crt": MICROK8S_ENDS, "front-proxy-client.crt": MICROK8S_ENDS}
    found.update({file.replace("_", "-") + ".crt": end for file, end in ends.items()})
    return outputs(hostKind="microk8s", hostKubeconfig=kubeconfig(client_ends=ISSUED + MICROK8S_CLIENT_VALIDITY),
                   hostCertificateExpiry={file: end and f"{end:%Y-%m-%dT%H:%M:%SZ}" for file, end in found.items()})


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
    "the CA an OIDC kubeconfig pins, and an existing cluster's kubeconfig certificate": (
        {"teamKubeconfigs": {"team-a": kubeconfig(client_ends=None, ca_ends=ISSUED + timedelta(days=100),
                                                  exec_user=True)},
         "hostKind": "kubeconfig",
         "hostKubeconfig": kubeconfig(client_ends=ISSUED + timedelta(days=50), ca_ends=None)}, 20,
        ["SOON    team-a: vCluster CA ends 2026-06-09T12:00:00Z (80 days)",
         "SOON    host: host kubeconfig client certificate ends 2026-04-20T12:00:00Z (30 days)",
         "pulumi config set --secret kubeconfig"]),
    "the MicroK8s CA the host kubeconfig pins": (
        {**microk8s_outputs(), "hostKubeconfig": kubeconfig(client_ends=None, ca_ends=ISSUED + timedelta(days=50))}, 20,
        ["SOON    host: host kubeconfig CA ends 2026-04-20T12:00:00Z (30 days)", "refresh-certs --cert ca.crt",
         "host-read-kubeconfig"]),
}


DUE["a team the outputs hold no kubeconfig for"] = (
    {"tenantKubeconfigs": {"team-a": ""}}, 30,
    ["UNKNOWN team-a: admin kubeconfig (tenantKubeconfigs) ends on a day the outputs do not hold",
     "Secret vc-team-a in namespace vcluster-team-a"])


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



# --- a MicroK8s host's own certificates ---------------------------------------------------------------


def test_a_pem_bundle_gives_each_certificates_end_in_order_or_none_at_all():
    names = ("server.crt", "front-proxy-client.crt")
    bundle = fake_certificate_pem(ISSUED, MICROK8S_ENDS) + fake_certificate_pem(ISSUED, ISSUED + timedelta(days=10))
    assert bundle_expiry(bundle, names) == {"server.crt": "2027-03-01T12:00:00Z",
                                            "front-proxy-client.crt": "2026-03-11T12:00:00Z"}
    # A missing file (cat printed one certificate), an empty or garbled answer: nothing is guessed.
    for answer in (fake_certificate_pem(ISSUED, MICROK8S_ENDS), "", "-----BEGIN CERTIFICATE-----\n!!\n"
                                                                      "-----END CERTIFICATE-----\n"):
        assert bundle_expiry(answer, names) == dict.fromkeys(names)


def test_program_exports_when_the_microk8s_serving_certificates_end_in_the_clear(dev_run):
    ends = (MOCK_CERTIFICATE_ISSUED + MICROK8S_SERVING_VALIDITY).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert dev_run.outputs["hostCertificateExpiry"] == dict.fromkeys(MICROK8S_SERVING_CERTIFICATES, ends)
    assert "hostCertificateExpiry" not in dev_run.secret_outputs
    assert "hostKubeconfig" in dev_run.secret_outputs
    assert bundle_expiry(fake_microk8s_serving_certificates(), MICROK8S_SERVING_CERTIFICATES) == \
        dev_run.outputs["hostCertificateExpiry"]


def test_a_fresh_microk8s_host_needs_nothing():
    text, due = expiry.report(microk8s_outputs(), ISSUED + timedelta(days=30), VCLUSTER_RENEWAL_WINDOW)
    assert not due
    assert "ok      host: MicroK8s API server serving certificate (server.crt) ends 2027-03-01T12:00:00Z " \
           "(335 days)" in text
    assert "ok      host: MicroK8s front proxy client certificate (front-proxy-client.crt) ends" in text
    assert "ok      host: host kubeconfig client certificate ends 2036-02-27T12:00:00Z" in text


MICROK8S_DUE = {
    "day 300: the server certificate within the window": (
        microk8s_outputs(), 300, ["SOON    host: MicroK8s API server serving certificate (server.crt) ends "
                                  "2027-03-01T12:00:00Z (65 days)", "sudo microk8s refresh-certs --cert server.crt",
                                  "pulumi up --replace <URN of host-read-serving-certificates>",
                                  "sudo microk8s refresh-certs --cert front-proxy-client.crt"]),
    "day 366: lapsed": (
        microk8s_outputs(), 366, ["EXPIRED host: MicroK8s API server serving certificate (server.crt) ends "
                                  "2027-03-01T12:00:00Z (-1 days)", "every client of the host API refuses it"]),
    "renewed once, the front proxy's not": (
        microk8s_outputs(server=MICROK8S_ENDS + MICROK8S_SERVING_VALIDITY), 300,
        ["ok      host: MicroK8s API server serving certificate (server.crt) ends 2028-02-29T12:00:00Z",
         "SOON    host: MicroK8s front proxy client certificate (front-proxy-client.crt)", "aggregated APIs"]),
    "a stack from before the program exported the ends": (
        {key: value for key, value in microk8s_outputs().items() if key != "hostCertificateExpiry"}, 30,
        ["UNKNOWN host: MicroK8s API server serving certificate (server.crt) ends on a day the outputs do not hold",
         "UNKNOWN host: MicroK8s front proxy client certificate", "run `pulumi up` with this version",
         "sudo microk8s refresh-certs --check"]),
    "the host's certificates could not be read or parsed": (
        microk8s_outputs(server=None), 30, ["UNKNOWN host: MicroK8s API server serving certificate (server.crt)",
                                            "could not read or parse"]),
}


@pytest.mark.parametrize("site, day, expected", MICROK8S_DUE.values(), ids=MICROK8S_DUE.keys())
def test_a_microk8s_certificate_near_its_end_or_unknown_is_listed_with_its_renewal(site, day, expected):
    text, due = expiry.report(site, ISSUED + timedelta(days=day), VCLUSTER_RENEWAL_WINDOW)
    assert due
    for line in expected:
        assert line in text


def test_the_microk8s_certificates_are_only_judged_on_a_microk8s_host():
    text, due = expiry.report(outputs(hostKind="eks"), ISSUED + timedelta(days=30), VCLUSTER_RENEWAL_WINDOW)
    assert not due and "MicroK8s" not in text and "UNKNOWN" not in text


def test_microk8s_exit_status_follows_its_certificates(tmp_path, capsys):
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(microk8s_outputs()))
    assert expiry.main(["lab", "--outputs", str(path), "--now", "2026-04-01T00:00:00Z"]) == 0
    assert expiry.main(["lab", "--outputs", str(path), "--now", "2027-01-01T00:00:00Z"]) == 1
    assert expiry.main(["lab", "--outputs", str(path), "--now", "2027-03-02T00:00:00Z"]) == 1
    unread = microk8s_outputs()
    del unread["hostCertificateExpiry"]
    path.write_text(json.dumps(unread))
    assert expiry.main(["lab", "--outputs", str(path), "--now", "2026-04-01T00:00:00Z"]) == 1
    path.write_text(json.dumps(microk8s_outputs() | {"hostCertificateExpiry": {"server.crt": "next spring"}}))
    capsys.readouterr()
    assert expiry.main(["lab", "--outputs", str(path), "--now", "2026-04-01T00:00:00Z"]) == 2
    assert "hostCertificateExpiry.server.crt is 'next spring'" in capsys.readouterr().err
