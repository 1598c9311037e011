package filters

import (
	"net/http"

	"github.com/loft-sh/vcluster/pkg/scheme"
	"github.com/loft-sh/vcluster/pkg/syncer/synccontext"
	"github.com/loft-sh/vcluster/pkg/util/encoding"
	"k8s.io/apimachinery/pkg/runtime"
)

// GPUTenancyCreateService is the Service CREATE of WithServiceCreateRedirect past its request parsing and
// impersonation: tests/vcluster_real.py adds this file to vCluster's filters package so the harness can run it.
func GPUTenancyCreateService(ctx *synccontext.SyncContext, req *http.Request, namespace string) (runtime.Object, error) {
	return createService(ctx, req, encoding.NewDecoder(scheme.Scheme, false), namespace)
}
