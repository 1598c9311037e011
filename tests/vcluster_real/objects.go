package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/loft-sh/vcluster/pkg/controllers/resources/configmaps"
	"github.com/loft-sh/vcluster/pkg/controllers/resources/endpoints"
	"github.com/loft-sh/vcluster/pkg/controllers/resources/endpointslices"
	"github.com/loft-sh/vcluster/pkg/controllers/resources/persistentvolumeclaims"
	"github.com/loft-sh/vcluster/pkg/controllers/resources/secrets"
	"github.com/loft-sh/vcluster/pkg/controllers/resources/services"
	"github.com/loft-sh/vcluster/pkg/mappings"
	"github.com/loft-sh/vcluster/pkg/server/filters"
	"github.com/loft-sh/vcluster/pkg/syncer/synccontext"
	syncertypes "github.com/loft-sh/vcluster/pkg/syncer/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objectRequest is one virtual object to sync: `via` "proxy" sends a Service CREATE through vCluster's API
// proxy (pkg/server/filters/service.go, which creates the host Service itself), anything else hands the object to
// its syncer's SyncToHost.
type objectRequest struct {
	Kind   string          `json:"kind"`
	Via    string          `json:"via"`
	Object json.RawMessage `json:"object"`
}

// objectUpdate is a tenant's edit (virtualOld -> virtual) of an object whose host copy is `host`.
type objectUpdate struct {
	Kind       string          `json:"kind"`
	Host       json.RawMessage `json:"host"`
	VirtualOld json.RawMessage `json:"virtualOld"`
	Virtual    json.RawMessage `json:"virtual"`
}

// objectResult: the host (and virtual) object after the sync, or why there is none: the syncer's error, or
// `skipped`, the syncer's own decision not to write one.
type objectResult struct {
	Host    client.Object `json:"host,omitempty"`
	Virtual client.Object `json:"virtual,omitempty"`
	Error   string        `json:"error,omitempty"`
	Skipped string        `json:"skipped,omitempty"`
}

// syncedKind is one kind of the syncers run: its Go type, its syncer's constructor, its mapping.
type syncedKind struct {
	empty  func() client.Object
	syncer func(*synccontext.RegisterContext) (syncertypes.Object, error)
	gvk    func() schema.GroupVersionKind
}

var syncedKinds = map[string]syncedKind{
	"Service":               {func() client.Object { return &corev1.Service{} }, services.New, mappings.Services},
	"Endpoints":             {func() client.Object { return &corev1.Endpoints{} }, endpoints.New, mappings.Endpoints}, //nolint:staticcheck // what the syncer syncs
	"EndpointSlice":         {func() client.Object { return &discoveryv1.EndpointSlice{} }, endpointslices.New, mappings.EndpointSlices},
	"PersistentVolumeClaim": {func() client.Object { return &corev1.PersistentVolumeClaim{} }, persistentvolumeclaims.New, mappings.PersistentVolumeClaims},
	"ConfigMap":             {func() client.Object { return &corev1.ConfigMap{} }, configmaps.New, mappings.ConfigMaps},
	"Secret":                {func() client.Object { return &corev1.Secret{} }, secrets.New, mappings.Secrets},
}

// decode is the named kind and each of `raws` decoded into its Go type (a field the type lacks is an error).
func decode(kindName string, raws ...json.RawMessage) (syncedKind, []client.Object, error) {
	kind, ok := syncedKinds[kindName]
	if !ok {
		return kind, nil, fmt.Errorf("no syncer for kind %q", kindName)
	}
	objects := make([]client.Object, len(raws))
	for index, raw := range raws {
		objects[index] = kind.empty()
		decoder := json.NewDecoder(bytes.NewReader(raw))
		decoder.DisallowUnknownFields()
		if err := decoder.Decode(objects[index]); err != nil {
			return kind, nil, err
		}
	}
	return kind, objects, nil
}

