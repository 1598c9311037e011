"""Guardrail of the Grafana that a monitoring chart installs: no shared, default or plain-text admin login.

kube-prometheus-stack (values under ``grafana``) and the grafana chart itself (values at the top) read the
admin login from ``admin.existingSecret``; without one the chart writes a Secret of its own with user
``admin`` (and kube-prometheus-stack releases before the grafana-community chart shipped the password
``prom-operator`` in their values). A password in the values is stored in plain text in the Helm release.
Like ``rules.py``, this module imports nothing from the project or from ``pulumi_policy``.
"""

from __future__ import annotations

from typing import Mapping

if __package__:
    from .rule_model import UNKNOWN, Resource, get, is_chart, is_known, release_label
else:  # the Pulumi CLI runs the pack from policy/ as top-level modules
    from rule_model import UNKNOWN, Resource, get, is_chart, is_known, release_label

# Where each chart keeps Grafana's values: kube-prometheus-stack nests the grafana subchart.
GRAFANA_VALUES = {"kube-prometheus-stack": ("grafana",), "grafana": ()}
KNOWN_DEFAULT_PASSWORDS = ("prom-operator", "admin")


def grafana_admin_from_secret(resource: Resource) -> list[str]:
    """A release that installs Grafana takes its admin login from a Secret, never from a default or the values."""
    path = next((path for chart, path in GRAFANA_VALUES.items() if is_chart(resource, chart)), None)
    if path is None:
        return []
    values = get(resource.inputs.get("values"), *path) if path else resource.inputs.get("values")
    if values is UNKNOWN:
        return []
    values = {} if values is None else values  # the chart's defaults: Grafana on, no existingSecret
    if not isinstance(values, Mapping) or values.get("enabled") is False:
        return []
    label = release_label(resource)
    problems = []
    password = values.get("adminPassword")
    if isinstance(password, str) and password in KNOWN_DEFAULT_PASSWORDS:
        problems.append(f"{label} sets Grafana's admin password to the published default {password!r}: anyone who "
                        "reads the chart's documentation can sign in as admin. Generate one (pulumi-random) and pass "
                        "it through a Secret named by admin.existingSecret.")
    elif password is not None and password is not UNKNOWN:
        problems.append(f"{label} puts Grafana's admin password in its values, where the Helm release stores it in "
                        "plain text. Pass it through a Secret named by admin.existingSecret.")
    secret = get(values, "admin", "existingSecret")
    if is_known(secret) and not (isinstance(secret, str) and secret.strip()):
        problems.append(f"{label} installs Grafana without admin.existingSecret: the chart then makes its own admin "
                        "login (user 'admin'), which the stack neither generates nor keeps secret. Name a Secret "
                        "holding a generated password.")
    return problems

