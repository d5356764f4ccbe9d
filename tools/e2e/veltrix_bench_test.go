package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkVeltrixTimeToReady measures the whole path from `kubectl apply` of the sample
// (resized) to Ready, for 3 and 10 members: the node agents preparing a loop device on each
// member's node (mkfs.xfs and the mount), the local volumes, the scheduler, the simulated
// kubelets starting veltrix-sim processes, the members joining and the operator opening
// their search-ready gates. One member per node: 10 members need 10 nodes, which `make
// bench` starts (E2E_GENERAL_NODES=8); the suite's own 5 nodes fail the 10-member case
// with that advice. Each run then deletes its cluster with reclaimPolicy Delete, which
// releases and wipes the disks for the next run.
//
//	cd tools/e2e && E2E_GENERAL_NODES=8 go test -run 'TestInstall$' -bench VeltrixTimeToReady -benchtime 1x .
func BenchmarkVeltrixTimeToReady(b *testing.B) {
	if env.local == nil {
		b.Fatalf("needs the local cluster's process runner (pods as host processes); E2E_KUBECONFIG=%s has none", env.kubeconfig)
	}
	for _, name := range []string{"node-agent", "veltrix-operator"} {
		if _, ok := installed.Load(name); !ok {
			b.Fatalf("release %s was not installed: run with -run 'TestInstall$'", name)
		}
	}
	ctx := context.Background()
	if err := vxUseAgentsPVRoot(ctx); err != nil {
		b.Fatal(err)
	}
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	sample := vxSampleOf(b, filepath.Join(env.root, "deploy", "samples", "veltrix.yaml"))
	for _, n := range []int{3, 10} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			if len(nodes.Items) < n {
				b.Fatalf("%d members need %d nodes (one per host) and the cluster has %d: run with E2E_GENERAL_NODES=%d", n, n, len(nodes.Items), n-e2eAgentNodes)
			}
			run := 0
			for b.Loop() {
				run++
				name := fmt.Sprintf("bench-%d-%d", n, run)
				b.ReportMetric(vxTimeToReady(ctx, b, sample, name, n).Seconds(), "s-to-ready")
			}
		})
	}
}

// vxTimeToReady applies the sample as a cluster of that name and size with reclaimPolicy
// Delete, returns the time to Ready, and deletes it (untimed) until its volumes are gone.
func vxTimeToReady(ctx context.Context, b *testing.B, sample, name string, size int) time.Duration {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	doc := strings.Replace(sample, "name: "+vxName, "name: "+name, 1)
	doc = strings.Replace(doc, "reclaimPolicy: Retain", "reclaimPolicy: Delete", 1)
	doc = strings.Replace(doc, "size: 3", fmt.Sprintf("size: %d", size), 1)
	if !strings.Contains(doc, "name: "+name) || !strings.Contains(doc, "reclaimPolicy: Delete") || !strings.Contains(doc, fmt.Sprintf("size: %d", size)) {
		b.Fatalf("the sample no longer has the name, size or reclaimPolicy lines this benchmark changes")
	}
	begin := time.Now()
	if out, err := kubectlStdin(ctx, doc, "apply", "-f", "-"); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	var last string
	err := pollEvery(ctx, 100*time.Millisecond, 10*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := vxClusterNamed(ctx, name)
		if err != nil {
			return transient(err)
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionReady)
		if ready != nil {
			last = ready.Reason + ": " + ready.Message
		}
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == c.Generation && c.Status.ReadyMembers == int32(size), nil
	})
	took := time.Since(begin)
	if err != nil {
		b.Fatalf("%s not Ready with %d members: %v (last: %s)", name, size, err, last)
	}
	b.Logf("%s: %d members Ready %s after kubectl apply (disk preparation included)", name, size, took.Round(100*time.Millisecond))
	if out, err := kubectl(ctx, "delete", "vc", name, "-n", vxNamespace, "--wait=true", "--timeout=5m"); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	selector := "veltrix.io/cluster=" + name + ",veltrix.io/namespace=" + vxNamespace
	err = pollEvery(ctx, time.Second, 3*time.Minute, func(ctx context.Context) (bool, error) {
		pvs, err := env.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return transient(err)
		}
		return len(pvs.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("%s's volumes not gone after deletion (reclaimPolicy Delete): %v", name, err)
	}
	return took
}
