"""What a MicroK8s host issues and what renews it, read from canonical/microk8s at every track a site may state
(config/credential_lifetimes.py, docs/operations-running.md "What expires"): a track that changes a lifetime, starts renewing
by itself or moves the certificates the program reads turns this red.

- The API server's serving certificate and the front proxy's client certificate: a year. The CAs and every other
  certificate, the admin client certificate `microk8s config` prints among them: ten years.
- Nothing renews the one-year certificates: they are issued again only when the rendered CSR config changes (the
  host's addresses), by the apiserver-kicker or the configure hook; no hook or timer reads a certificate's end, and
  `microk8s inspect` warns on the CA only. `microk8s refresh-certs --cert server.crt` renews by hand.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from config import credential_lifetimes as lifetimes
from tests.conftest import MICROK8S_TRACK_TAGS, git, mirror, mirrored_tag

MICROK8S = "canonical/microk8s"
UTILS = "microk8s-resources/actions/common/utils.sh"
SNAP_CERTS = "${SNAP_DATA}/certs"


def show(tag: str, path: str) -> str:
    return git(MICROK8S, "show", f"{mirrored_tag(MICROK8S, tag)}:{path}")


def shell_function(source: str, name: str) -> str:
    """The body of the shell function ``name() {`` or ``name() (``, up to its closing line."""
    start = re.search(rf"\n{name}\(\) ([{{(])\n", source)
    assert start, f"{name} is gone"
    end = source.index(f"\n{'}' if start.group(1) == '{' else ')'}\n", start.end())
    return source[start.end():end]


def days(command: str, output: str) -> int:
    """The ``-days`` of the openssl command of ``command`` that writes ``output``."""
    found = re.findall(rf"-out {re.escape(output)} -days (\d+)", command)
    assert len(found) == 1, f"no single openssl command writes {output}"
    return int(found[0])


def files_matching(tag: str, pattern: str, *paths: str) -> list[str]:
    found = subprocess.run(["git", "--git-dir", str(mirror(MICROK8S)), "grep", "-l", "-E", pattern,
                            mirrored_tag(MICROK8S, tag), "--", *paths], capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr
    return sorted(line.split(":", 1)[1] for line in found.stdout.split())


@pytest.mark.parametrize("tag", MICROK8S_TRACK_TAGS)
def test_the_api_server_serves_a_one_year_certificate_the_program_reads(tag):
    utils = show(tag, UTILS)
    serving = lifetimes.MICROK8S_SERVING_VALIDITY.days
    assert days(shell_function(utils, "gen_server_cert"), f"{SNAP_CERTS}/server.crt") == serving
    assert days(shell_function(utils, "gen_proxy_client_cert"), f"{SNAP_CERTS}/front-proxy-client.crt") == serving
    # The files the program's read step prints are the ones the API server presents and sends.
    apiserver = show(tag, "microk8s-resources/default-args/kube-apiserver").splitlines()
    assert f"--tls-cert-file={SNAP_CERTS}/server.crt" in apiserver
    assert f"--proxy-client-cert-file={SNAP_CERTS}/front-proxy-client.crt" in apiserver
    assert tuple(lifetimes.MICROK8S_SERVING_CERTIFICATES) == ("server.crt", "front-proxy-client.crt")
    # $SNAP_DATA is /var/snap/<snap>/<revision>; `current` names the running revision.
    assert lifetimes.MICROK8S_CERTIFICATES_DIR == "/var/snap/microk8s/current/certs"


@pytest.mark.parametrize("tag", MICROK8S_TRACK_TAGS)
def test_the_cas_and_every_other_certificate_last_ten_years(tag):
    utils = show(tag, UTILS)
    produce = shell_function(utils, "produce_certs")
    ca = lifetimes.MICROK8S_CA_VALIDITY.days
    for authority in ("ca", "front-proxy-ca"):
        issued = re.search(rf"req -x509 -new -sha256 -nodes -days (\d+) -key {re.escape(SNAP_CERTS)}/{authority}\.key",
                           produce)
        assert issued and int(issued.group(1)) == ca, authority
    signed = re.findall(r"-days (\d+)", shell_function(utils, "sign_certificate"))
    assert signed == [str(lifetimes.MICROK8S_CLIENT_VALIDITY.days)]
    # The admin certificate `microk8s config` prints is one of those: signed at install, written into client.config.
    users = shell_function(utils, "create_user_certificates")
    assert f'generate_csr /CN=admin/O=system:masters "{SNAP_CERTS}/client.key" | sign_certificate > ' \
           f'"{SNAP_CERTS}/client.crt"' in users
    assert f'create_kubeconfig_x509 "client.config" "admin" {SNAP_CERTS}/client.crt' in \
        shell_function(utils, "create_user_kubeconfigs")
    assert '"$SNAP/bin/sed" -e "s/127.0.0.1/$IP_ADDR/" "$SNAP_DATA/credentials/client.config"' in \
        show(tag, "microk8s-resources/wrappers/microk8s-config.wrapper")
    install = show(tag, "snap/hooks/install")
    assert "\nproduce_certs\n" in install and "\ncreate_user_certs_and_configs\n" in install
    # No other lifetime anywhere in the certificate code: a new certificate would need a row in "What expires".
    assert sorted(set(re.findall(r"-days (\d+)", utils))) == sorted({str(lifetimes.MICROK8S_SERVING_VALIDITY.days),
                                                                     str(ca)})


@pytest.mark.parametrize("tag", MICROK8S_TRACK_TAGS)
def test_nothing_renews_the_one_year_certificates_before_they_end(tag):
    utils = show(tag, UTILS)
    produce = shell_function(utils, "produce_certs")
    # Issued again only when the rendered CSR config differs from the one in use (new addresses), never by date.
    assert 'if ! "${SNAP}/usr/bin/cmp" -s "${SNAP_DATA}/certs/csr.conf.rendered" "${SNAP_DATA}/certs/csr.conf"' \
        in produce
    assert "if $force; then\n        gen_server_cert\n        gen_proxy_client_cert" in produce
    # ... or when server.crt is not signed by ca.crt.
    assert "openssl.wrapper\" verify" in shell_function(utils, "ensure_server_ca")
    for function in ("produce_certs", "ensure_server_ca", "gen_server_cert", "gen_proxy_client_cert"):
        assert not re.search(r"checkend|enddate|notAfter", shell_function(utils, function)), function
    # Who issues them: the install and configure hooks (`snap set`, a refresh), the kicker, and refresh-certs.
    assert files_matching(tag, r"produce_certs|ensure_server_ca|gen_server_cert|gen_proxy_client_cert",
                          ".", ":!tests", ":!docs") == sorted([
                              UTILS, "microk8s-resources/wrappers/apiservice-kicker", "scripts/wrappers/refresh_certs.py",
                              "snap/hooks/configure", "snap/hooks/install"])
    # Only refresh-certs --check and `microk8s inspect` read a certificate's end; inspect only the CA's, 3 days out.
    assert files_matching(tag, r"checkend|enddate", ".", ":!tests", ":!docs") == [
        "scripts/inspect.sh", "scripts/wrappers/refresh_certs.py"]
    inspect = show(tag, "scripts/inspect.sh")
    assert re.findall(r"-enddate -noout -in \"\$\{SNAP_DATA\}/certs/([\w.-]+)\"", inspect) == ["ca.crt"]
    # A refresh, were it not held, runs the post-refresh hooks (none about certificates) and the configure hook.
    assert not re.search(r"cert", show(tag, "snap/hooks/post-refresh"))
    hooks = git(MICROK8S, "ls-tree", "-r", "--name-only", mirrored_tag(MICROK8S, tag),
                "microk8s-resources/default-hooks/post-refresh.d").split()
    assert hooks == ["microk8s-resources/default-hooks/post-refresh.d/30-helm"]
    assert "cert" not in show(tag, hooks[0])
    # The snap runs no timer.
    assert not re.search(r"^\s+timer:", show(tag, "snap/snapcraft.yaml"), re.M)


@pytest.mark.parametrize("tag", MICROK8S_TRACK_TAGS)
def test_refresh_certs_renews_a_one_year_certificate_under_the_same_ca_and_restarts_kubelite(tag):
    refresh = show(tag, "scripts/wrappers/refresh_certs.py")
    for file in lifetimes.MICROK8S_SERVING_CERTIFICATES:
        assert f'"{file}": ' in refresh.split("def check_certificate")[0], file
    server = refresh[refresh.index("def reproduce_server_cert"):refresh.index("def refresh_cert(")]
    assert "gen_server_cert" in server and "ca.crt" not in server
    assert 'restart("kubelite")' in server and 'restart("cluster-agent")' in server
    proxy = refresh[refresh.index("def reproduce_front_proxy_client_cert"):refresh.index("def reproduce_server_cert")]
    assert "gen_proxy_client_cert" in proxy and 'restart("kubelite")' in proxy
    # refresh-certs needs root; --check prints days left for the CA, server and front proxy certificates.
    assert "exit_if_no_root()" in refresh
    assert "exit_if_not_root" in show(tag, "microk8s-resources/wrappers/microk8s-refresh-certs.wrapper")
