"""With ``vcluster.alwaysPullImages`` no tenant pod starts an image from a node's cache: rule ``image-pull-policy``.

Teams share GPU nodes. Team A's private image, pulled once with A's pull secret, stays in the node's image cache,
and the kubelet starts a container with ``imagePullPolicy: IfNotPresent`` (the API server's default for a tagged
image) or ``Never`` from that cache without asking the registry, so without checking the pod's own credentials.
A hostile team B names A's image with such a policy and a nodeSelector for A's node and reads A's code and
weights. vCluster copies ``image`` and ``imagePullPolicy`` to the host as written. On a site with the setting on,
the team's host policy refuses every synced pod whose containers, of every kind, or image volumes do not pull on
start, and the vCluster's defaults set ``Always`` on every pod created inside, so honest workloads run unmodified.
Pods are written as the tenant writes them, defaulted by the virtual API server, synced as vCluster does it and
mutated by KAI's webhook (tests/tenant_sim.py); the contract at the end reads vCluster's pod translator at every
accepted tag.
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from components.admission import PULL_ALWAYS, REWRITE_HOSTS_CONTAINER, policy_name, policy_spec, team_namespace_selector
from components.isolation_admission import isolation_policy_spec
from components.virtual_defaults import IMAGE_PULL_NAME
from config import versions
from config.gpu_asks import GpuAsk
from config.model import MEMORY_CAPPED
from config.vcluster_images import rewrite_hosts_image
from ops.smoke_objects import gpu_pod, plain_deployment
from tests.config_spec import put
from tests.conftest import ACCEPTED_TAGS, ACCEPTED_VCLUSTER_TAGS, dev_config, eks_config, git, mirrored_tag, run
from tests.mirror_charts import chart_values
from tests.isolation_sim import IsolationTenant
from tests.isolation_spec import isolation_config, prefixed
from tests.tenant_sim import (
    KAI_BINDER, KAI_SCHEDULER, POLICY, Admission, Tenant, container, platform_of, tenant_of, virtual_pod,
)
from tests.test_admission_honest import KAI, kai_doc_pods, refused_docs
from tests.test_virtual_defaults import HONEST, Inside, deployment_pod, job_pod, manifests, without_device_features
from tests.apiserver_pods import pull_policy_defaults
from tests.image_reference_sim import syncer_image_update

VCLUSTER = "loft-sh/vcluster"
TRANSLATE = "pkg/controllers/resources/pods/translate/"
# Team A's private image, already in the node's cache.
VICTIMS_IMAGE = "registry.team-nlp.example/models/llama-ft:v3"
CACHED = ("IfNotPresent", "Never")


def pulling(config: dict) -> dict:
    return put(config, "gpu-tenancy:vcluster.alwaysPullImages", True)


@pytest.fixture(scope="module")
def pulling_dev_run():
    return run(pulling(dev_config()), stack="dev-pulling")


@pytest.fixture(scope="module")
def pulling_eks_run():
    return run(pulling(eks_config()), stack="eks-pulling")


@pytest.fixture(scope="module", params=["dev", "eks"])
def tenant(request, pulling_dev_run, pulling_eks_run) -> Tenant:
    """The hostile team: team B of a site whose nodes it shares with team A."""
    if request.param == "dev":
        return tenant_of(pulling_dev_run, pulling(dev_config()), "team-vision")
    return tenant_of(pulling_eks_run, pulling(eks_config()), "team-legal")


@pytest.fixture(scope="module")
def inside(tenant) -> Inside:
    return Inside(tenant)


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def stolen(name: str = "main", policy: str = "IfNotPresent", **extra) -> dict:
    return {**container(name), "image": VICTIMS_IMAGE, "imagePullPolicy": policy, **extra}


def on_victims_node(tenant: Tenant, **spec) -> dict:
    """A pod of the hostile team on team A's node (kubernetes.io/hostname is a label a tenant may select)."""
    return pull_policy_defaults(virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER,
                                            nodeSelector={"kubernetes.io/hostname": "gpu-node-1"}, **spec))


