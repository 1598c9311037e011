"""What vCluster's snapshots are and how one is taken and restored, read in its source at every accepted release.

docs/operations-data.md ("Backing up and restoring a team") and ops/backup.py rest on these: the URL schemes vCluster
parses (config/snapshots.py), the arguments and flags of the commands ops.backup prints, what a snapshot of the
embedded database holds, who takes it (the control plane's snapshot controller, registered in the open-source
build), and what ``vcluster restore`` does to the running tenant (pauses it, deletes its synced pods, runs a pod
labelled ``app: vcluster-snapshot`` from the control plane's own pod spec, sets the old database aside).
"""

from __future__ import annotations

import base64
import json
import re

import pytest
import yaml

from components import tenant_backup as backup_job
from components.tenant_network import tenant_network_policies
from config import versions
from config.snapshots import SNAPSHOT_SCHEMES, Backup
from ops import backup
from ops.sites import platform_of
from tests.conftest import (
    ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, git, go_function, kubectl_source_tag, mirrored_tag, stack_config,
)

VCLUSTER = "loft-sh/vcluster"
# Where each command of the vcluster CLI is defined, and the files whose flags it takes besides its own.
COMMANDS = {
    ("snapshot", "create"): ("cmd/vclusterctl/cmd/snapshot/create.go", ("pkg/snapshot/options.go",)),
    ("snapshot", "get"): ("cmd/vclusterctl/cmd/snapshot/get.go", ("pkg/snapshot/options.go",)),
    ("restore",): ("cmd/vclusterctl/cmd/restore.go", ("pkg/snapshot/pod/pod.go", "pkg/snapshot/options.go")),
    ("connect",): ("cmd/vclusterctl/cmd/connect.go", ("pkg/cli/connect_helm.go",)),
}
GLOBAL_FLAGS = "pkg/cli/flags/flags.go"
# A team of a MinIO-backed site with every option the job writes.
BACKUP = Backup(bucket="lab-backups", prefix="gpu", every_hours=6, keep=2, endpoint="http://192.168.1.20:9000",
                region="us-east-2")
# A flag definition of spf13/pflag: fs.StringVar(&x, "name", ...), StringVarP(&x, "name", "n", ...), Bool(...)...
FLAG = re.compile(r'\.\w+?(?:Var)?P?\(\s*(?:&[\w.]+,\s*)?"([a-z][a-z0-9-]*)"')


def eks_team():
    return platform_of(stack_config("eks"), "eks").teams[0]


def show(tag: str, path: str) -> str:
    return git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:{path}")


def flags_of(tag: str, *paths: str) -> set[str]:
    return {name for path in paths for name in FLAG.findall(show(tag, path))}


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_schemes_a_snapshot_url_may_have_are_vclusters(tag):
    parse = go_function(show(tag, "pkg/snapshot/options.go"), "Parse")
    [listed] = re.findall(r"supportedSchemes := \[\]string\{([^}]*)\}", parse)
    assert tuple(re.findall(r'"(\w+)"', listed)) == SNAPSHOT_SCHEMES
    # container:// is the control plane's own filesystem; https:// is Azure blob storage.
    assert "snapshotOptions.Container.Path = parsedURL.Path" in parse
    assert 'snapshotOptions.Type = "azure"' in parse
    # An s3:// URL names a bucket and a key; its options come from the query, an endpoint base64-encoded.
    assert "snapshotOptions.S3.Bucket = parsedURL.Host" in parse
    options = show(tag, "vendor/github.com/loft-sh/api/v4/pkg/snapshot/options.go")
    assert re.search(r'S3URL\s+string\s+`json:"url,omitempty" url:"url,base64"`', options)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
