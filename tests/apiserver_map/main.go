// Command gpu-tenancy-map-real mutates pods and Services with the API server's own MutatingAdmissionPolicy plugin
// (k8s.io/apiserver pkg/admission/plugin/policy/mutating, as vendored by vCluster): the plugin registered and built
// by admission.Plugins.NewFromPlugins, so it sits in the admission chain's reinvocation handler as it does in the
// API server, its policies and bindings fed by informers over a fake clientset, its expressions compiled by the
// plugin's compiler, each apply configuration merged by the plugin's structured-merge-diff patcher with the type
// converter its TypeConverterManager builds from the OpenAPI v3 document discovery serves. tests/apiserver_map.py
// builds it inside vCluster's tree and sends {"policies", "bindings", "namespaces", "schemas", "requests"} on
// stdin; it writes, for each request, the mutated object (or the plugin's error) and the request's "expected" one,
// both decoded into the kind's type (corev1.Pod unless the request names Service) and converted back, so that the
// two compare field by field, each with the kind's type meta. The plugin's initializer and its wait for readiness are
// tests/apiserver_common/plugin_start.go's, shared with tests/apiserver_vap/main.go.
//
// What is not the API server's code: k8s.io/kubernetes' generated OpenAPI is not vendored, so discovery serves a
// document whose component schemas are Kubernetes 1.36's definitions as the kubernetes-validate package ships them
// ("schemas": the path of its _definitions.json; refs end in the definition's name, which is all the converter
// reads of them); the scheme's defaulting after each mutation (k8s.io/kubernetes' SetDefaults_Container and
// SetDefaults_ImageVolumeSource) is the pull-policy part only, as tests/apiserver_pods.py models it; the registry's
// defaults of policies and bindings are applied by tests/apiserver_map.py; the authorizer denies everything (no
// policy asks it).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi"
)

type request struct {
	Namespace string          `json:"namespace"`
	User      string          `json:"user"`
	Kind      string          `json:"kind"` // Pod (the default) or Service
	Old       json.RawMessage `json:"old"`  // an UPDATE's stored object; none for a CREATE
	Object    json.RawMessage `json:"object"`
	Expected  json.RawMessage `json:"expected"`
}

type input struct {
	stored
	Schemas  string    `json:"schemas"`
	Requests []request `json:"requests"`
}

type answer struct {
	Object   map[string]interface{} `json:"object"`
	Expected map[string]interface{} `json:"expected"`
	Error    string                 `json:"error,omitempty"`
}

// schemaDocument is the core group's OpenAPI v3 document as discovery would serve it.
type schemaDocument struct{ body []byte }

func (d schemaDocument) Schema(string) ([]byte, error) { return d.body, nil }
func (d schemaDocument) ServerRelativeURL() string     { return "/openapi/v3/api/v1?hash=gpu-tenancy" }

// schemaClient is the OpenAPI v3 endpoint; served is closed once the TypeConverterManager has listed its paths.
type schemaClient struct {
	document schemaDocument
	once     sync.Once
	served   chan struct{}
}

func (c *schemaClient) Paths() (map[string]openapi.GroupVersion, error) {
	defer c.once.Do(func() { close(c.served) })
	return map[string]openapi.GroupVersion{"api/v1": c.document}, nil
}

type schemaDiscovery struct {
	discovery.DiscoveryInterface
	openapi openapi.Client
}

func (d schemaDiscovery) OpenAPIV3() openapi.Client { return d.openapi }

// clientset is the fake clientset whose discovery serves the OpenAPI v3 document (the fake's own panics).
type clientset struct {
	*kubefake.Clientset
	discovery discovery.DiscoveryInterface
}

func (c clientset) Discovery() discovery.DiscoveryInterface { return c.discovery }

func document(path string) schemaDocument {
	raw, err := os.ReadFile(path)
	must(err)
	var definitions struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	must(json.Unmarshal(raw, &definitions))
	body, err := json.Marshal(map[string]interface{}{
		"openapi": "3.0.0", "info": map[string]string{"title": "Kubernetes", "version": "v1.36.0"}, "paths": map[string]interface{}{},
		"components": map[string]interface{}{"schemas": definitions.Defs},
	})
	must(err)
	return schemaDocument{body: body}
}

func objects(in input) []runtime.Object {
	var result []runtime.Object
	for _, item := range in.Policies {
		policy := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: item.Name}}
		must(json.Unmarshal(item.Spec, &policy.Spec))
		result = append(result, policy)
	}
	for _, item := range in.Bindings {
		binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: item.Name}}
		must(json.Unmarshal(item.Spec, &binding.Spec))
		result = append(result, binding)
	}
	for _, item := range in.Namespaces {
		result = append(result, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: item.Name, Labels: item.Labels,
			Annotations: item.Annotations}})
	}
	return result
}

// initializer gives the plugin what the API server's initializers give it, and keeps it to wait for.
type initializer struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	stop    chan struct{}
	plugin  *mutating.Plugin
}

func (i *initializer) Initialize(plugin admission.Interface) {
	i.plugin = plugin.(*mutating.Plugin)
	initialize(i.plugin, i.client, i.factory, i.stop)
}

type noConfig struct{}

func (noConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }

