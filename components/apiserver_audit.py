"""The audit log of a MicroK8s box's API server (``cluster.microk8s.auditLog``): the policy file and the flags the
setup step writes, as shell that runs on the box (locally or over SSH). No Pulumi here: components/host.py runs it.

A multi-tenant host needs a record of who did what on it: each team's vCluster syncer acts on the host under its own
service account, the platform's tools under theirs. The snap's own API server arguments set no audit flag (canonical/
microk8s v1.30 to v1.36, ``microk8s-resources/default-args/kube-apiserver``), so nothing is recorded until the program
adds them. Kubelite reads the API server's flags from ``$SNAP_DATA/args/kube-apiserver`` once, when it starts, the
way it reads the kubelet's (``ReadArgsFromFile`` in the kubelite patch; components/node_pids.py says how), and the
API server reads the policy file once, at start too: the step restarts kubelite when either changed.

The policy records every request at level ``Metadata`` (user, groups, source address, verb, resource, namespace,
name, response code), never ``Request`` or ``RequestResponse``: those write the bodies, which would copy tenants'
Secrets, ConfigMaps and pods' environment into a file on the node. ``RequestReceived`` is left out (each request
would be written twice, before and after), and so are the health probes and the lease renewals the node and the
control plane make every few seconds, which would otherwise take most of the log's room. The rotation flags bound
what it takes of the box's disk, which the tenants share: without them the API server keeps every rotated file
before Kubernetes 1.36, and 100 files of 100 MB from 1.36 on.

tests/test_apiserver_audit.py runs the shell against a scratch args file; tests/test_apiserver_audit_contract.py
reads the snap's files and the audit API at the mirrored tags.
"""

from __future__ import annotations

import shlex

import yaml

from components.node_pids import KUBELITE_SERVICE, ere_literal
from config.model_host import MICROK8S_AUDIT_LOG_FILE, MICROK8S_AUDIT_POLICY_FILE, AuditLog

MICROK8S_APISERVER_ARGS = "/var/snap/microk8s/current/args/kube-apiserver"
POLICY_FLAG = "--audit-policy-file"
PATH_FLAG = "--audit-log-path"
MAX_AGE_FLAG = "--audit-log-maxage"
MAX_BACKUP_FLAG = "--audit-log-maxbackup"
MAX_SIZE_FLAG = "--audit-log-maxsize"
AUDIT_FLAGS = (POLICY_FLAG, PATH_FLAG, MAX_AGE_FLAG, MAX_BACKUP_FLAG, MAX_SIZE_FLAG)

AUDIT_API_VERSION = "audit.k8s.io/v1"
LEVEL_NONE, LEVEL_METADATA = "None", "Metadata"
STAGE_REQUEST_RECEIVED = "RequestReceived"
# Probes of load balancers, kubelets and monitoring: many a minute, and no tenant's action.
HEALTH_URLS = ("/healthz*", "/livez*", "/readyz*", "/version")
# The identities MicroK8s gives its scheduler, controller manager and kubelet (their certificates' subjects): the
# first two renew their leader leases every two seconds, the kubelet its node's lease every ten.
CONTROL_PLANE_USERS = ("system:kube-scheduler", "system:kube-controller-manager")
NODES_GROUP = "system:nodes"


