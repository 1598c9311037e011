// Command vcluster-real runs vCluster's own pod syncer against fake host and virtual clients, with vCluster's config
// parsed by vCluster's config package from the Helm values the program renders for one team.
//
// It is built inside an exported vCluster source tree (tests/vcluster_real.py copies it there) and reads one JSON
// request on stdin: {"name", "hostNamespace", "values", "kubeIP", "dnsIP", "token", "hostVersion", "namespaces",
// "nodes", "services", "pods", "updates"} (nodes: those the virtual cluster has synced from the host; updates:
// {"host", "virtualOld", "virtual"}, a tenant's edit of a running pod). It writes {"created": [...], "updated":
// [...]}: for each pod, SyncToHost's host pod ({"host"}), for each update, both pods after Sync ({"host",
// "virtual"}), or {"error"}. Each runs on fresh clients, so none sees another's objects.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	vclusterconfig "github.com/loft-sh/vcluster/config"
	"github.com/loft-sh/vcluster/pkg/config"
	"github.com/loft-sh/vcluster/pkg/controllers/resources/pods"
	"github.com/loft-sh/vcluster/pkg/mappings"
	"github.com/loft-sh/vcluster/pkg/mappings/resources"
	"github.com/loft-sh/vcluster/pkg/mappings/store"
	"github.com/loft-sh/vcluster/pkg/mappings/store/verify"
	"github.com/loft-sh/vcluster/pkg/scheme"
	"github.com/loft-sh/vcluster/pkg/specialservices"
	"github.com/loft-sh/vcluster/pkg/strvals"
	"github.com/loft-sh/vcluster/pkg/syncer/synccontext"
	syncertypes "github.com/loft-sh/vcluster/pkg/syncer/types"
	"github.com/loft-sh/vcluster/pkg/util"
	"github.com/loft-sh/vcluster/pkg/util/log"
	"github.com/loft-sh/vcluster/pkg/util/loghelper"
	testingutil "github.com/loft-sh/vcluster/pkg/util/testing"
	"github.com/loft-sh/vcluster/pkg/util/translate"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

type request struct {
	Name          string                 `json:"name"`
	HostNamespace string                 `json:"hostNamespace"`
	Values        map[string]interface{} `json:"values"`
	KubeIP        string                 `json:"kubeIP"`
	DNSIP         string                 `json:"dnsIP"`
	Token         string                 `json:"token"`
	HostVersion   string                 `json:"hostVersion"`
	Namespaces    []corev1.Namespace     `json:"namespaces"`
	Nodes         []corev1.Node          `json:"nodes"`
	Services      []corev1.Service       `json:"services"`
	Pods          []corev1.Pod           `json:"pods"`
	Updates       []podUpdate            `json:"updates"`
}

type podUpdate struct {
	Host       corev1.Pod `json:"host"`
	VirtualOld corev1.Pod `json:"virtualOld"`
	Virtual    corev1.Pod `json:"virtual"`
}

type result struct {
	Host    *corev1.Pod `json:"host,omitempty"`
	Virtual *corev1.Pod `json:"virtual,omitempty"`
	Error   string      `json:"error,omitempty"`
}

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

