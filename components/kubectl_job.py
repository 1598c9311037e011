"""Pod parts and identities for the platform's short kubectl Jobs (waits and probes Pulumi cannot express).

The Kubernetes provider awaits a Job until it completes or fails, so a Job that runs
``kubectl wait`` turns "until X exists in the cluster" into an ordinary dependency. The pods
pass the ``restricted`` Pod Security level and set requests and limits, so they run in any
namespace, tenant namespaces with a ResourceQuota included.
"""

from __future__ import annotations

from typing import Sequence

import pulumi
from components.kubernetes_resources import (
    CLUSTER_ROLE, CLUSTER_ROLE_BINDING, ROLE, ROLE_BINDING, SERVICE_ACCOUNT, KubernetesObject,
)


HOME_MOUNT = "/tmp"
POD_SECURITY_CONTEXT = {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}}
HOME_VOLUME = {"name": "home", "emptyDir": {}}


def kubectl_container(name: str, image: str, args: Sequence[str], volume_mounts: Sequence[dict] = ()) -> dict:
    """``image`` is the site's kubectl (config/model.py Cluster.kubectl_image)."""
    return {
        "name": name,
        "image": image,
        "args": list(args),
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                      "limits": {"cpu": "100m", "memory": "128Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        # kubectl caches API discovery under $HOME; the root filesystem is read-only.
        "env": [{"name": "HOME", "value": HOME_MOUNT}],
        # `kubectl describe job` / the pod status then show why the wait gave up.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [*volume_mounts, {"name": HOME_VOLUME["name"], "mountPath": HOME_MOUNT}],
    }


def wait_for_create_args(resource: str, name: str, timeout_seconds: int, namespace: str | None = None) -> list[str]:
    """``kubectl wait --for=create``: exits 0 once the object exists, non-zero at the timeout."""
    args = ["wait", "--for=create", f"{resource}/{name}", f"--timeout={timeout_seconds}s"]
    if namespace is not None:
        args += ["--namespace", namespace]
    return args


def job_identity(resource_name: str, metadata: dict, rules: list[dict], *, cluster_wide: bool,
                 opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The Job's own service account, allowed ``rules`` and nothing else (a Role, or a ClusterRole for
    cluster-scoped objects), all named ``metadata["name"]``."""
    name, namespace = metadata["name"], metadata["namespace"]
    account = KubernetesObject(resource_name, SERVICE_ACCOUNT, metadata=metadata, opts=opts)
    role_metadata = {"name": name, "labels": metadata["labels"]} if cluster_wide else metadata
    role_kind, binding_kind = (CLUSTER_ROLE, CLUSTER_ROLE_BINDING) if cluster_wide else (ROLE, ROLE_BINDING)
    role = KubernetesObject(resource_name, role_kind, metadata=role_metadata, rules=rules, opts=opts)
    binding = KubernetesObject(
        resource_name, binding_kind, metadata=role_metadata,
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind.kind, "name": name},
        subjects=[{"kind": "ServiceAccount", "name": name, "namespace": namespace}], opts=opts)
    return [account, role, binding]
