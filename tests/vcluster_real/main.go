// Command vcluster-real runs vCluster's own syncers (pods, Services, Endpoints, EndpointSlices, claims, ConfigMaps,
// Secrets) and its API proxy's Service CREATE against fake host and virtual clients, with vCluster's config parsed
// by vCluster's config package from the Helm values the program renders for one team.
//
// It is built inside an exported vCluster source tree (tests/vcluster_real.py copies this package there, and
// filters/service_create.go into vCluster's pkg/server/filters) and reads one JSON request on stdin: {"name",
// "hostNamespace", "values", "kubeIP", "dnsIP", "token", "hostVersion", "namespaces", "nodes", "services", "pods",
// "updates", "objects", "objectUpdates"} (nodes: those the virtual cluster has synced from the host; updates:
// {"host", "virtualOld", "virtual"}, a tenant's edit of a running pod; objects: {"kind", "via", "object"};
// objectUpdates: {"kind", "host", "virtualOld", "virtual"}). It writes {"created", "updated", "objectsCreated",
// "objectsUpdated"}: for each pod or object, the host copy ({"host"}), for each update, both after Sync ({"host",
// "virtual"}), or {"error"}, or (objects) {"skipped"}; each object with its apiVersion and kind, as an API server
// answers it. Each runs on fresh clients, so none sees another's objects.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/loft-sh/vcluster/pkg/scheme"
	"github.com/loft-sh/vcluster/pkg/util"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
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
	Objects       []objectRequest        `json:"objects"`
	ObjectUpdates []objectUpdate         `json:"objectUpdates"`
}

// podUpdate is a Sync of a pod: the tenant's edit (virtualOld -> virtual) and the host pod as it is; hostOld, when
// given, is the host pod as the syncer last saw it (its object cache), so what others wrote since is copied back.
type podUpdate struct {
	HostOld    *corev1.Pod `json:"hostOld,omitempty"`
	Host       corev1.Pod  `json:"host"`
	VirtualOld corev1.Pod  `json:"virtualOld"`
	Virtual    corev1.Pod  `json:"virtual"`
}

type result struct {
	Host    *corev1.Pod `json:"host,omitempty"`
	Virtual *corev1.Pod `json:"virtual,omitempty"`
	Error   string      `json:"error,omitempty"`
}

// answered is an object read back from a fake client as the harness answers it: with the type meta an API server's
// answer (and an admission request's object) carries, which controller-runtime's clients clear from a typed object
// they read and the tests' host policy needs to know the object by; without a resourceVersion, which each run's
// fresh store counts on its own.
func answered(object client.Object) error {
	gvk, err := apiutil.GVKForObject(object, scheme.Scheme)
	if err != nil {
		return err
	}
	object.GetObjectKind().SetGroupVersionKind(gvk)
	object.SetResourceVersion("")
	return nil
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
		Created        []result       `json:"created"`
		Updated        []result       `json:"updated"`
		ObjectsCreated []objectResult `json:"objectsCreated"`
		ObjectsUpdated []objectResult `json:"objectsUpdated"`
	}{Created: []result{}, Updated: []result{}, ObjectsCreated: []objectResult{}, ObjectsUpdated: []objectResult{}}
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
	for i := range req.Objects {
		if made, err := createObject(req, &req.Objects[i], server); err != nil {
			answer.ObjectsCreated = append(answer.ObjectsCreated, objectResult{Error: err.Error()})
		} else {
			answer.ObjectsCreated = append(answer.ObjectsCreated, *made)
		}
	}
	for i := range req.ObjectUpdates {
		if both, err := updateObject(req, &req.ObjectUpdates[i], server); err != nil {
			answer.ObjectsUpdated = append(answer.ObjectsUpdated, objectResult{Error: err.Error()})
		} else {
			answer.ObjectsUpdated = append(answer.ObjectsUpdated, *both)
		}
	}
	out := &bytes.Buffer{}
	if err := json.NewEncoder(out).Encode(answer); err != nil {
		fmt.Fprintln(os.Stderr, "writing the host objects:", err)
		os.Exit(2)
	}
	_, _ = stdout.Write(out.Bytes())
}
