"""Offline runs: ``__main__.py`` under Pulumi's mocks, every registration recorded (``mockrun``), with the
SDK internals that needs fenced in one module (``sdk_internals``)."""