@pytest.mark.parametrize("action", ["snapshot", "restore"])
def test_every_command_ops_backup_prints_takes_its_arguments_and_flags(tag, action):
    """The vcluster commands take the vCluster's name and the URL as their two arguments, and only flags they
    define (or the CLI's global ones)."""
    team = platform_of(stack_config("eks"), "eks").teams[0]
    url = f"s3://bucket/{team.vcluster_name}/snapshot.tar.gz"
    commands = backup.restore_commands(team, url, volume_lost=True) if action == "restore" else \
        backup.snapshot_commands(team, url)
    # Both positional arguments, exactly: pkg/cli/snapshot_helm.go resolveSnapshotArgs.
    resolve = go_function(show(tag, "pkg/cli/snapshot_helm.go"), "resolveSnapshotArgs")
    assert "len(args) != 2" in resolve and "return args[0], args[1], nil" in resolve
    global_flags = flags_of(tag, GLOBAL_FLAGS)
    assert {"namespace", "context"} <= global_flags
    checked = 0
    for command in (command for command in commands if command[0] == "vcluster"):
        words = [word for word in command[1:3] if not word.startswith("-")]
        path = next(path for path in COMMANDS if tuple(words[:len(path)]) == path)
        source, shared = COMMANDS[path]
        assert re.search(rf'Use:\s+"{path[-1]}"', show(tag, source)), (tag, path)
        arguments = command[1 + len(path):]
        positional = arguments[:arguments.index("--namespace")] if "--namespace" in arguments else arguments
        if path != ("connect",):
            assert positional == [team.vcluster_name, url], command
        known = flags_of(tag, source, *shared) | global_flags
        used = {word[2:].split("=")[0] for word in arguments if word.startswith("--") and word != "--"}
        assert used <= known, (tag, path, used - known)
        checked += 1
    assert checked == 2


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_a_snapshot_of_the_embedded_database_is_every_key_and_no_volume(tag):
    client = show(tag, "pkg/snapshot/client.go")
    run = go_function(client, "(c *Client) Run")
    # Anything but embedded etcd (a Pro backing store) is written key by key: the team's whole virtual cluster.
    assert "if vConfig.BackingStoreType() == vclusterconfig.StoreTypeEmbeddedEtcd {" in run
    assert "c.writeKeyValueSnapshot(ctx, etcdClient, objectStore)" in run
    assert 'etcdClient.ListStream(ctx, "/")' in go_function(client, "(c *Client) writeKeyValueSnapshot")
    # Restoring the embedded database sets the old one aside and writes a new one from the snapshot's keys.
    restore = show(tag, "pkg/snapshot/restoreclient.go")
    assert "backupFile(ctx, constants.K8sSqliteDatabase)" in go_function(restore, "newRestoreEtcdClient")
    assert 'K8sSqliteDatabase = filepath.Join(DataDir, "state.db")' in show(tag, "pkg/constants/constants.go")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_control_plane_takes_the_snapshot_in_the_open_source_build(tag):
    """``vcluster snapshot create`` writes a request (a Secret holding the options, credentials included, and a
    ConfigMap) into the host namespace; the control plane's snapshot controller, registered unconditionally,
    uploads the snapshot itself. Only scheduled snapshots (``snapshots.auto``) are Pro
    (tests/test_vcluster_values_contract.py)."""
    register = show(tag, "pkg/controllers/register.go")
    assert "err = registerSnapshotController(registerContext)" in go_function(register, "RegisterControllers")
    create = go_function(show(tag, "pkg/cli/snapshot_helm.go"), "CreateSnapshot")
    assert "createSnapshotRequest(ctx, vCluster, kubeClient, snapshotOpts, log)" in create
    # The CLI fills in the S3 credentials of the machine it runs on, unless the URL says not to.
    options = show(tag, "pkg/snapshot/options.go")
    assert "s3.FillCredentials(&snapshotOptions.S3, true)" in go_function(options, "SetURLAndFillCredentials")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_restore_pauses_the_tenant_and_runs_a_pod_the_snapshot_policy_selects(tag):
    pause = go_function(show(tag, "pkg/cli/restore_helm.go"), "pauseVCluster")
    assert "lifecycle.PauseVCluster(ctx, kubeClient, vCluster.Name, vCluster.Namespace, true, log)" in pause
    assert 'lifecycle.DeletePods(ctx, kubeClient, "vcluster.loft.sh/managed-by="+vCluster.Name' in pause
    pod = go_function(show(tag, "pkg/snapshot/pod/pod.go"), "CreateSnapshotPod")
    assert re.search(r'Labels: map\[string\]string\{\s*"app": "vcluster-snapshot",\s*\}', pod)
    # The pod is the control plane's: its service account, security contexts and volumes, so it passes the
    # namespace's Pod Security level as the control plane does.
    for copied in ("ServiceAccountName:            serviceAccount", "SecurityContext:               podSpec.SecurityContext",
                   "SecurityContext: syncerContainer.SecurityContext"):
        assert copied in pod, copied
    for team in platform_of(stack_config("eks"), "eks").teams:
        assert tenant_network_policies(team)["snapshot"]["spec"]["podSelector"] == \
            {"matchLabels": {"app": "vcluster-snapshot"}}


