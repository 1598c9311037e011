"""The hand-written chapters of the config reference: what no single key definition says.

tools.docs.config_reference puts them around the tables it derives from the definitions. The rules
described here are the loader's cross-field checks (config/load.py and the readers); a section's own
introduction lives with its keys (``Block.intro`` / ``Block.notes``).
"""

from config import versions
from config.dns_guarantee import dns_in_queue_units_text

INTRO = """\
Every key lives under the `gpu-tenancy:` namespace in `Pulumi.<stack>.yaml`. The tables of the pages below drop
that prefix. Leaving a key out gives you the default shown. A `—` default means the key is optional
and has no value. "required" means the program stops without it.

Each key is declared once, in `config/`: the top-level blocks in `load.py`, each block's keys in the module that
reads it (`load_host.py`, `load_microk8s.py`, `load_eks.py`, `snapshots.py` for `backup`, ...). The loader's
checks, the JSON Schema and these pages all come from those definitions. `config/versions.py` holds the pinned
versions, and `Pulumi.yaml` declares the top-level keys for the Pulumi CLI."""

SECRETS = """\
Set these only with `pulumi config set --secret`. If one is present in plain text, the
program stops. They are the only keys it keeps secret: a value set with `--secret` under any other
key (a misspelt secret key, a chart value under `--path`) would be read as plain config, into
resource inputs, plans and error messages, so the program stops on it too, without showing it.
An offline plan (`tools.plan`) of a site that needs an unset secret uses a placeholder and warns
with the command to run; `pulumi up` stops with a config error instead."""

