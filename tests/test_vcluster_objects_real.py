"""The attack tests' synced Services, Endpoints, EndpointSlices, claims, ConfigMaps and Secrets, held against
vCluster's own syncers running (tests/vcluster_real.py).

The synced-object attack tests build each host object with ``tests/synced_objects_sim.py``. Here the same virtual
objects (tests/synced_objects_corpus.py) go through vCluster's real code at the pinned tag, configured by the Helm
values the program renders for each team of the committed stacks: a Service CREATE through the API proxy's
``createService``, every other object (and a Service whose host copy is missing) through its syncer's
``SyncToHost``, and a tenant's edits through ``Sync``. The host objects must equal the simulation's but for
``NOT_MODELLED`` (each with why no host policy decision depends on it); a new difference fails. For the first team
of each stack, the host policy must also judge the real host objects as it judges the simulated ones.
"""

from __future__ import annotations

import copy
import functools

import pytest
import yaml

from config import versions
from config.merge import deep_merge
from tests.conftest import dev_config, git, mirrored_tag
from tests.synced_objects_corpus import SELECTOR_LESS, edits, hostile_objects, honest_objects
from tests.synced_objects_sim import VIRTUAL_UID, allocated, synced_objects_admission_for
from tests.tenant_sim import platform_of
from tests.test_synced_objects_admission import ALLOCATED_IP, Synced, defaulted, endpoint_slice, endpoints, service
from tests.test_vcluster_sync_real import stack  # noqa: F401 (a fixture)
from tests.vcluster_real import (
    DNS_IP, KUBE_IP, VCLUSTER, as_go_writes, differences, listed, run_syncer, team_values, verdict_differences,
)
from tests.vcluster_volumes import VIRTUAL_TOKEN

TAG = f"v{versions.VCLUSTER_VERSION}"

# Host object fields (dotted paths, a regular expression each) the simulation does not model, and why no host
# policy decision depends on them.
NOT_MODELLED: dict[str, str] = {}


def stored(obj: dict) -> dict:
    """The virtual object as the virtual API server hands it to vCluster: in a namespace, with its uid."""
    virtual = copy.deepcopy(obj)
    virtual["metadata"].setdefault("namespace", "default")
    virtual["metadata"]["uid"] = VIRTUAL_UID
    return virtual


def normalized(obj: dict) -> dict:
    """``obj`` without what the fake API server stamps and the status, numbers and empty maps as Go writes them."""
    obj = copy.deepcopy(obj)
    # The type meta stays: the harness answers it as the API server does, and the simulation must write the same.
    obj.pop("status", None)
    for key in ("creationTimestamp", "resourceVersion", "uid", "generation"):
        obj["metadata"].pop(key, None)
    return as_go_writes(obj)


def unexplained(real: dict, simulated: dict) -> list[str]:
    return [found for found in differences(normalized(real), normalized(simulated)) if not listed(found, NOT_MODELLED)]


def _run(program, team, **batch) -> dict:
    """vCluster's code for ``team`` of ``program`` on ``batch``, the virtual cluster holding the selector-less
    Services the corpus's Endpoints and slices belong to."""
    return run_syncer(TAG, name=team.vcluster_name, namespace=team.namespace, values=team_values(program, team.name),
                      kube_ip=KUBE_IP, dns_ip=DNS_IP, token=VIRTUAL_TOKEN,
                      namespaces=[{"metadata": {"name": "default",
                                                "labels": {"kubernetes.io/metadata.name": "default"}}}],
                      services=[stored(service(name)) for name in SELECTOR_LESS], **batch)


def created(program, team, corpus) -> list[tuple[str, dict, dict, dict]]:
    """For each corpus object of ``team``: its name, what vCluster's code answered, the simulated host object and
    the virtual object."""
    objects = {name: (kind, stored(virtual), via, simulate) for name, (kind, virtual, via, simulate)
               in corpus(team).items()}
    real = _run(program, team, objects=[{"kind": kind, "object": virtual, "via": via}
                                        for kind, virtual, via, _ in objects.values()])["objectsCreated"]
    return [(name, answer, simulate(virtual, team), virtual)
            for (name, (_, virtual, _, simulate)), answer in zip(objects.items(), real)]


def teams(config) -> list:
    return platform_of(config).teams


def synced_both_ways(program, config, corpus) -> list[str]:
    found = []
    for team in teams(config):
        for name, answer, simulated, _ in created(program, team, corpus):
            if "host" not in answer:
                found.append(f"{team.name} {name}: vCluster wrote no host object: {answer}")
                continue
            found += [f"{team.name} {name}: {line}" for line in unexplained(answer["host"], simulated)]
    return found


@pytest.mark.parametrize("corpus", [honest_objects, hostile_objects], ids=["honest", "hostile"])
def test_the_objects_sync_as_vclusters_code_syncs_them(stack, corpus):
    program, config = stack
    assert synced_both_ways(program, config, corpus) == []


def edited(program, team) -> list[tuple[str, dict, dict, str]]:
    """For each edit of ``team``: its name, what vCluster's Sync made of the host object (created by SyncToHost
    from the object before the edit), the simulated host object after the edit, and the kind."""
    changes = {name: (kind, stored(before), stored(after), simulate)
               for name, (kind, before, after, simulate) in edits(team).items()}
    hosts = _run(program, team, objects=[{"kind": kind, "object": before, "via": "syncer"}
                                         for kind, before, _, _ in changes.values()])["objectsCreated"]
    updates = [{"kind": kind, "host": host["host"], "virtualOld": before, "virtual": after}
               for (kind, before, after, _), host in zip(changes.values(), hosts)]
    real = _run(program, team, object_updates=updates)["objectsUpdated"]
    return [(name, answer, simulate(update["host"], update["virtual"], team), kind)
            for (name, (kind, _, _, simulate)), update, answer in zip(changes.items(), updates, real)]


