"""What expires on a running site, read from its stack outputs: which kubeconfig stops working when, and what to do.

    python -m ops.expiry SITE [--outputs FILE] [--now 2027-09-01T00:00:00Z] [--days 90]

It reads the certificates inside the kubeconfigs the stack exports (``pulumi stack output --json --show-secrets``,
or ``--outputs``), without a cluster:
- each team's admin kubeconfig (``tenantKubeconfigs``): its client certificate is vCluster's admin.conf, valid a
  year. vCluster renews it 90 days before it ends and writes the new one into ``vc-<vcluster>``; the stack output
  follows only on the next ``pulumi up``, and a copy already handed out keeps the old certificate until it lapses
  (401 Unauthorized from then on);
- the vCluster CA each kubeconfig trusts (``tenantKubeconfigs``, ``teamKubeconfigs``): ten years, renewed by nobody
  (``vcluster certs rotate-ca``); a rotation changes the CA pinned in every kubeconfig handed out;
- the host kubeconfig's client certificate and CA, if it holds any (EKS signs in by token instead);
- on a MicroK8s host, its API server's serving certificate and its front proxy's client certificate
  (``hostCertificateExpiry``): valid a year and renewed by nobody; the first stops the whole host on the day it
  ends (every client of the host API refuses it: the program, the kubelet, the tenants' syncers, KAI).

A certificate that ends within ``--days`` (default: vCluster's renewal window, 90) or has ended, or a MicroK8s
certificate whose end the outputs do not hold, is listed with what to do; the exit status is then 1. 2: it cannot start (no outputs, secrets not shown, a certificate that does not
parse).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional, Sequence

from config.certificates import CertificateError, KubeconfigCertificates, kubeconfig_certificates
from config.credential_lifetimes import MICROK8S_SERVING_CERTIFICATES, VCLUSTER_RENEWAL_WINDOW
from ops.smoke import stack_outputs

SECRET_PLACEHOLDER = "[secret]"
UNKNOWN_FIRST = datetime.min.replace(tzinfo=timezone.utc)


class ExpiryError(Exception):
    """Outputs this command cannot read: the message says which and how to get them."""


@dataclass(frozen=True)
class Finding:
    subject: str
    certificate: str
    # None: the outputs do not say, which is as urgent as an end within the window.
    not_after: Optional[datetime]
    action: str

    def due(self, now: datetime, soon: timedelta) -> bool:
        return self.not_after is None or self.not_after - now <= soon

    def line(self, now: datetime, soon: timedelta) -> str:
        if self.not_after is None:
            return f"UNKNOWN {self.subject}: {self.certificate} ends on a day the outputs do not hold\n" \
                   f"        -> {self.action}"
        left = (self.not_after - now) / timedelta(days=1)
        state = "EXPIRED" if left <= 0 else "SOON" if self.due(now, soon) else "ok"
        text = (f"{state:<8}{self.subject}: {self.certificate} ends {self.not_after:%Y-%m-%dT%H:%M:%SZ} "
                f"({left:.0f} days)")
        return text + (f"\n        -> {self.action}" if state != "ok" else "")


def admin_action(team: str, vcluster: str, namespace: str) -> str:
    return (f"vCluster renews this certificate in Secret {namespace}/vc-{vcluster} 90 days before it ends (check: "
            f"kubectl -n {namespace} get secret {vcluster}-certs); run `pulumi up` to export the renewed one and "
            f"hand the new tenantKubeconfigs entry of {team} to whoever holds a copy: the old copy fails from the date "
            "shown. A lapsed one still here means the control plane has not restarted on new certificates: see "
            "docs/operations-running.md, What expires")


def authority_action(team: str) -> str:
    return (f"nothing renews a vCluster CA: `vcluster certs rotate-ca` in {team}'s vCluster, then `pulumi up` and hand "
            "out the new tenantKubeconfigs and teamKubeconfigs entries (every copy pins the old CA)")


HOST_KUBECONFIG_ACTIONS = {
    "microk8s": ("MicroK8s issued it for ten years and nothing renews it: `sudo microk8s refresh-certs --cert ca.crt` "
                 "issues a new CA and every certificate again (MicroK8s warns that the workloads' pods restart), then "
                 "`pulumi up --replace <URN of host-read-kubeconfig>` (`pulumi stack --show-urns`) reads the new "
                 "kubeconfig: see docs/operations-running.md, What expires"),
    "kubeconfig": ("the host cluster's own certificate: renew it the host's way, set the new kubeconfig with "
                   "`pulumi config set --secret kubeconfig`, then `pulumi up`"),
}
HOST_KUBECONFIG_ACTION = "the host cluster's own certificate: renew it the host's way, then `pulumi up`"
READ_SERVING_STEP = "host-read-serving-certificates"
MICROK8S_CERTIFICATES = {
    "server.crt": (
        "MicroK8s API server serving certificate (server.crt)",
        "nothing on the host renews it. On the host: `sudo microk8s refresh-certs --cert server.crt` (same CA and "
        "key, so no kubeconfig changes; kubelite and the cluster agent restart: the host API is away for a minute or "
        "two, running pods keep running, the tenants' syncers and KAI reconnect), then `pulumi up --replace <URN of "
        f"{READ_SERVING_STEP}>` (`pulumi stack --show-urns`) to export the new end. Lapsed, every client of the host "
        "API refuses it: see docs/operations-running.md, What expires"),
    "front-proxy-client.crt": (
        "MicroK8s front proxy client certificate (front-proxy-client.crt)",
        "nothing on the host renews it. On the host: `sudo microk8s refresh-certs --cert front-proxy-client.crt` "
        f"(kubelite restarts), then `pulumi up --replace <URN of {READ_SERVING_STEP}>`. Lapsed, aggregated APIs "
        "(APIService objects, such as metrics-server's) refuse the host API server's requests"),
}
UNREAD_ACTION = (f"the stack exports no end for it (hostCertificateExpiry): run `pulumi up` with this version of the "
                 f"program (its {READ_SERVING_STEP} step reads it; if it did and the end is still missing, the step "
                 "could not read or parse the host's certificates). Meanwhile, on the host: `sudo microk8s refresh-certs "
                 "--check`")


def _read(kubeconfig: str, where: str) -> KubeconfigCertificates:
    if kubeconfig == SECRET_PLACEHOLDER:
        raise ExpiryError(f"{where} is hidden: read the outputs with `pulumi stack output --json --show-secrets`")
    try:
        return kubeconfig_certificates(kubeconfig)
    except CertificateError as error:
        raise ExpiryError(f"{where}: {error}") from None


def findings(outputs: dict) -> list[Finding]:
    tenants = outputs.get("tenants") or {}
    admin = outputs.get("tenantKubeconfigs")
    if not tenants or admin is None:
        raise ExpiryError("the outputs list no tenants (outputs `tenants`, `tenantKubeconfigs`): is this a stack "
                          "of this program after `pulumi up`?")
    if admin == SECRET_PLACEHOLDER:
        raise ExpiryError("tenantKubeconfigs is hidden: read the outputs with `pulumi stack output --json "
                          "--show-secrets`")
    members = outputs.get("teamKubeconfigs") or {}
    found: list[Finding] = []
    for team, info in sorted(tenants.items()):
        vcluster, namespace = info.get("vcluster", team), info.get("namespace", team)
        if not admin.get(team):
            # Nothing to read is no sign of health: the team's certificates end on a day nobody can tell.
            found.append(Finding(team, "admin kubeconfig (tenantKubeconfigs)", None,
                                 f"the outputs hold none for {team}: run `pulumi up`, which reads it from the Secret "
                                 f"vc-{vcluster} in namespace {namespace}, then check again"))
            continue
        certificates = _read(admin[team], f"tenantKubeconfigs.{team}")
        if certificates.client:
            found.append(Finding(team, "admin client certificate (tenantKubeconfigs)", certificates.client.not_after,
                                 admin_action(team, vcluster, namespace)))
        authorities = [certificates.authority]
        if team in members:
            authorities.append(_read(members[team], f"teamKubeconfigs.{team}").authority)
        for authority in {a.not_after: a for a in authorities if a}.values():
            found.append(Finding(team, "vCluster CA", authority.not_after, authority_action(team)))
    kind = outputs.get("hostKind")
    host = outputs.get("hostKubeconfig")
    if host:
        certificates = _read(host, "hostKubeconfig")
        action = HOST_KUBECONFIG_ACTIONS.get(kind, HOST_KUBECONFIG_ACTION)
        for name, validity in (("client certificate", certificates.client), ("CA", certificates.authority)):
            if validity:
                found.append(Finding("host", f"host kubeconfig {name}", validity.not_after, action))
    if kind == "microk8s":
        found += microk8s_findings(outputs.get("hostCertificateExpiry") or {})
    return found


def microk8s_findings(ends: dict) -> list[Finding]:
    """MicroK8s' one-year certificates, which no kubeconfig holds (the host exports their ends)."""
    found = []
    for file in MICROK8S_SERVING_CERTIFICATES:
        certificate, action = MICROK8S_CERTIFICATES[file]
        end = ends.get(file)
        found.append(Finding("host", certificate, _moment(end, f"hostCertificateExpiry.{file}") if end else None,
                             action if end else UNREAD_ACTION))
    return found