VALIDATION_RULES = """\
The program checks the whole config before it registers any resource. It reports every problem at
once, each with the full key path, the bad value and a fix, for example
`gpu-tenancy:teams[1].resources.gpu.limit = 0.1: is below the quota (0.33). Fix: …`. Each key's
type, bounds and allowed values are in the tables above; these rules tie keys together or go
beyond a single value:

- **Names** (`organization.name`, `teams[].name`, `vclusterName`, `namespace`, node group names,
  `cluster.eks.name`, `gpuOperator.namespace`, `configMapName`) must be DNS-1123 labels: at most
  63 characters (a `vclusterName` at most 52: the vCluster's StatefulSet is named after it), lowercase
  letters, digits and `-`, starting and ending with a letter or digit.
  Team `name`, `vclusterName` and `namespace` must each be unique across teams. A team's
  `namespace` can't be `kube-system`, `kube-public`, `kube-node-lease`, `default`, KAI's or the GPU
  Operator's namespace. A `vclusterName` can't end in `shared-gpu-<number>` (the host names of a
  tenant's ConfigMaps end in it, and KAI keeps a fractional pod's device list in a ConfigMap named
  that way). No name can be one that Helm's and vCluster's YAML reader (YAML 1.1, go-yaml v2) takes for
  a boolean, null, number or date (`yes`, `y`, `off`, `null`, `123`, `1e3`, `0x1f`, `2024-1-5`): the
  charts (the vCluster chart's release name and namespace) and the program's in-tenant manifests write
  names unquoted. GPU node group names must be unique and can't be `system`.
- **Versions**: `kaiScheduler.version` must be v0.16.0 or later. A retired key (`teams[].strict`)
  is an error that says what replaced it.
- **Reserved queue names**: `default-queue` and `default-parent-queue`, which KAI creates on
  install, can't be used. A team can't have the organization's name.
- **Queue rules**: quota and limit must be ≥ 0 or `-1`, and the weight must be ≥ 0. The limit must
  be ≥ the quota, and it must be `-1` when the quota is `-1`. Numbers must be real numbers, not
  strings, and at most 10^12.
- **Org GPU quota**: when `organization.resources.gpu.quota` is finite, every team needs a finite
  gpu quota, and the team quotas must add up to no more than the org quota.
- **Capacity warning** (a warning only): the org gpu quota is larger than the GPUs the config says
  the host has. That count comes from `cluster.microk8s.gpus`, `cluster.kubeconfig.gpus`, or, on
  EKS, GPUs per instance type in `config/capacity.py` (no warning for unknown types) × each group's
  `desiredSize`, or its `maxSize` with `cluster.eks.autoscaler: cluster-autoscaler`.
- **Time-slicing + KAI sharing warning**: `kaiScheduler.gpuSharing` is on while the default
  profile, or an EKS group's `sharingProfile`, is `time-sliced`. KAI would count every replica as
  a whole GPU and then split it again, so one card could be promised several times over. On a group
  split into MIG slices (`migConfig`, `mixed` strategy) the warning says instead that the profile has no
  effect: the device plugin replicates only `nvidia.com/gpu`, which such a node does not advertise.
- **One GPU Operator**: `cluster.microk8s.enableNvidiaAddon: true` requires
  `gpuOperator.mode: microk8s-addon`.
- **Pinned versions**: a chart version must be one of the chart's releases the program was checked
  against (`config/versions.py` `*_RELEASES`): every release from its floor to the pinned default,
  no pre-release, no build and no later release; `latest`, `stable`, `*` and ranges are refused.
  GPU Operator and KAI versions start with `v`, and vCluster versions don't. The floors, the oldest
  releases the program works with (`config/versions.py` says why for each): GPU Operator `{gpu}`,
  KAI `{kai}`, vCluster `{vcluster}` (the first whose virtual cluster runs Kubernetes 1.36),
  kube-prometheus-stack `{kps}`. `cluster.<kind>.kubernetesVersion` must be `1.NN`, from `{kube}`
  to `{kube_newest}` (one minor version past the newest kubectl pinned, `config/versions.py`
  `KUBECTL_IMAGES`).
- **Per-kind required keys**: `cluster.kind` is required, and only its own settings block is
  allowed. On `eks`, `region` and at least one `gpuNodeGroups` entry (with `name` and
  `instanceTypes`) are required. `vpcId` and the subnet lists go together. `vpcCidr` must be an
  IPv4 block with room for the subnets. Node group sizes must satisfy min ≤ desired ≤ max.
  `microk8s-addon` mode only works on `microk8s`. `organization.name` and at least one team with a
  `name` are required.
- **Observability**: `external` settings only with `prometheus: external`, which needs
  `external.releaseLabel`; `grafana` only with `install`; `timeAwareFairness.enabled` needs
  Prometheus (`install`, or `external` with `external.url`). An installed monitoring stack gets a
  namespace of its own; an external one's objects may share the operator's or KAI's, never a team's.
- **Unknown keys** are errors at any depth, and they come with a suggestion, for example
  `teams[0].nmae … did you mean 'name'?`. Wrong types are errors too.
- **Empty keys**: a key or list item written with nothing after it (a YAML null) is an error naming
  it, as the JSON Schema has it, not a default: give it a value, or remove it
  (`pulumi config rm --path`) to take the default.
- **Quantities** are read as the API server reads them: `500m`, `4`, `1.5`, `16Gi`, `64G`, `250n`,
  `1e9`; a plain number is one too. Negative ones, and ones above 2^63-1, are refused.
- **Secrets** must be set with `--secret` when they are needed: `sshPrivateKey` for a remote
  MicroK8s host, `kubeconfig` for `cluster.kind: kubeconfig`.
- **Config namespaces**: besides `gpu-tenancy`, a stack may set keys of `pulumi`, `aws`, `eks`,
  `kubernetes` and `command` (e.g. `aws:region`). Any other namespace is an error naming the
  closest known one: `gpu-tenency:kaiScheduler … did you mean 'gpu-tenancy:kaiScheduler'?`.
- **How stack files are read**: as the Pulumi CLI reads them, YAML 1.2 (`config/stack_file.py`,
  used by every tool and test). An unquoted value that older YAML 1.1 tools read differently is an
  error naming its key: `yes`/`no`/`on`/`off` (write `true`/`false`, or quote them for text), a
  date such as `2026-01-01`, `010`, `1e3` or `1_000` (quote them, or write the number plainly). A
  key written twice in one map, explicit YAML tags and broken YAML (reported with file, line and
  column) are errors too. Anchors, aliases and merge keys work as the CLI reads them: `- <<: *team`
  then `name: team-b` gives a second team the first one's settings under its own name (a map's own
  keys win, then the first map merged; nested maps are taken whole, not merged).
- **Layouts that cannot work**: an EKS `systemNodeGroup.desiredSize` of 0 (the system group holds
  the only untainted nodes: KAI, the queue-webhook probe and the vCluster control planes run
  there); `gpuOperator.driverEnabled: true` on EKS (the AL2023 NVIDIA AMI ships the driver); a
  team `cpu` or `memory` quota below its DNS pod's requests ({dns_requests}), or a finite
  organization quota below all the teams' DNS pods together: KAI runs that non-preemptible pod
  only within the quotas of its queue and the organization's, so it would stay Pending.
- **Warnings** also cover: a system node group with `minSize: 0`, or whose nodes (`desiredSize`, or
  `maxSize` under `cluster.eks.autoscaler`) cannot hold the teams' vCluster control planes, KAI's services and EKS's add-ons, by
  their requests or by the pods each node may run (nodeadm's maxPods of the instance type; the deployability
  check counts every pod the charts add, [operations](operations-running.md#the-system-nodes)); `gpuOperator.toolkitEnabled: true`
  on EKS (the AMI ships the toolkit); an org GPU quota, or team GPU quotas under an unlimited org quota,
  adding up to more GPUs than the host has, counted as KAI counts them (a MIG slice by its compute
  units, a 3g slice as 3; each time-slice replica of a card on the time-sliced profile as one), or the
  GPU quotas of the teams kept on
  some of several EKS GPU node groups adding up to more than those groups hold; MIG slices of a `mixed` pool
  that no `mig` team pinned there asks for, which no team can use; teams that can run only on
  GPU node groups of `minSize: 0`, stranded when those scale to zero; team `cpu` or `memory` quotas (derived from their `vcluster.resourceQuota` unless
  written) adding up to more than a finite org quota of the same resource, which KAI over-commits silently, or
  to more than a MicroK8s box's stated `cpu` or `memory`; a shared team's fraction of a GPU (in its quota, or a
  limit below 1) while `kaiScheduler.gpuSharing` is off, where pods ask whole GPUs; a team with
  `podSecurity: privileged`. A **note** (information only) says
  when half a GPU or more of the host is guaranteed to no team (those MIG slices left out).
- **One problem, one message**: a misspelt key is reported once, without follow-on errors from the
  default it leaves behind (a misspelt `quota` does not also report the `limit`); a clashing team
  name is not reported again for the `vclusterName` and `namespace` derived from it.""".format(
    gpu=versions.GPU_OPERATOR_MINIMUM_VERSION, kai=versions.KAI_MINIMUM_VERSION, vcluster=versions.VCLUSTER_MINIMUM_VERSION,
    kps=versions.KUBE_PROMETHEUS_STACK_MINIMUM_VERSION, kube=versions.KUBERNETES_MINIMUM_VERSION,
    kube_newest=versions.KUBERNETES_NEWEST_ACCEPTED_VERSION, dns_requests=dns_in_queue_units_text())

