"""One Pulumi ComponentResource per file: host, GPU operator, KAI, queues, tenants."""
