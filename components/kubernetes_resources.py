"""Kubernetes objects and Helm releases registered as pulumi-kubernetes registers them, without its typed classes.

A typed class (``k8s.core.v1.Namespace``) sends the Kubernetes provider the object's type token and its fields with
``apiVersion`` and ``kind``, and sets a few options of its own: the SDK's version (which picks the provider plugin
when no provider is named) and, for a Secret, ``data`` and ``stringData`` as secrets, in and out. On top of that the SDK
converts every input and output by the class's Python types, records the aliases the class gives each object to
its kind's other API versions, and builds an output for every field the kind has: a tenth of a large site's
offline run and more, for types the program never reads (it writes its objects as plain dicts). ``KubernetesObject``
and ``HelmRelease`` send the same requests (tests/test_kubernetes_resources.py compares them with the typed classes'
for everything the committed stacks and two generated sites register), so a stack's state, its preview and the
provider's behaviour are unchanged.

They send no aliases. For the kinds the program registers the typed classes' are to pre-release API versions only,
which the program never declared, so they can match nothing in any stack's state (the tests check both). A kind
that moves to a new GA version here needs an alias to its old type on the objects, or they are replaced.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any, NamedTuple, Optional

import pulumi


class Kind(NamedTuple):
    api_version: str
    kind: str

    @property
    def token(self) -> str:
        """The type pulumi-kubernetes registers the kind as: ``kubernetes:<group>/<version>:<Kind>``, with the
        core group spelled ``core``."""
        group_version = self.api_version if "/" in self.api_version else f"core/{self.api_version}"
        return f"kubernetes:{group_version}:{self.kind}"


NAMESPACE = Kind("v1", "Namespace")
SECRET = Kind("v1", "Secret")
CONFIG_MAP = Kind("v1", "ConfigMap")
SERVICE = Kind("v1", "Service")
SERVICE_ACCOUNT = Kind("v1", "ServiceAccount")
DEPLOYMENT = Kind("apps/v1", "Deployment")
JOB = Kind("batch/v1", "Job")
CRON_JOB = Kind("batch/v1", "CronJob")
NETWORK_POLICY = Kind("networking.k8s.io/v1", "NetworkPolicy")
STORAGE_CLASS = Kind("storage.k8s.io/v1", "StorageClass")
ROLE = Kind("rbac.authorization.k8s.io/v1", "Role")
ROLE_BINDING = Kind("rbac.authorization.k8s.io/v1", "RoleBinding")
CLUSTER_ROLE = Kind("rbac.authorization.k8s.io/v1", "ClusterRole")
CLUSTER_ROLE_BINDING = Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
VALIDATING_ADMISSION_POLICY = Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
VALIDATING_ADMISSION_POLICY_BINDING = Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding")

# What the typed Secret class makes secret: these inputs, whole, and the same outputs, whatever the provider answers.
SECRET_OUTPUTS = {SECRET: ["data", "stringData"]}
# The version option every typed class sets: without a named provider, it picks the plugin of this SDK's version.
SDK_VERSION = pulumi.ResourceOptions(version=version("pulumi-kubernetes"))


def field_name(argument: str) -> str:
    """A field's name in the object (``string_data`` -> ``stringData``), as the typed classes translate theirs."""
    head, *words = argument.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in words)


class KubernetesObject(pulumi.CustomResource):
    """One Kubernetes object of ``kind``; its fields by their Python names (``metadata``, ``spec``,
    ``string_data``), each readable afterwards as an output of that name in the object's spelling."""

    def __init__(self, resource_name: str, kind: Kind, opts: Optional[pulumi.ResourceOptions] = None,
                 **fields: Any) -> None:
        secret_outputs = SECRET_OUTPUTS.get(kind)
        options = pulumi.ResourceOptions.merge(SDK_VERSION, opts)
        if secret_outputs:
            options = pulumi.ResourceOptions.merge(
                options, pulumi.ResourceOptions(additional_secret_outputs=secret_outputs))
        properties = {"apiVersion": kind.api_version, "kind": kind.kind}
        properties.update((field_name(argument), value) for argument, value in fields.items())
        for field in secret_outputs or ():
            if properties.get(field) is not None:
                properties[field] = pulumi.Output.secret(properties[field])
        super().__init__(kind.token, resource_name, properties, options)


HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


class HelmRelease(pulumi.CustomResource):
    """A Helm release (``k8s.helm.v3.Release``'s request); its settings by their Python names (``chart``,
    ``repository_opts={"repo": ...}``, ``max_history``). ``status`` is its output once installed."""

    def __init__(self, resource_name: str, opts: Optional[pulumi.ResourceOptions] = None, **settings: Any) -> None:
        # ``compat`` is the typed class's constant marker of the release's input format.
        properties = {"compat": "true", "status": None}
        properties.update((field_name(argument), value) for argument, value in settings.items())
        super().__init__(HELM_RELEASE, resource_name, properties, pulumi.ResourceOptions.merge(SDK_VERSION, opts))
