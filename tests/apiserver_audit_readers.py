"""How a MicroK8s box reads what the audit step writes, for tests/test_apiserver_audit.py and
tests/test_apiserver_audit_contract.py: the API server's flags as kubelite reads its args file and pflag keeps the
last of a flag given twice; a stand-in box that runs the step's shell against a scratch args file and policy file."""

from __future__ import annotations

import subprocess
from pathlib import Path

from components.apiserver_audit import AUDIT_FLAGS, remove_audit_log_command, set_audit_log_command
from config.model_host import AuditLog
from tests.node_pid_readers import READY, Box, kubelite_args

# Shaped like the snap's default-args/kube-apiserver: one flag per line, a quoted value, a comment, a blank line.
SNAP_APISERVER_ARGS = """\
--cert-dir=${SNAP_DATA}/certs
--secure-port=16443
--etcd-servers="unix://${SNAP_DATA}/var/kubernetes/backend/kine.sock:12379"
--service-account-issuer='https://kubernetes.default.svc'
--profiling=false

# Enable the aggregation layer
--requestheader-allowed-names=front-proxy-client
#~Enable the aggregation layer
--enable-admission-plugins=EventRateLimit
"""


def flag_values(text: str, flags=AUDIT_FLAGS) -> dict[str, list[str]]:
    """Every value each flag is given in an args file, in order (the API server keeps the last)."""
    args = kubelite_args(text)
    found: dict[str, list[str]] = {}
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if name in flags:
            found.setdefault(name, []).append(value if equals else args[index + 1])
    return found


def audit_flags(text: str) -> dict[str, str]:
    """The audit flags the API server ends up with: the last value of each."""
    return {flag: values[-1] for flag, values in flag_values(text).items()}


def other_args(text: str) -> list[str]:
    """The arguments besides the audit flags and their values."""
    args = kubelite_args(text)
    skip = {index + 1 for index, arg in enumerate(args) if arg in AUDIT_FLAGS}
    return [arg for index, arg in enumerate(args)
            if index not in skip and arg.partition("=")[0] not in AUDIT_FLAGS]


class AuditBox(Box):
    """A scratch MicroK8s box for the audit step: the API server's args file and the policy file beside it."""

    def __init__(self, root: Path, text: str):
        super().__init__(root, text)
        self.policy = root / "audit-policy.yaml"

    def set(self, settings: AuditLog = AuditLog()) -> subprocess.CompletedProcess:
        return self.run(set_audit_log_command("sudo ", settings, READY, str(self.args), str(self.policy)))

    def remove(self) -> subprocess.CompletedProcess:
        return self.run(remove_audit_log_command("sudo ", READY, str(self.args), str(self.policy)))


# Requests on the host and the level the policy must record each at: (user, groups, verb, api group, resource,
# subresource, namespace, name, path) -> level. A resource request has a resource; the rest are non-resource URLs.
SYNCER = ("system:serviceaccount:vcluster-team-nlp:vc-team-nlp",
          ("system:serviceaccounts", "system:serviceaccounts:vcluster-team-nlp", "system:authenticated"))
NODE = ("system:node:gpu-box", ("system:nodes", "system:authenticated"))
SCHEDULER = ("system:kube-scheduler", ("system:authenticated",))
ADMIN = ("admin", ("system:masters", "system:authenticated"))
ANONYMOUS = ("system:anonymous", ("system:unauthenticated",))
REQUESTS = [
    # A team's syncer acting on the host: every write and read, Secrets included, by name.
    (SYNCER, "create", "", "pods", "", "vcluster-team-nlp", "train-x-default-x-team-nlp", "", "Metadata"),
    (SYNCER, "get", "", "secrets", "", "vcluster-team-nlp", "vc-team-nlp", "", "Metadata"),
    (SYNCER, "update", "coordination.k8s.io", "leases", "", "vcluster-team-nlp", "vcluster", "", "Metadata"),
    (SYNCER, "create", "", "pods", "ephemeralcontainers", "vcluster-team-nlp", "train", "", "Metadata"),
    (ADMIN, "delete", "", "namespaces", "", "", "vcluster-team-vision", "", "Metadata"),
    (ADMIN, "create", "", "pods", "exec", "kube-system", "coredns-0", "", "Metadata"),
    (ANONYMOUS, "get", "", "", "", "", "", "/api", "Metadata"),
    # The node's heartbeat and the control plane's leader elections: every few seconds, no one's action.
    (NODE, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "gpu-box", "", "None"),
    (NODE, "get", "coordination.k8s.io", "leases", "", "kube-node-lease", "gpu-box", "", "None"),
    (SCHEDULER, "update", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler", "", "None"),
    # ... but not what else they do, nor the same identities' other lease changes.
    (NODE, "get", "", "secrets", "", "vcluster-team-nlp", "vc-team-nlp", "", "Metadata"),
    (NODE, "delete", "coordination.k8s.io", "leases", "", "kube-node-lease", "gpu-box", "", "Metadata"),
    (NODE, "update", "coordination.k8s.io", "leases", "", "vcluster-team-nlp", "vcluster", "", "Metadata"),
    (SCHEDULER, "create", "", "pods", "binding", "vcluster-team-nlp", "train", "", "Metadata"),
    # Health probes.
    (ANONYMOUS, "get", "", "", "", "", "", "/healthz", "None"),
    (ANONYMOUS, "get", "", "", "", "", "", "/readyz/etcd", "None"),
    (ANONYMOUS, "get", "", "", "", "", "", "/livez", "None"),
    (ANONYMOUS, "get", "", "", "", "", "", "/version", "None"),
    (ANONYMOUS, "get", "", "", "", "", "", "/metrics", "Metadata"),
]


def policy_level(policy: dict, request: tuple) -> str:
    """The level of the first rule matching ``request``: the API server's ``ruleMatches`` (k8s.io/apiserver
    pkg/audit/policy/checker.go) for the fields the program's policy uses: users, groups and verbs first, then the
    namespaces and resources of a resource request, else the non-resource URLs (a trailing ``*`` matching any
    rest); ``None`` when no rule does. tests/test_apiserver_audit_contract.py runs the real one on the same table."""
    (user, groups), verb, group, resource, subresource, namespace, _, path = request[:8]
    for rule in policy["rules"]:
        if rule.get("users") and user not in rule["users"]:
            continue
        if rule.get("userGroups") and not set(groups) & set(rule["userGroups"]):
            continue
        if rule.get("verbs") and verb not in rule["verbs"]:
            continue
        if rule.get("namespaces") or rule.get("resources"):
            if not resource or (rule.get("namespaces") and namespace not in rule["namespaces"]):
                continue
            combined = f"{resource}/{subresource}" if subresource else resource
            if rule.get("resources") and not any(
                    entry.get("group", "") in (group, "*") and (not entry.get("resources") or any(
                        name in (combined, "*") for name in entry["resources"])) for entry in rule["resources"]):
                continue
        elif rule.get("nonResourceURLs"):
            if resource or not any(spec == path or (spec.endswith("*") and path.startswith(spec.rstrip("*")))
                                   for spec in rule["nonResourceURLs"]):
                continue
        return rule["level"]
    return "None"
