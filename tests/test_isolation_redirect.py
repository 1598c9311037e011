"""A memory-capped team's HAMi-core is found on containerd 2.1 and 2.2 alike, and a tenant cannot point it elsewhere.

The fractional container mounts the HAMi-core image whole at ``IMAGE_ROOT`` (containerd 2.1 ignores a mount's
``subPath``, 2.2 honours it: only a whole-image mount puts the library at the same path on both) and names the
library in it by ``LD_PRELOAD`` and by ``CUDA_REDIRECT``, the path HAMi-core dlopens itself from (src/libvgpu.c).
A tenant that redirects HAMi-core, or mounts a directory of the image, would get a container without the cap
and without an error: the host refuses both, by attack, as tests/test_isolation_admission.py does for the rest.
"""

from __future__ import annotations

import copy

import pytest

from components.isolation_admission import IMAGE_ROOT, LIBRARY, REDIRECT
from components.virtual_defaults import HAMI_CORE_NAME, virtual_manifests
from config import versions
from tests.isolation_sim import with_hami_core
from tests.tenant_sim import container, virtual_pod
from tests.test_isolation_admission import capped, fractional, rules, site  # noqa: F401 (fixtures)
from tests.test_isolation_admission_inside import inside_capped  # noqa: F401 (fixture)

ELSEWHERE = "/tmp/own/libvgpu.so"


def fractional_container(pod: dict) -> dict:
    return pod["spec"]["containers"][0]


def set_env(entry_list: list[dict], name: str, **fields) -> list[dict]:
    return [entry for entry in entry_list if entry["name"] != name] + [{"name": name, **fields}]


def test_the_library_is_where_both_variables_name_it_in_the_whole_image():
    assert LIBRARY == f"{IMAGE_ROOT}/{versions.HAMI_CORE_IMAGE_LIBRARY}" == "/usr/local/vgpu/artifacts/libvgpu.so"


def test_an_honest_pod_names_the_library_twice_and_mounts_the_image_whole(capped):
    pod = fractional(capped)
    main = fractional_container(pod)
    assert {e["name"]: e["value"] for e in main["env"]} == {"LD_PRELOAD": LIBRARY, REDIRECT: LIBRARY}
    assert main["volumeMounts"] == [{"name": "hami-core", "mountPath": IMAGE_ROOT, "readOnly": True}]
    assert capped.create(pod) == []


@pytest.mark.parametrize("attack", ["elsewhere", "empty", "from-a-configmap"])
def test_the_fractional_container_cannot_redirect_hami_core(capped, attack):
    pod = fractional(capped)
    main = fractional_container(pod)
    fields = {"elsewhere": {"value": ELSEWHERE}, "empty": {"value": ""},
              "from-a-configmap": {"valueFrom": {"configMapKeyRef": {"name": "paths", "key": "lib"}}}}[attack]
    main["env"] = set_env(main["env"], REDIRECT, **fields)
    # An empty CUDA_REDIRECT makes HAMi-core fall back to /usr/local/vgpu/libvgpu.so, absent from the whole image.
    assert {"memory-limit", "hami-core"} <= rules(capped.create(pod))


def test_the_fractional_container_must_set_cuda_redirect(capped):
    pod = fractional(capped)
    main = fractional_container(pod)
    main["env"] = [entry for entry in main["env"] if entry["name"] != REDIRECT]
    assert rules(capped.create(pod)) == {"hami-core"}


def test_another_container_may_name_the_library_but_not_redirect_elsewhere(capped):
    pod = fractional(capped, containers=[container(), container("sidecar", env={REDIRECT: LIBRARY})])
    assert capped.create(pod) == []
    pod["spec"]["containers"][1]["env"] = [{"name": REDIRECT, "value": ELSEWHERE}]
    assert "memory-limit" in rules(capped.create(pod))


@pytest.mark.parametrize("prefix", [None, "CUDA_RE", "CUDA_REDIRECT"])
def test_env_from_cannot_spell_cuda_redirect(capped, prefix):
    source = {"configMapRef": {"name": "paths"}, **({"prefix": prefix} if prefix else {})}
    pod = fractional(capped)
    fractional_container(pod)["envFrom"] = [source]
    assert "memory-limit" in rules(capped.create(pod))


