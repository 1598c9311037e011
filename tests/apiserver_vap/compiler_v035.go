package main

// The compiler's environment from k8s.io/apiserver v0.35 (Kubernetes 1.35): strict cost enforcement is no longer
// an option (GA and locked on since 1.32).

import (
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

func newExpressionsCompiler() (*plugincel.CompositedCompiler, plugincel.OptionalVariableDeclarations) {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	must(err)
	return compiler, plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
}
