"""What a pod's containers and its spec store of their own, beside their lists and their text, in bytes.

The lists of a pod are bounded by the rules (config/pod_entry_bytes.py, config/synced_entry_bytes.py) and its text by
``pod-size``; what is left are the fields each container holds once (its name, policies, probes' numbers and ports,
security context) and those the spec holds once (its DNS policy, host name, priority, affinity's wrappers, ...). Each
is bounded: a container by its messages at their largest, counted once for each of the at most 65 containers rule
``containers`` allows, the spec once. Counted as config/pod_entry_bytes.py counts an entry: tags, three-byte lengths,
bounded strings at the longest value validation allows, numbers at a negative number's ten bytes, text fields' tags
and lengths; a probe's or hook's handler at the largest of its kinds (validation admits one). Fields the syncer clears
or the rules refuse count at their largest all the same where a host controller may write them (the binder's node
name, the service account the API server copies into the deprecated ``serviceAccount``); a probe's host, refused
(rule ``probe-host``), counts empty. tests/test_pod_entry_bytes_contract.py holds these against generated.proto at
every accepted minor.
"""

from __future__ import annotations

from config.pod_entry_bytes import (
    SUBDOMAIN_BYTES, Field, Message, _bool, _message, string_field, _text, own_bytes, stored_bytes,
)
from config.synced_entry_bytes import DNS_LABEL_BYTES, ENUM_BYTES, INT_OR_STRING, NEGATIVE, tag_bytes, varint_bytes

# k8s.io/apiserver MaxRequestBodyBytes: no spec is longer, so its length takes at most this varint.
REQUEST_BYTES = 3 * 2 ** 20
# validation validateWindowsSecurityContextOptions: a 256-byte domain, '\' and a 104-byte user.
RUN_AS_USER_NAME_BYTES = 361
# What the rules leave of a string they refuse (a probe's host).
REFUSED = 0
# A service account, node, scheduler or runtime class name: a DNS subdomain at most.
HOST_NAME_BYTES = SUBDOMAIN_BYTES


def _int64(number: int) -> Field:
    return Field(number, "int64", NEGATIVE)


def _seconds(number: int) -> Field:
    return Field(number, "int32", NEGATIVE)


EXEC_ACTION = Message("ExecAction", {})
HTTP_GET_ACTION = Message("HTTPGetAction", {
    "path": _text(1), "port": _message(2, INT_OR_STRING), "host": string_field(3, REFUSED),
    "scheme": string_field(4, ENUM_BYTES)})
TCP_SOCKET_ACTION = Message("TCPSocketAction", {"port": _message(1, INT_OR_STRING), "host": string_field(2, REFUSED)})
GRPC_ACTION = Message("GRPCAction", {"port": _seconds(1), "service": _text(2)})
SLEEP_ACTION = Message("SleepAction", {"seconds": _int64(1)})
PROBE_HANDLER = Message("ProbeHandler", {
    "exec": _message(1, EXEC_ACTION), "httpGet": _message(2, HTTP_GET_ACTION),
    "tcpSocket": _message(3, TCP_SOCKET_ACTION), "grpc": _message(4, GRPC_ACTION)}, one_of=True)
PROBE = Message("Probe", {
    "handler": _message(1, PROBE_HANDLER), "initialDelaySeconds": _seconds(2), "timeoutSeconds": _seconds(3),
    "periodSeconds": _seconds(4), "successThreshold": _seconds(5), "failureThreshold": _seconds(6),
    "terminationGracePeriodSeconds": _int64(7)})
LIFECYCLE_HANDLER = Message("LifecycleHandler", {
    "exec": _message(1, EXEC_ACTION), "httpGet": _message(2, HTTP_GET_ACTION),
    "tcpSocket": _message(3, TCP_SOCKET_ACTION), "sleep": _message(4, SLEEP_ACTION)}, one_of=True)
LIFECYCLE = Message("Lifecycle", {
    "postStart": _message(1, LIFECYCLE_HANDLER), "preStop": _message(2, LIFECYCLE_HANDLER),
    "stopSignal": string_field(3, ENUM_BYTES)})
SE_LINUX_OPTIONS = Message("SELinuxOptions", {"user": _text(1), "role": _text(2), "type": _text(3), "level": _text(4)})
SECCOMP_PROFILE = Message("SeccompProfile", {"type": string_field(1, ENUM_BYTES), "localhostProfile": _text(2)})
APP_ARMOR_PROFILE = Message("AppArmorProfile", {"type": string_field(1, ENUM_BYTES), "localhostProfile": _text(2)})
WINDOWS_OPTIONS = Message("WindowsSecurityContextOptions", {
    "gmsaCredentialSpecName": string_field(1, SUBDOMAIN_BYTES), "gmsaCredentialSpec": _text(2),
    "runAsUserName": string_field(3, RUN_AS_USER_NAME_BYTES), "hostProcess": _bool(4)})
