"""A deployed site for ops.smoke, offline: fake API servers on 127.0.0.1 for the host and each team's vCluster.

Each server answers the few REST calls the smoke test makes, as the real API server would (paths, list
selectors, a ``Status`` body on a refusal). Behind them the site behaves as the program configured it:
a pod created in a team's vCluster is synced as vCluster 0.36.1 syncs it and mutated by the host's webhooks
(KAI's, tests/tenant_sim.py; its hamicore plugin where the site turned it on, tests/isolation_sim.py), then the
host asks the admission policies this run rendered for the team (its tier's too, for an IsolationTenant). A refusal
becomes a Warning event on the virtual pod, as vCluster records a failed sync; an admitted pod gets
the phase ``schedule`` gives it (on host and virtual pod, as vCluster copies status back). The host
answers a dry-run pod CREATE in a tenant namespace as that team's admission chain would, as the user the
request impersonates, and stores nothing.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional, Union
from urllib.parse import parse_qs, urlparse

import yaml

from components.isolation_admission import isolation_outputs
from tests.tenant_sim import KAI_SCHEDULER, Tenant
from tests.apiserver_pods import limit_ranger

QUEUE = "kai.scheduler/queue"


def default_schedule(pod: dict) -> dict:
    """Pods that run once succeed, the others run."""
    return {"phase": "Succeeded" if pod["spec"].get("restartPolicy") == "Never" else "Running"}


def pending(message: str) -> Callable[[dict], dict]:
    def schedule(pod: dict) -> dict:
        return {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                    "reason": "Unschedulable", "message": message}]}
    return schedule


class Store:
    """One API server's objects."""

    def __init__(self) -> None:
        self.namespaces: set[str] = {"default"}
        self.pods: dict[tuple[str, str], dict] = {}
        self.deployments: dict[tuple[str, str], dict] = {}
        self.events: list[dict] = []
        # (impersonated user, pod) of every dry-run CREATE the host judged.
        self.dry_runs: list[tuple[str, dict]] = []
        self.lock = threading.Lock()


def _matches(obj: dict, selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    pairs = [term.split("=", 1) for term in selector.split(",") if term]
    return all(labels.get(key) == value for key, value in pairs)


@dataclass
class FakeVCluster:
    """A team's vCluster in front of the shared host store."""

    tenant: Tenant
    host: Store
    schedule: Callable[[dict], dict] = default_schedule
    # Inside-the-vCluster defaults (the queue label and KAI's scheduler on every pod), when the site has them;
    # a predicate: on the pods it accepts (a tenant can narrow or delete the policy).
    defaults: Union[bool, Callable[[dict], bool]] = True
    # The host admission policy; False models a site where it is missing.
    host_admission: bool = True
    # A copy of the host's rules refusing at create time inside the vCluster (message -> HTTP 403).
    refuse_in_vcluster: Optional[Callable[[dict], Optional[str]]] = None
    fail_delete: bool = False
    # What a tenant's own controller writes into its virtual pods' status (the host pod keeps the real one).
    virtual_status: Optional[dict] = None
    # The vCluster's other mutating policies, after the defaults (tests/test_virtual_defaults.py ``Inside.mutate``:
    # a memory-capped team's pods get HAMi-core there).
    mutate_inside: Optional[Callable[[dict], dict]] = None
    store: Store = field(default_factory=Store)
    suffix: itertools.count = field(default_factory=lambda: itertools.count(1))

    def create_pod(self, namespace: str, pod: dict) -> tuple[int, dict]:
        pod = copy.deepcopy(pod)
        pod["metadata"]["namespace"] = namespace
        if namespace not in self.store.namespaces:
            return 404, _status(404, f'namespaces "{namespace}" not found')
        if self.defaults(pod) if callable(self.defaults) else self.defaults:
            # The MutatingAdmissionPolicy's apply configuration sets both, replacing another queue or scheduler.
            pod["metadata"].setdefault("labels", {})[QUEUE] = self.tenant.team.queue_name
            pod["spec"]["schedulerName"] = KAI_SCHEDULER
        if self.mutate_inside:
            pod = self.mutate_inside(pod)
        if self.refuse_in_vcluster and (message := self.refuse_in_vcluster(pod)):
            return 403, _status(403, message)
        pod["status"] = {"phase": "Pending"}
        self.store.pods[(namespace, pod["metadata"]["name"])] = pod
        self._sync(pod)
        return 201, pod

    def _sync(self, pod: dict) -> None:
        host_pod = self.tenant.host_pod(pod)
        refusals = self.tenant.create_host(host_pod) if self.host_admission else []
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        if refusals:
            self.store.events.append({"type": "Warning", "reason": "SyncError", "involvedObject": {
                "kind": "Pod", "name": name, "namespace": namespace},
                "message": f"Error syncing to physical cluster: admission denied: {refusals[0]}"})
            return
        status = self.schedule(host_pod)
        host_pod["status"] = status
        pod["status"] = copy.deepcopy(self.virtual_status or status)
        self.host.pods[(host_pod["metadata"]["namespace"], host_pod["metadata"]["name"])] = host_pod

    def dry_run_host_pod(self, pod: dict, user: str) -> tuple[int, dict]:
        """A host pod CREATE with ``dryRun=All``: LimitRanger, the host's webhooks (KAI's) and the team's policies run,
        nothing is stored."""
        host = self.tenant.host_webhooks(limit_ranger(copy.deepcopy(pod), self.tenant.team.vcluster))
        refusals = self.tenant.create_host(host, user=user) if self.host_admission else []
        self.host.dry_runs.append((user, host))
        if refusals:
            policy = f"gpu-tenancy-{self.tenant.team.name}"
            return 422, _status(422, f'pods "{pod["metadata"]["name"]}" is forbidden: ValidatingAdmissionPolicy '
                                     f"'{policy}' with binding '{policy}' denied request: {refusals[0]}")
        return 201, host

    def create_deployment(self, namespace: str, deployment: dict) -> tuple[int, dict]:
        self.store.deployments[(namespace, deployment["metadata"]["name"])] = deployment
        template = copy.deepcopy(deployment["spec"]["template"])
        template["metadata"]["name"] = f"{deployment['metadata']['name']}-7c9d{next(self.suffix)}-x2k4p"
        self.create_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **template})
        return 201, deployment

    def delete_namespace(self, namespace: str) -> tuple[int, dict]:
        if self.fail_delete:
            return 500, _status(500, "etcdserver: request timed out")
        self.store.namespaces.discard(namespace)
        for key in [key for key in self.store.pods if key[0] == namespace]:
            del self.store.pods[key]
        for key in [key for key, pod in self.host.pods.items()
                    if pod["metadata"]["labels"].get("vcluster.loft.sh/namespace") == namespace]:
            del self.host.pods[key]
        self.store.deployments = {k: v for k, v in self.store.deployments.items() if k[0] != namespace}
        return 200, _status(200, "deleted")


