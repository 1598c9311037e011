"""Review documents of a site: ``plan.json`` (``document``), ``summary.md`` (``summary``, ``summary_tenants``),
the change between two plans (``diff``) and the golden plans of the committed stacks (``golden``).
``python -m tools.plan STACK`` writes them (``cli``)."""