CAPABILITIES = Message("Capabilities", {})
SECURITY_CONTEXT = Message("SecurityContext", {
    "capabilities": _message(1, CAPABILITIES), "privileged": _bool(2), "seLinuxOptions": _message(3, SE_LINUX_OPTIONS),
    "windowsOptions": _message(10, WINDOWS_OPTIONS), "runAsUser": _int64(4), "runAsGroup": _int64(8),
    "runAsNonRoot": _bool(5), "readOnlyRootFilesystem": _bool(6), "allowPrivilegeEscalation": _bool(7),
    "procMount": string_field(9, ENUM_BYTES), "seccompProfile": _message(11, SECCOMP_PROFILE),
    "appArmorProfile": _message(12, APP_ARMOR_PROFILE)})
RESOURCE_REQUIREMENTS = Message("ResourceRequirements", {})
CONTAINER = Message("Container", {
    "name": string_field(1, DNS_LABEL_BYTES), "image": _text(2), "workingDir": _text(5),
    "resources": _message(8, RESOURCE_REQUIREMENTS), "restartPolicy": string_field(24, ENUM_BYTES),
    "livenessProbe": _message(10, PROBE), "readinessProbe": _message(11, PROBE), "startupProbe": _message(22, PROBE),
    "lifecycle": _message(12, LIFECYCLE), "terminationMessagePath": _text(13),
    "terminationMessagePolicy": string_field(20, ENUM_BYTES), "imagePullPolicy": string_field(14, ENUM_BYTES),
    "securityContext": _message(15, SECURITY_CONTEXT), "stdin": _bool(16), "stdinOnce": _bool(17), "tty": _bool(18)})
EPHEMERAL_CONTAINER_COMMON = Message("EphemeralContainerCommon", CONTAINER.fields)
EPHEMERAL_CONTAINER = Message("EphemeralContainer", {
    "ephemeralContainerCommon": _message(1, EPHEMERAL_CONTAINER_COMMON),
    "targetContainerName": string_field(2, DNS_LABEL_BYTES)})
POD_SECURITY_CONTEXT = Message("PodSecurityContext", {
    "seLinuxOptions": _message(1, SE_LINUX_OPTIONS), "windowsOptions": _message(8, WINDOWS_OPTIONS),
    "runAsUser": _int64(2), "runAsGroup": _int64(6), "runAsNonRoot": _bool(3),
    "supplementalGroupsPolicy": string_field(12, ENUM_BYTES), "fsGroup": _int64(5),
    "fsGroupChangePolicy": string_field(9, ENUM_BYTES), "seccompProfile": _message(10, SECCOMP_PROFILE),
    "appArmorProfile": _message(11, APP_ARMOR_PROFILE), "seLinuxChangePolicy": string_field(13, ENUM_BYTES)})
NODE_SELECTOR = Message("NodeSelector", {})
NODE_AFFINITY = Message("NodeAffinity", {"requiredDuringSchedulingIgnoredDuringExecution": _message(1, NODE_SELECTOR)})
AFFINITY = Message("Affinity", {
    "nodeAffinity": _message(1, NODE_AFFINITY), "podAffinity": _message(2, Message("PodAffinity", {})),
    "podAntiAffinity": _message(3, Message("PodAntiAffinity", {}))})
POD_OS = Message("PodOS", {"name": string_field(1, ENUM_BYTES)})
POD_SPEC = Message("PodSpec", {
    "restartPolicy": string_field(3, ENUM_BYTES), "terminationGracePeriodSeconds": _int64(4),
    "activeDeadlineSeconds": _int64(5), "dnsPolicy": string_field(6, ENUM_BYTES),
    "serviceAccountName": string_field(8, HOST_NAME_BYTES), "serviceAccount": string_field(9, HOST_NAME_BYTES),
    "automountServiceAccountToken": _bool(21), "nodeName": string_field(10, HOST_NAME_BYTES), "hostNetwork": _bool(11),
    "hostPID": _bool(12), "hostIPC": _bool(13), "shareProcessNamespace": _bool(27),
    "securityContext": _message(14, POD_SECURITY_CONTEXT), "hostname": string_field(16, DNS_LABEL_BYTES),
    "subdomain": string_field(17, HOST_NAME_BYTES), "affinity": _message(18, AFFINITY),
    "schedulerName": string_field(19, HOST_NAME_BYTES), "priorityClassName": string_field(24, HOST_NAME_BYTES),
    "priority": _seconds(25), "dnsConfig": _message(26, Message("PodDNSConfig", {})),
    "runtimeClassName": string_field(29, HOST_NAME_BYTES), "enableServiceLinks": _bool(30),
    "preemptionPolicy": string_field(31, ENUM_BYTES), "setHostnameAsFQDN": _bool(35), "os": _message(36, POD_OS),
    "hostUsers": _bool(37), "hostnameOverride": _text(41)})

# The most one container stores of its own, of any kind (an ephemeral one nests its fields one message deeper).
CONTAINER_OWN_BYTES = max(stored_bytes(_message(2, CONTAINER)), stored_bytes(_message(20, CONTAINER)),
                          stored_bytes(_message(34, EPHEMERAL_CONTAINER)))
# The most the spec stores of its own, with its own tag and length in the pod.
POD_OWN_BYTES = tag_bytes(2) + varint_bytes(REQUEST_BYTES) + own_bytes(POD_SPEC)