# --- what the scheduled snapshot job (components/tenant_backup.py) relies on ---------------------------------------


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_job_runs_the_control_planes_image_as_the_chart_names_it(tag):
    values = yaml.safe_load(show(tag, "chart/values.yaml"))
    image = values["controlPlane"]["statefulSet"]["image"]
    assert (image["registry"], image["repository"], image["tag"]) == \
        (versions.VCLUSTER_IMAGE_REGISTRY, versions.VCLUSTER_CONTROL_PLANE_REPOSITORY, "")
    helper = show(tag, "chart/templates/_helper.tpl")
    assert '{{- $tag := .Chart.Version -}}' in helper
    # The config the job's binary reads is the control plane's, from the Secret the chart writes.
    statefulset = show(tag, "chart/templates/statefulset.yaml")
    assert re.search(r"- name: vcluster-config\s+secret:\s+secretName: vc-config-\{\{ \.Release\.Name \}\}",
                     statefulset)
    assert re.search(r"- name: vcluster-config\s+mountPath: /var/lib/vcluster\n", statefulset)
    constants = show(tag, "pkg/constants/constants.go")
    assert f'DefaultVClusterConfigLocation = "{backup_job.CONFIG_MOUNT}/config.yaml"' in constants
    assert f'VClusterStorageOptionsEnv = "{backup_job.OPTIONS_ENV}"' in constants
    assert f'VClusterStandaloneEnvVar              = "{backup_job.STANDALONE_ENV}"' in \
        show(tag, "pkg/constants/standalone.go")
    # vCluster's own snapshot and restore pods run /vcluster in the control plane's image, and it execs sh there.
    pod = show(tag, "pkg/snapshot/pod/pod.go")
    assert "image := syncerContainer.Image" in pod and 'Command:   []string{"sh", "-c",' in pod
    assert '[]string{"/vcluster", "snapshot"}' in show(tag, "pkg/cli/snapshot_helm.go")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_snapshot_create_in_the_pod_writes_the_request_from_the_environment(tag):
    assert "rootCmd.AddCommand(snapshot.NewSnapshotCommand())" in show(tag, "cmd/vcluster/cmd/root.go")
    assert "cmd.AddCommand(NewCreateCmd())" in show(tag, "cmd/vcluster/cmd/snapshot/snapshot.go")
    create = show(tag, "cmd/vcluster/cmd/snapshot/create.go")
    for step in ('config.LoadConfig(os.Getenv("VCLUSTER_NAME"))', "snapshot.ParseOptionsFromEnv()",
                 "setupconfig.InitClientConfig()", "snapshot.CreateSnapshotRequestResources("):
        assert step in create, step
    load = go_function(show(tag, "pkg/config/load.go"), "LoadConfig")
    assert 'if standaloneEnv == "true" {' in load and "LoadInClusterConfig(vClusterName" in load
    # Its options: base64 of the JSON of loft-sh/api's Options, whose tags options_data writes.
    assert "base64.StdEncoding.DecodeString(snapshotOptions)" in show(tag, "pkg/snapshot/options.go")
    options = show(tag, "vendor/github.com/loft-sh/api/v4/pkg/snapshot/options.go")
    assert 'Type string `json:"type,omitempty"`' in options and re.search(r'S3\s+S3Options\s+`json:"s3"`', options)
    written = {key for slot in backup_job.options_data(BACKUP, eks_team(), "id", "secret").values()
               for key in json.loads(base64.b64decode(slot))["s3"]}
    tags = set(re.findall(r'json:"([a-z-]+),omitempty"', options[options.index("type S3Options"):
                                                                 options.index("type OCIOptions")]))
    assert written <= tags, written - tags


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_a_slots_url_names_the_store_as_the_cli_parses_it(tag):
    """ops.backup's slot URLs carry the store's options in the query: each key is a url tag of the S3 options, which
    Parse reads strictly (an unknown key fails), the endpoint base64-encoded."""
    assert "options.PopulateStructFromMap(&snapshotOptions.S3, parsedURL.Query(), true)" in \
        go_function(show(tag, "pkg/snapshot/options.go"), "Parse")
    options = show(tag, "vendor/github.com/loft-sh/api/v4/pkg/snapshot/options.go")
    s3 = options[options.index("type S3Options"):options.index("type OCIOptions")]
    tags = dict(re.findall(r'url:"([a-z-]+)(,base64)?"', s3))
    team = eks_team()
    url = BACKUP.slot_url(team.namespace, team.vcluster_name, 1)
    query = dict(pair.split("=", 1) for pair in url.split("?", 1)[1].split("&"))
    assert set(query) <= set(tags), set(query) - set(tags)
    assert tags["url"] == ",base64" and base64.b64decode(query["url"]).decode() == BACKUP.endpoint


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_request_is_two_creates_and_carries_no_synced_label(tag):
    """The job's Role grants what CreateSnapshotRequestResources does (and a read of the ConfigMap back), and the
    request's labels are not the managed-by label the synced-objects policy matches, so the control plane's updates
    to it pass."""
    request = go_function(show(tag, "pkg/snapshot/request.go"), "CreateSnapshotRequestResources")
    assert set(re.findall(r"kubeClient\.CoreV1\(\)\.(\w+)\([^)]*\)\.(\w+)\(", request)) == \
        {("Secrets", "Create"), ("ConfigMaps", "Create")}
    resources = show(tag, "vendor/github.com/loft-sh/api/v4/pkg/snapshot/resources.go")
    labels = go_function(resources, "NewOptionsSecret")
    assert "VClusterNamespaceLabel: vClusterNamespace" in labels and "managed-by" not in labels


