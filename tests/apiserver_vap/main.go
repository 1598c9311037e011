// Command gpu-tenancy-vap-real judges admission requests with the API server's own ValidatingAdmissionPolicy plugin
// (k8s.io/apiserver pkg/admission/plugin/policy/validating, as vendored by vCluster): the whole plugin, its policy
// source fed by informers over a fake clientset holding the policies, bindings and namespaces, its matcher and its
// dispatcher, asked with Validate for each request. tests/apiserver_vap.py builds it inside vCluster's tree and
// sends {"policies", "bindings", "namespaces", "requests"} on stdin; it writes one verdict per request. Run as
// `gpu-tenancy-vap-real served`, it reads [{"kind", "object"}] instead and writes each object as the plugin hands
// it to a policy's CEL: decoded as below, then converted with runtime.DefaultUnstructuredConverter; as
// `gpu-tenancy-vap-real compile`, see compile.go. The few calls whose signature differs between the Kubernetes
// releases a site may run are in plugin_v0*.go and compiler_v0*.go, one of each copied in per release
// (tests/apiserver_vap.py RELEASES); starting the plugin, as tests/apiserver_map/main.go starts its own, is in
// tests/apiserver_common/plugin_start.go.
//
// What is not the API server's code: the defaults the API server's registry gives a policy and a binding on
// create (k8s.io/kubernetes, not vendored; applied here as k8s.io/api's types.go documents them), the decoding of
// each object (JSON into the typed object of its kind, no defaulting, as the request's body after the registry's
// decoding but before its defaulting), the authorizer (denies everything: no policy of the program asks it) and
// the equivalent-resource registry (empty: the program's resources are served at one version each).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
)

