package main

// NewPlugin as k8s.io/apiserver v0.36 (Kubernetes 1.36, the pinned release) declares it: it reads a configuration
// and may fail.

import "k8s.io/apiserver/pkg/admission/plugin/policy/validating"

func newPlugin() *validating.Plugin {
	p, err := validating.NewPlugin(nil)
	must(err)
	return p
}