SHARING_PROFILES = """\
The program creates a device-plugin ConfigMap (`timeSlicing.configMapName`, in the operator's
namespace) that always holds two profiles:

- **`exclusive`**: `version: v1` with no sharing, so each GPU is advertised once. Use this wherever
  KAI splits GPUs with `gpu-fraction`. KAI shares a GPU by itself and needs no device-plugin
  sharing.
- **`time-sliced`**: every GPU is advertised `timeSlicing.replicas` times as `nvidia.com/gpu`
  (`renameByDefault: false`, `failRequestsGreaterThanOne: true`). This is for nodes where KAI
  sharing is not used.

Each ConfigMap key carries a content hash, such as `exclusive-aefdbe17` or
`time-sliced-d42e3364`: the first 8 hex characters of the SHA-256 of the rendered profile. The
device plugin doesn't reload when the content behind a key changes, but it does reload when a
node's selected key changes. So changing `replicas` renames the `time-sliced` key, and the change
rolls out to every node that uses it. The operator's default key (`devicePlugin.config.default`,
or the patched ClusterPolicy in `microk8s-addon` mode) follows `timeSlicing.defaultProfile`.

A node picks a profile through the label `nvidia.com/device-plugin.config=<key>`. If a node has no
label, it uses the default. On EKS, set `gpuNodeGroups[].sharingProfile` and the program puts the
label on the node group. On MicroK8s or an existing cluster, label nodes yourself. The ConfigMap
also holds every profile under its plain name (`exclusive`, `time-sliced`), so a hand-set label
such as `nvidia.com/device-plugin.config=time-sliced` never points at a key that disappeared (that
would break the device plugin's config manager). The price: a node labelled with a plain name picks
up a content change only when its device plugin restarts; label it with the hashed key from the
`timeSlicing.profileKeys` output to get every change rolled out, and relabel it when the key
changes, right after `pulumi up` (the plan diff names the old and the new key; see
[Changing a running site](operations-running.md#changing-a-running-site)). In `external` mode, point your operator at the ConfigMap and default key from the
`timeSlicing` output."""

EDITOR_SUPPORT = """\
`schema/stack-config.schema.json` is the JSON Schema of `Pulumi.<stack>.yaml`. It is not written by
hand: `python -m tools.docs.schema` derives it from the same key definitions as the config reference, each key
with its description, and a test fails when the committed file is stale. It checks keys, types,
enums and bounds as you type; cross-field rules (quotas fitting, unique names) stay with the loader.
With the YAML language server (VS Code's YAML extension and most editors), put this first line in
a stack file:

```yaml
# yaml-language-server: $schema=./schema/stack-config.schema.json
```

or map it once in VS Code's settings: `"yaml.schemas": {"./schema/stack-config.schema.json": "Pulumi.*.yaml"}`
(and leave `Pulumi.yaml` out: it is the project file)."""
