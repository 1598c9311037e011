"""The gpu-tenancy policy pack (Pulumi CrossGuard) and its offline checker.

- ``rule_model``: the neutral ``Resource``, ``UNKNOWN``, the vocabulary and resource readers the rules share;
- ``label_selectors``: Kubernetes label selectors, validated and evaluated (the project's one evaluator:
  tools.deployability imports it from here);
- ``rules``: the guardrails as plain functions over that model (no pulumi_policy) and ``RULES``, the rule set;
  ``rules_queues``, ``rules_admission``, ``rules_time_slicing`` and ``rules_grafana`` hold the rules of one
  subject each;
- ``adapters``: pulumi_policy resources and offline plan.json entries -> ``Resource``;
- ``pack``: the rules wrapped as pulumi_policy policies; ``__main__``: the PolicyPack itself,
  run by ``pulumi preview --policy-pack policy``;
- ``check``: ``python -m policy.check PLAN_JSON``, the same rules on an offline plan (CI, no CLI).

Importing this package imports nothing else, so it stays cheap and needs no pulumi_policy.
"""
