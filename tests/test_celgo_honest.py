"""Every honest review stays within the API server's CEL cost limits, measured with its own cel-go, and cel-go reaches
cel-python's verdict on each.

The reviews are the honest tests' own (tests/test_admission_honest.py, the large honest pods of
tests/test_pod_entry_sizes.py and tests/test_pod_sizes.py, the smoke test's pods, the synced objects' and the
isolation tiers' honest tests), run again here with tests/tenant_sim.py recording each review (tests/celgo.py
``recorded``), then judged by cel-go (tests/celgo.py) one process per policy and held to the limits
(tests/celgo_cost.py). KAI's docs are read at the pinned KAI only (their pods are the same at every accepted tag).
"""

from __future__ import annotations

import copy

import pytest

from config import versions
from tests import test_admission_honest as honest
from tests import test_isolation_admission as isolation
from tests import test_pod_entry_sizes as entry_sizes
from tests import test_pod_sizes as pod_sizes
from tests import test_smoke as smoke
from tests import test_synced_endpoints as endpoints
from tests import test_synced_object_sizes as object_sizes
from tests import test_synced_objects_admission as synced
from tests.celgo import celgo, differing, judge_reviews, recorded  # noqa: F401 (the session's evaluator)
from tests.celgo_cost import charges, stopped
from tests.conftest import COMMITTED_STACKS, run, stack_config
from tests.fake_site import FakeSite
from tests.isolation_sim import isolation_tenant_of
from tests.synced_objects_sim import synced_objects_admission_for
from tests.tenant_sim import platform_of, tenant_of


def pod_reviews(program, config: dict, team: str) -> None:
    """The honest pods of the pod policy's tests, for one team of a site."""
    tenant = tenant_of(program, config, team)
    honest.test_every_pod_of_kais_docs_is_admitted_but_for_the_queue(tenant, versions.KAI_VERSION)
    for seed in (honest.SEED_000, honest.SEED_003):
        honest.test_the_seed_workloads_are_admitted_but_for_the_queue(tenant, seed)
    for kind in honest.controller_pods(tenant):
        honest.test_pods_of_controllers_charts_and_tools_are_admitted(tenant, kind)
    honest.test_kais_updates_and_the_syncers_resync_of_them_pass(tenant)
    honest.test_the_tenants_dns_as_the_program_ships_it_is_admitted_on_every_stack((program, tenant))
    for source in ({"prefix": "APP_", "configMapRef": {"name": "settings"}},
                   {"prefix": "HF_", "secretRef": {"name": "hub-token"}}):
        honest.test_a_gpu_container_takes_env_from_under_a_prefix_that_cannot_spell_its_device_list(tenant, source)
    honest.test_per_container_resources_are_admitted(tenant)
    for fraction in ("0.05", "0.33", "0.99"):
        honest.test_fractions_in_hundredths_are_admitted(tenant, fraction)
    honest.test_mig_slices_of_several_profiles_and_gpus_of_one_kind_are_admitted(tenant)
    # The largest honest pods: three containers mounting twenty volumes of ten items, a hundred Services' links,
    # a training pod's large JSON config.
    entry_sizes.test_the_largest_honest_pods_store_far_less_than_the_cap(tenant)
    pod_sizes.test_a_training_pod_with_a_large_json_config_in_its_env_is_admitted(tenant)


def synced_reviews(program, config: dict, team: str) -> None:
    tenant = synced.Synced(synced_objects_admission_for(program, team), synced.team_of(config, team))
    for spec in ({}, {"clusterIP": "None"}, {"type": "ClusterIP", "sessionAffinity": "ClientIP"}):
        synced.test_cluster_ip_and_headless_services_are_admitted(tenant, tenant, spec)
    synced.test_a_claim_of_the_default_class_and_a_clone_of_its_own_claim_are_admitted(tenant, tenant)
    synced.test_selector_less_services_may_point_at_public_addresses(tenant)
    synced.test_plain_configmaps_and_secrets_are_admitted(tenant)
    endpoints.test_honest_services_and_endpoints_are_admitted(tenant, tenant)
    for obj in object_sizes.HONEST:
        object_sizes.test_what_honest_pods_name_is_admitted(object_sizes.Syncer(program, config, team), copy.deepcopy(obj))


@pytest.fixture(scope="module")
def judged(celgo, dev_run) -> list[tuple[str, object, dict]]:  # noqa: F811 (the fixture above)
    """(policy name, review, cel-go's result) of every honest review."""
    programs = {stack: dev_run if stack == "dev" else run(stack_config(stack), stack=stack)
                for stack in COMMITTED_STACKS}
    isolation_site = run(isolation.CONFIG, stack="isolation")
    with recorded() as reviews:
        for stack, program in programs.items():
            config = stack_config(stack)
            first = platform_of(config).teams[0].name
            pod_reviews(program, config, first)
            synced_reviews(program, config, first)
            site = FakeSite([tenant_of(program, config, team.name) for team in platform_of(config).teams])
            try:
                smoke.run(site)
            finally:
                site.close()
        capped = isolation_tenant_of(isolation_site, isolation.CONFIG, "team-nlp")
        for pod in ("fraction", "gpu-memory", "whole-gpu", "cpu"):
            isolation.test_memory_capped_legitimate_pods_are_admitted(capped, pod)
    return judge_reviews(celgo, reviews, (*programs.values(), isolation_site))


def test_the_corpus_holds_every_policy_an_honest_object_meets(judged):
    policies = {name for name, _, _ in judged}
    for stack in COMMITTED_STACKS:
        first = platform_of(stack_config(stack)).teams[0].name
        assert {f"gpu-tenancy-{first}", f"gpu-tenancy-{first}-synced-objects"} <= policies
    assert "gpu-tenancy-team-nlp-isolation" in policies
    assert len(judged) > 200


def test_every_honest_review_is_within_the_api_servers_cost_limits(judged):
    offenders = [(name, review.inputs["object"]["metadata"].get("name"), reasons) for name, review, result in judged
                 if (reasons := stopped(result, review.spec))]
    assert offenders == []


def test_cel_go_reaches_cel_pythons_verdict_on_every_honest_review(judged):
    assert differing(judged) == []


def test_the_dearest_honest_reviews_stay_far_inside_the_limits(judged):
    """The headroom: no honest pod comes within a tenth of the per-call limit, nor any policy of the budget."""
    dearest = max((charges(result, review.spec).dearest[0], name) for name, review, result in judged)
    heaviest = max(charges(result, review.spec).validations for _, review, result in judged)
    assert dearest[0] < 100_000 and heaviest < 1_000_000, (dearest, heaviest)