type request struct {
	Operation   string                      `json:"operation"`
	Kind        metav1.GroupVersionKind     `json:"kind"`
	Resource    metav1.GroupVersionResource `json:"resource"`
	SubResource string                      `json:"subResource"`
	Namespace   string                      `json:"namespace"`
	Name        string                      `json:"name"`
	UserInfo    struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"userInfo"`
	Object    json.RawMessage `json:"object"`
	OldObject json.RawMessage `json:"oldObject"`
	Options   json.RawMessage `json:"options"`
}

type input struct {
	stored
	Requests []request `json:"requests"`
}

// verdict is one request's answer: the API server's error (empty when admitted) and, from a second plugin whose
// bindings only warn, every failed validation's message (the API server's error names only the first).
type verdict struct {
	Allowed  bool     `json:"allowed"`
	Error    string   `json:"error,omitempty"`
	Code     int32    `json:"code,omitempty"`
	Warnings []string `json:"warnings"`
	// ObserverError: what the warning plugin still refused (a configuration error, which no action softens).
	ObserverError string `json:"observerError,omitempty"`
}

// defaultMatchResources gives match resources the defaults the API server's registry sets (types.go: matchPolicy
// "Defaults to Equivalent", the selectors default to the empty selector, a rule's scope to "*").
func defaultMatchResources(resources *admissionregistrationv1.MatchResources) {
	if resources == nil {
		return
	}
	if resources.MatchPolicy == nil {
		equivalent := admissionregistrationv1.Equivalent
		resources.MatchPolicy = &equivalent
	}
	if resources.NamespaceSelector == nil {
		resources.NamespaceSelector = &metav1.LabelSelector{}
	}
	if resources.ObjectSelector == nil {
		resources.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{resources.ResourceRules, resources.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				all := admissionregistrationv1.AllScopes
				rules[i].Scope = &all
			}
		}
	}
}

func policies(in input) []runtime.Object {
	var objects []runtime.Object
	for _, item := range in.Policies {
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: item.Name}}
		must(json.Unmarshal(item.Spec, &policy.Spec))
		if policy.Spec.FailurePolicy == nil {
			fail := admissionregistrationv1.Fail
			policy.Spec.FailurePolicy = &fail
		}
		defaultMatchResources(policy.Spec.MatchConstraints)
		objects = append(objects, policy)
	}
	return objects
}

func bindings(in input, warnOnly bool) []runtime.Object {
	var objects []runtime.Object
	for _, item := range in.Bindings {
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: item.Name}}
		must(json.Unmarshal(item.Spec, &binding.Spec))
		defaultMatchResources(binding.Spec.MatchResources)
		if warnOnly {
			binding.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
		}
		objects = append(objects, binding)
	}
	return objects
}

// plugin is the ValidatingAdmissionPolicy plugin started as the API server starts it (its initializers' inputs),
// ready once its informers have listed the policies and bindings and compiled them.
func plugin(in input, warnOnly bool, stop chan struct{}) *validating.Plugin {
	objects := append(policies(in), bindings(in, warnOnly)...)
	for _, item := range in.Namespaces {
		objects = append(objects, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: item.Name, Labels: item.Labels,
			Annotations: item.Annotations}})
	}
	client := kubefake.NewSimpleClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	p := newPlugin()
	initialize(p, client, factory, stop)
	must(p.ValidateInitialization())
	start(p, factory, stop)
	return p
}

// object decodes a request's object into the typed object of its kind, as the API server holds it; a kind the
// client-go scheme does not know stays unstructured.
func object(raw json.RawMessage, kind schema.GroupVersionKind) runtime.Object {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	typed, err := scheme.Scheme.New(kind)
	if err != nil {
		generic := &unstructured.Unstructured{}
		must(json.Unmarshal(raw, &generic.Object))
		return generic
	}
	must(json.Unmarshal(raw, typed))
	typed.GetObjectKind().SetGroupVersionKind(kind)
	return typed
}

func options(raw json.RawMessage, operation admission.Operation) runtime.Object {
	var result runtime.Object
	switch operation {
	case admission.Create:
		result = &metav1.CreateOptions{}
	case admission.Update:
		result = &metav1.UpdateOptions{}
	case admission.Delete:
		result = &metav1.DeleteOptions{}
	default:
		return nil
	}
	if len(raw) > 0 && string(raw) != "null" {
		must(json.Unmarshal(raw, result))
	}
	return result
}

type warnings struct {
	lock  sync.Mutex
	texts []string
}

func (w *warnings) AddWarning(_, text string) {
	w.lock.Lock()
	defer w.lock.Unlock()
	w.texts = append(w.texts, text)
}

func judge(p *validating.Plugin, req request) (error, []string) {
	operation := admission.Operation(req.Operation)
	kind := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	attributes := admission.NewAttributesRecord(
		object(req.Object, kind), object(req.OldObject, kind), kind, req.Namespace, req.Name,
		schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource},
		req.SubResource, operation, options(req.Options, operation), false,
		&user.DefaultInfo{Name: req.UserInfo.Username, Groups: req.UserInfo.Groups})
	recorder := &warnings{texts: []string{}}
	ctx := warning.WithWarningRecorder(context.Background(), recorder)
	err := p.Validate(ctx, attributes, admission.NewObjectInterfacesFromScheme(scheme.Scheme))
	return err, recorder.texts
}

type servedRequest struct {
	Kind   metav1.GroupVersionKind `json:"kind"`
	Object json.RawMessage         `json:"object"`
}

func served() {
	var in []servedRequest
	must(json.NewDecoder(os.Stdin).Decode(&in))
	out := make([]map[string]interface{}, 0, len(in))
	for _, item := range in {
		kind := schema.GroupVersionKind{Group: item.Kind.Group, Version: item.Kind.Version, Kind: item.Kind.Kind}
		converted, err := runtime.DefaultUnstructuredConverter.ToUnstructured(object(item.Object, kind))
		must(err)
		out = append(out, converted)
	}
	must(json.NewEncoder(os.Stdout).Encode(out))
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "served" {
		served()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "compile" {
		compile()
		return
	}
	var in input
	must(json.NewDecoder(os.Stdin).Decode(&in))
	stop := make(chan struct{})
	defer close(stop)
	denying, warning := plugin(in, false, stop), plugin(in, true, stop)
	out := make([]verdict, 0, len(in.Requests))
	for _, req := range in.Requests {
		err, _ := judge(denying, req)
		observerErr, texts := judge(warning, req)
		result := verdict{Allowed: err == nil, Warnings: texts}
		if err != nil {
			result.Error = err.Error()
			var status *apierrors.StatusError
			if errors.As(err, &status) {
				result.Code = status.ErrStatus.Code
			}
		}
		if observerErr != nil {
			result.ObserverError = observerErr.Error()
		}
		out = append(out, result)
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetEscapeHTML(false)
	must(encoder.Encode(out))
}
