"""Offline runs: ``__main__.py`` under Pulumi's mocks (``mockrun``), the providers' answers (``mocks``), every
registration recorded (``recording``), with the SDK internals that needs fenced in one module (``sdk_internals``)."""
