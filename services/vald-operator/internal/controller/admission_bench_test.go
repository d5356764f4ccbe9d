package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	"github.com/opsuite/suite/shared/ssa"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkWrites measures what each kind of write that convergence is made of costs the
// API server (its CPU milliseconds per write, from its own process_cpu_seconds_total, and
// the wall time per write with VALD_BENCH_WORKERS parallel clients): creating a release
// (schema and CEL validation), a ValdRelease created as the floor does, the same applied
// server-side as the operator does, the release's status patch, and an event.
func BenchmarkWrites(b *testing.B) {
	n := envInt("VALD_BENCH_N", 200)
	workers := envInt("VALD_BENCH_WORKERS", floorClients)
	cfg := *env.Config
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(&cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	apply := ssa.Applier{Client: c, FieldManager: resources.FieldManager}
	for range b.N {
		ns := newNamespace(b)
		var vrs, applied []*valdv1.ValdRelease
		for i := range n {
			vor := benchRelease(ns, i)
			vor.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
			built, err := resources.DesiredValdReleases(resources.Input{Release: vor}, resources.DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			vrs, applied = append(vrs, built[0]), append(applied, built[1])
		}
		status := completedStatus
		var vors []*valdv1.ValdOperatorRelease
		writes := []struct {
			name  string
			write func(i int) error
		}{
			{"vor-create", func(i int) error { return c.Create(ctx, benchRelease(ns, i)) }},
			{"vr-create", func(i int) error { return c.Create(ctx, vrs[i]) }},
			{"vr-apply", func(i int) error { return apply.Apply(ctx, applied[i]) }},
			{"vor-status", func(i int) error {
				vor := &valdv1.ValdOperatorRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("vor-%04d", i)}}
				return c.Status().Patch(ctx, vor, client.RawPatch(types.MergePatchType, status))
			}},
			{"vor-status-update", func(i int) error {
				// The same status, with a PUT of the whole release read before the loop
				// (status once more, so that the write is not a no-op).
				vor := vors[i].DeepCopy()
				vor.Status.ObservedGeneration = 2
				return c.Status().Update(ctx, vor)
			}},
			{"event", func(i int) error {
				return c.Create(ctx, &eventsv1.Event{
					ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("vor-%04d.%d", i, time.Now().UnixNano())},
					EventTime:           metav1.NewMicroTime(time.Now()),
					ReportingController: Name, ReportingInstance: Name + "-bench",
					Action: valdv1.ConditionCompleted, Reason: valdv1.ReasonSucceeded, Type: corev1.EventTypeNormal,
					Regarding: corev1.ObjectReference{Kind: "ValdOperatorRelease", APIVersion: valdv1.GroupVersion.String(), Namespace: ns, Name: fmt.Sprintf("vor-%04d", i)},
					Note:      "Completed: Every phase succeeded.",
				})
			}},
		}
		for _, w := range writes {
			if w.name == "vor-status-update" {
				list := &valdv1.ValdOperatorReleaseList{}
				if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
					b.Fatal(err)
				}
				vors = make([]*valdv1.ValdOperatorRelease, n)
				for j := range list.Items {
					var k int
					if _, err := fmt.Sscanf(list.Items[j].Name, "vor-%d", &k); err != nil {
						b.Fatal(err)
					}
					vors[k] = &list.Items[j]
				}
			}
			before := readAPIServer(b, benchCluster{cfg: env.Config})
			began := time.Now()
			if err := parallel(n, workers, w.write); err != nil {
				b.Fatalf("%s: %v", w.name, err)
			}
			wall := time.Since(began)
			cpu := readAPIServer(b, benchCluster{cfg: env.Config}).since(before).cpu
			b.ReportMetric(cpu*1000/float64(n), w.name+"-apiserver-cpu-ms/op")
			b.ReportMetric(wall.Seconds()*1000/float64(n), w.name+"-ms/op")
		}
		// Namespaces never go without kube-controller-manager: remove what was written, or
		// the operator of a later BenchmarkConverge, watching every namespace, would
		// reconcile these releases too.
		for _, obj := range []client.Object{&valdv1.ValdOperatorRelease{}, &valdv1.ValdRelease{}, &eventsv1.Event{}} {
			if err := c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
		}
	}
}
