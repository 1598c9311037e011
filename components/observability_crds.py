"""kube-prometheus-stack's CRDs follow the chart: its CRD upgrade hook (``crds.upgradeJob``), with pinned images.

Helm installs the files of a chart's ``crds/`` folder on the first install only. The chart's upgrade hook (the
``crds`` subchart's ``templates/upgrade``, the same at every accepted release) runs before each install, upgrade
and rollback: a ConfigMap carries the chart's CRDs (``files/crds.bz2``, the same CRDs as its ``crds/`` folder), an
init container unpacks them with busybox's ``bzcat``, and a kubectl container applies them with
``kubectl apply --server-side --force-conflicts``: server-side so a CRD of megabytes fits (a client-side apply
keeps the whole object in an annotation, which is limited to 256 KiB), forced so the hook takes over the fields
Helm wrote at the first install. Its service account's ClusterRole may write only those CRDs (by name).

The chart's defaults pull ``busybox:latest`` and a kubectl tagged as the cluster's Kubernetes: here both are
pinned in config/versions.py, kubectl per the Kubernetes the site states (within one minor of its API server) and
by digest, which the hook's ``sha`` value carries.
Its pod passes the ``restricted`` Pod Security level as the chart sets it (non-root 65534, no privilege
escalation, every capability dropped, read-only root, RuntimeDefault seccomp); the program adds requests and
limits, and a writable ``HOME`` for kubectl's discovery cache (the chart's ``/tmp`` emptyDir).
"""

from __future__ import annotations

from config import versions
from config.mirrors import Mirrors

# kubectl parses the ~4.5 MB of CRD YAML into memory before sending it.
RESOURCES = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
# The chart mounts an emptyDir at /tmp in both containers.
WRITABLE_HOME = "/tmp"


def chart_image(reference: str) -> dict:
    """``registry/repository:tag[@sha256:hex]`` as the chart's ``registry``, ``repository``, ``tag`` and ``sha``
    values: the hook names ``<registry>/<repository>:<tag>@sha256:<sha>`` when ``sha`` is set."""
    name, _, digest = reference.partition("@")
    registry, _, rest = name.partition("/")
    repository, _, tag = rest.rpartition(":")
    values = {"registry": registry, "repository": repository, "tag": tag}
    if digest:  # sha256, as tests/test_kubectl_skew.py checks every pin is
        values["sha"] = digest.removeprefix("sha256:")
    return values


def crd_upgrade_values(kubectl_image: str, mirrors: Mirrors) -> dict:
    """The ``crds`` values of the kube-prometheus-stack release; ``kubectl_image`` is the site's kubectl
    (config/model.py Platform.kubectl_image, under the site's mirror)."""
    return {"upgradeJob": {
        "enabled": True,
        "forceConflicts": True,
        "image": {"busybox": chart_image(mirrors.image(versions.CRD_UPGRADE_UNPACK_IMAGE)),
                  "kubectl": chart_image(kubectl_image)},
        "resources": RESOURCES,
        "env": {"HOME": WRITABLE_HOME},
    }}