// chain is the admission chain holding the plugin alone, ready once its policies are compiled and the
// TypeConverterManager has read discovery's document.
func chain(in input, stop chan struct{}) admission.MutationInterface {
	schemas := &schemaClient{document: document(in.Schemas), served: make(chan struct{})}
	fakeClient := kubefake.NewSimpleClientset(objects(in)...)
	client := clientset{Clientset: fakeClient, discovery: schemaDiscovery{fakeClient.Discovery(), schemas}}
	init := &initializer{client: client, factory: informers.NewSharedInformerFactory(client, 0), stop: stop}
	plugins := admission.NewPlugins()
	mutating.Register(plugins)
	handler, err := plugins.NewFromPlugins([]string{mutating.PluginName}, noConfig{}, init, nil)
	must(err)
	start(init.plugin, init.factory, stop)
	select {
	case <-schemas.served:
	case <-time.After(30 * time.Second):
		must(errors.New("the plugin never read the OpenAPI document"))
	}
	return handler.(admission.MutationInterface)
}

// pullPolicyDefaults stands in for the scheme's defaulter the dispatcher calls after each mutation.
type pullPolicyDefaults struct{}

func defaultPullPolicy(image string) corev1.PullPolicy {
	name, _, digested := strings.Cut(image, "@")
	last := name[strings.LastIndex(name, "/")+1:]
	if index := strings.LastIndex(last, ":"); index >= 0 {
		if last[index+1:] == "latest" {
			return corev1.PullAlways
		}
		return corev1.PullIfNotPresent
	}
	if digested {
		return corev1.PullIfNotPresent
	}
	return corev1.PullAlways
}

func (pullPolicyDefaults) Default(object runtime.Object) {
	pod, ok := object.(*corev1.Pod)
	if !ok {
		return
	}
	for _, containers := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range containers {
			if containers[i].ImagePullPolicy == "" {
				containers[i].ImagePullPolicy = defaultPullPolicy(containers[i].Image)
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].ImagePullPolicy == "" {
			pod.Spec.EphemeralContainers[i].ImagePullPolicy = defaultPullPolicy(pod.Spec.EphemeralContainers[i].Image)
		}
	}
	for i := range pod.Spec.Volumes {
		if image := pod.Spec.Volumes[i].Image; image != nil && image.PullPolicy == "" {
			image.PullPolicy = defaultPullPolicy(image.Reference)
		}
	}
}

type objectInterfaces struct{ admission.ObjectInterfaces }

func (objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return pullPolicyDefaults{} }

// kinds are the objects a request may send, each with the resource it is sent to.
var kinds = map[string]struct {
	gvk      schema.GroupVersionKind
	resource string
	empty    func() runtime.Object
}{
	"Pod": {schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "pods",
		func() runtime.Object { return &corev1.Pod{} }},
	"Service": {schema.GroupVersionKind{Version: "v1", Kind: "Service"}, "services",
		func() runtime.Object { return &corev1.Service{} }},
}

func kindOf(req request) string {
	if req.Kind == "" {
		return "Pod"
	}
	return req.Kind
}

func typed(kind string, raw json.RawMessage) runtime.Object {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	object := kinds[kind].empty()
	must(json.Unmarshal(raw, object))
	object.GetObjectKind().SetGroupVersionKind(kinds[kind].gvk)
	return object
}

func plain(kind string, object runtime.Object) map[string]interface{} {
	converted, err := runtime.DefaultUnstructuredConverter.ToUnstructured(object)
	must(err)
	// Both with the type meta the API server hands the object on with (the next admission plugins' request object):
	// the chain's typed object loses it when the patcher's result is converted back.
	converted["apiVersion"], converted["kind"] = kinds[kind].gvk.GroupVersion().String(), kinds[kind].gvk.Kind
	return converted
}

// mutate sends a CREATE (an UPDATE when the request has an old object) through the chain, reinvocation included, and
// answers the object it ends with. Until the TypeConverterManager has stored the document it listed, the plugin
// answers 503, as the API server does for a resource it has no schema for yet: the request is sent again then.
func mutate(handler admission.MutationInterface, req request) answer {
	kind := kindOf(req)
	for attempt := 0; ; attempt++ {
		object, old := typed(kind, req.Object), typed(kind, req.Old)
		operation, options := admission.Create, runtime.Object(&metav1.CreateOptions{})
		if old != nil {
			operation, options = admission.Update, &metav1.UpdateOptions{}
		}
		attributes := admission.NewAttributesRecord(object, old, kinds[kind].gvk, req.Namespace,
			object.(metav1.Object).GetName(), corev1.SchemeGroupVersion.WithResource(kinds[kind].resource), "",
			operation, options, false, &user.DefaultInfo{Name: req.User})
		err := handler.Admit(context.Background(), attributes, objectInterfaces{admission.NewObjectInterfacesFromScheme(scheme.Scheme)})
		var status *apierrors.StatusError
		if errors.As(err, &status) && status.ErrStatus.Code == 503 {
			if attempt == 100 {
				must(fmt.Errorf("the plugin had no schema for the %s: %w", kind, err))
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		result := answer{Object: plain(kind, attributes.GetObject())}
		if expected := typed(kind, req.Expected); expected != nil {
			result.Expected = plain(kind, expected)
		}
		if err != nil {
			result.Error = err.Error()
		}
		return result
	}
}

func main() {
	var in input
	must(json.NewDecoder(os.Stdin).Decode(&in))
	stop := make(chan struct{})
	defer close(stop)
	handler := chain(in, stop)
	out := make([]answer, 0, len(in.Requests))
	for _, req := range in.Requests {
		out = append(out, mutate(handler, req))
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetEscapeHTML(false)
	must(encoder.Encode(out))
}