# --- how the job learns the outcome (components/tenant_backup.py SCRIPT) ---------------------------------------------

API_SNAPSHOT = "vendor/github.com/loft-sh/api/v4/pkg/snapshot"


def go_struct(source: str, name: str) -> list[tuple[str, str]]:
    """The fields of Go struct ``name``, in order, as (field, json tag); an embedded struct is named by its type."""
    body = source[source.index(f"type {name} struct {{"):]
    body = body[body.index("{") + 1:body.index("\n}")]
    return re.findall(r'^\s*(\w+)(?:\s+[\w.\[\]*]+)?\s+`json:"([^"]*)"', body, re.MULTILINE)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_request_is_named_when_written_and_printed_with_its_name_first(tag):
    """``snapshot create`` prints the request's JSON, whose first key is its name; the ConfigMap bears the name the
    API server generated for the Secret, so it cannot be known before and the Role cannot name it."""
    create = show(tag, "cmd/vcluster/cmd/snapshot/create.go")
    assert "encodedBytes, err := json.Marshal(request)" in create and "os.Stdout.Write(encodedBytes)" in create
    request = go_function(show(tag, "pkg/snapshot/request.go"), "CreateSnapshotRequestResources")
    assert "Name:              secret.Name," in request and "configMap.Name = secret.Name" in request
    assert 'secret.GenerateName = fmt.Sprintf("%s-snapshot-request-", vClusterName)' in \
        go_function(show(tag, f"{API_SNAPSHOT}/resources.go"), "NewSnapshotOptionsSecret")
    types = show(tag, f"{API_SNAPSHOT}/request.go")
    assert go_struct(types, "Request") == [("RequestMetadata", "metadata,omitempty"), ("Spec", "spec,omitempty"),
                                           ("Status", "status,omitempty")]
    assert go_struct(types, "RequestMetadata")[0] == ("Name", "name")
    # The options (the store's keys) are never marshalled into the request.
    assert ("Options", "-") in go_struct(types, "RequestSpec")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_control_plane_records_the_outcome_in_the_requests_config_map(tag):
    """The request's JSON under ``snapshotRequest``; its status begins with the phase and ends with the error. Done
    is Completed, or one of the phases the job reports as failed; a failure's message is the error's text."""
    assert 'RequestKey = "snapshotRequest"' in show(tag, f"{API_SNAPSHOT}/constants.go")
    types = show(tag, f"{API_SNAPSHOT}/request.go")
    status = go_struct(types, "RequestStatus")
    assert status[0] == ("Phase", "phase,omitempty") and status[-1] == ("Error", "error,omitempty")
    assert go_struct(show(tag, f"{API_SNAPSHOT}/types.go"), "SnapshotError") == [("Message", "message,omitempty")]
    done = re.findall(r"r\.Status\.Phase == (RequestPhase\w+)", go_function(types, "(r *Request) Done"))
    phases = dict(re.findall(r'(RequestPhase\w+)\s+RequestPhase = "(\w*)"', types))
    assert {phases[name] for name in done} == {"Completed", *backup_job.FAILED_PHASES}
    controller = show(tag, "pkg/snapshot/controller.go")
    reconcile = go_function(controller, "(c *Reconciler) Reconcile")
    assert "snapshotRequest.Status.Phase = snapshotapi.RequestPhaseFailed" in reconcile
    assert "snapshotRequest.Status.Error.Message = retErr.Error()" in reconcile
    assert "snapshotRequest.Status.Phase = snapshotapi.RequestPhaseCompleted" in \
        go_function(controller, "(c *Reconciler) reconcileCreatingEtcdBackup")
    assert "configMap.Data[snapshotapi.RequestKey] = string(snapshotRequestJSON)" in \
        go_function(controller, "(c *Reconciler) updateRequest")
    # The marks the job's shell looks for, as they read inside the ConfigMap's JSON (the request a string in it).
    request = json.dumps({"metadata": {"name": "n"}, "spec": {}, "status": {"phase": "Failed", "error": {
        "message": "m"}}}, separators=(",", ":"))
    config_map = json.dumps({"data": {"snapshotRequest": request}}, separators=(",", ":"))
    assert backup_job.PHASE_MARK + "Failed" in config_map and backup_job.MESSAGE_MARK + "m" in config_map


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_a_retrys_request_for_the_same_url_cancels_the_first_trys_unfinished_one(tag):
    """A retry writes the same slot (components/tenant_backup.py): the request's URL is the options' (the store
    and the slot's key), and a new request cancels an older one for that URL still under way, not another URL's."""
    assert re.search(r"\bURL:\s+options\.GetURL\(\),", go_function(show(tag, "pkg/snapshot/request.go"),
                                                                  "CreateSnapshotRequestResources"))
    cancel = go_function(show(tag, f"{API_SNAPSHOT}/request.go"), "(r *Request) ShouldCancel")
    assert "if otherRequest.Spec.URL != r.Spec.URL {\n\t\treturn false" in cancel
    assert "if otherRequest.CreationTimestamp.Time.After(r.CreationTimestamp.Time) {\n\t\treturn false" in cancel
    assert "otherRequest.Status.Phase == RequestPhaseCreatingEtcdBackup" in cancel
    assert "request.ShouldCancel(otherRequest)" in go_function(show(tag, "pkg/snapshot/controller.go"),
                                                              "(c *Reconciler) cancelPreviousRequests")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vclusters_release_image_is_alpines(tag):
    """The job's shell runs busybox's ``wget`` and ``sleep`` besides ``sh``, ``date`` and ``cat``: alpine's. This is
    the open-source image's build; the chart's default, vcluster-pro, is built outside this repository."""
    [base] = re.findall(r"^FROM (\S+)", show(tag, "Dockerfile.release"), re.MULTILINE)
    assert re.fullmatch(r"alpine:3\.\d+", base), base


