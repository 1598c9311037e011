package main

// `gpu-tenancy-vap-real compile` reads {"policies": [{"name", "spec"}]} and writes, for the release the harness is
// built at, the compatibility version new expressions are held to and, per policy, every expression that does not
// compile there: {"compatibility", "policies": [{"name", "errors": ["<field>: <error>"]}]}.
//
// A policy is created (or its expressions changed) only if every expression compiles in the new-expressions
// environment of environment.DefaultCompatibilityVersion(); the API server holds stored ones to the full environment
// (environment.go's NewExpressions and StoredExpressions). The call that does this on create is in
// k8s.io/kubernetes' registry validation (pkg/apis/admissionregistration/validation, not vendored): here the
// plugin's own compiler (k8s.io/apiserver pkg/admission/plugin/cel) is asked the same, with the variables each
// expression sees declared as the plugin's compilePolicy declares them (the authorizer for all but messages).

import (
	"encoding/json"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

type compiled struct {
	Name   string   `json:"name"`
	Errors []string `json:"errors"`
}

func compileErrors(spec admissionregistrationv1.ValidatingAdmissionPolicySpec) []string {
	compiler, options := newExpressionsCompiler()
	messages := options
	messages.HasAuthorizer = false
	errs := []string{}
	check := func(field string, result plugincel.CompilationResult) {
		if result.Error != nil {
			errs = append(errs, fmt.Sprintf("%s: %s", field, result.Error.Detail))
		}
	}
	for i, variable := range spec.Variables {
		check(fmt.Sprintf("variables[%d].expression", i), compiler.CompileAndStoreVariable(
			&validating.Variable{Name: variable.Name, Expression: variable.Expression}, options, environment.NewExpressions))
	}
	for i := range spec.MatchConditions {
		check(fmt.Sprintf("matchConditions[%d].expression", i), compiler.CompileCELExpression(
			(*matchconditions.MatchCondition)(&spec.MatchConditions[i]), options, environment.NewExpressions))
	}
	for i, validation := range spec.Validations {
		check(fmt.Sprintf("validations[%d].expression", i), compiler.CompileCELExpression(
			&validating.ValidationCondition{Expression: validation.Expression}, options, environment.NewExpressions))
		if validation.MessageExpression != "" {
			check(fmt.Sprintf("validations[%d].messageExpression", i), compiler.CompileCELExpression(
				&validating.MessageExpressionCondition{MessageExpression: validation.MessageExpression}, messages,
				environment.NewExpressions))
		}
	}
	for i, annotation := range spec.AuditAnnotations {
		check(fmt.Sprintf("auditAnnotations[%d].valueExpression", i), compiler.CompileCELExpression(
			&validating.AuditAnnotationCondition{Key: annotation.Key, ValueExpression: annotation.ValueExpression},
			options, environment.NewExpressions))
	}
	return errs
}

func compile() {
	var in input
	must(json.NewDecoder(os.Stdin).Decode(&in))
	out := struct {
		Compatibility string     `json:"compatibility"`
		Policies      []compiled `json:"policies"`
	}{Compatibility: environment.DefaultCompatibilityVersion().String(), Policies: []compiled{}}
	for _, item := range in.Policies {
		var spec admissionregistrationv1.ValidatingAdmissionPolicySpec
		must(json.Unmarshal(item.Spec, &spec))
		out.Policies = append(out.Policies, compiled{Name: item.Name, Errors: compileErrors(spec)})
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetEscapeHTML(false)
	must(encoder.Encode(out))
}
