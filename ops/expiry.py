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
- the host kubeconfig's client certificate and CA, if it holds any (EKS signs in by token instead).

A certificate that ends within ``--days`` (default: vCluster's renewal window, 90) or has ended is listed with what
to do; the exit status is then 1. 2: it cannot start (no outputs, secrets not shown, a certificate that does not
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
from config.credential_lifetimes import VCLUSTER_RENEWAL_WINDOW
from ops.smoke import stack_outputs

SECRET_PLACEHOLDER = "[secret]"


class ExpiryError(Exception):
    """Outputs this command cannot read: the message says which and how to get them."""


@dataclass(frozen=True)
class Finding:
    subject: str
    certificate: str
    not_after: datetime
    action: str

    def days_left(self, now: datetime) -> float:
        return (self.not_after - now) / timedelta(days=1)

    def line(self, now: datetime, soon: timedelta) -> str:
        left = self.days_left(now)
        state = "EXPIRED" if left <= 0 else "SOON" if self.not_after - now <= soon else "ok"
        text = (f"{state:<8}{self.subject}: {self.certificate} ends {self.not_after:%Y-%m-%dT%H:%M:%SZ} "
                f"({left:.0f} days)")
        return text + (f"\n        -> {self.action}" if state != "ok" else "")


def admin_action(team: str, vcluster: str, namespace: str) -> str:
    return (f"vCluster renews this certificate in Secret {namespace}/vc-{vcluster} 90 days before it ends (check: "
            f"kubectl -n {namespace} get secret {vcluster}-certs); run `pulumi up` to export the renewed one and "
            f"hand the new tenantKubeconfigs entry of {team} to whoever holds a copy: the old copy fails from the date "
            "shown. A lapsed one still here means the control plane has not restarted on new certificates: see "
            "docs/operations.md, What expires")


def authority_action(team: str) -> str:
    return (f"nothing renews a vCluster CA: `vcluster certs rotate-ca` in {team}'s vCluster, then `pulumi up` and hand "
            "out the new tenantKubeconfigs and teamKubeconfigs entries (every copy pins the old CA)")


HOST_ACTION = ("the host cluster's own certificate: renew it the host's way (MicroK8s: `microk8s refresh-certs`), "
               "then `pulumi up` re-reads the host kubeconfig where the program reads it")


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
        certificates = _read(admin.get(team) or "", f"tenantKubeconfigs.{team}")
        if certificates.client:
            found.append(Finding(team, "admin client certificate (tenantKubeconfigs)", certificates.client.not_after,
                                 admin_action(team, vcluster, namespace)))
        authorities = [certificates.authority]
        if team in members:
            authorities.append(_read(members[team], f"teamKubeconfigs.{team}").authority)
        for authority in {a.not_after: a for a in authorities if a}.values():
            found.append(Finding(team, "vCluster CA", authority.not_after, authority_action(team)))
    host = outputs.get("hostKubeconfig")
    if host:
        certificates = _read(host, "hostKubeconfig")
        for name, validity in (("client certificate", certificates.client), ("CA", certificates.authority)):
            if validity:
                found.append(Finding("host", f"host kubeconfig {name}", validity.not_after, HOST_ACTION))
    return found


def report(outputs: dict, now: datetime, soon: timedelta) -> tuple[str, bool]:
    """The report's text, and whether anything ends within ``soon`` of ``now``."""
    listed = sorted(findings(outputs), key=lambda finding: (finding.not_after, finding.subject))
    lines = [f"Certificates of the stack outputs at {now:%Y-%m-%dT%H:%M:%SZ} (SOON: within {soon.days} days)"]
    lines += [finding.line(now, soon) for finding in listed]
    if not listed:
        lines.append("no certificate in the exported kubeconfigs (tokens only)")
    return "\n".join(lines), any(finding.not_after - now <= soon for finding in listed)


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
