"""A tenant's own alerts do not silence the platform's about the same namespace (components/observability_alerting.py
inhibit_rules), proved on a real Alertmanager (Debian's prometheus-alertmanager; tests/local_alertmanager.py).

A team's host namespace holds the tenant's volume claims and its vCluster control plane's. The tenant fills its own
claim at will, and the chart's KubePersistentVolumeFillingUp goes critical for it; kube-prometheus-stack's rule "a
critical alert inhibits the warning of the same name and namespace" would then silence the warning that forecasts
the control plane's claim filling up, which is the platform's.
"""

from __future__ import annotations

import time
from pathlib import Path

from components import observability_alerting as alerting
from tests.local_alertmanager import needs_alertmanager, post_alerts, receiving_end, running_alertmanager

FILLING_UP = "KubePersistentVolumeFillingUp"
NAMESPACE = "vcluster-alpha"
TENANT_CLAIM = "data-x-default-x-alpha"
CONTROL_PLANE_CLAIM = "data-alpha-0"


def filling_up(claim: str, severity: str) -> dict:
    return {"labels": {"alertname": FILLING_UP, "namespace": NAMESPACE, "persistentvolumeclaim": claim,
                       "severity": severity}}


def delivered(rules: list[dict], alerts: list[dict], root: Path) -> list[tuple[str, str]]:
    """(claim, severity) of every alert a webhook receiver got from an Alertmanager with ``rules``."""
    root.mkdir()
    with receiving_end() as (hook, received):
        config = {"route": {"receiver": "hook", "group_by": ["persistentvolumeclaim", "severity"], "group_wait": "1s"},
                  "receivers": [{"name": "hook", "webhook_configs": [{"url": hook}]}], "inhibit_rules": rules}
        with running_alertmanager(config, root) as url:
            post_alerts(url, alerts)
            time.sleep(5)
    return sorted((alert["labels"]["persistentvolumeclaim"], alert["labels"]["severity"])
                  for message in received for alert in message["alerts"])


@needs_alertmanager
def test_a_tenants_full_claim_does_not_silence_the_control_planes_forecast(tmp_path):
    alerts = [filling_up(TENANT_CLAIM, "critical"), filling_up(CONTROL_PLANE_CLAIM, "warning")]
    assert delivered(alerting.inhibit_rules(), alerts, tmp_path / "program") == [
        (CONTROL_PLANE_CLAIM, "warning"), (TENANT_CLAIM, "critical")]
    # The chart's rules, comparing namespace and name only: the forecast is gone.
    by_name = [{**rule, "equal": [label for label in rule["equal"] if label != alerting.INHIBIT_SAME_CLAIM]}
               if "equal" in rule else rule for rule in alerting.inhibit_rules()]
    assert delivered(by_name, alerts, tmp_path / "chart") == [(TENANT_CLAIM, "critical")]


@needs_alertmanager
def test_a_critical_alert_still_silences_the_warning_of_its_own_claim(tmp_path):
    alerts = [filling_up(CONTROL_PLANE_CLAIM, "critical"), filling_up(CONTROL_PLANE_CLAIM, "warning")]
    assert delivered(alerting.inhibit_rules(), alerts, tmp_path / "program") == [(CONTROL_PLANE_CLAIM, "critical")]
