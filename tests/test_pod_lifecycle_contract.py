"""What a running pod's later life does to KAI's books, read from upstream at every pinned tag.

``fixed-requests`` (components/admission.py) and ``deletion-grace-period`` (components/admission_deletion.py) rest
on four facts of the pinned releases; the day one changes, the rule may be revisited (or must grow):

- vCluster's syncer patches a tenant's changed container resources onto the host pod through ``pods/resize`` from a
  1.35 host, regular containers only;
- it deletes the host pod with the grace period the tenant deleted the virtual pod with;
- KAI charges a queue for a pod's containers' requests as its spec holds them (tests/test_admission_contract.py),
  but not at all for a pod being deleted (Releasing), whose node stays taken.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import ACCEPTED_TAGS, ACCEPTED_VCLUSTER_TAGS, git, go_function, mirrored_tag

KAI = "kai-scheduler/KAI-Scheduler"
VCLUSTER = "loft-sh/vcluster"
POD_SYNCER = "pkg/controllers/resources/pods/syncer.go"
POD_STATUS = "pkg/scheduler/api/pod_status/pod_status.go"
POD_INFO = "pkg/scheduler/api/pod_info/pod_info.go"
PROPORTION = "pkg/scheduler/plugins/proportion/proportion.go"


def _status_set(source: str, name: str) -> set[str]:
    found = re.search(rf"\b{name}\s*=\s*([A-Za-z |]+)\n", source)
    assert found, name
    return {status.strip() for status in found.group(1).split("|")}


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_resizes_a_host_pods_containers_in_place_from_a_1_35_host(tag):
    source = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:{POD_SYNCER}")
    resize = go_function(source, "(s *podSyncer) resizeHostPodContainerResourcesInPlace")
    assert 'MustParseSemantic("1.35.0")' in resize, tag
    patch = go_function(source, "buildHostPodContainersResourcesResizePatch")
    # Every regular container whose resources differ gets the virtual container's requests and limits; nothing else.
    assert "range vPod.Spec.Containers" in patch and "Resources: v.Resources" in patch, tag
    assert "InitContainers" not in patch and "Spec.Resources" not in patch, tag
    assert 'SubResource("resize")' in source, tag


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_deletes_the_host_pod_with_the_tenants_grace_period(tag):
    source = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:{POD_SYNCER}")
    deletion = re.search(r"else if event\.Virtual\.DeletionTimestamp != nil \{\s*return patcher\."
                         r"DeleteHostObjectWithOptions\((.*?)\}\)", source, re.S)
    assert deletion and "GracePeriodSeconds: event.Virtual.DeletionGracePeriodSeconds" in deletion.group(1), tag


@pytest.mark.parametrize("tag", ACCEPTED_TAGS[KAI])
def test_kai_charges_no_queue_for_a_pod_being_deleted(tag):
    tag = mirrored_tag(KAI, tag)
    statuses = git(KAI, "show", f"{tag}:{POD_STATUS}")
    charged, used = _status_set(statuses, "allocatedStatuses"), _status_set(statuses, "activeUsedStatuses")
    assert "Running" in charged and not {"Releasing", "StuckInReleasing"} & charged, tag
    assert {"Releasing", "StuckInReleasing"} <= used, tag  # the node stays taken
    task_status = go_function(git(KAI, "show", f"{tag}:{POD_INFO}"), "getTaskStatus")
    running = task_status[task_status.index("case v1.PodRunning:"):task_status.index("case v1.PodPending:")]
    assert "pod.DeletionTimestamp != nil" in running and "pod_status.Releasing" in running, tag
    proportion = git(KAI, "show", f"{tag}:{PROPORTION}")
    usage = go_function(proportion, "(pp *proportionPlugin) updateQueuesCurrentResourceUsage")
    assert "pod_status.AllocatedStatus(status)" in usage and "Releasing" not in usage, tag
