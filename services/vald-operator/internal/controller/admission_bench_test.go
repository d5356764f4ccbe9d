package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkWrites compares the API server's cost of the writes convergence is made of:
// creating a release (schema and CEL validation), patching its status, and the same two
// writes on a schemaless ValdRelease of the same values.
func BenchmarkWrites(b *testing.B) {
	n := envInt("VALD_BENCH_N", 200)
	workers := envInt("VALD_BENCH_WORKERS", 8)
	cfg := *env.Config
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(&cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range b.N {
		ns := newNamespace(b)
		began := time.Now()
		if err := parallel(n, workers, func(i int) error { return c.Create(ctx, benchRelease(ns, i)) }); err != nil {
			b.Fatal(err)
		}
		vorCreate := time.Since(began)

		began = time.Now()
		if err := parallel(n, workers, func(i int) error {
			vor := &valdv1.ValdOperatorRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("vor-%04d", i)}}
			patch := []byte(`{"status":{"phase":"WaitingClusterCreate","progressText":"0/3","state":"Progressing","conditions":[{"type":"WaitingClusterCreate","status":"Unknown","reason":"Progressing","message":"x","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
			return c.Status().Patch(ctx, vor, client.RawPatch(types.MergePatchType, patch))
		}); err != nil {
			b.Fatal(err)
		}
		statusPatch := time.Since(began)

		var vrs []*valdv1.ValdRelease
		for i := range n {
			vor := benchRelease(ns, i)
			vor.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
			built, err := resources.DesiredValdReleases(resources.Input{Release: vor}, resources.DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			vrs = append(vrs, built[0])
		}
		began = time.Now()
		if err := parallel(n, workers, func(i int) error { return c.Create(ctx, vrs[i]) }); err != nil {
			b.Fatal(err)
		}
		vrCreate := time.Since(began)

		began = time.Now()
		if err := parallel(n, workers, func(i int) error {
			vr := &valdv1.ValdRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vrs[i].Name}}
			patch := []byte(`{"status":{"phase":"WaitingClusterCreate","progressText":"0/3","state":"Progressing","conditions":[{"type":"WaitingClusterCreate","status":"Unknown","reason":"Progressing","message":"x","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
			return c.Status().Patch(ctx, vr, client.RawPatch(types.MergePatchType, patch))
		}); err != nil {
			b.Fatal(err)
		}
		vrStatus := time.Since(began)
		b.ReportMetric(vorCreate.Seconds()*1000/float64(n), "vor-create-ms/op")
		b.ReportMetric(statusPatch.Seconds()*1000/float64(n), "vor-status-ms/op")
		b.ReportMetric(vrCreate.Seconds()*1000/float64(n), "vr-create-ms/op")
		b.ReportMetric(vrStatus.Seconds()*1000/float64(n), "vr-status-ms/op")
	}
}
