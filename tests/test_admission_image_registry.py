"""With ``vcluster.allowedRegistries`` a tenant pod pulls only from the site's registries: rule ``image-registry``.

vCluster copies a container's ``image`` to the host pod as written, and syncs a later image change too; the node's
runtime then connects to whatever registry the reference names. A hostile tenant names ``10.0.3.4:8080/x:y`` and
reads in the pull error whether something listens there: a port scan from the node, past every network policy.
On a site with the list set, the team's host policy refuses a synced pod with an image, in any container or image
volume, that the node would pull from elsewhere, on create and on every image change, and each vCluster refuses
it when the tenant applies it. References are judged as the node reads them (tests/image_reference_sim.py, the
grammar read from distribution/reference's source): the CEL must agree with that reading on every reference.
"""

from __future__ import annotations

import copy
import itertools
import re
from pathlib import Path

import celpy
import pytest
import yaml

from components.admission import image_registry_validations, policy_spec, team_namespace_selector
from components.admission_images import allowed_image, platform_images
from components.isolation_admission import isolation_policy_spec
from components.virtual_defaults import IMAGE_REGISTRY_NAME
from config import versions
from config.gpu_asks import GpuAsk
from config.model import MEMORY_CAPPED
from config.vcluster_images import coredns_image, rewrite_hosts_image
from ops.smoke_objects import gpu_pod, plain_deployment
from tests.config_spec import put
from tests.conftest import MIRRORED_TAGS, dev_config, eks_config, mirrored_tag, run
from tests.image_reference_sim import REFERENCE, registry_of, syncer_image_update, under
from tests.isolation_sim import IsolationTenant
from tests.isolation_spec import isolation_config, prefixed
from tests.reference_cel import ReferenceCel
from tests.tenant_sim import (
    KAI_BINDER, KAI_SCHEDULER, POLICY, Admission, Tenant, container, platform_of, tenant_of, virtual_pod,
)
from tests.test_admission_honest import kai_doc_pods, refused_docs
from tests.test_virtual_defaults import Inside, manifests, named

# The registries KAI's docs pull from, a team's own, an IPv6 one, and the test pods' default (nvcr.io/nvidia).
ALLOWED = ["ghcr.io/acme", "nvcr.io/nvidia", "docker.io/library", "docker.io/nvidia", "docker.io/kubeflow",
           "ghcr.io/kubeflow", "registry.local", "[fd00::5]:5000/team"]
PRIVATE_ADDRESSES = ["10.0.3.4:8080/x:y", "169.254.169.254/x", "169.254.169.254/latest/meta-data",
                     "internal-svc.corp:443/a", "localhost/x", "localhost:10250/pods", "[::1]:5000/x",
                     "[fd00::5]:5001/team/x", "registry.local:5000/x", "127.0.0.1/library/nginx"]
SPOOFS = ["ghcr.io.evil.com/acme/x", "ghcr.io/acmex", "ghcr.io/acme-evil/x", "ghcr.io:443/acme/x", "GHCR.IO/acme/x",
          "evil.com/ghcr.io/acme/x", "docker.io.evil.com/library/nginx", "nvidia.evil.com/cuda", "localhost/library/x",
          "registry.local.evil.com/x", "nvcr.io/nvidia-evil/x", "nvcr.io/nvidiax", "acme/x", "docker.io/acme/x",
          "ghcr.io/acme/x@evil.com", "ghcr.io/acme/x:v1@10.0.3.4:8080", "user:pass@evil.com/x"]
HONEST_REFERENCES = ["ghcr.io/acme/trainer:v2", "ghcr.io/acme/team/trainer@sha256:" + "a" * 64, "nginx", "nginx:1.27",
                     "library/nginx:1.27", "docker.io/nginx", "docker.io/library/nginx:1.27",
                     "index.docker.io/library/nginx", "nvidia/cuda:12.4.0-base-ubuntu22.04",
                     "index.docker.io/nvidia/cuda:12", "nvcr.io/nvidia/pytorch:24.05-py3", "registry.local/x/y:1",
                     "[fd00::5]:5000/team/model:v1", "ghcr.io/acme/x:v1@sha256:" + "b" * 64,
                     "busybox@sha256:" + "c" * 64]


def allowing(config: dict, entries=None) -> dict:
    return put(config, "gpu-tenancy:vcluster.allowedRegistries", list(entries or ALLOWED))


# Each site with the list set, and the hostile team of it.
SITES = {"dev": (dev_config, "team-vision"), "eks": (eks_config, "team-legal")}


