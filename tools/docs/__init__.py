"""Files generated from the code and kept current by tests: the stack-config JSON Schema (``schema``),
the config reference (``config_reference``) and the dashboard pictures of docs/observability-dashboards.md
(``dashboard_picture``)."""