// kindSyncer is the kind's syncer on fresh clients, the virtual object stored in the virtual client; a ConfigMap
// or Secret is referenced by a pod, so the syncer (which syncs only those pods use) takes it.
func kindSyncer(req *request, server *httptest.Server, kind syncedKind, virtual client.Object, hostObjects ...client.Object) (*synccontext.SyncContext, syncertypes.Sync[client.Object], syncertypes.Object, error) {
	registerCtx, pClient, vClient, err := registerContext(req, server)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, host := range hostObjects {
		if err := pClient.Create(registerCtx, host); err != nil {
			return nil, nil, nil, err
		}
	}
	object, err := kind.syncer(registerCtx)
	if err != nil {
		return nil, nil, nil, err
	}
	syncCtx, syncer := syncerOf(registerCtx, object)
	if err := vClient.Create(syncCtx, virtual.DeepCopyObject().(client.Object)); err != nil {
		return nil, nil, nil, err
	}
	if kind.gvk() == mappings.ConfigMaps() || kind.gvk() == mappings.Secrets() {
		user := types.NamespacedName{Namespace: virtual.GetNamespace(), Name: "user"}
		reference := synccontext.NameMapping{GroupVersionKind: kind.gvk(),
			VirtualName: types.NamespacedName{Namespace: virtual.GetNamespace(), Name: virtual.GetName()},
			HostName:    mappings.VirtualToHost(syncCtx, virtual.GetName(), virtual.GetNamespace(), kind.gvk())}
		pod := synccontext.NameMapping{GroupVersionKind: mappings.Pods(), VirtualName: user,
			HostName: mappings.VirtualToHost(syncCtx, user.Name, user.Namespace, mappings.Pods())}
		// The store records the pod's own mapping first, then the reference (a pod's translate does alike).
		for _, mapping := range []synccontext.NameMapping{pod, reference} {
			if err := registerCtx.Mappings.Store().AddReferenceAndSave(syncCtx, mapping, pod); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	return syncCtx, syncer, object, nil
}

// hostCopy is the host object the syncer keeps for the virtual one, or nil when it wrote none.
func hostCopy(syncCtx *synccontext.SyncContext, kind syncedKind, virtual client.Object) (client.Object, error) {
	host := kind.empty()
	name := mappings.VirtualToHost(syncCtx, virtual.GetName(), virtual.GetNamespace(), kind.gvk())
	if err := syncCtx.HostClient.Get(syncCtx, name, host); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return host, answered(host)
}

// createObject is what vCluster writes on the host for a new virtual object.
func createObject(req *request, change *objectRequest, server *httptest.Server) (*objectResult, error) {
	kind, decoded, err := decode(change.Kind, change.Object)
	if err != nil {
		return nil, err
	}
	virtual := decoded[0]
	if change.Via == "proxy" {
		return createThroughProxy(req, kind, virtual, change.Object, server)
	}
	syncCtx, syncer, object, err := kindSyncer(req, server, kind, virtual)
	if err != nil {
		return nil, err
	}
	// The controller asks a Starter first whether it handles the object at all (the endpoints syncer leaves a
	// selector Service's to the host).
	if starter, ok := object.(syncertypes.Starter); ok {
		skip, err := starter.ReconcileStart(syncCtx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: virtual.GetNamespace(), Name: virtual.GetName()}})
		if err != nil {
			return nil, err
		}
		if skip {
			return &objectResult{Skipped: "ReconcileStart"}, nil
		}
	}
	if _, err := syncer.SyncToHost(syncCtx, synccontext.NewSyncToHostEvent[client.Object](virtual.DeepCopyObject().(client.Object))); err != nil {
		return nil, err
	}
	host, err := hostCopy(syncCtx, kind, virtual)
	if err != nil || host == nil {
		return &objectResult{Skipped: "SyncToHost wrote no host object"}, err
	}
	return &objectResult{Host: host}, nil
}

// createThroughProxy is a tenant's Service CREATE as vCluster's API proxy serves it (the body as the tenant sent
// it), the host Service it creates.
func createThroughProxy(req *request, kind syncedKind, virtual client.Object, body json.RawMessage, server *httptest.Server) (*objectResult, error) {
	registerCtx, _, _, err := registerContext(req, server)
	if err != nil {
		return nil, err
	}
	syncCtx := registerCtx.ToSyncContext("create-service")
	sent, err := http.NewRequestWithContext(syncCtx, http.MethodPost, "/api/v1/namespaces/"+virtual.GetNamespace()+"/services", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if _, err := filters.GPUTenancyCreateService(syncCtx, sent, virtual.GetNamespace()); err != nil {
		return nil, err
	}
	host, err := hostCopy(syncCtx, kind, virtual)
	if err != nil || host == nil {
		return &objectResult{Skipped: "the proxy wrote no host Service"}, err
	}
	return &objectResult{Host: host}, nil
}

// updateObject is Sync of a tenant's edit with the host object as it is: both objects afterwards.
func updateObject(req *request, change *objectUpdate, server *httptest.Server) (*objectResult, error) {
	kind, decoded, err := decode(change.Kind, change.Host, change.VirtualOld, change.Virtual)
	if err != nil {
		return nil, err
	}
	host, virtualOld, virtual := decoded[0], decoded[1], decoded[2]
	syncCtx, syncer, _, err := kindSyncer(req, server, kind, virtual, host.DeepCopyObject().(client.Object))
	if err != nil {
		return nil, err
	}
	stored := kind.empty()
	if err := syncCtx.HostClient.Get(syncCtx, client.ObjectKeyFromObject(host), stored); err != nil {
		return nil, err
	}
	storedVirtual := kind.empty()
	if err := syncCtx.VirtualClient.Get(syncCtx, client.ObjectKeyFromObject(virtual), storedVirtual); err != nil {
		return nil, err
	}
	event := synccontext.NewSyncEventWithOld[client.Object](stored.DeepCopyObject().(client.Object), stored, virtualOld, storedVirtual)
	if _, err := syncer.Sync(syncCtx, event); err != nil {
		return nil, err
	}
	after, err := hostCopy(syncCtx, kind, virtual)
	if err != nil || after == nil {
		return &objectResult{Skipped: "Sync deleted the host object"}, err
	}
	if err := syncCtx.VirtualClient.Get(syncCtx, client.ObjectKeyFromObject(virtual), storedVirtual); err != nil {
		return nil, err
	}
	if err := answered(storedVirtual); err != nil {
		return nil, err
	}
	return &objectResult{Host: after, Virtual: storedVirtual}, nil
}
