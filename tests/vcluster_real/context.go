package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	vclusterconfig "github.com/loft-sh/vcluster/config"
	"github.com/loft-sh/vcluster/pkg/config"
	"github.com/loft-sh/vcluster/pkg/mappings"
	"github.com/loft-sh/vcluster/pkg/mappings/resources"
	"github.com/loft-sh/vcluster/pkg/mappings/store"
	"github.com/loft-sh/vcluster/pkg/mappings/store/verify"
	"github.com/loft-sh/vcluster/pkg/scheme"
	"github.com/loft-sh/vcluster/pkg/specialservices"
	"github.com/loft-sh/vcluster/pkg/strvals"
	"github.com/loft-sh/vcluster/pkg/syncer/synccontext"
	syncertypes "github.com/loft-sh/vcluster/pkg/syncer/types"
	"github.com/loft-sh/vcluster/pkg/util/log"
	"github.com/loft-sh/vcluster/pkg/util/loghelper"
	testingutil "github.com/loft-sh/vcluster/pkg/util/testing"
	"github.com/loft-sh/vcluster/pkg/util/translate"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// withConfig is a fake manager whose REST config points at the token endpoint, the one call the syncer makes to
// the virtual API server over HTTP (a service account token projection).
type withConfig struct {
	ctrl.Manager
	config *rest.Config
}

func (m withConfig) GetConfig() *rest.Config { return m.config }

// tokenServer answers TokenRequests the way the virtual API server does, with the request's token. The request's
// body (protobuf or JSON, as client-go chooses) is not read: the syncer reads only the token back.
func tokenServer(token string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/token") {
			http.Error(w, "only TokenRequests are served", http.StatusNotFound)
			return
		}
		answer := &authenticationv1.TokenRequest{
			TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
			Status:   authenticationv1.TokenRequestStatus{Token: token},
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(answer)
	}))
}

// virtualClusterConfig is what the syncer reads from its config Secret: the chart's defaults under the site's
// values, parsed and defaulted by vCluster's config package.
func virtualClusterConfig(req *request) (*config.VirtualClusterConfig, error) {
	defaults, err := vclusterconfig.NewDefaultConfig()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(defaults)
	if err != nil {
		return nil, err
	}
	defaultMap := map[string]interface{}{}
	if err := json.Unmarshal(raw, &defaultMap); err != nil {
		return nil, err
	}
	merged, err := yaml.Marshal(strvals.MergeMaps(defaultMap, req.Values))
	if err != nil {
		return nil, err
	}
	vConfig, err := config.ParseConfigBytes(merged, req.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("vCluster refuses the values: %w", err)
	}
	vConfig.HostNamespace = req.HostNamespace
	vConfig.HostConfig = &rest.Config{}
	return vConfig, nil
}

// registerContext is what vCluster hands its syncers, for the request's config, on fresh fake clients: the virtual
// one holding the request's virtual objects, the host one the two host Services the pod syncer reads and
// `hostObjects`; the name mappings registered and migrated as at start-up.
func registerContext(req *request, server *httptest.Server, hostObjects ...runtime.Object) (*synccontext.RegisterContext, *testingutil.FakeIndexClient, *testingutil.FakeIndexClient, error) {
	vConfig, err := virtualClusterConfig(req)
	if err != nil {
		return nil, nil, nil, err
	}
	translate.VClusterName = req.Name
	translate.Default = translate.NewSingleNamespaceTranslator(req.HostNamespace)
	specialservices.Default = specialservices.NewDefaultServiceSyncer()

	virtualObjects := []runtime.Object{}
	for i := range req.Namespaces {
		virtualObjects = append(virtualObjects, req.Namespaces[i].DeepCopy())
	}
	for i := range req.Nodes {
		virtualObjects = append(virtualObjects, req.Nodes[i].DeepCopy())
	}
	for i := range req.Services {
		virtualObjects = append(virtualObjects, req.Services[i].DeepCopy())
	}
	vClient := testingutil.NewFakeClient(scheme.Scheme, virtualObjects...)
	dns := translate.Default.HostName(nil, specialservices.DefaultKubeDNSServiceName, specialservices.DefaultKubeDNSServiceNamespace)
	pClient := testingutil.NewFakeClient(scheme.Scheme, append(hostObjects,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.HostNamespace},
			Spec: corev1.ServiceSpec{ClusterIP: req.KubeIP}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: dns.Name, Namespace: req.HostNamespace},
			Spec: corev1.ServiceSpec{ClusterIP: req.DNSIP}})...)

	var hostVersion *utilversion.Version
	if req.HostVersion != "" {
		hostVersion = utilversion.MustParseSemantic(req.HostVersion)
	}
	registerCtx := &synccontext.RegisterContext{
		Context:                context.Background(),
		Config:                 vConfig,
		CurrentNamespace:       req.HostNamespace,
		CurrentNamespaceClient: pClient,
		VirtualManager:         withConfig{testingutil.NewFakeManager(vClient), &rest.Config{Host: server.URL}},
		HostManager:            testingutil.NewFakeManager(pClient),
		HostClusterVersion:     hostVersion,
	}
	mappingsStore, err := store.NewStoreWithVerifyMapping(registerCtx, vClient, pClient, store.NewMemoryBackend(),
		verify.NewVerifyMapping(registerCtx.ToSyncContext("verify-mapping")))
	if err != nil {
		return nil, nil, nil, err
	}
	registerCtx.Mappings = mappings.NewMappingsRegistry(mappingsStore)
	if err := resources.RegisterMappings(registerCtx); err != nil {
		return nil, nil, nil, err
	}
	for _, mapper := range registerCtx.Mappings.List() {
		if err := mapper.Migrate(registerCtx, mapper); err != nil {
			return nil, nil, nil, err
		}
	}
	return registerCtx, pClient, vClient, nil
}

// syncerOf is the sync context and generic syncer of one of vCluster's syncers, as its controller sets them up.
func syncerOf(registerCtx *synccontext.RegisterContext, object syncertypes.Object) (*synccontext.SyncContext, syncertypes.Sync[client.Object]) {
	syncCtx := registerCtx.ToSyncContext(object.Name())
	syncCtx.Log = loghelper.NewFromExisting(log.NewLog(0), object.Name())
	if provider, ok := object.(syncertypes.OptionsProvider); ok && provider.Options().ObjectCaching {
		mapper, _ := object.(synccontext.Mapper)
		syncCtx.ObjectCache = synccontext.NewBidirectionalObjectCache(object.Resource(), mapper)
	}
	return syncCtx, object.(syncertypes.Syncer).Syncer()
}
