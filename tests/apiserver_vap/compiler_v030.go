package main

// The compiler's environment in k8s.io/apiserver v0.30 to v0.34 (Kubernetes 1.30 to 1.34): it is told whether the
// StrictCostEnforcementForVAP feature gate (off by default before 1.32) is on.

import (
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

func newExpressionsCompiler() (*plugincel.CompositedCompiler, plugincel.OptionalVariableDeclarations) {
	strict := utilfeature.DefaultFeatureGate.Enabled(features.StrictCostEnforcementForVAP)
	compiler, err := plugincel.NewCompositedCompiler(
		environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), strict))
	must(err)
	return compiler, plugincel.OptionalVariableDeclarations{HasAuthorizer: true, StrictCost: strict}
}