def pulled(pod: dict) -> dict:
    """``pod`` with every container pulling on start."""
    pod = copy.deepcopy(pod)
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for entry in pod["spec"].get(field, []):
            entry["imagePullPolicy"] = PULL_ALWAYS
    return pod


# --- attacks ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", CACHED)
def test_a_cached_image_is_refused_in_a_container_an_init_container_and_a_sidecar(tenant, policy):
    sidecar = stolen("proxy", policy, restartPolicy="Always")
    pods = [on_victims_node(tenant, containers=[stolen(policy=policy)]),
            on_victims_node(tenant, containers=[container()], initContainers=[stolen("fetch", policy)]),
            on_victims_node(tenant, annotations={"gpu-fraction": "0.5"}, containers=[container()],
                            initContainers=[sidecar])]
    for pod in pods:
        for mutated in (False, True):
            assert rules(tenant.create(pod, mutated=mutated)) == {"image-pull-policy"}
        # The same pod pulling on start is admitted: the rule reads the pull policy, not the image.
        assert tenant.create(pulled(pod)) == []


@pytest.mark.parametrize("policy", CACHED)
def test_a_cached_image_in_a_debug_container_is_refused(tenant, policy):
    running = tenant.host_pod(on_victims_node(tenant))
    debugged = copy.deepcopy(running)
    debug = {"name": "debug", "image": VICTIMS_IMAGE, "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}
    debugged["spec"]["ephemeralContainers"] = [{**debug, "imagePullPolicy": policy}]
    assert rules(tenant.update(running, debugged, subresource="ephemeralcontainers")) == {"image-pull-policy"}
    # kubectl debug --image-pull-policy=Always
    debugged["spec"]["ephemeralContainers"] = [{**debug, "imagePullPolicy": PULL_ALWAYS}]
    assert tenant.update(running, debugged, subresource="ephemeralcontainers") == []


@pytest.mark.parametrize("image", [VICTIMS_IMAGE, "registry.team-nlp.example/models/llama-ft@sha256:" + "a" * 64])
def test_a_pod_that_names_no_policy_arrives_with_the_api_servers_default_and_is_refused(tenant, image):
    """The virtual API server defaults a tagged or digest-pinned image to IfNotPresent before vCluster syncs it."""
    written = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER,
                          containers=[{**container(), "image": image}])
    stored = pull_policy_defaults(written)
    assert stored["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert rules(tenant.create(stored)) == {"image-pull-policy"}
    latest = pull_policy_defaults(virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER,
                                              containers=[{**container(), "image": "busybox"}]))
    assert tenant.create(latest) == []  # untagged means latest, which the API server has pull on every start


@pytest.mark.parametrize("policy", CACHED)
def test_a_cached_image_mounted_as_an_image_volume_is_refused(tenant, policy):
    mount = {"name": "weights", "mountPath": "/weights", "readOnly": True}
    volume = {"name": "weights", "image": {"reference": VICTIMS_IMAGE, "pullPolicy": policy}}
    pod = pulled(on_victims_node(tenant, containers=[{**container(), "volumeMounts": [mount]}], volumes=[volume]))
    assert rules(tenant.create(pod)) == {"image-pull-policy"}
    pod["spec"]["volumes"][0]["image"]["pullPolicy"] = PULL_ALWAYS
    assert tenant.create(pod) == []