// podSyncer is vCluster's pod syncer for the request's config, on fresh fake clients holding the request's
// virtual objects and the two host Services the syncer reads, and the host objects given.
func podSyncer(req *request, server *httptest.Server, hostObjects ...runtime.Object) (*synccontext.SyncContext, syncertypes.Sync[client.Object], *testingutil.FakeIndexClient, *testingutil.FakeIndexClient, error) {
	vConfig, err := virtualClusterConfig(req)
	if err != nil {
		return nil, nil, nil, nil, err
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
		return nil, nil, nil, nil, err
	}
	registerCtx.Mappings = mappings.NewMappingsRegistry(mappingsStore)
	if err := resources.RegisterMappings(registerCtx); err != nil {
		return nil, nil, nil, nil, err
	}
	for _, mapper := range registerCtx.Mappings.List() {
		if err := mapper.Migrate(registerCtx, mapper); err != nil {
			return nil, nil, nil, nil, err
		}
	}

	object, err := pods.New(registerCtx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	syncCtx := registerCtx.ToSyncContext(object.Name())
	syncCtx.Log = loghelper.NewFromExisting(log.NewLog(0), object.Name())
	if provider, ok := object.(syncertypes.OptionsProvider); ok && provider.Options().ObjectCaching {
		mapper, _ := object.(synccontext.Mapper)
		syncCtx.ObjectCache = synccontext.NewBidirectionalObjectCache(object.Resource(), mapper)
	}
	return syncCtx, object.(syncertypes.Syncer).Syncer(), pClient, vClient, nil
}

// onlyPod is the one pod a client holds after a sync.
func onlyPod(syncCtx *synccontext.SyncContext, c client.Client, side string) (*corev1.Pod, error) {
	found := &corev1.PodList{}
	if err := c.List(syncCtx, found); err != nil {
		return nil, err
	}
	if len(found.Items) != 1 {
		return nil, fmt.Errorf("the syncer left %d %s pods", len(found.Items), side)
	}
	pod := found.Items[0]
	pod.ResourceVersion = ""
	return &pod, nil
}

// create is SyncToHost of a virtual pod: the host pod the syncer creates.
func create(req *request, vPod *corev1.Pod, server *httptest.Server) (*corev1.Pod, error) {
	syncCtx, syncer, pClient, vClient, err := podSyncer(req, server)
	if err != nil {
		return nil, err
	}
	if err := vClient.Create(syncCtx, vPod.DeepCopy()); err != nil {
		return nil, err
	}
	if _, err := syncer.SyncToHost(syncCtx, synccontext.NewSyncToHostEvent[client.Object](vPod.DeepCopy())); err != nil {
		return nil, err
	}
	return onlyPod(syncCtx, pClient, "host")
}

// update is Sync of a tenant's edit (virtualOld -> virtual) with the host pod as it is: both pods afterwards.
func update(req *request, change *podUpdate, server *httptest.Server) (*result, error) {
	syncCtx, syncer, pClient, vClient, err := podSyncer(req, server, change.Host.DeepCopy())
	if err != nil {
		return nil, err
	}
	if err := vClient.Create(syncCtx, change.Virtual.DeepCopy()); err != nil {
		return nil, err
	}
	host, virtual := &corev1.Pod{}, &corev1.Pod{}
	if err := pClient.Get(syncCtx, client.ObjectKeyFromObject(&change.Host), host); err != nil {
		return nil, err
	}
	if err := vClient.Get(syncCtx, client.ObjectKeyFromObject(&change.Virtual), virtual); err != nil {
		return nil, err
	}
	event := synccontext.NewSyncEventWithOld[client.Object](host.DeepCopy(), host.DeepCopy(), change.VirtualOld.DeepCopy(), virtual)
	if _, err := syncer.Sync(syncCtx, event); err != nil {
		return nil, err
	}
	if host, err = onlyPod(syncCtx, pClient, "host"); err != nil {
		return nil, err
	}
	if virtual, err = onlyPod(syncCtx, vClient, "virtual"); err != nil {
		return nil, err
	}
	return &result{Host: host, Virtual: virtual}, nil
}

func main() {
	// vCluster's packages print to stdout (a refused config, for one); the answer alone goes there.
	stdout := os.Stdout
	os.Stdout = os.Stderr
	// The syncer asks whether CRDs exist on the host; a fake host has every kind.
	util.KindExists = func(_ *rest.Config, _ schema.GroupVersionKind) (bool, error) { return true, nil }

	req := &request{}
	decoder := json.NewDecoder(os.Stdin)
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(req); err != nil {
		fmt.Fprintln(os.Stderr, "reading the request:", err)
		os.Exit(2)
	}
	server := tokenServer(req.Token)
	defer server.Close()

	answer := struct {
		Created []result `json:"created"`
		Updated []result `json:"updated"`
	}{Created: []result{}, Updated: []result{}}
	for i := range req.Pods {
		if host, err := create(req, &req.Pods[i], server); err != nil {
			answer.Created = append(answer.Created, result{Error: err.Error()})
		} else {
			answer.Created = append(answer.Created, result{Host: host})
		}
	}
	for i := range req.Updates {
		if both, err := update(req, &req.Updates[i], server); err != nil {
			answer.Updated = append(answer.Updated, result{Error: err.Error()})
		} else {
			answer.Updated = append(answer.Updated, *both)
		}
	}
	out := &bytes.Buffer{}
	if err := json.NewEncoder(out).Encode(answer); err != nil {
		fmt.Fprintln(os.Stderr, "writing the host pods:", err)
		os.Exit(2)
	}
	_, _ = stdout.Write(out.Bytes())
}
