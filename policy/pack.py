"""The CrossGuard policies: each rule of ``rules.RULES`` wrapped for pulumi_policy.

Building these objects starts nothing (only ``PolicyPack(...)`` in ``__main__.py`` starts the
analyzer server), so tests call ``policy.validate(args, report_violation)`` on them directly.
"""

from __future__ import annotations

from typing import Any, Callable

from pulumi_policy import EnforcementLevel, Policy, ResourceValidationPolicy, StackValidationPolicy

if __package__:  # imported as the `policy` package
    from .adapters import from_policy_resource, from_stack_args
    from .rule_model import Rule
    from .rules import RULES
else:  # run by the Pulumi CLI, which puts the policy pack's directory on sys.path
    from adapters import from_policy_resource, from_stack_args
    from rule_model import Rule
    from rules import RULES

PACK_NAME = "gpu-tenancy"
PACK_DESCRIPTION = ("Guardrails of the multi-tenant GPU platform: pinned Helm charts, complete and consistent "
                    "KAI queues, vCluster settings KAI needs, a host-side admission policy per tenant and "
                    "explicit Kubernetes providers.")


def enforcement_level(rule: Rule) -> EnforcementLevel:
    return EnforcementLevel.MANDATORY if rule.mandatory else EnforcementLevel.ADVISORY


def _resource_validation(rule: Rule) -> Callable[[Any, Callable[..., None]], None]:
    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        for message in rule.check(from_policy_resource(args)):
            report_violation(message)
    return validate


def _stack_validation(rule: Rule) -> Callable[[Any, Callable[..., None]], None]:
    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        for finding in rule.check(from_stack_args(args)):
            report_violation(finding.message, finding.urn)
    return validate


def build_policy(rule: Rule) -> Policy:
    if rule.scope == "resource":
        return ResourceValidationPolicy(name=rule.name, description=rule.description,
                                        validate=_resource_validation(rule),
                                        enforcement_level=enforcement_level(rule))
    return StackValidationPolicy(name=rule.name, description=rule.description,
                                 validate=_stack_validation(rule),
                                 enforcement_level=enforcement_level(rule))


def build_policies() -> list[Policy]:
    return [build_policy(rule) for rule in RULES]
