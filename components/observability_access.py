"""Grafana's admin login, owned by the stack: generated at ``pulumi up``, never a chart default.

The password is a pulumi-random ``RandomPassword`` (its ``result`` is a secret output, so it is encrypted in
the state and shown as ``[secret]`` in a preview), handed to Grafana through a Kubernetes Secret the chart
reads with ``grafana.admin.existingSecret``. Without that value the grafana chart (12.11.1, inside
kube-prometheus-stack 88.5.3) writes its own Secret with user ``admin``; older kube-prometheus-stack
releases also shipped the password ``prom-operator`` in their values. The deployability check and the
policy pack refuse both (tools/deployability/grafana.py, policy/rules_grafana.py).
"""

from __future__ import annotations

from typing import Optional, TYPE_CHECKING

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from components.kubernetes_resources import SECRET, KubernetesObject

from config.vocabulary import MANAGED_BY

if TYPE_CHECKING:
    from config.observability import Observability

# The grafana chart's admin.userKey / admin.passwordKey defaults, kept so the Secret reads as the chart expects.
ADMIN_SECRET = "gpu-tenancy-grafana-admin"
ADMIN_USER = "admin"
USER_KEY = "admin-user"
PASSWORD_KEY = "admin-password"
PASSWORD_LENGTH = 32


def grafana_ini(settings: "Observability") -> dict:
    """The ``grafana.ini`` sections the stack sets (merged over the chart's own by Helm).

    ``auto_assign_org_role = None``: a user Grafana creates (an admin adding one by hand, the fallback without
    single sign-on) lands in the main organization with no role, not as a Viewer of the platform board and the
    unfiltered Prometheus data source; the admin then adds them to their team's organization.
    """
    ini: dict = {"users": {"auto_assign_org_role": "None"}}
    if settings.grafana_login is not None:
        # The base of the OAuth redirect URI (<root_url>/login/generic_oauth).
        ini["server"] = {"root_url": settings.grafana_login.root_url}
    return ini


def admin_values() -> dict:
    """The ``grafana.admin`` values: the chart reads user and password from the stack's Secret."""
    return {"existingSecret": ADMIN_SECRET, "userKey": USER_KEY, "passwordKey": PASSWORD_KEY}


class GrafanaAdmin(pulumi.ComponentResource):
    """The generated admin password and the Secret the Grafana chart reads it from."""

    password: pulumi.Output[str]
    secret: KubernetesObject

    def __init__(self, name: str, namespace: str, provider: k8s.Provider, protect: bool,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gpu-tenancy:platform:GrafanaAdmin", name, None, opts)
        # No special characters: the password also travels in the Grafana provider's `user:password` auth string.
        # Protected with the monitoring data: Grafana takes the password only when it creates its database, so a
        # new one would lock the program out of a Grafana whose database is on a volume.
        generated = random.RandomPassword(f"{name}-password", length=PASSWORD_LENGTH, special=False,
                                          opts=pulumi.ResourceOptions(parent=self, protect=protect))
        self.password = pulumi.Output.secret(generated.result)
        self.secret = KubernetesObject(
            f"{name}-secret", SECRET,
            metadata={"name": ADMIN_SECRET, "namespace": namespace,
                      "labels": MANAGED_BY},
            type="Opaque",
            string_data={USER_KEY: ADMIN_USER, PASSWORD_KEY: self.password},
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        self.register_outputs({"secretName": ADMIN_SECRET, "user": ADMIN_USER})
