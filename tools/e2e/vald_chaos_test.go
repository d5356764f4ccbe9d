package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// vdChaos is the chaos run's Vald part: a ValdOperatorRelease of two clusters. Vald's data
// plane is the Vald Helm Operator's, which the suite plays (awaitVorCompleted reports each
// ValdRelease Deployed); what must not be lost here is the release's spec: at the end its
// ValdReleases are those of the last generation.
type vdChaos struct {
	t              *testing.T
	ns, name       string
	replicas, dims int
}

func newVdChaos(t *testing.T) *vdChaos {
	v := &vdChaos{t: t, ns: "e2e-chaos-vald", name: "chaos", replicas: 2, dims: 8}
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), v.ns, metav1.DeleteOptions{})
	})
	return v
}

func (v *vdChaos) product() string                  { return "vald" }
func (v *vdChaos) operator() string                 { return "vald-operator" }
func (v *vdChaos) members(context.Context) []string { return nil }
func (v *vdChaos) create(ctx context.Context) {
	applyManifest(ctx, v.t, vorManifest(v.ns, v.name, "c1", "c2"))
}
func (v *vdChaos) start(ctx context.Context) {
	awaitVorCompleted(ctx, v.t, v.ns, v.name, 1, "c1", "c2")
}
func (v *vdChaos) ready(ctx context.Context) bool {
	r, err := readVor(ctx, v.ns, v.name)
	return err == nil && r.isTrue("Completed") && r.observed == r.generation
}

func (v *vdChaos) patch(ctx context.Context, path string, value int) error {
	p := fmt.Sprintf(`[{"op":"replace","path":%q,"value":%d}]`, path, value)
	_, err := env.dyn.Resource(vorGVR).Namespace(v.ns).Patch(ctx, v.name, types.JSONPatchType, []byte(p), metav1.PatchOptions{})
	return err
}

func (v *vdChaos) faults() []chaosFault {
	return []chaosFault{
		{name: "scale", run: func(ctx context.Context, _ *rand.Rand, log *chaosLog) error {
			to := 5 - v.replicas // 2 <-> 3
			if err := v.patch(ctx, "/spec/infrastructure/0/nodePools/general/replicas", to); err != nil {
				return err
			}
			v.replicas = to
			log.add("vald general pool scaled to %d", to)
			return nil
		}},
		{name: "reindex", run: func(ctx context.Context, _ *rand.Rand, log *chaosLog) error {
			to := 24 - v.dims // 8 <-> 16
			if err := v.patch(ctx, "/spec/vectorEngine/vald/agent/ngt/dimension", to); err != nil {
				return err
			}
			v.dims = to
			log.add("vald agent dimension set to %d", to)
			return nil
		}},
	}
}

func (v *vdChaos) finish(ctx context.Context) {
	r, err := readVor(ctx, v.ns, v.name)
	if err != nil {
		v.t.Fatal(err)
	}
	awaitVorCompleted(ctx, v.t, v.ns, v.name, r.generation, "c1", "c2")
	vrs, err := vorValdReleases(ctx, v.ns, v.name)
	if err != nil {
		v.t.Fatal(err)
	}
	for _, vr := range vrs {
		dims, _, _ := unstructured.NestedInt64(vr.Object, "spec", "agent", "ngt", "dimension")
		if dims != int64(v.dims) {
			v.t.Errorf("ValdRelease %s: agent.ngt.dimension %d, want the last spec's %d", vr.GetName(), dims, v.dims)
		}
	}
	v.t.Logf("vald: ValdReleases of generation %d, dimension %d", r.generation, v.dims)
}