@pytest.fixture(scope="module", params=SITES)
def site(request) -> tuple:
    """The program run of a site with the list set, and its hostile team."""
    stack_config, team = SITES[request.param]
    program = run(allowing(stack_config()), stack=f"{request.param}-registries")
    return program, tenant_of(program, allowing(stack_config()), team)


@pytest.fixture(scope="module")
def tenant(site) -> Tenant:
    return site[1]


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def pod_with(tenant: Tenant, image: str, **spec) -> dict:
    return virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER,
                       containers=[{**container(), "image": image}], **spec)


def inside_policy(team) -> Admission:
    """The vCluster's own image policy (create and update, debug containers too)."""
    objects = manifests(team)
    return Admission(named(objects, "ValidatingAdmissionPolicy", IMAGE_REGISTRY_NAME)["spec"],
                     named(objects, "ValidatingAdmissionPolicyBinding", IMAGE_REGISTRY_NAME)["spec"])


def narrow_tenant(entries=("ghcr.io/acme",), tier_team: bool = False) -> Tenant:
    """A team of a site listing none of the platform's own registries (its policies built without a program run)."""
    platform = platform_of(allowing(prefixed(isolation_config()), entries))
    team = next(t for t in platform.teams if (t.isolation.tier == MEMORY_CAPPED) == tier_team)
    binding = {"matchResources": {"namespaceSelector": team_namespace_selector(team)}, "validationActions": ["Deny"]}
    return IsolationTenant(Admission(policy_spec(team), binding), Admission(isolation_policy_spec(team), binding),
                           team, platform.kai_scheduler.hamicore)


# --- the reading of a reference ----------------------------------------------------------------------------------


def corpus() -> list[str]:
    hosts = ["", "docker.io/", "index.docker.io/", "ghcr.io/", "ghcr.io:443/", "GHCR.IO/", "ghcr.io.evil.com/",
             "localhost/", "localhost:5000/", "registry.local/", "registry.local:5000/", "[fd00::5]:5000/", "[::1]/",
             "10.0.3.4:8080/", "nvcr.io/", "acme/", "Acme/", "evil.com/", "localhost:32000/", "registry.local:5000/a/"]
    paths = ["x", "acme", "acme/x", "acmex/y", "acme-evil/x", "library", "library/nginx", "library/a/b", "nginx",
             "nvidia", "nvidia/cuda", "kubeflow/a/b", "team/x", "Acme/x", "a..b", "localhost/x", "ghcr.io/acme/x", "b", "b/c", "cuda", "nginx/x",
             "a" * 64]
    tails = ["", ":1.0", "@sha256:" + "d" * 64, ":v1@sha256:" + "e" * 64, ":bad tag", "@md5:ff"]
    return [host + path + tail for host, path, tail in itertools.product(hosts, paths, tails)] + \
        PRIVATE_ADDRESSES + SPOOFS + HONEST_REFERENCES


# Lists that reach every way an entry is read: a whole host, a path prefix, all of Docker Hub (familiar names whose
# first component could be taken for a host), one official image, a port, localhost, an IPv6 address.
LISTS = {"sites": ALLOWED, "all of docker hub": ["docker.io", "registry.local:5000/a/b"],
         "one official image": ["docker.io/library/nginx", "docker.io/nvidia/cuda", "localhost", "localhost:32000"]}


@pytest.mark.parametrize("tag", MIRRORED_TAGS[REFERENCE])
@pytest.mark.parametrize("listed", LISTS)
def test_the_rule_admits_exactly_the_references_the_node_pulls_from_a_listed_registry(tag, listed):
    """Both CEL engines (cel-python, and CEL C++ with RE2 as the API server's cel-go) against distribution/reference's
    reading at each mirrored tag: no reference the node would pull from elsewhere passes, none it pulls from a
    listed registry is refused."""
    tag = mirrored_tag(REFERENCE, tag)
    entries = tuple(LISTS[listed])
    team = platform_of(allowing(dev_config(), entries)).teams[0]
    expression = allowed_image(team, "object.image")
    environment = celpy.Environment()
    program = environment.program(environment.compile(expression))
    reference_cel = ReferenceCel()
    wrong = []
    for reference in corpus():
        expected = reference in platform_images(team) or under(registry_of(reference, tag), entries)
        python = bool(program.evaluate({"object": celpy.json_to_cel({"image": reference})}))
        native = reference_cel.evaluate(expression, {"object": {"image": reference}})
        if (python, native) != (expected, ("value", expected)):
            wrong.append((reference, expected, python, native))
    assert wrong == []
    # The corpus reaches both answers.
    verdicts = {under(registry_of(reference, tag), entries) for reference in corpus()}
    assert verdicts == {True, False}