@pytest.mark.parametrize("where", ["init", "ephemeral"])
def test_init_and_ephemeral_containers_cannot_redirect_hami_core(capped, where):
    entry = {"name": REDIRECT, "value": ELSEWHERE}
    if where == "init":
        assert "memory-limit" in rules(capped.create(fractional(capped, initContainers=[
            container("warm", env_entries=[entry])])))
        return
    host = capped.host_pod(fractional(capped))
    debug = copy.deepcopy(host)
    no_gpu = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}  # what the tenant rules ask of a debug container
    debug["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox", "env": [no_gpu, entry]}]
    assert "memory-limit" in rules(capped.update(host, debug, subresource="ephemeralcontainers"))
    debug["spec"]["ephemeralContainers"][0]["env"] = [no_gpu, {"name": REDIRECT, "value": LIBRARY}]
    assert capped.update(host, debug, subresource="ephemeralcontainers") == []


def test_a_later_update_cannot_redirect_hami_core(capped):
    host = capped.host_pod(fractional(capped))
    changed = copy.deepcopy(host)
    main = fractional_container(changed)
    main["env"] = [{**entry, "value": ELSEWHERE} if entry["name"] == REDIRECT else entry for entry in main["env"]]
    assert {"memory-limit", "hami-core"} <= rules(capped.update(host, changed))


def old_subpath_form(pod: dict) -> dict:
    """The layout before this rule: the image's artifacts directory mounted by subPath, the default path preloaded
    (what containerd 2.1 mounts as the whole image, leaving no library at that path)."""
    main = fractional_container(pod)
    main["env"] = [{"name": "LD_PRELOAD", "value": f"{IMAGE_ROOT}/libvgpu.so"}]
    main["volumeMounts"][0]["subPath"] = versions.HAMI_CORE_IMAGE_LIBRARY.rsplit("/", 1)[0]
    return pod


@pytest.mark.parametrize("mount", [{"subPath": "artifacts"}, {"subPathExpr": "$(DIR)"}, {}],
                         ids=["subpath", "subpath-expr", "old-form"])
def test_a_directory_of_the_image_is_refused(capped, mount):
    # With the variables naming the whole-image path, containerd 2.2 would honour a subPath and move the library.
    pod = fractional(capped)
    if mount:
        fractional_container(pod)["volumeMounts"][0].update(mount)
    else:
        pod = old_subpath_form(pod)
    assert "hami-core" in rules(capped.create(pod))


def test_the_in_vcluster_policy_mounts_the_image_whole_and_names_the_library_twice(inside_capped):
    expressions = [mutation["applyConfiguration"]["expression"] for obj in virtual_manifests(inside_capped.tenant.team)
                   if obj["kind"] == "MutatingAdmissionPolicy" for mutation in obj["spec"]["mutations"]]
    assert not any("subPath" in expression for expression in expressions)
    mutated, refused = inside_capped.create(virtual_pod(annotations={"gpu-fraction": "0.5"}))
    main = fractional_container(mutated)
    assert refused == [] and inside_capped.tenant.create(mutated) == []
    assert [e for e in main["env"] if e["name"] in ("LD_PRELOAD", REDIRECT)] == [
        {"name": "LD_PRELOAD", "value": LIBRARY}, {"name": REDIRECT, "value": LIBRARY}]
    assert main["volumeMounts"] == [{"name": HAMI_CORE_NAME, "mountPath": IMAGE_ROOT, "readOnly": True}]


def test_a_tenants_own_redirect_is_overwritten_inside_and_its_subpath_form_refused(inside_capped):
    pod = virtual_pod(annotations={"gpu-fraction": "0.5"}, containers=[container(env={REDIRECT: ELSEWHERE})])
    mutated, refused = inside_capped.create(pod)
    assert refused == [] and inside_capped.tenant.create(mutated) == []
    assert {"name": REDIRECT, "value": LIBRARY} in fractional_container(mutated)["env"]
    # A subPath the tenant wrote on a mount at the image root survives the merge by mount path: refused, not lost.
    written = old_subpath_form(with_hami_core(virtual_pod(annotations={"gpu-fraction": "0.5"})))
    mutated, refused = inside_capped.create(written)
    assert "hami-core" in rules(refused) and "hami-core" in rules(inside_capped.tenant.create(mutated))
