package main

// NewPlugin as k8s.io/apiserver v0.30 to v0.35 (Kubernetes 1.30 to 1.35) declares it: it cannot fail.

import "k8s.io/apiserver/pkg/admission/plugin/policy/validating"

func newPlugin() *validating.Plugin {
	return validating.NewPlugin(nil)
}
