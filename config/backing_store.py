"""Where a tenant's vCluster keeps its state, and what that puts in the tenant's host namespace. No Pulumi here.

The program renders the embedded SQLite store (``controlPlane.backingStore.database.embedded.enabled: true``); a
site may choose a deployed etcd (``backingStore.etcd.deploy``, a StatefulSet ``<name>-etcd`` in the namespace) or an
external one (``backingStore.etcd.external``) through ``extraValues``. What the vCluster chart then renders, read at v0.35.0 and
v0.36.1 (chart/templates/_backingstore.tpl, _persistence.tpl, statefulset.yaml, headless-service.yaml,
etcd-statefulset.yaml, etcd-service.yaml, etcd-headless-service.yaml, role.yaml, chart/values.yaml):

- more than one store enabled fails the chart (``vcluster.database.embedded.enabled``: "you can only enable one
  backingStore at the same time");
- more than one control-plane replica (``controlPlane.statefulSet.highAvailability.replicas``) grants the syncer
  writes on Leases in the host namespace (role.yaml), which no host policy checks, so it is refused; vCluster also
  refuses it on the embedded database (pkg/config/validation.go ValidateConfigAndSetDefaults);
- the control plane has its data volume (``persistence.volumeClaim.enabled: auto``) only on the embedded database,
  and is then a StatefulSet with a headless Service; otherwise a Deployment without either;
- a deployed etcd adds its replicas (each a claim of ``persistence.volumeClaim.size``), a Service (unless
  ``service.enabled`` is false) and a headless Service;
- ``persistence.volumeClaimTemplates`` (of the control plane, or of a deployed etcd) replaces the one claim template
  the chart renders (``data``) with the site's list, as it is; the control plane is then a StatefulSet on any store.
  Each pod still mounts a volume ``data`` (the syncer at /data, etcd at /var/lib/etcd), which only the list (or,
  for the control plane, ``persistence.dataVolume``) can then give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.key_types import Invalid, Quantity
from config.model import Team, VClusterSettings

# vCluster 0.35.0 and 0.36.1's defaults (chart/values.yaml).
VOLUME_SIZE = "5Gi"
ETCD_REQUESTS = {"cpu": "20m", "memory": "150Mi"}
_STORES = ("controlPlane.backingStore.etcd.deploy.enabled", "controlPlane.backingStore.etcd.external.enabled")
_EMBEDDED = "controlPlane.backingStore.database.embedded.enabled"
_REPLICAS = "controlPlane.statefulSet.highAvailability.replicas"
# A deployed etcd's objects are named after the release (vclusterName): StatefulSet `<name>-etcd`, whose name the
# StatefulSet controller puts in a 63-character pod label with an 11-character hash (at most 52), and the Service
# `<name>-etcd-headless` (a DNS label, at most 63).
ETCD_NAME_LENGTH = min(52 - len("-etcd"), 63 - len("-etcd-headless"))


def _value(values: dict, path: str, default: Any = None) -> Any:
    for key in path.split("."):
        values = values.get(key) if isinstance(values, dict) else None
    return default if values is None else values


# vCluster's names of its stores, in the order its ``Config.BackingStoreType`` tries them (config/config.go, the same
# from v0.35.0 to v0.36.1): the first enabled is the one it runs on, and none enabled is the embedded database.
STORE_TYPES = (("controlPlane.backingStore.etcd.embedded.enabled", "embedded-etcd"),
               ("controlPlane.backingStore.etcd.external.enabled", "external-etcd"),
               ("controlPlane.backingStore.etcd.deploy.enabled", "deployed-etcd"),
               (_EMBEDDED, "embedded-database"),
               ("controlPlane.backingStore.database.external.enabled", "external-database"))
EMBEDDED_DATABASE = "embedded-database"


def store_type(values: dict) -> str:
    """The store a vCluster of these Helm values runs on, as vCluster names it."""
    return next((name for path, name in STORE_TYPES if _value(values, path) is True), EMBEDDED_DATABASE)


@dataclass(frozen=True)
class ControlPlaneShape:
    """What the chart runs for one tenant's control plane (one replica: backing_store_findings), in its namespace."""
    volumes: tuple[str, ...]  # the size of each claim of the control plane's pod; none: a Deployment
    deployed_etcd: bool
    etcd_replicas: int
    etcd_volumes: tuple[str, ...]  # the size of each claim of one etcd pod
    etcd_services: int
    etcd_requests: dict
    # The claim templates' names (each claim is ``<name>-<statefulset>-<ordinal>``): the chart's ``data``, or the
    # site's own templates.
    claim_names: tuple[str, ...] = ("data",)
    etcd_claim_names: tuple[str, ...] = ("data",)

    @property
    def services(self) -> int:
        """The API Service, the synced kube-dns Service, the headless twin of a StatefulSet, and etcd's."""
        return 2 + bool(self.volumes) + self.etcd_services


