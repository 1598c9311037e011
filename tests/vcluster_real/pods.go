package main

import (
	"fmt"
	"net/http/httptest"

	"github.com/loft-sh/vcluster/pkg/controllers/resources/pods"
	"github.com/loft-sh/vcluster/pkg/syncer/synccontext"
	syncertypes "github.com/loft-sh/vcluster/pkg/syncer/types"
	testingutil "github.com/loft-sh/vcluster/pkg/util/testing"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podSyncer is vCluster's pod syncer for the request's config, on fresh fake clients holding the request's
// virtual objects and the host objects given.
func podSyncer(req *request, server *httptest.Server, hostObjects ...runtime.Object) (*synccontext.SyncContext, syncertypes.Sync[client.Object], *testingutil.FakeIndexClient, *testingutil.FakeIndexClient, error) {
	registerCtx, pClient, vClient, err := registerContext(req, server, hostObjects...)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	object, err := pods.New(registerCtx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	syncCtx, syncer := syncerOf(registerCtx, object)
	return syncCtx, syncer, pClient, vClient, nil
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
	return &pod, answered(&pod)
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
	hostOld := host.DeepCopy()
	if change.HostOld != nil {
		hostOld = change.HostOld.DeepCopy()
	}
	event := synccontext.NewSyncEventWithOld[client.Object](hostOld, host.DeepCopy(), change.VirtualOld.DeepCopy(), virtual)
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