def _status(code: int, message: str) -> dict:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure" if code >= 300 else "Success",
            "message": message, "code": code}


def _handler(store: Store, vcluster: Optional[FakeVCluster], tenants: dict[str, FakeVCluster]):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep test output clean
            pass

        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def do_GET(self):
            url = urlparse(self.path)
            query = {key: values[0] for key, values in parse_qs(url.query).items()}
            parts = url.path.strip("/").split("/")
            with store.lock:
                if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 5 and parts[4] == "pods":
                    items = [p for (ns, _), p in store.pods.items() if ns == parts[3]
                             and _matches(p, query.get("labelSelector", ""))]
                    return self._reply(200, {"kind": "PodList", "apiVersion": "v1", "items": items})
                if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 6 and parts[4] == "pods":
                    pod = store.pods.get((parts[3], parts[5]))
                    return self._reply(200, pod) if pod else self._reply(404, _status(404, "not found"))
                if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 5 and parts[4] == "events":
                    wanted = dict(term.split("=", 1) for term in query.get("fieldSelector", "").split(",") if term)
                    items = [e for e in store.events if e["involvedObject"]["namespace"] == parts[3]
                             and e["involvedObject"]["name"] == wanted.get("involvedObject.name")]
                    return self._reply(200, {"kind": "EventList", "apiVersion": "v1", "items": items})
            self._reply(404, _status(404, f"no fake route for GET {url.path}"))

        def do_POST(self):
            url = urlparse(self.path)
            parts, body = url.path.strip("/").split("/"), self._body()
            with store.lock:
                # The host stores nothing the smoke test sends: it may only ask, as the syncer, what would pass.
                if not vcluster and parts[:3] == ["api", "v1", "namespaces"] and parts[4:] == ["pods"] \
                        and parse_qs(url.query).get("dryRun") == ["All"] and parts[3] in tenants:
                    user = self.headers.get("Impersonate-User") or "kubernetes-admin"
                    return self._reply(*tenants[parts[3]].dry_run_host_pod(body, user))
                if vcluster and parts == ["api", "v1", "namespaces"]:
                    store.namespaces.add(body["metadata"]["name"])
                    return self._reply(201, body)
                if vcluster and parts[:3] == ["api", "v1", "namespaces"] and parts[4:] == ["pods"]:
                    return self._reply(*vcluster.create_pod(parts[3], body))
                if vcluster and parts[:4] == ["apis", "apps", "v1", "namespaces"] and parts[5:] == ["deployments"]:
                    return self._reply(*vcluster.create_deployment(parts[4], body))
            self._reply(405, _status(405, f"no fake route for POST {self.path}"))

        def do_DELETE(self):
            parts = urlparse(self.path).path.strip("/").split("/")
            self._body()
            with store.lock:
                if vcluster and parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4:
                    return self._reply(*vcluster.delete_namespace(parts[3]))
            self._reply(405, _status(405, f"no fake route for DELETE {self.path}"))

    return Handler


class Server:
    def __init__(self, store: Store, vcluster: Optional[FakeVCluster] = None,
                 tenants: Optional[dict[str, FakeVCluster]] = None):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(store, vcluster, tenants or {}))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def kubeconfig(self) -> str:
        server = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "fake",
                               "clusters": [{"name": "fake", "cluster": {"server": server}}],
                               "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                               "users": [{"name": "fake", "user": {"token": "fake-token"}}]})

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeSite:
    """The host and one vCluster per tenant, each behind its own server; ``outputs`` as the stack exports them."""

    def __init__(self, tenants: list[Tenant], **behaviour):
        self.host = Store()
        self.vclusters = {t.team.name: FakeVCluster(t, self.host, **behaviour) for t in tenants}
        by_namespace = {v.tenant.team.namespace: v for v in self.vclusters.values()}
        self.servers = {"host": Server(self.host, tenants=by_namespace)}
        self.servers.update({name: Server(v.store, v) for name, v in self.vclusters.items()})

    @property
    def outputs(self) -> dict:
        return {"hostKubeconfig": self.servers["host"].kubeconfig,
                "tenants": {name: {"namespace": v.tenant.team.namespace, "queue": v.tenant.team.queue_name,
                                   "vcluster": v.tenant.team.vcluster_name,
                                   "isolation": isolation_outputs(v.tenant.team)}
                            for name, v in self.vclusters.items()},
                "tenantKubeconfigs": {name: self.servers[name].kubeconfig for name in self.vclusters}}

    def close(self) -> None:
        for server in self.servers.values():
            server.close()