def _templates(persistence: Any) -> list:
    """A ``persistence`` block's ``volumeClaimTemplates``: the site's list, which the chart renders instead of its own
    claim template when it is not empty."""
    templates = persistence.get("volumeClaimTemplates") if isinstance(persistence, dict) else None
    return templates if isinstance(templates, list) else []


def _claim_names(persistence: Any) -> tuple[str, ...]:
    return tuple(str(_value(template, "metadata.name")) for template in _templates(persistence)) or ("data",)


def _template_size(template: Any) -> Any:
    return _value(template, "spec.resources.requests.storage")


def _claim_sizes(persistence: Any, claimed: bool) -> tuple[str, ...]:
    """The size of each claim of a pod with this ``persistence`` block: its templates, else the chart's ``data``
    claim (of ``volumeClaim.size``) when ``claimed``."""
    templates = _templates(persistence)
    if templates:
        return tuple(str(_template_size(template)) for template in templates)
    claim = _value(persistence, "volumeClaim", {})
    return (str(claim.get("size", VOLUME_SIZE) if isinstance(claim, dict) else VOLUME_SIZE),) if claimed else ()


def control_plane_shape(settings: VClusterSettings) -> ControlPlaneShape:
    extra = settings.extra_values
    embedded = _value(extra, _EMBEDDED, True) is True and not any(_value(extra, path) is True for path in _STORES)
    persistence = _value(extra, "controlPlane.statefulSet.persistence", {})
    claim = _value(persistence, "volumeClaim", {})
    enabled = str(claim.get("enabled", "auto")).lower() if isinstance(claim, dict) else "auto"
    etcd = _value(extra, "controlPlane.backingStore.etcd.deploy", {})
    deployed = _value(etcd, "enabled") is True and _value(etcd, "statefulSet.enabled", True) is not False
    etcd_persistence = _value(etcd, "statefulSet.persistence", {})
    return ControlPlaneShape(
        volumes=_claim_sizes(persistence, enabled == "true" or (enabled == "auto" and embedded)),
        deployed_etcd=deployed,
        etcd_replicas=int(_value(etcd, "statefulSet.highAvailability.replicas", 1)) if deployed else 0,
        etcd_volumes=_claim_sizes(etcd_persistence, _value(etcd_persistence, "volumeClaim.enabled", True) is not False)
        if deployed else (),
        etcd_services=(1 + (_value(etcd, "service.enabled", True) is not False)) if _value(etcd, "enabled") is True
        else 0,
        etcd_requests={**ETCD_REQUESTS, **_value(etcd, "statefulSet.resources.requests", {})},
        claim_names=_claim_names(persistence), etcd_claim_names=_claim_names(etcd_persistence))


# The values the namespace's quota is computed from (control_plane_shape), each with what it must be.
_COUNTS = ("controlPlane.statefulSet.highAvailability.replicas",
           "controlPlane.backingStore.etcd.deploy.statefulSet.highAvailability.replicas")
_QUANTITIES = ("controlPlane.statefulSet.persistence.volumeClaim.size",
               "controlPlane.backingStore.etcd.deploy.statefulSet.persistence.volumeClaim.size",
               "controlPlane.backingStore.etcd.deploy.statefulSet.resources.requests.cpu",
               "controlPlane.backingStore.etcd.deploy.statefulSet.resources.requests.memory")
_TEMPLATES = ("controlPlane.statefulSet.persistence.volumeClaimTemplates",
              "controlPlane.backingStore.etcd.deploy.statefulSet.persistence.volumeClaimTemplates")
_SWITCHES = (*_STORES, _EMBEDDED, "controlPlane.backingStore.etcd.deploy.statefulSet.enabled",
             "controlPlane.backingStore.etcd.deploy.service.enabled",
             "controlPlane.backingStore.etcd.deploy.statefulSet.persistence.volumeClaim.enabled")


