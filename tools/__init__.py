"""Developer tools: offline program runs under Pulumi mocks (mockrun) and stack plans (plan)."""
