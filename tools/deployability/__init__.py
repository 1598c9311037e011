"""The deployability check: what a real cluster would refuse or never run, found in the program's objects and
the rendered charts (``check``), from the site and its objects (``inputs``), with Pod Security Standards
(``pod_security``) and NetworkPolicy egress (``network_policy``) evaluated as Kubernetes does."""