def _shape_values(extra: dict, whose: str) -> list[tuple[str, Any, str, str]]:
    """Values of the wrong type for what the chart makes of them: the quota would be computed from a guess."""
    found = []
    for path in _COUNTS:
        value = _value(extra, path)
        if value is not None and (type(value) is not int or value < 1):
            found.append((f"extraValues.{path}", value, f"is not a whole number of replicas for {whose} vCluster, "
                          "which the chart's schema asks for", "write a number such as 1 or 3, unquoted"))
    for path in _QUANTITIES:
        value = _value(extra, path)
        try:
            Quantity().parse(value, Quantity.fix) if value is not None else None
        except Invalid as invalid:
            found.append((f"extraValues.{path}", value, f"{invalid.problem}: the API server refuses {whose} "
                          "vCluster's objects that carry it", Quantity.fix))
    for path in _SWITCHES:
        value = _value(extra, path)
        if value is not None and not isinstance(value, bool):
            found.append((f"extraValues.{path}", value, "is not true or false: the chart's schema refuses it, and a "
                          "quoted \"false\" would read as on in its templates", "write true or false, unquoted"))
    for path in _TEMPLATES:
        for index, template in enumerate(_templates(_value(extra, path.rsplit(".", 1)[0]))):
            name, size = _value(template, "metadata.name"), _template_size(template)
            try:
                Quantity().parse(size, Quantity.fix)
                sized = True
            except Invalid:
                sized = False
            if not isinstance(name, str) or not name or not sized:
                found.append((f"extraValues.{path}[{index}]", template, "is not a claim template with a name "
                              "(metadata.name) and a size (spec.resources.requests.storage): the API server refuses "
                              f"{whose} vCluster's StatefulSet, and the namespace's quota is computed from the sizes",
                              "write e.g. {metadata: {name: data}, spec: {accessModes: [ReadWriteOnce], resources: "
                              "{requests: {storage: 5Gi}}}}"))
    return found


def _data_volume_findings(extra: dict, whose: str) -> list[tuple[str, Any, str, str]]:
    """Claim templates that leave a pod without the ``data`` volume its container mounts."""
    found = []
    etcd_claimed = _value(extra, "controlPlane.backingStore.etcd.deploy.statefulSet.persistence.volumeClaim.enabled",
                          True) is not False
    data_volume = _value(extra, "controlPlane.statefulSet.persistence.dataVolume", [])
    has_data_volume = isinstance(data_volume, list) and any(_value(v, "name") == "data" for v in data_volume)
    mounts = ((_TEMPLATES[0], "control plane's container (the syncer) mounts the volume data at /data",
               not has_data_volume),
              (_TEMPLATES[1], "deployed etcd's container mounts the volume data at /var/lib/etcd", etcd_claimed))
    for path, pod, needs_template in mounts:
        templates = _templates(_value(extra, path.rsplit(".", 1)[0]))
        if templates and needs_template and not any(_value(t, "metadata.name") == "data" for t in templates):
            found.append((f"extraValues.{path}", templates, f"replaces the chart's own claim template data, and "
                          f"{whose} {pod}: without a template of that name the pod has no such volume and the API "
                          "server refuses the StatefulSet", "add a template named data (the chart's own is 5Gi, "
                          "ReadWriteOnce), or remove volumeClaimTemplates"))
    return found


def backing_store_findings(settings: VClusterSettings, whose: str) -> list[tuple[str, Any, str, str]]:
    """A choice of store the chart or vCluster refuses: (key under the vcluster block, value, problem, fix)."""
    extra = settings.extra_values
    found = _shape_values(extra, whose)
    if found:
        return found
    found = _data_volume_findings(extra, whose)
    chosen = [path for path in _STORES if _value(extra, path) is True]
    if chosen and _value(extra, _EMBEDDED, True) is True:
        found.append((f"extraValues.{chosen[0]}", True,
                      f"the embedded SQLite store the program renders for {whose} vCluster ({_EMBEDDED}: true) stays "
                      "on too, and the vCluster chart renders one backing store only (\"you can only enable one "
                      "backingStore at the same time\"): the release would fail",
                      f"also set extraValues.{_EMBEDDED} to false in the same vcluster block"))
    replicas = _value(extra, _REPLICAS, 1)
    if replicas > 1:
        found.append((f"extraValues.{_REPLICAS}", replicas,
                      f"with several replicas the chart grants {whose} syncer writes on Leases in the host namespace "
                      "for leader election (chart/templates/role.yaml), a kind no host policy checks; on the "
                      "program's SQLite store vCluster also refuses to start (\"embedded database is not supported "
                      "with multiple replicas\")", "remove it (one replica)"))
    return found


def etcd_name_findings(index: int, team: Team) -> list[tuple[str, Any, str, str]]:
    """A vclusterName too long for the objects of the team's deployed etcd: (full key, value, problem, fix)."""
    if not control_plane_shape(team.vcluster).deployed_etcd or len(team.vcluster_name) <= ETCD_NAME_LENGTH:
        return []
    return [(f"teams[{index}].vclusterName", team.vcluster_name,
             f"is {len(team.vcluster_name)} characters long, and the team's deployed etcd is named after it: its "
             f"StatefulSet {team.vcluster_name}-etcd would make no pods (the controller's pod label takes at most a "
             f"52-character name) and the API server refuses its Service {team.vcluster_name}-etcd-headless",
             f"set teams[{index}].vclusterName to at most {ETCD_NAME_LENGTH} characters")]
