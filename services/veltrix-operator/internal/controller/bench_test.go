package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrixtest"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkTimeToReady measures the operator's share of the time from creating a cluster to
// Ready: preparing a 1 GiB loop device on every member's node through the real agents
// (mkfs.xfs included), the volumes and children, the search-ready gates and membership,
// against simulator processes already running (no scheduler or kubelet here; tools/e2e
// measures the whole path for 3 members).
// go test -run XXX -bench TimeToReady -benchtime 1x ./internal/controller
func BenchmarkTimeToReady(b *testing.B) {
	for _, n := range []int{3, 10} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				d := timeToReady(b, n)
				b.StartTimer()
				b.ReportMetric(d.Seconds(), "s-to-ready")
			}
		})
	}
}

var benchRuns int

func timeToReady(b *testing.B, n int) time.Duration {
	ctx := context.Background()
	benchRuns++
	sims := veltrixtest.StartCluster(b, n, veltrixtest.Options{Name: "vx", ReplicationFactor: 3})
	var nodes []string
	for i := range n {
		nodes = append(nodes, fmt.Sprintf("bench%d-%02d", benchRuns, i))
	}
	f := startFleet(b, operatorTokens(b, fmt.Sprintf("bench%d", benchRuns), true), 1<<30, nodes, nil)
	run := fmt.Sprintf("run%d", benchRuns)
	for _, name := range nodes {
		var node corev1.Node
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
			b.Fatal(err)
		}
		node.Labels["bench"] = run
		if err := env.Client.Update(ctx, &node); err != nil {
			b.Fatal(err)
		}
	}
	ns := testenv.NewNamespace(b, env.Client, "bench")
	addr := simAddrs(sims)
	startController(b, f, ns, func(cfg *controller.Config, _ ctrl.Manager) {
		cfg.AdminAddr, cfg.TextAddr = addr(false), addr(true)
		cfg.Admin = func(string) veltrix.Admin { return sims.Client() }
	})
	begin := time.Now()
	c := newCluster(b, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = int32(n), 3
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
		c.Spec.NodeSelector = map[string]string{"bench": run}
	})
	for o := range int32(n) {
		memberPod(b, c, o)
	}
	condition(b, c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)
	d := time.Since(begin)
	b.Logf("%d members Ready in %s (operator's share)", n, d.Round(10*time.Millisecond))
	return d
}
