"""Deployability rule ``grafana-admin``: Grafana's admin login is the stack's generated one.

Read on the objects a chart renders, as the pod would start: Grafana takes its admin user and password from
``GF_SECURITY_ADMIN_USER`` / ``GF_SECURITY_ADMIN_PASSWORD`` (or ``..._PASSWORD__FILE``); without them it
starts with ``admin``/``admin``. The grafana chart (12.11.1) fills them from ``admin.existingSecret`` or,
when none is named, from a Secret it renders itself, with a password the stack neither generates nor keeps
as a secret. A literal ``value`` sits in plain text in the manifest; a published password in a rendered
Secret is a shared login.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Iterable, Optional, Sequence

from tools.deployability.inputs import K8sObject, pod_templates

PASSWORD_VARIABLES = ("GF_SECURITY_ADMIN_PASSWORD", "GF_SECURITY_ADMIN_PASSWORD__FILE")
KNOWN_DEFAULT_PASSWORDS = ("prom-operator", "admin")
GRAFANA_IMAGE = "grafana/grafana"
RULE = "grafana-admin"


def _is_grafana(container: dict[str, Any]) -> bool:
    image = str(container.get("image", ""))
    return image.split("@")[0].rsplit(":", 1)[0].endswith(GRAFANA_IMAGE)


def _chart_secrets(objects: Iterable[K8sObject]) -> dict[tuple[Any, str], K8sObject]:
    """Secrets a Helm chart renders (not the program's own), by (namespace, name)."""
    return {(obj.namespace, obj.name): obj for obj in objects if obj.kind == "Secret" and obj.release is not None}


def _secret_value(secret: K8sObject, key: Any) -> Optional[str]:
    """The value of one key of a rendered Secret, decoded; None when absent or not text."""
    manifest = secret.manifest
    if key in (manifest.get("stringData") or {}):
        return str(manifest["stringData"][key])
    try:
        return base64.b64decode(str((manifest.get("data") or {})[key]), validate=True).decode()
    except (KeyError, binascii.Error, UnicodeDecodeError):
        return None


def check_grafana_admin(objects: Sequence[K8sObject]) -> list[tuple[K8sObject, str, str]]:
    """(object, problem, fix) for every Grafana container whose admin login is not the stack's own."""
    chart_secrets = _chart_secrets(objects)
    found = []
    for obj, _metadata, spec in pod_templates(objects):
        for container in spec.get("containers") or []:
            if not _is_grafana(container):
                continue
            env = {entry.get("name"): entry for entry in container.get("env") or [] if isinstance(entry, dict)}
            password = next((env[name] for name in PASSWORD_VARIABLES if name in env), None)
            where = f"container {container.get('name')}"
            if password is None:
                found.append((obj, f"{where} sets no admin password: Grafana starts with admin/admin",
                              "set grafana.admin.existingSecret to the stack's generated Secret"))
                continue
            if "value" in password:
                found.append((obj, f"{where} has {password.get('name')} as a literal value, in plain text in the "
                                   "manifest", "pass it through a Secret named by grafana.admin.existingSecret"))
                continue
            reference = (password.get("valueFrom") or {}).get("secretKeyRef") or {}
            secret = chart_secrets.get((obj.namespace, reference.get("name")))
            if secret is None:
                continue
            value = _secret_value(secret, reference.get("key"))
            problem = (f"{where} reads the published password {value!r} from Secret {secret.name}"
                       if value in KNOWN_DEFAULT_PASSWORDS else
                       f"{where} reads its password from Secret {secret.name}, which the chart generates itself "
                       "(the stack neither chose nor keeps it)")
            found.append((obj, problem, "set grafana.admin.existingSecret to the stack's generated Secret"))
    return found
