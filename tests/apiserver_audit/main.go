// The API server's own reading of an audit policy file, and its choice of level for each request: the policy's path
// is the first argument, the requests a JSON list on stdin; prints each request's level and omitted stages as JSON.
// tests/test_apiserver_audit_contract.py builds it inside vCluster's source, whose vendor/ holds k8s.io/apiserver.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	auditapi "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

type request struct {
	User        string   `json:"user"`
	Groups      []string `json:"groups"`
	Verb        string   `json:"verb"`
	APIGroup    string   `json:"apiGroup"`
	Resource    string   `json:"resource"`
	Subresource string   `json:"subresource"`
	Namespace   string   `json:"namespace"`
	Name        string   `json:"name"`
	Path        string   `json:"path"`
}

type verdict struct {
	Level      string   `json:"level"`
	OmitStages []string `json:"omitStages"`
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

func main() {
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("reading the policy: %v", err)
	}
	// The API server falls back to lenient decoding with a warning only: a misspelt field would be dropped unseen.
	strict := serializer.NewCodecFactory(audit.Scheme, serializer.EnableStrict).UniversalDecoder()
	if _, _, err := strict.Decode(data, nil, &auditapi.Policy{}); err != nil {
		fail("strict decoding: %v", err)
	}
	loaded, err := policy.LoadPolicyFromBytes(data)
	if err != nil {
		fail("loading: %v", err)
	}
	evaluator := policy.NewPolicyRuleEvaluator(loaded)
	var requests []request
	if err := json.NewDecoder(os.Stdin).Decode(&requests); err != nil {
		fail("reading the requests: %v", err)
	}
	verdicts := []verdict{}
	for _, r := range requests {
		config := evaluator.EvaluatePolicyRule(authorizer.AttributesRecord{
			User: &user.DefaultInfo{Name: r.User, Groups: r.Groups}, Verb: r.Verb, APIGroup: r.APIGroup,
			Resource: r.Resource, Subresource: r.Subresource, Namespace: r.Namespace, Name: r.Name,
			ResourceRequest: r.Resource != "", Path: r.Path,
		})
		stages := []string{}
		for _, stage := range config.OmitStages {
			stages = append(stages, string(stage))
		}
		verdicts = append(verdicts, verdict{Level: string(config.Level), OmitStages: stages})
	}
	if err := json.NewEncoder(os.Stdout).Encode(verdicts); err != nil {
		fail("writing: %v", err)
	}
}
