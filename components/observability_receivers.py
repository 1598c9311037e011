"""Alertmanager receivers as the program writes them: where the address comes from, and which severities pass.

Every receiver (the site's, each team's, the heartbeat's) reads its URL or key from a file of one Secret that the
Prometheus operator mounts into Alertmanager's pod, never from the chart's values. Plain data, no resources.
"""

from __future__ import annotations

from typing import Optional

from config.observability_alerting import SEVERITIES

RECEIVER_SECRET = "gpu-tenancy-alert-receiver"
# Where the Prometheus operator mounts a Secret named in alertmanagerSpec.secrets.
SECRETS_DIR = "/etc/alertmanager/secrets"

SLACK_TITLE = '[{{ .Status | toUpper }}{{ if eq .Status "firing" }}:{{ .Alerts.Firing | len }}{{ end }}] ' \
              '{{ .CommonLabels.alertname }}{{ with .CommonLabels.team }} ({{ . }}){{ end }}'
SLACK_TEXT = ('{{ range .Alerts }}*{{ .Annotations.summary }}*\n{{ .Annotations.description }}\n'
              '{{ with .Annotations.runbook }}Runbook: {{ . }}\n{{ end }}'
              '{{ with .Annotations.runbook_url }}Runbook: {{ . }}\n{{ end }}{{ end }}')


def receiver_config(name: str, kind: str, address_file: str, slack_channel: Optional[str] = None) -> dict:
    """A receiver of ``kind`` (slack, webhook, pagerduty) reading its URL or key from the mounted Secret's file."""
    if kind == "slack":
        slack = {"api_url_file": address_file, "send_resolved": True, "title": SLACK_TITLE, "text": SLACK_TEXT}
        if slack_channel:
            slack["channel"] = slack_channel
        return {"name": name, "slack_configs": [slack]}
    if kind == "webhook":
        return {"name": name, "webhook_configs": [{"url_file": address_file, "send_resolved": True}]}
    return {"name": name, "pagerduty_configs": [{"routing_key_file": address_file, "send_resolved": True}]}


def severity_matcher(least: str) -> list[str]:
    """A matcher on the severity label for ``least`` and anything more severe; none for the least of all."""
    kept = SEVERITIES[SEVERITIES.index(least):]
    return [] if kept == SEVERITIES else [f'severity =~ "{"|".join(kept)}"']