def test_vclusters_own_hosts_rewriting_container_passes_with_its_own_image_only(tenant):
    """vCluster adds its init container to a pod with a subdomain (a StatefulSet's) without a pull policy: the host
    defaults it to IfNotPresent. Only that container, with the image the site's values give it, is let through."""
    stateful = pulled(on_victims_node(tenant, hostname="db-0", subdomain="db"))
    host = tenant.host_pod(stateful)
    first = host["spec"]["initContainers"][0]
    assert (first["name"], first["image"], first["imagePullPolicy"]) == (
        REWRITE_HOSTS_CONTAINER, rewrite_hosts_image(tenant.team.vcluster), "IfNotPresent")
    assert tenant.create(stateful) == []
    # A tenant's init container wearing its name passes only with vCluster's public image, which is all it starts.
    for image, refused in ((VICTIMS_IMAGE, {"image-pull-policy"}), (rewrite_hosts_image(tenant.team.vcluster), set())):
        look_alike = pulled(on_victims_node(tenant))
        look_alike["spec"]["initContainers"] = [{**container(REWRITE_HOSTS_CONTAINER), "image": image,
                                                 "imagePullPolicy": "IfNotPresent"}]
        assert rules(tenant.create(look_alike)) == refused


def test_a_pod_running_from_before_the_setting_keeps_its_updates(tenant):
    """Pull policies cannot be updated: a pod created before the site turned the setting on is not refused KAI's and
    the syncer's later writes, nor a debug container that pulls, for its old containers."""
    running = tenant.host_pod(on_victims_node(tenant, annotations={"gpu-fraction": "0.5"}))
    assert running["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    bound = copy.deepcopy(running)
    bound["metadata"]["annotations"]["received-resource-type"] = "Fraction"
    assert tenant.update(running, bound, user=KAI_BINDER) == []
    old_debug = {"name": "old", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                 "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}
    bound["spec"]["ephemeralContainers"] = [old_debug]
    debugged = copy.deepcopy(bound)
    debugged["spec"]["ephemeralContainers"].append({**old_debug, "name": "new", "imagePullPolicy": PULL_ALWAYS})
    assert tenant.update(bound, debugged, subresource="ephemeralcontainers") == []
    debugged["spec"]["ephemeralContainers"][1]["imagePullPolicy"] = "IfNotPresent"
    assert rules(tenant.update(bound, debugged, subresource="ephemeralcontainers")) == {"image-pull-policy"}


def test_a_hosts_rewriting_look_alike_cannot_later_take_a_cached_image(tenant):
    """A tenant's own init container named vcluster-rewrite-hosts, with vCluster's public image and IfNotPresent,
    passes on create; a sidecar (or an init container kept failing) is restarted by the kubelet from the spec.
    vCluster syncs a later image change of it to the host (diff.go calcContainerImageDiff skips that name only in a
    pod it rewrote itself, vcluster.loft.sh/hosts-rewritten), and the kubelet would start the new image from the
    cache: a container that does not pull may not change its image."""
    look_alike = {**container(REWRITE_HOSTS_CONTAINER), "image": rewrite_hosts_image(tenant.team.vcluster),
                  "imagePullPolicy": "IfNotPresent", "restartPolicy": "Always"}
    virtual = pulled(on_victims_node(tenant))
    virtual["spec"]["initContainers"] = [look_alike]
    host = tenant.host_pod(virtual)
    assert "vcluster.loft.sh/hosts-rewritten" not in host["metadata"]["annotations"]
    assert tenant.create(virtual) == []
    patched = copy.deepcopy(virtual)
    patched["spec"]["initContainers"][0]["image"] = VICTIMS_IMAGE
    updated = syncer_image_update(host, patched)
    assert updated["spec"]["initContainers"][0]["image"] == VICTIMS_IMAGE
    assert rules(tenant.update(host, updated)) == {"image-pull-policy"}
    # The containers that pull on start may change their images as before.
    patched = copy.deepcopy(virtual)
    patched["spec"]["containers"][0]["image"] = VICTIMS_IMAGE
    assert tenant.update(host, syncer_image_update(host, patched)) == []


@pytest.mark.parametrize("field", ["containers", "initContainers"])
def test_a_pod_from_before_the_setting_cannot_change_an_image_it_would_start_from_cache(tenant, field):
    """Pull policies cannot be updated, but images can: a pod created before the site turned the setting on keeps
    IfNotPresent, and an image change the syncer copies would start another team's image from the node's cache."""
    virtual = on_victims_node(tenant, initContainers=[{**container("proxy"), "restartPolicy": "Always"}])
    host = tenant.host_pod(virtual)
    assert host["spec"][field][0]["imagePullPolicy"] == "IfNotPresent"
    patched = copy.deepcopy(virtual)
    patched["spec"][field][0]["image"] = VICTIMS_IMAGE
    updated = syncer_image_update(host, patched)
    assert rules(tenant.update(host, updated)) == {"image-pull-policy"}
    # Its images kept, it passes every other write (test_a_pod_running_from_before_the_setting_keeps_its_updates).
    assert tenant.update(host, copy.deepcopy(host)) == []


def test_inside_the_vcluster_the_defaults_pull_and_without_them_the_rules_refuse_as_the_host_does(inside):
    """A tenant gets past the vCluster's defaults only by deleting them; the host refuses the sync all the same."""
    mutated = inside.mutate(on_victims_node(inside.tenant, containers=[stolen(policy="Never")]))
    assert mutated["spec"]["containers"][0]["imagePullPolicy"] == PULL_ALWAYS
    without_defaults = on_victims_node(inside.tenant, containers=[stolen(policy="Never")])
    refused = inside.rules.review("default", without_defaults, user=Inside.USER)
    assert rules(refused) == {"image-pull-policy"} and set(refused) <= set(inside.tenant.create(without_defaults))


def test_with_the_setting_off_the_rule_and_the_mutation_are_absent_and_cached_images_pass(dev_run):
    off = tenant_of(dev_run, dev_config(), "team-vision")
    policy = next(p for p in dev_run.of_type(POLICY) if p.inputs["metadata"]["name"] == policy_name(off.team))
    assert not any("[image-pull-policy]" in v.get("message", "") for v in policy.inputs["spec"]["validations"])
    assert not any(obj["metadata"]["name"] == IMAGE_PULL_NAME for obj in manifests(off.team))
    for policy_value in CACHED:
        assert off.create(on_victims_node(off, containers=[stolen(policy=policy_value)])) == []


# --- honest tenants ------------------------------------------------------------------------------------------


def stateful_pod() -> dict:
    """A StatefulSet's pod: the controller sets its hostname and the governing Service as subdomain."""
    return virtual_pod("db-0", "shop", labels={"app": "db", "apps.kubernetes.io/pod-index": "0"},
                       hostname="db-0", subdomain="db",
                       containers=[{"name": "postgres", "image": "postgres:17", "ports": [{"containerPort": 5432}]}])


PULLED_HONEST = {**HONEST, "stateful-set": stateful_pod,
                 "sidecar": lambda: virtual_pod("mesh", initContainers=[
                     {"name": "proxy", "image": "envoyproxy/envoy:v1.33.0", "restartPolicy": "Always"}]),
                 "smoke-gpu-pod": lambda: gpu_pod("smoke-gpu", "default", "ignored-queue", GpuAsk(fraction="0.5")),
                 "smoke-deployment": lambda: {"apiVersion": "v1", "kind": "Pod", "metadata": {
                     "name": "smoke-web-x2k4p", "namespace": "default",
                     **plain_deployment("smoke-web", "default")["spec"]["template"]["metadata"]},
                     "spec": plain_deployment("smoke-web", "default")["spec"]["template"]["spec"]}}


@pytest.mark.parametrize("kind", PULLED_HONEST)
def test_an_unmodified_pod_pulls_on_start_and_is_admitted_inside_and_on_the_host(inside, kind):
    pod = PULLED_HONEST[kind]()
    # Without the vCluster's defaults the host refuses what the virtual API server stored: the test can fail.
    assert "image-pull-policy" in rules(inside.tenant.create(pull_policy_defaults(pod)))
    mutated, refused = inside.create(pod)
    assert refused == []
    for field in ("containers", "initContainers"):
        assert {entry.get("imagePullPolicy") for entry in mutated["spec"].get(field, [])} <= {PULL_ALWAYS}
    assert inside.tenant.create(mutated) == []


@pytest.mark.parametrize("kind", ["deployment", "job-with-a-fraction"])
def test_the_mutation_changes_the_pull_policies_and_nothing_else(inside, kind):
    pod = pull_policy_defaults({"deployment": deployment_pod, "job-with-a-fraction": job_pod}[kind]())
    mutated = inside.mutate(pod)
    # Besides the pull policies, the fraction's container gets the toolkit's device features switched off.
    restored = without_device_features(mutated)
    for entry, before in zip(restored["spec"]["containers"], pod["spec"]["containers"]):
        entry["imagePullPolicy"] = before["imagePullPolicy"]
    restored["spec"]["schedulerName"] = pod["spec"].get("schedulerName", "default-scheduler")
    assert restored["spec"] == {**pod["spec"], "schedulerName": restored["spec"]["schedulerName"]}
    assert inside.mutate(mutated) == mutated  # run again (reinvocation): nothing changes


def test_every_pod_of_kais_docs_at_the_pinned_tag_pulls_and_is_admitted_inside_and_on_the_host(inside):
    for path, found in kai_doc_pods(versions.KAI_VERSION).items():
        if path in refused_docs(inside.tenant):
            continue
        for pod in found:
            pod = {**copy.deepcopy(pod), "metadata": {"namespace": "default", **pod["metadata"]}}
            mutated, refused = inside.create(pod)
            assert refused == [], f"{path}: {pod['metadata']['name']}"
            assert inside.tenant.create(mutated, kai_version=versions.KAI_VERSION) == [], path


def test_the_tenants_dns_pulls_on_start_and_is_admitted(tenant, pulling_dev_run, pulling_eks_run):
    program = pulling_dev_run if tenant.team.name == "team-vision" else pulling_eks_run
    values = program.named(f"tenant-{tenant.team.name}-vcluster").inputs["values"]
    documents = yaml.safe_load_all(values["controlPlane"]["coredns"]["overwriteManifests"])
    template = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]
    assert {entry["imagePullPolicy"] for entry in template["spec"]["containers"]} == {PULL_ALWAYS}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "coredns-5d8f9-x2k4p", "namespace": "kube-system", **template["metadata"]},
           "spec": template["spec"]}
    assert tenant.create(pod) == []
    assert Inside(tenant).create(pod)[1] == []