def _moment(text: str, where: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except (TypeError, ValueError):
        raise ExpiryError(f"{where} is {text!r}, not the program's ISO 8601 time: is this a stack of this "
                          "program?") from None


def report(outputs: dict, now: datetime, soon: timedelta) -> tuple[str, bool]:
    """The report's text, and whether anything ends within ``soon`` of ``now``."""
    listed = sorted(findings(outputs), key=lambda finding: (finding.not_after or UNKNOWN_FIRST, finding.subject))
    lines = [f"Certificates of the stack outputs at {now:%Y-%m-%dT%H:%M:%SZ} (SOON: within {soon.days} days)"]
    lines += [finding.line(now, soon) for finding in listed]
    if not listed:
        lines.append("no certificate in the exported kubeconfigs (tokens only)")
    return "\n".join(lines), any(finding.due(now, soon) for finding in listed)


def parse_now(text: Optional[str]) -> datetime:
    if not text:
        return datetime.now(timezone.utc)
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise ExpiryError(f"--now {text!r} is not an ISO 8601 time; write it as 2027-09-01T00:00:00Z") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.expiry", description=__doc__.split("\n\n")[0])
    parser.add_argument("stack", help="the site (Pulumi stack)")
    parser.add_argument("--outputs", type=Path, help="stack outputs as JSON (`pulumi stack output --json "
                                                     "--show-secrets`) instead of asking Pulumi")
    parser.add_argument("--now", help="the time to judge at (default: now), e.g. to see a site on a later day")
    parser.add_argument("--days", type=int, default=VCLUSTER_RENEWAL_WINDOW.days,
                        help="list what ends within this many days (default: vCluster's renewal window)")
    args = parser.parse_args(argv)
    if args.days < 0:
        parser.error(f"--days {args.days}: give a number of days, 0 or more")
    try:
        outputs = json.loads(args.outputs.read_text()) if args.outputs else stack_outputs(args.stack)
        text, due = report(outputs, parse_now(args.now), timedelta(days=args.days))
    except (OSError, ValueError, ExpiryError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(text)
    return 1 if due else 0


if __name__ == "__main__":
    sys.exit(main())
