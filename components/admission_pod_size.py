"""The bytes of free text a tenant pod's containers carry to the host: rule ``pod-size`` of the pod policy.

vCluster copies each container's env, command and args as the tenant wrote them (pods/translate/translator.go
``Translate`` deep-copies the pod, adds the Kubernetes and service-link variables and rewrites references), and the
API server bounds none of them but by the request's size, so a team's cluster-admin could write ``count/pods`` pods of
1.5 MiB (etcd's request limit) into the host's etcd. The other text of a pod is bounded already (labels and
annotations by ``metadata-size``, names and paths by the API server's validation) or by count only (tolerations,
selectors, volumes' items: short strings, as docs/security-model.md says under Sizes).
"""

from __future__ import annotations

from components.admission_devices import CONTAINER_LISTS
from components.admission_metadata import refusal
from config.model import Team
from config.synced_data import SYNCED_POD_TEXT_ITEMS, pod_text_bytes

# The text of a container that the tenant writes freely, as paths under it: lists of strings (its process's and each
# exec handler's: probes and lifecycle hooks run commands of their own) and lists of names with values (its env, and
# the headers of each HTTP handler).
HANDLERS = ("livenessProbe", "readinessProbe", "startupProbe", "lifecycle.postStart", "lifecycle.preStop")
STRING_LISTS = ("command", "args", *(f"{handler}.exec.command" for handler in HANDLERS))
NAMED_VALUE_LISTS = ("env", *(f"{handler}.httpGet.httpHeaders" for handler in HANDLERS))


def _present(container: str, path: str) -> str:
    """Every field on ``path`` under ``container`` is set (CEL's has() reads one field at a time)."""
    parts = path.split(".")
    return " && ".join(f"has({container}.{'.'.join(parts[:depth])})" for depth in range(1, len(parts) + 1))


def _strings(container: str, path: str, per_string: str) -> str:
    """``per_string`` (over ``s``) summed over the list at ``path``; 0 when it is absent."""
    field = f"{container}.{path}"
    return f"({_present(container, path)} ? {field}.map(s, {per_string}).sum() : 0)"


def _container_items(container: str) -> str:
    return " + ".join(f"({_present(container, path)} ? size({container}.{path}) : 0)"
                      for path in NAMED_VALUE_LISTS + STRING_LISTS)


def _container_bytes(container: str) -> str:
    """Names of env variables and headers are ASCII (the API server's validation); values and strings are any text,
    whose CEL size() counts characters, so their UTF-8 bytes are counted."""
    named = " + ".join(_strings(container, path, "size(s.name) + (has(s.value) ? size(bytes(s.value)) : 0)")
                       for path in NAMED_VALUE_LISTS)
    strings = " + ".join(_strings(container, path, "size(bytes(s))") for path in STRING_LISTS)
    return f"{named} + {strings}"


def _over_containers(obj: str, per_container: str) -> str:
    return " + ".join(f"(has({obj}.spec.{field}) ? {obj}.spec.{field}.map(c, {per_container}).sum() : 0)"
                      for field in CONTAINER_LISTS)


def _ephemeral(obj: str) -> str:
    field = f"{obj}.spec.ephemeralContainers"
    return f"(has({field}) ? size({field}) : 0)"


def pod_text_items(obj: str = "object") -> str:
    """How many env variables and strings ``obj``'s containers hold."""
    return _over_containers(obj, _container_items("c"))


def pod_text_bytes_of(obj: str = "object") -> str:
    """The bytes of ``obj``'s containers' env names and values and their strings."""
    return _over_containers(obj, _container_bytes("c"))


def pod_size(team: Team) -> dict:
    """Judged on CREATE and when ephemeral containers are added: the API server lets no other update change a
    container's env, command or args, so KAI's and the syncer's updates of an admitted pod (and of one from before the
    rule) pass unjudged.

    Cost: the API server stops one expression at 1,000,000 (k8s.io/apiserver pkg/apis/cel/config.go PerCallLimit) and
    refuses the pod then (failurePolicy Fail). cel-go (interpreter/runtimecost.go) charges 1 for each identifier,
    field, has(), size(), operator and call. The count comes first and ``&&`` stops there: a container costs about 250
    in it (the has() chains down to each of its thirteen lists, up to four fields deep, and their sizes; the list the
    map macro appends, 10). Past it, a string costs about 14 (its variable, bytes(), size(), the appended list, the
    sum) and an env variable or header about 22, plus a tenth of each character for bytes() rounded up: at most
    8,192 x 23 + 0.1 x 3 Mi characters (the API server's request limit, k8s.io/apiserver pkg/server/config.go
    MaxRequestBodyBytes) + 8,192, about 511,000, and about 500 a container for both passes: within the limit up to
    some 950 containers, far more than any pod runs."""
    cap = pod_text_bytes(team.vcluster)
    stated = team.vcluster.resource_quota.synced_pod_text_bytes
    unchanged = f"(request.operation == 'UPDATE' && {_ephemeral('object')} == {_ephemeral('oldObject')})"
    return refusal(
        "pod-size",
        f"{unchanged} || ({pod_text_items()} <= {SYNCED_POD_TEXT_ITEMS} && {pod_text_bytes_of()} <= {cap})",
        f"the env variables (names and values), commands and args (probes' and hooks' exec commands and HTTP headers "
        f"included) of a pod's containers vCluster copies to the host may hold at most {cap} bytes ({stated}, config "
        f"vcluster.resourceQuota.syncedPodTextBytes) in at most {SYNCED_POD_TEXT_ITEMS} variables and strings: every "
        "copy lands in the host's etcd, which turns the whole cluster read-only when full",
        "keep large configs out of env and args: put them in a ConfigMap mounted as a file (or in the image), or ask "
        "the platform team for a larger syncedPodTextBytes")