BUSYBOX = "mirror/busybox"
# How long busybox's wget waits for a silent server when not given -T: the stand-in wget of
# tests/test_tenant_backup.py waits as long.
BUSYBOX_WGET_TIMEOUT = 900
BUSYBOX_CONFIG_DEFAULT = re.compile(r"//config:config FEATURE_WGET_TIMEOUT\n(?://config:.*\n)*?//config:\tdefault y\n")


@pytest.mark.parametrize("tag", MIRRORED_TAGS[BUSYBOX])
def test_busybox_wget_takes_a_timeout_and_waits_as_the_backup_test_assumes_without_one(tag):
    """The job's wget is given ``-T`` (components/tenant_backup.py WGET_TIMEOUT_SECONDS): busybox builds the option
    by default, and without it waits BUSYBOX_WGET_TIMEOUT seconds for a silent server, as tests/test_tenant_backup.py's
    stand-in does."""
    source = git(BUSYBOX, "show", f"{mirrored_tag(BUSYBOX, tag)}:networking/wget.c")
    assert BUSYBOX_CONFIG_DEFAULT.search(source)
    assert '"cqSO:o:P:Y:U:T:+"' in source  # -T takes a number
    assert f"G.timeout_seconds = {BUSYBOX_WGET_TIMEOUT};" in source
    assert "-T" in backup_job.SCRIPT and backup_job.WGET_TIMEOUT_SECONDS < backup_job.TRY_OVERHEAD_SECONDS


