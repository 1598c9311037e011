"""Developer tooling, one package per subsystem:

- ``tools.offline``: runs the program offline through Pulumi's mocks and records what it registers;
- ``tools.plan``: the review documents of a site (``python -m tools.plan STACK``), their diff and the
  golden plans;
- ``tools.charts``: the chart cache and in-process Helm rendering (``python -m tools.charts``);
- ``tools.deployability``: what a real cluster would refuse, checked on the program's and the charts' objects;
- ``tools.docs``: files generated from the code (the stack-config JSON Schema, the dashboard pictures).

The operators' own commands (usage report, new site, the CI's site matrix) live in ``ops``.
"""
