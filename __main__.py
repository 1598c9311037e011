"""gpu-tenancy: a multi-tenant GPU platform from stack config.

host cluster -> GPU Operator + KAI Scheduler -> KAI queues -> one vCluster per team
"""

import gc

# The SDK holds every resource's futures, tasks and outputs until the run ends, and importing the typed SDK makes
# hundreds of thousands of objects that live as long: each collection re-walks what was made since the last and
# frees little (with full collections deferred, the rest still took a sixth of a 300-team run, imports included).
# The cycles left (a few percent of the run's memory) go when the language host's process ends with the run.
gc.disable()

import pulumi  # noqa: E402 (the collector is off before the SDK's and the components' imports)

from components.gpu_operator import GpuOperator, GpuOperatorArgs
from components.host import HostCluster, HostClusterArgs
from components.isolation_admission import isolation_outputs
from components.kai import KaiScheduler, KaiSchedulerArgs
from components.observability import Observability, ObservabilityArgs
from components.pod_size_admission import PodSizeAdmission, PodSizeAdmissionArgs
from components.queues import QueueHierarchy, QueueHierarchyArgs
from components.tenant import TenantCluster, TenantClusterArgs
from config import PROJECT, load_platform, sharing
from config.access_rules import endpoint_node_ports
from config.audit_trail import audit_trail
from config.capacity import autoscaler_node_resources
from config.cpu_memory_capacity import pool_guarantees
from config.snapshots import SECRETS as BACKUP_SECRETS
from config.source import raw_stack_config, team_alert_addresses

raw, secrets_set, placeholders = raw_stack_config()
platform = load_platform(raw, secrets_set=secrets_set, placeholders=placeholders, stack=pulumi.get_stack())
for warning in platform.warnings:
    pulumi.log.warn(warning)
for note in platform.notes:
    pulumi.log.info(note)

# Judged before any resource is registered: its content is only known here, decrypted.
team_addresses = team_alert_addresses(platform)
secrets = pulumi.Config(PROJECT)
host = HostCluster("host", HostClusterArgs(
    cluster=platform.cluster,
    profile_keys=sharing.profile_keys(platform.gpu_operator.time_slicing),
    ssh_private_key=secrets.get_secret("sshPrivateKey"),
    kubeconfig=secrets.get_secret("kubeconfig"),
    host=platform.host,
    autoscaler_node_resources=autoscaler_node_resources(platform),
))
gpu_operator = GpuOperator("gpu-operator", GpuOperatorArgs(
    settings=platform.gpu_operator, host_kind=platform.cluster.kind, provider=host.provider,
    mirrors=platform.mirrors))
kai = KaiScheduler("kai", KaiSchedulerArgs(settings=platform.kai_scheduler, provider=host.provider,
                                           kubectl_image=platform.kubectl_image))
queues = QueueHierarchy("queues", QueueHierarchyArgs(
    organization=platform.organization, teams=platform.teams, provider=host.provider,
    scheduler_ready=kai.queue_webhook_ready,
    cpu_memory_guarantees=[found.record() for found in pool_guarantees(platform)]))
endpoint_ports = endpoint_node_ports(platform.teams)
pod_size_admission = PodSizeAdmission("pod-size-admission", PodSizeAdmissionArgs(teams=platform.teams,
                                                                                provider=host.provider))
tenants = {
    team.name: TenantCluster(f"tenant-{team.name}", TenantClusterArgs(
        team=team, provider=host.provider, queue=queues.team_queues[team.name], cluster_dns=host.cluster_dns,
        endpoint_node_ports=endpoint_ports, trusted_node_ports=platform.host.trusted_node_ports,
        kubectl_image=platform.kubectl_image,
        pod_size_admission=pod_size_admission,
        prerequisites=host.tenant_prerequisites,
        backup_credentials=[secrets.get_secret(name) for name in BACKUP_SECRETS] if team.vcluster.backup else ()))
    for team in platform.teams
}
if platform.observability.enabled:
    observability = Observability("observability", ObservabilityArgs(
        platform=platform, provider=host.provider, kai_release=kai.release,
        gpu_operator=[gpu_operator.release] if gpu_operator.release else [],
        grafana_client_secret=secrets.get_secret("grafanaClientSecret") if "grafanaClientSecret" in secrets_set else None,
        alert_receiver=secrets.get_secret("alertReceiver") if platform.observability.alerting.delivers else None,
        alert_heartbeat=secrets.get_secret("alertHeartbeat") if platform.observability.alerting.heartbeat else None,
        team_alert_addresses=team_addresses))
    pulumi.export("observability", {"mode": platform.observability.prometheus,
                                    "namespace": observability.namespace, "dashboards": observability.dashboards})

pulumi.export("hostKind", platform.cluster.kind)
pulumi.export("hostKubeconfig", host.kubeconfig)
if host.certificate_expiry is not None:
    # MicroK8s' API server certificate lapses after a year unless renewed by hand (docs/operations-running.md, What expires).
    pulumi.export("hostCertificateExpiry", host.certificate_expiry)
host_audit_log = audit_trail(platform.cluster)
if host_audit_log is not None:
    # Who did what on the host (each team's syncer, each tool, each person): where to look after an incident.
    pulumi.export("hostAuditLog", host_audit_log)
pulumi.export("timeSlicing", {
    "namespace": gpu_operator.namespace,
    "configMap": gpu_operator.config_map_name,
    "profileKeys": gpu_operator.profile_keys,
    "defaultKey": gpu_operator.default_profile_key,
})
pulumi.export("orgQueue", platform.organization.name)
if platform.mirrors.images:
    # The smoke test (ops/smoke.py) pulls its pods' images from the same mirrors.
    pulumi.export("imageMirrors", platform.mirrors.images)
pulumi.export("tenants", {
    team.name: {"namespace": team.namespace, "queue": team.queue_name, "vcluster": team.vcluster_name,
                "connectCommand": tenants[team.name].connect_command,
                # How the smoke test's pods ask for a GPU and load what the tier needs (config/gpu_asks.py).
                "isolation": isolation_outputs(team)}
    for team in platform.teams
})
pulumi.export("tenantKubeconfigs", {name: tenant.kubeconfig for name, tenant in tenants.items()})
# When each of them stops working: vCluster renews the certificate in its Secret 90 days before, and the next
# `pulumi up` exports the renewed one (docs/operations-running.md, What expires; python -m ops.expiry checks a site).
pulumi.export("tenantKubeconfigExpiry", {name: tenant.kubeconfig_expiry for name, tenant in tenants.items()})
# Per-person access (vcluster.access.oidc): kubeconfigs without secrets, for the teams that have one.
member_kubeconfigs = {name: tenant.member_kubeconfig for name, tenant in tenants.items()
                      if tenant.member_kubeconfig is not None}
if member_kubeconfigs:
    pulumi.export("teamKubeconfigs", member_kubeconfigs)
