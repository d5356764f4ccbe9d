package controller

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lastAppliedAnnotation is where client-side `kubectl apply` keeps a full copy of what it
// applied: as large as the spec itself, and never read by the controller.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// ManagerOptions sets what the controller needs of the manager: the cache keeps objects
// without their managedFields (server-side apply computes ownership on the API server;
// about half of a cached ValdRelease) and without kubectl's last-applied copy, and
// ValdReleases with only the part of their status the controller reads and their spec
// compressed (see packSpec).
func ManagerOptions(mo *ctrl.Options) {
	mo.Cache.DefaultTransform = stripForCache
}

// stripForCache drops what the controller never reads from an object entering the cache.
// Objects of other types (the informer's tombstones) pass unchanged.
func stripForCache(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	obj.SetManagedFields(nil)
	if a := obj.GetAnnotations(); a[lastAppliedAnnotation] != "" {
		delete(a, lastAppliedAnnotation)
		obj.SetAnnotations(a)
	}
	if vr, ok := obj.(*valdv1.ValdRelease); ok {
		slimHelmStatus(vr)
		if vr.Spec != nil {
			vr.Spec.Raw = packSpec(vr.Spec.Raw)
		}
	}
	return obj, nil
}

// slimHelmStatus keeps of a ValdRelease's status the conditions and observedGeneration,
// which is all deployment reads. The Vald Helm Operator also writes deployedRelease, with
// the whole manifest it rendered from the Vald chart: tens of kilobytes per ValdRelease,
// which 2,000 cached ValdReleases would hold in memory for nothing. A status that is not
// the Vald Helm Operator's is left as it is, for deployment to say so.
func slimHelmStatus(vr *valdv1.ValdRelease) {
	if vr.Status == nil || len(vr.Status.Raw) == 0 {
		return
	}
	var st helmStatus
	if err := json.Unmarshal(vr.Status.Raw, &st); err != nil {
		return
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return
	}
	vr.Status.Raw = raw
}

// packedSpec is the first byte of a spec the cache holds compressed: no JSON text begins
// with it, so a packed spec is never taken for chart values.
const packedSpec byte = 0

// specDictionary is what packed specs are deflated against: the chart values the builder
// renders for a one-cluster release with the default configuration. Every ValdRelease
// shares most of its keys and many values with it, so a spec of 2.6 kB packs into about
// 500 bytes where deflate alone leaves 750: the cached specs, a third of the heap at
// 1,000 releases, take a fifth of it. The dictionary only ever lives in this process,
// like the cache, so it may change with the builder.
var specDictionary = sync.OnceValue(func() []byte {
	sample := &valdv1.ValdOperatorRelease{}
	sample.Name, sample.Namespace = "release", "namespace"
	sample.Spec.Infrastructure = []valdv1.Infrastructure{{Role: "green", Clusters: []valdv1.Cluster{{Name: "cluster", ID: "id"}}}}
	sample.Spec.VectorEngine.Name = "vald"
	vrs, err := resources.DesiredValdReleases(resources.Input{Release: sample}, resources.DefaultConfig())
	if err != nil || len(vrs) == 0 || vrs[0].Spec == nil {
		return nil // packs without a dictionary: larger, as correct
	}
	return vrs[0].Spec.Raw
})

var (
	// specWriter packs every spec: the transform runs on the ValdRelease informer's one
	// goroutine, so a single writer (800 kB of deflate state) serves it, where a pool
	// emptied by every other garbage collection made twenty of them while 1,000 releases
	// converged.
	specWriter struct {
		sync.Mutex
		w *flate.Writer
	}
	specReaders sync.Pool
)

// packSpec compresses a ValdRelease's spec for the cache. The controller reads the specs
// of cached ValdReleases only through its client (indexedClient), which unpacks them; a
// spec that does not get smaller, or is packed already, stays as it is.
func packSpec(raw []byte) []byte {
	if len(raw) == 0 || raw[0] == packedSpec {
		return raw
	}
	var buf bytes.Buffer
	buf.Grow(len(raw) / 4)
	buf.WriteByte(packedSpec)
	specWriter.Lock()
	defer specWriter.Unlock()
	if specWriter.w == nil {
		w, err := flate.NewWriterDict(&buf, flate.DefaultCompression, specDictionary())
		if err != nil {
			return raw // only for a level out of range
		}
		specWriter.w = w
	}
	w := specWriter.w
	w.Reset(&buf)
	if _, err := w.Write(raw); err != nil {
		return raw
	}
	if err := w.Close(); err != nil || buf.Len() >= len(raw) {
		return raw
	}
	return bytes.Clone(buf.Bytes()) // exactly as long as it needs to be
}

// unpackSpec returns the chart values of a spec packSpec packed, and any other as it is.
func unpackSpec(raw []byte) ([]byte, error) {
	if len(raw) == 0 || raw[0] != packedSpec {
		return raw, nil
	}
	src := bytes.NewReader(raw[1:])
	r, _ := specReaders.Get().(io.ReadCloser)
	if r == nil {
		r = flate.NewReaderDict(src, specDictionary())
	} else if err := r.(flate.Resetter).Reset(src, specDictionary()); err != nil {
		return nil, err
	}
	defer specReaders.Put(r)
	out := bytes.NewBuffer(make([]byte, 0, 4*len(raw)))
	if _, err := out.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("unpacking a cached ValdRelease spec: %w", err)
	}
	return out.Bytes(), nil
}

// unpackValdRelease gives vr, read from the cache, its spec as the API server holds it.
// The spec gets a new value rather than being written into: with UnsafeDisableDeepCopy,
// vr shares it with the cache.
func unpackValdRelease(vr *valdv1.ValdRelease) error {
	if vr.Spec == nil || len(vr.Spec.Raw) == 0 || vr.Spec.Raw[0] != packedSpec {
		return nil
	}
	raw, err := unpackSpec(vr.Spec.Raw)
	if err != nil {
		return fmt.Errorf("ValdRelease %s/%s: %w", vr.Namespace, vr.Name, err)
	}
	vr.Spec = &apiextensionsv1.JSON{Raw: raw}
	return nil
}

// unpackRead unpacks the specs of the ValdReleases a read through the cache returned.
func unpackRead(obj runtime.Object) error {
	switch o := obj.(type) {
	case *valdv1.ValdRelease:
		return unpackValdRelease(o)
	case *valdv1.ValdReleaseList:
		for i := range o.Items {
			if err := unpackValdRelease(&o.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}
