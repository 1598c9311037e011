"""No probe or lifecycle hook of a tenant pod names a host: the kubelet would send it from the node.

The kubelet runs httpGet and tcpSocket probes and lifecycle hooks from the node's own network
namespace, so a handler with a ``host`` reaches whatever the node reaches (kubelets, node ports, the
cloud's metadata address, other teams' services), outside every NetworkPolicy, and the pod's readiness
tells the tenant what answered. vCluster copies probes and hooks to the host unchanged. Pod Security's
baseline level refuses such a host only from Kubernetes 1.34 (k8s.io/pod-security-admission), and a
site may run 1.30, so the team's policy refuses it, on every host, and again inside the vCluster.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import kubernetes_validate
import pytest

from components.admission import CONTAINER_LISTS, HOST_ACTIONS, LIFECYCLE_HOOKS, PROBES
from config import versions
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, dev_config, eks_config, git, mirrored_tag
from tests.tenant_sim import KAI_SCHEDULER, Tenant, container, tenant_of, virtual_pod

POD_SECURITY = "kubernetes/pod-security-admission"
VCLUSTER = "loft-sh/vcluster"
# Where a handler can name a host, as (probe or "lifecycle.<hook>", action).
HANDLERS = [*((probe, action) for probe in PROBES for action in HOST_ACTIONS),
            *((f"lifecycle.{hook}", action) for hook in LIFECYCLE_HOOKS for action in HOST_ACTIONS)]
# Addresses a tenant would aim at from a node: the instance metadata service, a private address, the node itself.
TARGETS = ("169.254.169.254", "10.0.12.7", "localhost")


@pytest.fixture(scope="module", params=["dev", "eks"])
def tenant(request, dev_run, eks_run) -> Tenant:
    if request.param == "dev":
        return tenant_of(dev_run, dev_config(), "team-nlp")
    return tenant_of(eks_run, eks_config(), "team-legal")


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def with_handler(entry: dict, handler: str, action: str, host: str | None) -> dict:
    """``entry`` with a probe or hook at ``handler`` that runs ``action`` on port 8080 of ``host`` (None: no host)."""
    entry = copy.deepcopy(entry)
    spec = {"port": 8080, **({"path": "/healthz"} if action == "httpGet" else {})}
    if host is not None:
        spec["host"] = host
    target = entry
    *parents, last = handler.split(".")
    for parent in parents:
        target = target.setdefault(parent, {})
    target[last] = {action: spec}
    return entry


def on_kai(tenant: Tenant, **spec) -> dict:
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, **spec)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("handler, action", HANDLERS, ids=[f"{h}-{a}" for h, a in HANDLERS])
def test_a_handler_naming_a_host_is_refused_in_a_container(tenant, handler, action, target):
    pod = on_kai(tenant, containers=[with_handler(container(), handler, action, target)])
    for mutated in (False, True):
        assert rules(tenant.create(pod, mutated=mutated)) == {"probe-host"}


@pytest.mark.parametrize("handler, action", HANDLERS, ids=[f"{h}-{a}" for h, a in HANDLERS])
def test_a_handler_naming_a_host_is_refused_in_an_init_container_and_a_sidecar(tenant, handler, action):
    sidecar = {**with_handler(container("proxy"), handler, action, "10.0.12.7"), "restartPolicy": "Always"}
    for init in (with_handler(container("fetch"), handler, action, "10.0.12.7"), sidecar):
        pod = on_kai(tenant, annotations={"gpu-fraction": "0.5"}, initContainers=[init])
        assert "probe-host" in rules(tenant.create(pod))


def test_a_host_in_a_debug_container_is_refused(tenant):
    running = tenant.host_pod(on_kai(tenant))
    debugged = copy.deepcopy(running)
    debug = with_handler({"name": "debug", "image": "busybox:1.36", "env": [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}, "readinessProbe", "tcpSocket", "10.0.12.7")
    debugged["spec"]["ephemeralContainers"] = [debug]
    assert "probe-host" in rules(tenant.update(running, debugged, subresource="ephemeralcontainers"))


def test_probes_and_hooks_without_a_host_are_admitted(tenant):
    server = {**container("server"),
              "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
              "livenessProbe": {"tcpSocket": {"port": 8080}},
              "startupProbe": {"grpc": {"port": 9000}},
              "lifecycle": {"postStart": {"exec": {"command": ["touch", "/tmp/started"]}},
                            "preStop": {"httpGet": {"path": "/drain", "port": 8080}}}}
    metrics = {**container("metrics"), "readinessProbe": {"httpGet": {"host": "", "path": "/", "port": 9100}}}
    proxy = {**container("proxy"), "restartPolicy": "Always", "startupProbe": {"exec": {"command": ["true"]}},
             "livenessProbe": {"tcpSocket": {"port": 15000}}}
    pod = on_kai(tenant, annotations={"gpu-fraction": "0.5"}, containers=[server, metrics], initContainers=[proxy])
    for mutated in (False, True):
        assert tenant.create(pod, mutated=mutated) == []


def test_the_rule_reads_every_host_a_container_schema_has_at_every_kubernetes_a_site_may_run():
    """Every ``host`` field reachable from a container, in the pod schema of each Kubernetes from the host floor to
    the newest kubernetes-validate knows, is one the rule reads: a release that adds one fails here."""
    read = {f"{handler}.{action}.host" for handler, action in HANDLERS}
    schemas = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    minors = sorted({tuple(map(int, path.name[1:].split(".")[:2])) for path in schemas.glob("v1.*-local")})
    floor = versions.release_numbers(versions.KUBERNETES_MINIMUM_VERSION)
    checked = [minor for minor in minors if minor >= floor]
    assert checked and checked[0] == floor
    for major, minor in checked:
        definitions = json.loads((schemas / f"v{major}.{minor}.0-local" / "_definitions.json").read_text())["$defs"]
        for kind in ("Container", "EphemeralContainer"):
            found = _host_paths(definitions, f"io.k8s.api.core.v1.{kind}")
            assert found == read, f"Kubernetes {major}.{minor} {kind}: {sorted(found ^ read)}"


def _host_paths(definitions: dict, name: str, prefix: str = "", seen: frozenset = frozenset()) -> set[str]:
    """The dotted paths of every property named ``host`` under the definition ``name``."""
    found = set()
    for key, schema in definitions[name].get("properties", {}).items():
        path = f"{prefix}{key}"
        ref = schema.get("$ref") or schema.get("items", {}).get("$ref") or next(
            (entry["$ref"] for entry in schema.get("allOf", []) if "$ref" in entry), None)
        if key == "host":
            found.add(path)
        elif ref and ref.rsplit("/", 1)[1] not in seen:
            child = ref.rsplit("/", 1)[1]
            found |= _host_paths(definitions, child, f"{path}.", seen | {child})
    return found


def test_the_schema_walk_finds_a_host_a_new_release_would_add():
    definitions = {"io.k8s.api.core.v1.Container": {"properties": {
        "readinessProbe": {"$ref": "#/$defs/probe"}, "name": {"type": "string"}}},
        "probe": {"properties": {"httpGet": {"allOf": [{"$ref": "#/$defs/action"}]},
                                 "webSocket": {"$ref": "#/$defs/action"}}},
        "action": {"properties": {"host": {"type": "string"}, "port": {"type": "integer"}}}}
    assert _host_paths(definitions, "io.k8s.api.core.v1.Container") == {
        "readinessProbe.httpGet.host", "readinessProbe.webSocket.host"}


def _pod_security_tags() -> list[str]:
    return list(MIRRORED_TAGS[POD_SECURITY])


@pytest.mark.parametrize("tag", _pod_security_tags())
def test_pod_security_refuses_a_handler_host_from_kubernetes_1_34_only(tag):
    """Below 1.34 Pod Security has no such check, which is why the team's policy has one; from 1.34 its baseline
    check reads no handler the rule does not."""
    tag = mirrored_tag(POD_SECURITY, tag)
    files = git(POD_SECURITY, "ls-tree", "--name-only", tag, "policy/").split()
    checks = [name for name in files if re.search(r"check_hostProbes.*\.go$", name) and not name.endswith("_test.go")]
    minor = int(tag.split(".")[1])
    if minor < 34:
        assert checks == [], f"{tag} has a probe host check: {checks}"
        return
    [check] = checks
    source = git(POD_SECURITY, "show", f"{tag}:{check}")
    assert "api.MajorMinorVersion(1, 34)" in source and "api.LevelBaseline" in source
    probes = set(re.findall(r"container\.(\w+Probe)\b", source))
    hooks = set(re.findall(r"container\.Lifecycle\.(\w+)\b", source))
    actions = set(re.findall(r"\.(HTTPGet|TCPSocket)\.Host\b", source))
    assert probes == {probe[0].upper() + probe[1:] for probe in PROBES}
    assert hooks == {hook[0].upper() + hook[1:] for hook in LIFECYCLE_HOOKS}
    assert actions == {"HTTPGet", "TCPSocket"} and len(HOST_ACTIONS) == len(actions)
    visitor = git(POD_SECURITY, "show", f"{tag}:policy/visitor.go")
    assert set(re.findall(r"podSpec\.(\w*Containers)\b", visitor)) == {
        field[0].upper() + field[1:] for field in CONTAINER_LISTS}


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_copies_probes_and_hooks_to_the_host_unchanged(tag):
    tag = mirrored_tag(VCLUSTER, tag)
    directory = "pkg/controllers/resources/pods/translate/"
    touching = [name for name in git(VCLUSTER, "ls-tree", "-r", "--name-only", tag, directory).split()
                if re.search(r"probe|lifecycle|httpget|tcpsocket", git(VCLUSTER, "show", f"{tag}:{name}"), re.I)]
    assert touching == [], f"vCluster {tag} now reads probes or hooks when it syncs a pod: {touching}"
