"""A real value for every classified pod field (components/admission_pod_fields.py), placed into a tenant's pod.

``HOSTILE_EXAMPLES``: what a hostile tenant (its vCluster's cluster-admin) would send for a refused, constrained or
Pod Security field; ``HARMLESS_EXAMPLES``: what an honest workload sets for a harmless one. Each key is
``<definition>.<field>``; ``place`` puts the example where that object lives in a pod (the first container, its
first port, mount, probe, ...), an ``EphemeralContainer`` into a debug container of the host pod.
"""

from __future__ import annotations

import copy

from tests.tenant_sim import container

MIG = "nvidia.com/mig-1g.10gb"
SCRATCH = {"name": "scratch", "emptyDir": {}}
NODE_ADDRESS = "169.254.169.254"
# Fields k8s.io/api documents as not allowed in an ephemeral container (core/v1 EphemeralContainerCommon, v0.30 to
# v0.36), which the API server's validation refuses.
EPHEMERAL_REFUSED_BY_API = {"ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "resources",
                            "restartPolicy", "restartPolicyRules"}


def _container_fields(prefix: str, fields: dict) -> dict:
    return {f"{prefix}.{field}": value for field, value in fields.items()}


_HOSTILE_CONTAINER = {
    # KAI's webhook rewrites the first entry to void; the kubelet takes the last.
    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
    "image": "registry.attacker.example/miner:1",
    "imagePullPolicy": "IfNotPresent",
}
_HOSTILE_SECURITY = {
    "appArmorProfile": {"type": "Unconfined"},
    "seLinuxOptions": {"type": "spc_t"},
    "seccompProfile": {"type": "Unconfined"},
    "windowsOptions": {"hostProcess": True},
}
HOSTILE_EXAMPLES = {
    "PodSpec.evictionResponders": [{"name": "acme.io/keeper", "priority": 10000}],
    "PodSpec.hostIPC": True,
    "PodSpec.hostNetwork": True,
    "PodSpec.hostPID": True,
    "PodSpec.nodeName": "gpu-node-1",
    "PodSpec.resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "other-teams-gpus"}],
    "PodSpec.resources": {"requests": {"cpu": "60", "memory": "400Gi"}, "limits": {"cpu": "60", "memory": "400Gi"}},
    "PodSpec.runtimeClassName": "nvidia",
    "PodSpec.schedulerName": "default-scheduler",
    "PodSpec.schedulingGroup": {"podGroupName": "other-teams-group"},
    "PodSpec.terminationGracePeriodSeconds": 86400 * 365,
    "PodSpec.tolerations": [{"key": f"example.com/t{index}", "operator": "Exists", "effect": "NoSchedule"}
                            for index in range(200)],
    "PodSpec.volumes": [{"name": "share", "nfs": {"server": "10.0.0.5", "path": "/"}}],
    "PodSpec.workloadRef": {"name": "training", "podGroup": "workers"},
    **_container_fields("Container", _HOSTILE_CONTAINER),
    **_container_fields("EphemeralContainer", _HOSTILE_CONTAINER),
    **_container_fields("PodSecurityContext", {**_HOSTILE_SECURITY,
                                               "sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}),
    **_container_fields("SecurityContext", {**_HOSTILE_SECURITY, "capabilities": {"add": ["SYS_ADMIN"]},
                                            "privileged": True, "procMount": "Unmasked"}),
    "ResourceRequirements.claims": [{"name": "gpu"}],
    "ResourceRequirements.limits": {"nvidia.com/gpu": "1", MIG: "1"},
    "ResourceRequirements.requests": {"nvidia.com/gpu": "1", MIG: "1"},
    "ContainerPort.hostPort": 22,
    "VolumeMount.mountPath": "/var/run/nvidia-container-devices/all",
    "HTTPGetAction.host": NODE_ADDRESS,
    "TCPSocketAction.host": NODE_ADDRESS,
    "EnvFromSource.prefix": None,
}

_HARMLESS_CONTAINER = {
    "args": ["--epochs", "3"],
    "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
    "command": ["python", "train.py"],
    "name": "trainer",
    "stdin": True,
    "stdinOnce": True,
    "terminationMessagePath": "/tmp/done",
    "terminationMessagePolicy": "FallbackToLogsOnError",
    "tty": True,
    "volumeDevices": [{"name": "data", "devicePath": "/dev/xvdb"}],
    "workingDir": "/work",
}
_HARMLESS_IDENTITY = {"runAsGroup": 1000, "runAsNonRoot": True, "runAsUser": 1000}
HARMLESS_EXAMPLES = {
    "PodSpec.activeDeadlineSeconds": 3600,
    "PodSpec.dnsConfig": {"options": [{"name": "ndots", "value": "2"}], "searches": ["corp.example"]},
    "PodSpec.dnsPolicy": "Default",
    "PodSpec.hostAliases": [{"ip": "10.1.2.3", "hostnames": ["db.local"]}],
    "PodSpec.hostUsers": False,
    "PodSpec.hostname": "worker-0",
    "PodSpec.hostnameOverride": "trainer",
    "PodSpec.nodeSelector": {"nvidia.com/gpu.present": "true"},
    "PodSpec.os": {"name": "linux"},
    "PodSpec.overhead": {"cpu": "250m", "memory": "120Mi"},
    "PodSpec.preemptionPolicy": "Never",
    "PodSpec.readinessGates": [{"conditionType": "example.com/ready"}],
    "PodSpec.restartPolicy": "OnFailure",
    "PodSpec.schedulingGates": [{"name": "example.com/quota-check"}],
    "PodSpec.setHostnameAsFQDN": True,
    "PodSpec.shareProcessNamespace": True,
    "PodSpec.terminationGracePeriodSeconds": 600,
    "PodSpec.tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    **_container_fields("Container", {
        **_HARMLESS_CONTAINER,
        "restartPolicy": "Always",
        "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]}),
    **_container_fields("EphemeralContainer", {**_HARMLESS_CONTAINER, "targetContainerName": "main"}),
    **_container_fields("PodSecurityContext", {
        **_HARMLESS_IDENTITY, "fsGroup": 1000, "fsGroupChangePolicy": "OnRootMismatch",
        "seLinuxChangePolicy": "MountOption", "supplementalGroups": [2000], "supplementalGroupsPolicy": "Strict"}),
    **_container_fields("SecurityContext", {**_HARMLESS_IDENTITY, "allowPrivilegeEscalation": False,
                                            "readOnlyRootFilesystem": True}),
    "ContainerPort.containerPort": 8080,
    "ContainerPort.hostIP": "10.0.0.1",
    "ContainerPort.name": "http",
    "ContainerPort.protocol": "UDP",
    "VolumeMount.bindMountOptions": ["noexec", "nosuid"],
    "VolumeMount.mountPropagation": "HostToContainer",
    "VolumeMount.name": "scratch",
    "VolumeMount.readOnly": True,
    "VolumeMount.recursiveReadOnly": "IfPossible",
    "VolumeMount.subPath": "models",
    "VolumeMount.subPathExpr": "$(POD_NAME)",
    "Probe.exec": {"command": ["cat", "/tmp/healthy"]},
    "Probe.failureThreshold": 5,
    "Probe.grpc": {"port": 9000, "service": "health"},
    "Probe.initialDelaySeconds": 10,
    "Probe.periodSeconds": 20,
    "Probe.successThreshold": 1,
    "Probe.terminationGracePeriodSeconds": 60,
    "Probe.timeoutSeconds": 3,
    "Lifecycle.stopSignal": "SIGUSR1",
    "LifecycleHandler.exec": {"command": ["sh", "-c", "sync"]},
    "LifecycleHandler.sleep": {"seconds": 5},
    "HTTPGetAction.httpHeaders": [{"name": "X-Probe", "value": "kubelet"}],
    "HTTPGetAction.path": "/healthz",
    "HTTPGetAction.port": "http",
    "HTTPGetAction.protocol": "HTTP/2",
    "HTTPGetAction.scheme": "HTTPS",
    "TCPSocketAction.port": 8080,
    "EnvVarSource.fileKeyRef": {"volumeName": "scratch", "path": "settings.env", "key": "MODEL"},
    "EnvVarSource.resourceFieldRef": {"resource": "limits.cpu"},
    "Affinity.nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]}},
}


def _debug_container(field: str, value) -> dict:
    """An ephemeral container as ``kubectl debug`` adds it, with ``field`` set."""
    debug = {"name": "debug", "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04", "imagePullPolicy": "Always",
             "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}
    return {**debug, field: value}


def _probe(field: str, value) -> dict:
    """A liveness probe with ``field``: a handler replaces the TCP one, a number joins it."""
    return {field: value} if field in ("exec", "grpc") else {"tcpSocket": {"port": 8080}, field: value}


def place(pod: dict, key: str, value) -> dict:
    """``pod`` (a virtual pod, or a host pod for an ephemeral container) with ``key``'s example in it."""
    definition, field = key.split(".")
    pod = copy.deepcopy(pod)
    spec = pod["spec"]
    main = spec["containers"][0]
    if definition == "PodSpec":
        spec[field] = value
    elif definition == "EphemeralContainer":
        spec["ephemeralContainers"] = [_debug_container(field, value)]
    elif definition == "Container" and field == "restartPolicy":
        spec["initContainers"] = [{**container("sidecar"), "imagePullPolicy": "Always", "restartPolicy": value}]
    elif definition == "Container":
        main[field] = value
    elif definition == "PodSecurityContext":
        spec["securityContext"] = {field: value}
    elif definition == "SecurityContext":
        main["securityContext"] = {field: value}
    elif definition == "ResourceRequirements":
        main["resources"] = {**main["resources"], field: {**main["resources"].get(field, {}), **value}} \
            if isinstance(value, dict) else {**main["resources"], field: value}
    elif definition == "ContainerPort":
        main["ports"] = [{"containerPort": 8080, field: value}]
    elif definition == "VolumeMount":
        mount = {"name": "scratch", "mountPath": "/scratch", field: value}
        if field == "recursiveReadOnly":
            mount["readOnly"] = True
        main["volumeMounts"] = [mount]
        if field == "subPathExpr":
            main["env"] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    elif definition == "Probe":
        main["livenessProbe"] = _probe(field, value)
    elif definition == "Lifecycle":
        main["lifecycle"] = {field: value}
    elif definition == "LifecycleHandler":
        main["lifecycle"] = {"preStop": {field: value}}
    elif definition in ("HTTPGetAction", "TCPSocketAction"):
        action = "httpGet" if definition == "HTTPGetAction" else "tcpSocket"
        main["livenessProbe"] = {action: {"port": 8080, field: value}}
    elif definition == "EnvVarSource":
        main["env"] = [{"name": "SETTING", "valueFrom": {field: value}}]
    elif definition == "EnvFromSource":
        # A GPU container with an unprefixed source: its keys could spell a device list.
        main["resources"] = {"limits": {**main["resources"]["limits"], "nvidia.com/gpu": "1"},
                             "requests": {**main["resources"]["requests"], "nvidia.com/gpu": "1"}}
        main["envFrom"] = [{"configMapRef": {"name": "settings"}, **({field: value} if value is not None else {})}]
    elif definition == "Affinity":
        spec["affinity"] = {field: value}
    else:
        raise KeyError(f"place {definition} into a pod")
    if definition != "EphemeralContainer":
        spec.setdefault("volumes", []).extend([SCRATCH, {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    return pod