def test_a_tenants_edits_reach_the_host_as_vclusters_syncers_carry_them(stack):
    program, config = stack
    found = []
    for team in teams(config):
        for name, answer, simulated, _ in edited(program, team):
            if "host" not in answer:
                found.append(f"{team.name} {name}: vCluster left no host object: {answer}")
                continue
            found += [f"{team.name} {name}: {line}" for line in unexplained(answer["host"], simulated)]
    assert found == []


def judged(tenant: Synced, host: dict, kind: str, old: dict = None) -> set[str]:
    """The rules the host policy refuses ``host`` (a ``kind``) by, as the host API server hands it over: a Service
    with the addresses and node ports its allocator gives, a claim with the default class."""
    messages = tenant.update(as_handed_over(tenant, old, kind), as_handed_over(tenant, host, kind)) if old \
        else tenant.create(as_handed_over(tenant, host, kind))
    return {message[1:message.index("]")] for message in messages}


def as_handed_over(tenant: Synced, obj: dict, kind: str) -> dict:
    return allocated(obj, ALLOCATED_IP) if kind == "Service" else defaulted(tenant, obj) \
        if kind == "PersistentVolumeClaim" else obj


def verdicts(program, config, corpus) -> list[str]:
    """For the stack's first team: each corpus object whose host copy from vCluster's code the host policy judges
    otherwise than the simulated copy."""
    team = teams(config)[0]
    tenant = Synced(synced_objects_admission_for(program, team.name), team)
    return verdict_differences(team.name, "object", [
        (name, answer, simulated, functools.partial(judged, tenant, kind=virtual["kind"]))
        for name, answer, simulated, virtual in created(program, team, corpus)])


@pytest.mark.parametrize("corpus", [honest_objects, hostile_objects], ids=["honest", "hostile"])
def test_the_host_policy_judges_the_real_host_objects_as_the_simulated_ones(stack, corpus):
    program, config = stack
    assert verdicts(program, config, corpus) == []


def test_the_host_policy_judges_the_real_edits_as_the_simulated_ones(stack):
    program, config = stack
    team = teams(config)[0]
    tenant = Synced(synced_objects_admission_for(program, team.name), team)
    before = {name: stored(obj) for name, (_, obj, _, _) in edits(team).items()}
    hosts = _run(program, team, objects=[{"kind": kind, "object": before[name], "via": "syncer"}
                                         for name, (kind, _, _, _) in edits(team).items()])["objectsCreated"]
    assert verdict_differences(team.name, "object after the edit", [
        (name, answer, simulated, functools.partial(judged, tenant, kind=kind, old=host["host"]))
        for (name, answer, simulated, kind), host in zip(edited(program, team), hosts)]) == []


def test_vcluster_leaves_a_selector_services_endpoints_to_the_host(dev_run):
    """The simulation syncs every Endpoints and slice it is given; vCluster syncs only a selector-less Service's
    (``ReconcileStart``), so the corpus holds only those, and a selector Service's get no host copy from vCluster."""
    team = teams(dev_config())[0]
    web = endpoints("203.0.113.10")
    web["metadata"]["name"] = "web"
    web_slice = endpoint_slice("203.0.113.10")
    web_slice["metadata"]["labels"]["kubernetes.io/service-name"] = "web"
    answers = run_syncer(TAG, name=team.vcluster_name, namespace=team.namespace, values=team_values(dev_run, team.name),
                         kube_ip=KUBE_IP, dns_ip=DNS_IP, token=VIRTUAL_TOKEN,
                         services=[stored(service("web", selector={"app": "web"})), stored(service("db"))],
                         objects=[{"kind": kind, "object": stored(obj), "via": "syncer"} for kind, obj in (
                             ("Endpoints", web), ("EndpointSlice", web_slice), ("Endpoints", endpoints("8.8.8.8")),
                             ("EndpointSlice", endpoint_slice("8.8.8.8")))])["objectsCreated"]
    assert [answer.get("skipped") for answer in answers] == ["ReconcileStart", "ReconcileStart", None, None]


# The kinds the corpus syncs through vCluster's code (sync.toHost keys), pods by tests/test_vcluster_sync_real.py.
RUN_KINDS = {"pods", "services", "endpoints", "endpointSlices", "persistentVolumeClaims", "configMaps", "secrets"}


def test_every_kind_a_team_syncs_to_the_host_is_run(stack):
    """The kinds the chart's defaults under the team's values sync to the host are those these tests run: a site
    that turns on another (ingresses, network policies...) needs its syncer run here first."""
    program, config = stack
    chart = yaml.safe_load(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, TAG)}:chart/values.yaml"))
    for team in teams(config):
        to_host = deep_merge(chart["sync"]["toHost"], team_values(program, team.name).get("sync", {}).get("toHost", {}))
        enabled = {kind for kind, setting in to_host.items()
                   if isinstance(setting, dict) and setting.get("enabled") is True}
        assert enabled == RUN_KINDS, team.name