KUBECTL = "kubernetes/kubectl"


@pytest.mark.parametrize("image", sorted(set(versions.KUBECTL_IMAGES.values())))
def test_kubectl_proxy_serves_the_loopback_and_filters_as_the_sidecar_expects(image):
    tag = mirrored_tag(KUBECTL, kubectl_source_tag(image))
    command = git(KUBECTL, "show", f"{tag}:pkg/cmd/proxy/proxy.go")
    for flag in ("address", "port", "accept-paths", "reject-methods"):
        assert f'"{flag}"' in command, flag
    assert f"defaultPort         = {backup_job.PROXY_PORT}" in command
    server = git(KUBECTL, "show", f"{tag}:pkg/proxy/proxy_server.go")
    accept = go_function(server, "(f *FilterServer) accept")
    assert "matchesRegexp(method, f.RejectMethods)" in accept and "matchesRegexp(path, f.AcceptPaths)" in accept
    # The shell calls http://127.0.0.1:PORT: a host the default filter accepts once the port is split off.
    assert 'DefaultHostAcceptRE = "^localhost$,^127\\\\.0\\\\.0\\\\.1$' in server
    assert "net.SplitHostPort(header)" in go_function(server, "extractHost")
    assert 'parts := strings.Split(str, ",")' in go_function(server, "MakeRegexpArray")
    [sidecar] = backup_job.backup_pod_spec(eks_team(), BACKUP, image)["initContainers"]
    assert not any("," in arg for arg in sidecar["args"]), "a comma splits kubectl proxy's patterns"