# --- attacks -----------------------------------------------------------------------------------------------------


def pods_pulling(tenant: Tenant, image: str) -> list[dict]:
    """``image`` in each kind of container, and as an image volume."""
    mount = {"name": "weights", "mountPath": "/weights", "readOnly": True}
    return [pod_with(tenant, image),
            virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, containers=[container()],
                        initContainers=[{**container("fetch"), "image": image}]),
            virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, annotations={"gpu-fraction": "0.5"},
                        containers=[container()],
                        initContainers=[{**container("proxy"), "image": image, "restartPolicy": "Always"}]),
            virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER,
                        containers=[{**container(), "volumeMounts": [mount]}],
                        volumes=[{"name": "weights", "image": {"reference": image}}])]


@pytest.mark.parametrize("image", PRIVATE_ADDRESSES + SPOOFS)
def test_an_image_from_elsewhere_is_refused_in_every_kind_of_container_and_as_an_image_volume(tenant, image):
    inside = inside_policy(tenant.team)
    for pod in pods_pulling(tenant, image):
        assert rules(tenant.create(pod)) == {"image-registry"}, pod["spec"]
        assert rules(inside.review("default", pod)) == {"image-registry"}


def test_the_same_pods_from_a_listed_registry_are_admitted(tenant):
    """The pods above with a listed image: the rule reads the reference, nothing else."""
    for pod in pods_pulling(tenant, "ghcr.io/acme/model:v1"):
        assert tenant.create(pod) == []
        assert inside_policy(tenant.team).review("default", pod) == []


def test_a_debug_container_from_elsewhere_is_refused(tenant):
    running = tenant.host_pod(pod_with(tenant, "ghcr.io/acme/model:v1"))
    debugged = copy.deepcopy(running)
    debug = {"name": "debug", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}
    for image, refused in (("169.254.169.254/x", {"image-registry"}), ("busybox:1.36", set())):
        debugged["spec"]["ephemeralContainers"] = [{**debug, "image": image}]
        assert rules(tenant.update(running, debugged, subresource="ephemeralcontainers")) == refused
        assert rules(inside_policy(tenant.team).review("default", debugged, operation="UPDATE", old=running,
                                                       subresource="ephemeralcontainers")) == refused


@pytest.mark.parametrize("field", ["containers", "initContainers"])
def test_an_image_changed_after_create_is_refused(tenant, field):
    """Images of containers and init containers may be updated, and vCluster syncs the change to the host: a pod
    created with a listed image cannot be patched to another registry's."""
    virtual = pod_with(tenant, "ghcr.io/acme/model:v1", initContainers=[{**container("fetch"), "image": "busybox"}])
    host = tenant.host_pod(virtual)
    for image, refused in (("10.0.3.4:8080/x:y", {"image-registry"}), ("ghcr.io/acme/model:v2", set())):
        patched = copy.deepcopy(virtual)
        patched["spec"][field][0]["image"] = image
        updated = syncer_image_update(host, patched)
        assert updated["spec"][field][0]["image"] == image
        assert rules(tenant.update(host, updated)) == refused
        assert rules(inside_policy(tenant.team).review("default", patched, operation="UPDATE",
                                                       old=virtual)) == refused


def test_a_pod_running_from_before_the_list_keeps_its_updates_while_its_images_stay(tenant):
    """KAI's and the syncer's later writes change no image; a pod created before the site set the list passes them,
    and is refused only a change of image that is not listed."""
    host = tenant.host_pod(pod_with(tenant, "internal-svc.corp:443/a", annotations={"gpu-fraction": "0.5"}))
    bound = copy.deepcopy(host)
    bound["metadata"]["annotations"]["received-resource-type"] = "Fraction"
    assert tenant.update(host, bound, user=KAI_BINDER) == []
    patched = copy.deepcopy(bound)
    patched["spec"]["containers"][0]["image"] = "internal-svc.corp:443/b"
    assert rules(tenant.update(bound, patched)) == {"image-registry"}


# --- honest tenants and the platform's own images -------------------------------------------------------------


@pytest.mark.parametrize("image", HONEST_REFERENCES)
def test_an_image_from_a_listed_registry_is_admitted_however_it_is_spelled(tenant, image):
    pod = pod_with(tenant, image)
    assert tenant.create(pod) == []
    assert inside_policy(tenant.team).review("default", pod) == []