def test_a_memory_capped_teams_hami_core_volume_pulls_on_start_and_is_admitted():
    """The HAMi-core image volume the vCluster adds to a fractional pod pulls too (the pull policy runs after it)."""
    platform = platform_of(pulling(prefixed(isolation_config())))
    team = next(t for t in platform.teams if t.isolation.tier == MEMORY_CAPPED)
    binding = {"matchResources": {"namespaceSelector": team_namespace_selector(team)}, "validationActions": ["Deny"]}
    tenant = IsolationTenant(Admission(policy_spec(team), binding), Admission(isolation_policy_spec(team), binding),
                             team, platform.kai_scheduler.hamicore)
    pod = virtual_pod("llm", annotations={"gpu-fraction": "0.5"}, containers=[container("model")])
    mutated, refused = Inside(tenant).create(pod)
    [volume] = [v for v in mutated["spec"]["volumes"] if "image" in v]
    assert volume["image"]["pullPolicy"] == PULL_ALWAYS and refused == []
    assert tenant.create(mutated) == []
    del volume["image"]["pullPolicy"]
    assert rules(tenant.create(mutated)) == {"image-pull-policy"}  # defaulted to IfNotPresent on the host


# --- upstream ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_copies_pull_policies_as_written_and_adds_only_its_hosts_container_without_one(tag):
    """No code of vCluster's pod syncer names a pull policy; translateImage only swaps one image name for another
    (a site's own value); the one container it adds is the hosts-rewriting init container, with the chart's image
    under the registry order rewrite_hosts_image follows."""
    tag = mirrored_tag(VCLUSTER, tag)
    files = [name for name in git(VCLUSTER, "ls-tree", "-r", "--name-only", tag, "pkg/controllers/resources/pods/")
             .split() if name.endswith(".go") and not name.endswith("_test.go")]
    sources = {name: git(VCLUSTER, "show", f"{tag}:{name}") for name in files}
    assert [name for name, text in sources.items() if re.search(r"PullPolicy", text)] == []
    translator = sources[f"{TRANSLATE}image_translator.go"]
    assert re.search(r"out, ok := i\.translateImages\[image\]\s+if ok \{\s+return out\s+\}\s+return image", translator)
    # A container the syncer builds itself (not a copy of the tenant's): a corev1.Container literal with fields.
    added = [name for name, text in sources.items() if re.search(r"corev1\.(Ephemeral)?Container\{\s*Name:", text)]
    assert added == [f"{TRANSLATE}hosts.go"]
    assert f'HostsRewriteContainerName         = "{REWRITE_HOSTS_CONTAINER}"' in sources[f"{TRANSLATE}hosts.go"]
    assert re.search(r"cmp\.Or\(\s*ctx\.Config\.ControlPlane\.Advanced\.DefaultImageRegistry,\s*"
                     r"overrideHostsImage\.Registry,\s*\"docker\.io\",\s*\)", sources[f"{TRANSLATE}translator.go"])
    pods = chart_values(versions.VCLUSTER_CHART, tag.removeprefix("v"))["sync"]["toHost"]["pods"]
    assert pods["rewriteHosts"]["initContainer"]["image"] == versions.REWRITE_HOSTS_IMAGE
    config = git(VCLUSTER, "show", f"{tag}:config/config.go")
    assert 'ref += "library/"' in config and "!strings.ContainsRune(i.Repository, '/')" in config


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_syncs_image_changes_of_an_init_container_wearing_the_hosts_rewriting_name(tag):
    """calcSpecDiff leaves the hosts-rewriting init container's image alone only in a pod its translator rewrote
    (hosts.go sets the hosts-rewritten annotation there, and the annotation is not synced from the virtual pod): a
    tenant's own init container of that name has a later image change copied to the host like any other."""
    tag = mirrored_tag(VCLUSTER, tag)
    diff = git(VCLUSTER, "show", f"{tag}:{TRANSLATE}diff.go")
    assert re.search(r'if pObj\.Annotations != nil && pObj\.Annotations\[HostsRewrittenAnnotation\] == "true" \{\s*'
                     r'skipContainers = map\[string\]bool\{\s*HostsRewriteContainerName: true,', diff)
    assert "HostsRewrittenAnnotation, VClusterLabelsAnnotation}" in diff  # GetExcludedAnnotations
    hosts = git(VCLUSTER, "show", f"{tag}:{TRANSLATE}hosts.go")
    assert 'pPod.Annotations[HostsRewrittenAnnotation] = "true"' in hosts


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kais_pod_webhook_leaves_pull_policies_and_images_alone(tag):
    """The policies judge pods after KAI's webhook: none of its plugins writes a pull policy, an image or an image
    volume, or adds a container (rules image-pull-policy and image-registry)."""
    # Every Go file has a package line, so the grep always answers (git grep fails when nothing matches).
    lines = git(KAI, "grep", "-E", r"PullPolicy|ImageVolumeSource|\.Image\b|Image:|Containers = append|^package ", tag,
                "--", "pkg/admission").splitlines()
    assert len(lines) > 10
    assert [line for line in lines if "_test.go:" not in line and not re.search(r"\.go:package ", line)] == []
