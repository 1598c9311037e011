"""Every field of a tenant's pod that vCluster copies to the host, and what keeps it harmless there.

vCluster's syncer deep-copies the virtual pod and rewrites a handful of fields (pods/translate/translator.go
``Translate``); everything else reaches the host API server, the kubelet and the host's controllers as the tenant
wrote it. So each field of the pod spec and of the objects below it that can name something outside the pod (a host
address, a node's resource or privilege, a host object a controller acts on) is classified here, once:

- ``refused``: the host policy named refuses it on every tenant pod;
- ``constrained``: the rule named lets through only what the platform can explain;
- ``pod-security``: the namespace's Pod Security level (``vcluster.podSecurity``, baseline unless a team picks
  privileged, which the config warns gives away the node) refuses the values that reach the node, by the control named;
- ``rewritten``: the translator function named rewrites it at every accepted vCluster release;
- ``harmless``: the reason says why, as copied;
- ``nested``: an object whose own fields are classified under the name given.

tests/test_pod_fields_contract.py fails on a field of any accepted Kubernetes that is not here, reads each rewrite
from the translator's source at every accepted vCluster tag and each Pod Security control from its check at every
accepted Kubernetes, and attacks with every refused and constrained field as the syncer writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.admission_devices import SCHEDULED_LISTS, every_container
from components.admission_metadata import refusal
from config.model import Team
from config.synced_data import SYNCED_POD_TOLERATIONS

REFUSED, CONSTRAINED, POD_SECURITY, REWRITTEN, HARMLESS, NESTED = (
    "refused", "constrained", "pod-security", "rewritten", "harmless", "nested")
# Fields naming host objects that the host's controllers act on for the pod, where the platform offers nothing:
# no DRA driver (and vCluster's claim syncs stay off, config/virtual_cluster.py), no Workload or PodGroup objects of
# the kube-scheduler (KAI schedules every pod), no eviction responders.
HOST_CONTROLLER_FIELDS = ("workloadRef", "schedulingGroup", "evictionResponders")


@dataclass(frozen=True)
class Verdict:
    kind: str
    by: str  # the rule, the Pod Security control, the translator function or the nested object
    reason: str


def refused(rule: str, reason: str) -> Verdict:
    return Verdict(REFUSED, rule, reason)


def constrained(rule: str, reason: str) -> Verdict:
    return Verdict(CONSTRAINED, rule, reason)


def pod_security(control: str, reason: str) -> Verdict:
    return Verdict(POD_SECURITY, control, reason)


def rewritten(function: str, reason: str) -> Verdict:
    return Verdict(REWRITTEN, function, reason)


def harmless(reason: str) -> Verdict:
    return Verdict(HARMLESS, "", reason)


def nested(definition: str) -> Verdict:
    return Verdict(NESTED, definition, f"each field of {definition} is classified")


PLACEMENT = "where the pod runs only: KAI charges the team's queue wherever it places it, and every rule holds on " \
            "any node"
OWN_PROCESS = "shapes the container's own process, inside its namespaces, capabilities and seccomp profile"
OWN_IDENTITY = ("the container's own user and groups: baseline lets root run inside the container, confined by its "
                "capabilities and seccomp profile; the node's files are reached only through volumes "
                "volume-sources refuses (restricted refuses root besides)")
NAMES_POD_ITSELF = "addresses the pod itself (the kubelet dials the pod's IP)"

POD_SPEC = {
    "activeDeadlineSeconds": harmless("ends the pod's own run sooner"),
    "affinity": nested("Affinity"),
    "automountServiceAccountToken": rewritten("Translate", "set false: the host pod gets no host token"),
    "containers": nested("Container"),
    "dnsConfig": harmless("the pod's own resolv.conf; its queries leave from the pod's network, under the team's "
                          "NetworkPolicy (the syncer merges the virtual cluster's DNS for ClusterFirst)"),
    "dnsPolicy": harmless("which resolv.conf the pod gets (Default: the node's resolvers, queried from the pod's "
                          "network under the team's NetworkPolicy); the syncer turns ClusterFirst into None"),
    "enableServiceLinks": rewritten("Translate", "set false: no host Service variables"),
    "ephemeralContainers": nested("EphemeralContainer"),
    "evictionResponders": refused("host-controllers", "names responders that host controllers run for the pod's "
                                                      "evictions; the platform offers none"),
    "hostAliases": harmless("lines of the pod's own /etc/hosts"),
    "hostIPC": pod_security("Host Namespaces", "the node's IPC namespace"),
    "hostNetwork": pod_security("Host Namespaces", "the node's network, past every NetworkPolicy"),
    "hostPID": pod_security("Host Namespaces", "the node's processes"),
    "hostUsers": harmless("false puts the pod in a user namespace of its own, which only narrows it"),
    "hostname": harmless("the pod's own hostname"),
    "hostnameOverride": harmless("the pod's own hostname as it sees it; no DNS record, and the API server refuses "
                                 "it with hostNetwork"),
    "imagePullSecrets": rewritten("Translate", "renamed to Secrets of the tenant's host namespace"),
    "initContainers": nested("Container"),
    "nodeName": constrained("node-name", "a pod created on a node skips KAI and every queue"),
    "nodeSelector": harmless(PLACEMENT),
    "os": harmless("only selects which API validation and Pod Security checks apply"),
    "overhead": harmless("the API server's RuntimeClass admission sets it from the RuntimeClass or refuses the pod; "
                         "KAI charges the queue for it"),
    "preemptionPolicy": harmless("read by the kube-scheduler's preemption, which never runs for KAI's pods"),
    "priority": rewritten("Translate", "cleared: the config refuses priority-class syncs both ways "
                                       "(config/virtual_cluster.py)"),
    "priorityClassName": rewritten("Translate", "as priority"),
    "readinessGates": harmless("conditions the pod's own readiness waits for"),
    "resourceClaims": refused("resource-claims", "copied with the tenant's claim and template names (translateResourceClaims "
                                                 "renames them only with claim sync, which the program keeps off) and "
                                                 "allocated by the host's DRA drivers outside KAI's queues; the "
                                                 "platform offers no DRA"),
    "resources": refused("pod-resources", "the kubelet reserves it on the node while KAI charges only the "
                                          "containers' requests"),
    "restartPolicy": harmless("restarts of the pod's own containers"),
    "runtimeClassName": constrained("runtime-class", "the nvidia runtime only with a GPU allocation"),
    "schedulerName": constrained("own-queue", "KAI, in the team's queue"),
    "schedulingGates": harmless("keeps the pod unscheduled, charged nothing, until the gates are removed"),
    "schedulingGroup": refused("host-controllers", "names a host PodGroup the kube-scheduler and its controllers act "
                                                   "on; KAI schedules every pod"),
    "securityContext": nested("PodSecurityContext"),
    "serviceAccount": rewritten("Translate", "cleared; the host pod runs as vCluster's workload account"),
    "serviceAccountName": rewritten("Translate", "vCluster's workload account of the host namespace"),
    "setHostnameAsFQDN": harmless("the pod's own hostname"),
    "shareProcessNamespace": harmless("the pod's own containers see each other's processes"),
    "subdomain": rewritten("Translate", "cleared; the syncer rewrites the pod's /etc/hosts instead"),
    "terminationGracePeriodSeconds": constrained(
        "grace-period", "at most the team's vcluster.maxTerminationGracePeriodSeconds: KAI reclaims a GPU for another "
                        "team by deleting the pod, which keeps the GPU for its grace period"),
    "tolerations": constrained("tolerations", f"at most {SYNCED_POD_TOLERATIONS} of the pod's own, on CREATE and when an update adds some: "
                                              "the API server bounds each, not their number, and the syncer copies "
                                              "later ones; which taints they tolerate is placement only ("
                                              + PLACEMENT + ")"),
    "topologySpreadConstraints": rewritten("translateTopologySpreadConstraints",
                                           "the selector counts only the vCluster's pods of the pod's namespace"),
    "volumes": constrained("volume-sources", "components/admission_volumes.py, by kind; how many, rule volumes "
                                             "(components/admission_pod_size.py)"),
    "workloadRef": refused("host-controllers", "names a host Workload the kube-scheduler groups the pod by; KAI "
                                               "schedules every pod"),
}

CONTAINER = {
    "args": harmless(OWN_PROCESS),
    "command": harmless(OWN_PROCESS),
    "env": constrained("device-env", "device lists, toolkit features and HAMi-core's variables are the platform's "
                                     "(device-features, memory-limit besides); each valueFrom is an EnvVarSource"),
    "envFrom": nested("EnvFromSource"),
    "image": constrained("image-registry", "a site's allowed registries (vcluster.allowedRegistries), pulled on "
                                           "start with vcluster.alwaysPullImages (image-pull-policy)"),
    "imagePullPolicy": constrained("image-pull-policy", "Always, with vcluster.alwaysPullImages"),
    "lifecycle": nested("Lifecycle"),
    "livenessProbe": nested("Probe"),
    "name": harmless("names the container within the pod"),
    "ports": nested("ContainerPort"),
    "readinessProbe": nested("Probe"),
    "resizePolicy": harmless("whether an in-place resize restarts the container"),
    "resources": nested("ResourceRequirements"),
    "restartPolicy": harmless("Always makes an init container a sidecar of the pod"),
    "restartPolicyRules": harmless("restarts of the container on its own exit codes"),
    "securityContext": nested("SecurityContext"),
    "startupProbe": nested("Probe"),
    "stdin": harmless("the container's own terminal"),
    "stdinOnce": harmless("the container's own terminal"),
    "terminationMessagePath": harmless("a file of the container's own the kubelet reads its message from"),
    "terminationMessagePolicy": harmless("where the container's own message comes from"),
    "tty": harmless("the container's own terminal"),
    "volumeDevices": harmless("a block volume of the pod's own claim (volumes are constrained)"),
    "volumeMounts": nested("VolumeMount"),
    "workingDir": harmless(OWN_PROCESS),
}
EPHEMERAL_CONTAINER = {**CONTAINER, "targetContainerName": harmless("shares a process namespace of the same pod")}

POD_SECURITY_CONTEXT = {
    "appArmorProfile": pod_security("AppArmor", "an unconfined profile lifts the node's confinement"),
    "fsGroup": harmless(OWN_IDENTITY),
    "fsGroupChangePolicy": harmless("how the kubelet relabels the pod's own volumes"),
    "runAsGroup": harmless(OWN_IDENTITY),
    "runAsNonRoot": harmless(OWN_IDENTITY),
    "runAsUser": harmless(OWN_IDENTITY),
    "seLinuxChangePolicy": harmless("how the pod's own volumes are relabelled"),
    "seLinuxOptions": pod_security("SELinux", "another type, user or role lifts the node's confinement"),
    "seccompProfile": pod_security("Seccomp", "Unconfined opens every system call of the node's kernel"),
    "supplementalGroups": harmless(OWN_IDENTITY),
    "supplementalGroupsPolicy": harmless(OWN_IDENTITY),
    "sysctls": pod_security("Sysctls", "unsafe sysctls change the node's kernel"),
    "windowsOptions": pod_security("HostProcess", "a HostProcess container is the Windows node itself"),
}
SECURITY_CONTEXT = {
    "allowPrivilegeEscalation": harmless("setuid binaries inside the container, within its capabilities (restricted "
                                         "refuses it besides)"),
    "appArmorProfile": POD_SECURITY_CONTEXT["appArmorProfile"],
    "capabilities": pod_security("Capabilities", "capabilities beyond the runtime's defaults reach the node's kernel"),
    "privileged": pod_security("Privileged Containers", "every device and capability of the node"),
    "procMount": pod_security("/proc Mount Type", "an unmasked /proc shows the node's kernel settings"),
    "readOnlyRootFilesystem": harmless("only narrows the container"),
    "runAsGroup": harmless(OWN_IDENTITY),
    "runAsNonRoot": harmless(OWN_IDENTITY),
    "runAsUser": harmless(OWN_IDENTITY),
    "seLinuxOptions": POD_SECURITY_CONTEXT["seLinuxOptions"],
    "seccompProfile": POD_SECURITY_CONTEXT["seccompProfile"],
    "windowsOptions": POD_SECURITY_CONTEXT["windowsOptions"],
}
RESOURCE_REQUIREMENTS = {
    "claims": refused("resource-claims", "names the pod's resourceClaims, which the platform refuses"),
    "limits": constrained("gpu-kinds", "KAI charges the queue for them and the quota and LimitRange bound them; one "
                                       "kind of GPU per pod (the isolation tiers' rules besides)"),
    "requests": constrained("gpu-kinds", "as limits"),
}
CONTAINER_PORT = {
    "containerPort": harmless("a port of the pod's own address"),
    "hostIP": harmless("binds nothing without a hostPort"),
    "hostPort": pod_security("Host Ports", "a port of the node's address"),
    "name": harmless("names the port within the pod"),
    "protocol": harmless("a port of the pod's own address"),
}
VOLUME_MOUNT = {
    "bindMountOptions": harmless("noexec, nodev and nosuid only narrow the mount"),
    "mountPath": constrained("device-paths", "not where the container toolkit reads device lists (hami-core's own "
                                             "path for a memory-capped team)"),
    "mountPropagation": harmless("Bidirectional needs a privileged container; HostToContainer shows the node's later "
                                 "mounts under a volume of an allowed kind only"),
    "name": harmless("names one of the pod's own volumes"),
    "readOnly": harmless("only narrows the mount"),
    "recursiveReadOnly": harmless("only narrows the mount"),
    "subPath": harmless("a path inside the pod's own volume; the kubelet refuses one that leaves it"),
    "subPathExpr": harmless("a path inside the pod's own volume; the kubelet refuses one that leaves it"),
}
PROBE = {
    "exec": harmless("runs in the container"),
    "failureThreshold": harmless("the pod's own restarts"),
    "grpc": harmless(NAMES_POD_ITSELF + ": a port and a service name, no host"),
    "httpGet": nested("HTTPGetAction"),
    "initialDelaySeconds": harmless("the pod's own restarts"),
    "periodSeconds": harmless("the pod's own restarts"),
    "successThreshold": harmless("the pod's own readiness"),
    "tcpSocket": nested("TCPSocketAction"),
    "terminationGracePeriodSeconds": harmless("the grace of the container's own restart; eviction uses the pod's"),
    "timeoutSeconds": harmless("the pod's own restarts"),
}
LIFECYCLE = {
    "postStart": nested("LifecycleHandler"),
    "preStop": nested("LifecycleHandler"),
    "stopSignal": harmless("the signal the container's own process gets"),
}
LIFECYCLE_HANDLER = {
    "exec": PROBE["exec"],
    "httpGet": nested("HTTPGetAction"),
    "sleep": harmless("bounded by the pod's grace period"),
    "tcpSocket": nested("TCPSocketAction"),
}
HTTP_GET_ACTION = {
    "host": constrained("probe-host", "the kubelet would dial the host from the node, past the team's NetworkPolicy"),
    "httpHeaders": harmless("headers of a request " + NAMES_POD_ITSELF),
    "path": harmless(NAMES_POD_ITSELF),
    "port": harmless(NAMES_POD_ITSELF),
    "protocol": harmless(NAMES_POD_ITSELF),
    "scheme": harmless(NAMES_POD_ITSELF),
}
TCP_SOCKET_ACTION = {"host": HTTP_GET_ACTION["host"], "port": harmless(NAMES_POD_ITSELF)}
ENV_VAR_SOURCE = {
    "configMapKeyRef": rewritten("TranslateContainerEnv", "renamed to a ConfigMap of the tenant's host namespace"),
    "fieldRef": rewritten("translateDownwardAPI", "label, name, namespace and uid paths point at the host pod's copies "
                                               "of the virtual pod's; the rest are the pod's own fields"),
    "fileKeyRef": harmless("a file of one of the pod's own emptyDir volumes"),
    "resourceFieldRef": harmless("the container's own requests and limits"),
    "secretKeyRef": rewritten("TranslateContainerEnv", "renamed to a Secret of the tenant's host namespace"),
}
ENV_FROM_SOURCE = {
    "configMapRef": ENV_VAR_SOURCE["configMapKeyRef"],
    "prefix": constrained("gpu-env-from", "no source without a prefix may spell a device list in a GPU container "
                                          "(memory-limit besides)"),
    "secretRef": ENV_VAR_SOURCE["secretKeyRef"],
}
AFFINITY = {
    "nodeAffinity": harmless(PLACEMENT),
    "podAffinity": rewritten("translatePodAffinity", "each term selects only the vCluster's pods of the host "
                                                     "namespace: its namespaces become a label selector"),
    "podAntiAffinity": rewritten("translatePodAffinity", "as podAffinity"),
}

# Schema definition (io.k8s.api.core.v1.<name>) -> field -> verdict. The depth: every object whose fields can name
# an address, a node's resource or privilege, or an object outside the pod; objects of plain values (tolerations,
# host aliases, DNS options, scheduling gates) are judged whole by their field above.
POD_FIELDS: dict[str, dict[str, Verdict]] = {
    "PodSpec": POD_SPEC, "Container": CONTAINER, "EphemeralContainer": EPHEMERAL_CONTAINER,
    "PodSecurityContext": POD_SECURITY_CONTEXT, "SecurityContext": SECURITY_CONTEXT,
    "ResourceRequirements": RESOURCE_REQUIREMENTS, "ContainerPort": CONTAINER_PORT, "VolumeMount": VOLUME_MOUNT,
    "Probe": PROBE, "Lifecycle": LIFECYCLE, "LifecycleHandler": LIFECYCLE_HANDLER, "HTTPGetAction": HTTP_GET_ACTION,
    "TCPSocketAction": TCP_SOCKET_ACTION, "EnvVarSource": ENV_VAR_SOURCE, "EnvFromSource": ENV_FROM_SOURCE,
    "Affinity": AFFINITY,
}


# --- the rules of this module's own ----------------------------------------------------------------------------


def _absent(field: str) -> str:
    return f"(!has(object.spec.{field}) || size(object.spec.{field}) == 0)"


def _unchanged(field: str) -> str:
    """A field the pod had from its creation keeps its value (an old pod keeps its KAI and syncer updates)."""
    return f"(!has(object.spec.{field}) || (has(oldObject.spec.{field}) && object.spec.{field} == oldObject.spec.{field}))"


def _resource_claims() -> dict:
    no_claims = every_container(SCHEDULED_LISTS, "!has(c.resources) || !has(c.resources.claims) || "
                                                 "size(c.resources.claims) == 0")
    return refusal(
        "resource-claims",
        f"request.operation != 'CREATE' || ({_absent('resourceClaims')} && {no_claims})",
        "the platform offers no dynamic resource allocation: vCluster copies spec.resourceClaims and each container's "
        "resources.claims with the tenant's names, and the host's DRA drivers would allocate devices outside KAI's "
        "queues",
        "remove spec.resourceClaims and resources.claims; request GPUs with gpu-fraction, gpu-memory or nvidia.com/gpu")


def _host_controllers() -> dict:
    created = " && ".join(f"(!has(object.spec.{field}))" for field in HOST_CONTROLLER_FIELDS)
    kept = " && ".join(_unchanged(field) for field in HOST_CONTROLLER_FIELDS)
    return refusal(
        "host-controllers", f"request.operation == 'CREATE' ? ({created}) : ({kept})",
        f"{', '.join(HOST_CONTROLLER_FIELDS)} hand the pod to host objects and controllers the kube-scheduler and the "
        "eviction API run (Workloads, PodGroups, eviction responders), which the platform does not offer: KAI "
        "schedules every pod",
        "remove them; group pods with KAI's own pod groups (the pod-grouper makes them from the pod's owner)")


def _grace_period(team: Team) -> dict:
    """KAI evicts a pod by deleting it with no grace period of its own (pkg/scheduler/cache/evictor
    default_evictor.go), so the pod's grace period is how long a reclaimed GPU stays with a team whose pod ignores
    SIGTERM. The field cannot change after creation."""
    cap = team.vcluster.max_termination_grace_seconds
    return refusal(
        "grace-period",
        f"request.operation != 'CREATE' || !has(object.spec.terminationGracePeriodSeconds) || "
        f"object.spec.terminationGracePeriodSeconds <= {cap}",
        f"KAI reclaims a GPU for another team by deleting the pod, and a deleted pod keeps its GPUs for its "
        f"termination grace period, which team {team.name} may set to at most {cap} s "
        "(config vcluster.maxTerminationGracePeriodSeconds)",
        f"set spec.terminationGracePeriodSeconds to at most {cap}, or ask the platform team for a longer cap")


def pod_field_validations(team: Team) -> list[dict]:
    return [_resource_claims(), _host_controllers(), _grace_period(team)]