def test_every_pod_of_kais_docs_is_admitted_when_the_site_lists_the_registries_they_use(tenant):
    inside, images = Inside(tenant), inside_policy(tenant.team)
    checked = 0
    for path, found in kai_doc_pods(versions.KAI_VERSION).items():
        if path in refused_docs(tenant):
            continue
        for pod in found:
            pod = {**copy.deepcopy(pod), "metadata": {"namespace": "default", **pod["metadata"]}}
            mutated, refused = inside.create(pod)
            assert refused == [] and images.review("default", mutated) == [], path
            assert tenant.create(mutated, kai_version=versions.KAI_VERSION) == [], path
            checked += 1
    assert checked > 10


def platform_images_found(tenant: Tenant, program) -> set[str]:
    """Every image the platform itself puts into the team's synced pods, found where it is put there."""
    values = program.named(f"tenant-{tenant.team.name}-vcluster").inputs["values"]
    documents = yaml.safe_load_all(values["controlPlane"]["coredns"]["overwriteManifests"])
    dns = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    stateful = tenant.host_pod(pod_with(tenant, "ghcr.io/acme/db:1", hostname="db-0", subdomain="db"))
    smoke = [gpu_pod("smoke-gpu", "default", "q", GpuAsk(fraction="0.5"))["spec"],
             plain_deployment("smoke-web", "default")["spec"]["template"]["spec"]]
    return ({entry["image"] for entry in dns["containers"]} | {stateful["spec"]["initContainers"][0]["image"]}
            | {entry["image"] for spec in smoke for entry in spec["containers"]})


def test_the_platforms_own_images_are_each_found_and_listed(site):
    program, tenant = site
    assert platform_images_found(tenant, program) == set(platform_images(tenant.team))
    # The smoke test names its containers' images only through versions.SMOKE_* under the site's mirrors (none here),
    # and an image volume only as the HAMi-core a memory-capped team's vCluster adds (exported as hami_core_image,
    # listed above for such a team), so the pods above are all it sends.
    for path in sorted(Path("ops").glob("smoke*.py")):
        images = re.findall(r'"image":\s*([^,}\]]+)', path.read_text())
        assert set(images) <= {"mirrors.image(versions.SMOKE_CUDA_IMAGE)", "mirrors.image(versions.SMOKE_PAUSE_IMAGE)",
                               '{"reference": hami_core'}, path


def test_a_memory_capped_teams_hami_core_volume_is_found_and_admitted_by_its_exact_reference():
    tenant = narrow_tenant(tier_team=True)
    model = {**container("model"), "image": "ghcr.io/acme/llm:1"}
    mutated, refused = Inside(tenant).create(virtual_pod("llm", annotations={"gpu-fraction": "0.5"},
                                                         containers=[model]))
    [volume] = [v for v in mutated["spec"]["volumes"] if "image" in v]
    assert volume["image"]["reference"] in platform_images(tenant.team) and refused == []
    assert inside_policy(tenant.team).review("default", mutated) == []
    assert tenant.create(mutated) == []
    volume["image"]["reference"] += "-patched"  # refused by the tier's own rule as well
    assert "image-registry" in rules(tenant.create(mutated))


def test_the_platforms_own_images_pass_where_the_list_names_none_of_their_registries_and_only_they():
    tenant = narrow_tenant()
    team = tenant.team
    assert not any(under(registry_of(image), team.vcluster.allowed_registries) for image in platform_images(team))
    stateful = pod_with(tenant, "ghcr.io/acme/db:1", hostname="db-0", subdomain="db")
    assert tenant.host_pod(stateful)["spec"]["initContainers"][0]["image"] == rewrite_hosts_image(team.vcluster)
    assert tenant.create(stateful) == []
    for image in (coredns_image(team.vcluster), versions.SMOKE_CUDA_IMAGE, versions.SMOKE_PAUSE_IMAGE):
        assert tenant.create(pod_with(tenant, image)) == []
        # Exactly that reference: another tag of the same repository is the site's to list.
        assert rules(tenant.create(pod_with(tenant, image.rsplit(":", 1)[0] + ":other"))) == {"image-registry"}


def test_with_the_list_unset_the_rule_and_the_vclusters_policy_are_absent_and_any_registry_passes(dev_run):
    off = tenant_of(dev_run, dev_config(), "team-vision")
    policy = next(p for p in dev_run.of_type(POLICY) if p.inputs["metadata"]["name"] == f"gpu-tenancy-{off.team.name}")
    assert not any("[image-registry]" in v.get("message", "") for v in policy.inputs["spec"]["validations"])
    assert image_registry_validations(off.team) == []
    assert not any(obj["metadata"]["name"] == IMAGE_REGISTRY_NAME for obj in manifests(off.team))
    for image in PRIVATE_ADDRESSES[:3]:
        assert off.create(pod_with(off, image)) == []
