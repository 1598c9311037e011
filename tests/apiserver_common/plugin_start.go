package main

// What the two real-plugin harnesses (tests/apiserver_vap/main.go, tests/apiserver_map/main.go) do alike: start a
// policy plugin as the API server does and wait until it is ready. tests/apiserver_vap.py and tests/apiserver_map.py
// copy this file next to each main.go. It is built in every release tree the validating harness is built in
// (k8s.io/apiserver v0.30 to v0.36), so it calls nothing whose signature differs between them, and asks for what
// only some releases have through an interface.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/featuregate"
)

// named is a policy, a binding or a namespace as the tests send it.
type named struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Spec        json.RawMessage   `json:"spec"`
}

// stored is what a harness's fake clientset holds: the policies, their bindings and the namespaces requests name.
type stored struct {
	Policies   []named `json:"policies"`
	Bindings   []named `json:"bindings"`
	Namespaces []named `json:"namespaces"`
}

// policyPlugin is the part of k8s.io/apiserver's generic policy plugin (pkg/admission/plugin/policy/generic) the
// API server's admission initializers set and its readiness check asks, alike in both plugins and every release.
type policyPlugin interface {
	SetExternalKubeInformerFactory(informers.SharedInformerFactory)
	SetExternalKubeClientSet(kubernetes.Interface)
	SetRESTMapper(meta.RESTMapper)
	SetDynamicClient(dynamic.Interface)
	SetDrainedNotification(<-chan struct{})
	SetAuthorizer(authorizer.Authorizer)
	WaitForReady() bool
}

// initialize gives a policy plugin what the API server's admission initializers give a plugin that asks, before its
// ValidateInitialization: the feature gates (the validating plugin is off until told ValidatingAdmissionPolicy is
// on, before 1.32) and its identity (from 1.36) among them.
func initialize(p policyPlugin, client kubernetes.Interface, factory informers.SharedInformerFactory, stop chan struct{}) {
	if wants, ok := p.(interface{ InspectFeatureGates(featuregate.FeatureGate) }); ok {
		wants.InspectFeatureGates(utilfeature.DefaultFeatureGate)
	}
	if wants, ok := p.(interface{ SetAPIServerID(string) }); ok {
		wants.SetAPIServerID("gpu-tenancy-test")
	}
	p.SetExternalKubeInformerFactory(factory)
	p.SetExternalKubeClientSet(client)
	p.SetRESTMapper(meta.NewDefaultRESTMapper(nil))
	p.SetDynamicClient(fake.NewSimpleDynamicClient(runtime.NewScheme()))
	p.SetDrainedNotification(stop)
	p.SetAuthorizer(authorizerfactory.NewAlwaysDenyAuthorizer())
}

// start starts the informers and returns once they have listed the policies, bindings and namespaces and the
// plugin has compiled its policies: until then the plugin refuses every request as not yet ready.
func start(p policyPlugin, factory informers.SharedInformerFactory, stop chan struct{}) {
	factory.Start(stop)
	for informer, synced := range factory.WaitForCacheSync(stop) {
		if !synced {
			must(fmt.Errorf("informer %v did not sync", informer))
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for !p.WaitForReady() {
		if time.Now().After(deadline) {
			must(errors.New("the plugin never became ready"))
		}
	}
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
}
