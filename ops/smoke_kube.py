"""The few Kubernetes API calls the smoke test makes, through the official ``kubernetes`` client.

The official client rather than ``kubectl``: it reads the same kubeconfigs (client certificates, exec
plugins such as kubelogin), needs no binary on the runner, and returns the API server's own Status on a
refusal, so an admission policy's ``[rule]`` message reaches the report unchanged. Objects go in and
come out as plain dicts (``_preload_content=False``): what the API server sent, not the client's models.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

import yaml
from kubernetes import client, config as kube_config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError


@dataclass
class ApiError(Exception):
    """The API server refused or could not be reached; ``status`` 0 means no answer."""

    status: int
    message: str

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.message}" if self.status else self.message


def _error(error: Exception) -> ApiError:
    if isinstance(error, ApiException):
        try:
            message = json.loads(error.body or "{}").get("message") or error.reason
        except ValueError:
            message = error.body or error.reason
        return ApiError(error.status or 0, str(message))
    return ApiError(0, f"cannot reach the API server: {error}")


class Kube:
    """One cluster (the host, or a team's vCluster) reached with one kubeconfig."""

    def __init__(self, kubeconfig: str, impersonate: Optional[str] = None):
        try:
            config = yaml.safe_load(kubeconfig) if kubeconfig else None
        except yaml.YAMLError as error:
            # PyYAML's message quotes the line it stopped at, which may hold a token or a key: say where only.
            mark = getattr(error, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            raise ApiError(0, f"the kubeconfig is not YAML{where}") from None
        if not isinstance(config, dict):
            raise ApiError(0, "the kubeconfig is empty or not YAML")
        self.server = next((c.get("cluster", {}).get("server") for c in config.get("clusters") or []), None)
        try:
            api = kube_config.new_client_from_config_dict(config)
        except (kube_config.ConfigException, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ApiError(0, f"the kubeconfig cannot be used: {error}") from error
        if impersonate:
            # The API server authorizes and admits the request as this user (the kubeconfig's user needs
            # the `impersonate` verb).
            api.set_default_header("Impersonate-User", impersonate)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)

    def _call(self, method, *args, **kwargs) -> Any:
        try:
            response = method(*args, _preload_content=False, _request_timeout=30, **kwargs)
        except (ApiException, HTTPError, OSError) as error:
            raise _error(error) from error
        return json.loads(response.data or b"null")

    def create_namespace(self, name: str, labels: dict) -> dict:
        return self._call(self.core.create_namespace, {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": name, "labels": labels}})

    def delete_namespace(self, name: str) -> None:
        try:
            self._call(self.core.delete_namespace, name, body={"propagationPolicy": "Foreground"})
        except ApiError as error:
            if error.status != 404:
                raise

    def create_pod(self, namespace: str, pod: dict, dry_run: bool = False) -> dict:
        """With ``dry_run`` the API server runs authorization and every admission step, and stores nothing."""
        return self._call(self.core.create_namespaced_pod, namespace, pod, **({"dry_run": "All"} if dry_run else {}))

    def get_pod(self, namespace: str, name: str) -> Optional[dict]:
        try:
            return self._call(self.core.read_namespaced_pod, name, namespace)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def list_pods(self, namespace: str, label_selector: str) -> list[dict]:
        return self._call(self.core.list_namespaced_pod, namespace, label_selector=label_selector)["items"]

    def pod_events(self, namespace: str, name: str) -> list[dict]:
        return self._call(self.core.list_namespaced_event, namespace,
                          field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}")["items"]

    def create_deployment(self, namespace: str, deployment: dict) -> dict:
        return self._call(self.apps.create_namespaced_deployment, namespace, deployment)
