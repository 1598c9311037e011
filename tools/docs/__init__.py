"""Files generated from the code and kept current by tests: the stack-config JSON Schema (``schema``)
and the README's dashboard pictures (``dashboard_picture``)."""