def _lease_renewals() -> dict:
    # New lists for each rule: YAML would write shared ones as anchors and aliases, harder to review on the box.
    return {"verbs": ["get", "update"], "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}]}


def audit_policy() -> dict:
    """The audit policy: rules are tried in order, the first that matches a request decides its level."""
    return {
        "apiVersion": AUDIT_API_VERSION,
        "kind": "Policy",
        "omitStages": [STAGE_REQUEST_RECEIVED],
        "rules": [
            {"level": LEVEL_NONE, "nonResourceURLs": list(HEALTH_URLS)},
            {"level": LEVEL_NONE, "users": list(CONTROL_PLANE_USERS), "namespaces": ["kube-system"],
             **_lease_renewals()},
            {"level": LEVEL_NONE, "userGroups": [NODES_GROUP], "namespaces": ["kube-node-lease"],
             **_lease_renewals()},
            {"level": LEVEL_METADATA},
        ],
    }


def audit_policy_text() -> str:
    return ("# Written by gpu-tenancy (cluster.microk8s.auditLog): every pulumi up writes it again.\n"
            + yaml.safe_dump(audit_policy(), sort_keys=False))


def audit_flag_lines(settings: AuditLog, policy_file: str = MICROK8S_AUDIT_POLICY_FILE) -> list[str]:
    return [f"{POLICY_FLAG}={policy_file}", f"{PATH_FLAG}={MICROK8S_AUDIT_LOG_FILE}",
            f"{MAX_AGE_FLAG}={settings.max_age_days}", f"{MAX_BACKUP_FLAG}={settings.max_backups}",
            f"{MAX_SIZE_FLAG}={settings.max_size_megabytes}"]


# Every line kubelite would read as one of the five flags: blanks and quotes before the flag (it trims the line and
# drops every quote), the value after "=", a blank or a quote.
_FLAG_LINES = "^[[:space:]\"']*(" + "|".join(AUDIT_FLAGS) + ")([=\"'[:space:]]|$)"
_DROP_FLAGS = "-e " + shlex.quote(f"/{_FLAG_LINES}/d")


def _ours_line(policy_file: str) -> str:
    """The policy flag naming the program's own file, in any spelling kubelite reads: the mark of the program's lines
    (it writes all five or none). Audit flags without it are the site's own."""
    path = ere_literal(policy_file, delimiter="")
    return shlex.quote(f"^[[:space:]\"']*{POLICY_FLAG}[=\"'[:space:]]+{path}[\"'[:space:]]*$")


def _one_line(text: str) -> str:
    """``text`` as a printf format on one line (its newlines as ``\\n``), so the step reads as one command in the
    plan's review; printf's own escapes and conversions are kept out of it."""
    assert "%" not in text and "\\" not in text, "the policy would be read as printf's format"
    return shlex.quote(text.replace("\n", "\\n"))


def set_audit_log_command(sudo: str, settings: AuditLog, ready: str, args_file: str = MICROK8S_APISERVER_ARGS,
                          policy_file: str = MICROK8S_AUDIT_POLICY_FILE) -> str:
    """Shell that writes the audit policy and leaves the API server's args with exactly one line of each audit flag,
    restarts kubelite when either changed, then waits for the cluster.

    Both are written to scratch files and copied over the old ones only when they differ: run again with the same
    settings, it changes nothing and restarts nothing; with other settings it replaces the old lines (every
    spelling kubelite would read). Audit flags without the program's policy file are the site's own: the step stops
    before it changes anything, so destroy cannot take them away. The policy is in place before the flag that names
    it. The program's lines go last, in one order, so a second run writes the same bytes; ``$a\\`` ends the last line
    when the file lacked it.
    """
    missing = (f"{args_file} is missing or empty: the API server's arguments of the MicroK8s snap are not where "
               "this program expects them. Check 'snap list microk8s'.")
    sites_own = (f"{args_file} already sets the API server's audit log ({', '.join(AUDIT_FLAGS)}) without the "
                 f"program's policy {policy_file}: the site's own, which this step would replace and pulumi destroy "
                 "then take away. Keep it with cluster.microk8s.auditLog.enabled: false, or take those lines out and "
                 "run pulumi up again.")
    lines = " ".join(shlex.quote(line) for line in audit_flag_lines(settings, policy_file))
    return (f"if ! {sudo}test -s {args_file}; then echo \"{missing}\" >&2; exit 1; fi; "
            f"if {sudo}grep -Eq {shlex.quote(_FLAG_LINES)} {args_file} && "
            f"! {sudo}grep -Eq {_ours_line(policy_file)} {args_file}; then echo \"{sites_own}\" >&2; exit 1; fi; "
            f"new=$(mktemp) && policy=$(mktemp) && trap 'rm -f \"$new\" \"$policy\"' EXIT && changed= && "
            f"printf {_one_line(audit_policy_text())} > \"$policy\" && "
            f"{{ {sudo}sed -E {_DROP_FLAGS} -e '$a\\' {args_file} && printf '%s\\n' {lines}; }} > \"$new\" && "
            f"if ! {sudo}cmp -s \"$policy\" {policy_file}; then {sudo}cp \"$policy\" {policy_file} && changed=1; fi && "
            f"if ! {sudo}cmp -s \"$new\" {args_file}; then {sudo}cp \"$new\" {args_file} && changed=1; fi && "
            f"if [ -n \"$changed\" ]; then {sudo}snap restart {KUBELITE_SERVICE}; fi && {ready}")


def remove_audit_log_command(sudo: str, ready: str, args_file: str = MICROK8S_APISERVER_ARGS,
                             policy_file: str = MICROK8S_AUDIT_POLICY_FILE) -> str:
    """Shell that takes the audit flags out of the API server's args and deletes the policy file, restarting
    kubelite when a flag went; nothing when nothing of the program's is left, or no snap. The log files stay: they
    are the record of what happened."""
    return (f"if {sudo}test -e {args_file}; then new=$(mktemp) && trap 'rm -f \"$new\"' EXIT && "
            f"{sudo}sed -E {_DROP_FLAGS} {args_file} > \"$new\" && "
            f"if ! {sudo}cmp -s \"$new\" {args_file}; then {sudo}cp \"$new\" {args_file} && "
            f"{sudo}snap restart {KUBELITE_SERVICE} && {ready}; fi; fi && {sudo}rm -f {policy_file}")
