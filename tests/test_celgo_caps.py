"""Objects at each size rule's cap, and one byte past it, are judged by the rule and not stopped for cost: cel-go
(tests/celgo.py) finds every one within the API server's CEL limits (tests/celgo_cost.py) and reaches cel-python's
verdict, the rule's own message included.

The objects are the size tests' own (tests/test_pod_sizes.py, tests/test_pod_entry_sizes.py,
tests/test_synced_metadata_sizes.py, tests/test_synced_object_sizes.py, tests/test_synced_endpoints.py,
tests/test_synced_endpoint_text.py), run again with tests/tenant_sim.py recording each review.
"""

from __future__ import annotations

import pytest

from tests import test_pod_entry_sizes as entry_sizes
from tests import test_pod_sizes as pod_sizes
from tests import test_synced_endpoint_text as endpoint_text
from tests import test_synced_endpoints as endpoints
from tests import test_synced_metadata_sizes as metadata_sizes
from tests import test_synced_object_sizes as object_sizes
from tests import test_synced_objects_admission as synced
from tests.celgo import celgo, differing, judge_reviews, recorded  # noqa: F401 (the session's evaluator)
from tests.celgo_cost import charges, stopped
from tests.conftest import dev_config
from tests.synced_objects_sim import synced_objects_admission_for
from tests.tenant_sim import tenant_of

TEAM = "team-nlp"


def size_caps(program) -> None:
    """The size tests' objects at and one byte past each cap, reviewed by tenant_sim on dev's ``TEAM``."""
    tenant = tenant_of(program, dev_config(), TEAM)
    tenant_synced = synced.Synced(synced_objects_admission_for(program, TEAM), synced.team_of(dev_config(), TEAM))
    syncer = object_sizes.Syncer(program, dev_config())
    pod_sizes.test_a_pod_one_byte_past_the_cap_is_refused_and_one_at_it_admitted(tenant)
    entry_sizes.test_a_pod_at_the_cap_is_admitted_and_one_byte_past_it_refused(tenant)
    metadata_sizes.test_a_pod_one_byte_past_the_metadata_cap_is_refused_created_and_updated(tenant)
    metadata_sizes.test_after_kai_binds_a_pod_an_edit_past_the_cap_is_refused(tenant)
    metadata_sizes.test_kais_longest_labels_and_their_changes_keep_a_pod_at_the_cap_updatable(tenant)
    metadata_sizes.test_kais_keys_do_not_count_among_the_keys_either(tenant)
    for kind in ("Service", "Endpoints", "EndpointSlice", "PersistentVolumeClaim"):
        metadata_sizes.test_an_object_one_byte_past_the_metadata_cap_is_refused_created_and_updated(
            tenant_synced, kind)
    for slack in (0, 1, 2):
        object_sizes.test_a_secret_one_byte_past_the_cap_is_refused_created_and_updated(syncer, slack)
    object_sizes.test_a_config_map_one_byte_past_the_cap_is_refused_created_and_updated(syncer)
    endpoints.test_the_caps_themselves_are_admitted(tenant_synced)
    endpoint_text.test_a_service_at_its_caps_is_admitted(tenant_synced)
    endpoint_text.test_the_largest_objects_the_rules_admit_are_what_the_worst_case_counts(tenant_synced)


@pytest.fixture(scope="module")
def judged(celgo, dev_run) -> list:  # noqa: F811 (the fixture above)
    with recorded() as reviews:
        size_caps(dev_run)
    return judge_reviews(celgo, reviews, [dev_run])


def test_objects_at_and_past_each_size_cap_are_within_the_cost_limits(judged):
    assert {f"gpu-tenancy-{TEAM}", f"gpu-tenancy-{TEAM}-synced-objects"} <= {name for name, _, _ in judged}
    offenders = [(name, review.inputs["object"]["metadata"].get("name"), reasons) for name, review, result in judged
                 if (reasons := stopped(result, review.spec))]
    assert offenders == []


def test_each_is_refused_by_the_rules_message_as_cel_python_refuses_it(judged):
    refused = [review for _, review, _ in judged if review.messages]
    assert len(refused) >= 10
    assert differing(judged) == []


def test_the_dearest_object_at_a_cap_leaves_room_under_the_per_call_limit(judged):
    dearest = max(charges(result, review.spec).dearest for _, review, result in judged)
    assert dearest[0] < 600_000, dearest
