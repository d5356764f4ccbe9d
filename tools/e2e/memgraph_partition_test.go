package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/tools/internal/bolt"
)

// mgStatusFollowBound is how long after the coordinators' promotion the operator may take
// to report the new MAIN: generous for a loaded machine, well under the 30 s resync.
const mgStatusFollowBound = 15 * time.Second

// mgPartitionMain cuts the MAIN off from every coordinator (issue "Faults across the suite",
// item 2) while a client keeps writing to it directly, the worst case: a client that routes
// through the coordinators (neo4j://) is sent to the new MAIN instead. The MAIN still reaches
// its replicas. The coordinators stop hearing from it and, after their down timeout
// (instance_down_timeout_sec, 5 s), promote the replica; the old MAIN, which never heard of
// that, goes on taking writes, which the replica (now a MAIN of a newer epoch) no longer
// confirms. Memgraph documents such a write ("At least one SYNC replica has not confirmed
// committing last transaction") as committed on the MAIN only, and it is lost when the old
// MAIN is demoted. What the test holds: every write the MAIN acknowledged without that
// exception is on the new MAIN and on every replica after healing; the unconfirmed ones are
// counted and logged, with the window they came from; the cluster is Ready again. The
// operator's status follows the promotion within mgStatusFollowBound (issue 24: its failover
// watch reads the coordinators every 5 s; a partition makes no Kubernetes event, and before
// the watch the status waited for the 30 s resync), reports Converged=False MembersDown while
// the old MAIN is cut off, and records the failover (status.lastFailoverTime).
func mgPartitionMain(ctx context.Context, t *testing.T, plane *mgPlane) {
	t.Helper()
	oldMain, _ := plane.view(ctx, t, "before the partition")
	ipOf := func(pod string) string {
		p, err := env.client.CoreV1().Pods(mgNamespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || p.Status.PodIP == "" {
			t.Fatalf("pod %s: no address (err %v)", pod, err)
		}
		return p.Status.PodIP
	}
	var coords []string
	for i := 1; i <= plane.coordinators; i++ {
		coords = append(coords, ipOf(fmt.Sprintf("%s-coordinator-%d", mgName, i)))
	}
	watch := watchMain(ctx)
	cut := partitionPods(t, ipOf(mgPod(oldMain)), coords, 2*time.Minute)
	begin := time.Now()

	// The writer: one node per call, numbered, on the old MAIN, until the coordinators have
	// promoted another instance and at least 40 s have gone by: longer than the operator's
	// 30 s resync, so that what it reports during a partition is seen.
	var acked, unconfirmed []int64
	var refused []string
	var firstUnconfirmed, failover time.Duration
	var newMain string
	var reported []string
	// statusFollowed is when the operator first reported the new MAIN; membersDown whether
	// it said Converged=False MembersDown during the partition.
	var statusFollowed time.Duration
	membersDown := false
	lastView := time.Time{}
	for i := int64(0); ; i++ {
		_, err := mgRun(ctx, mgPod(oldMain), fmt.Sprintf("CREATE (:E2EPartition {i: %d})", i))
		switch {
		case err == nil:
			acked = append(acked, i)
		case strings.Contains(err.Error(), "SYNC replica has not confirmed"):
			if len(unconfirmed) == 0 {
				firstUnconfirmed = time.Since(begin)
			}
			unconfirmed = append(unconfirmed, i)
		default:
			if len(refused) < 5 {
				refused = append(refused, err.Error())
			}
		}
		if time.Since(lastView) > 500*time.Millisecond {
			lastView = time.Now()
			if newMain == "" {
				if _, rows, why := mgLeaderView(ctx, plane.coordinators); why == "" {
					for _, r := range rows {
						if r.Role == "main" && r.Name != oldMain {
							newMain, failover = r.Name, time.Since(begin)
							t.Logf("+%.1fs the coordinators promoted %s", failover.Seconds(), newMain)
						}
					}
				}
			}
			if c, err := mgCluster(ctx); err == nil {
				if newMain != "" && c.Status.Main == newMain && statusFollowed == 0 {
					statusFollowed = time.Since(begin)
				}
				if cv := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionConverged); cv != nil &&
					cv.Status == metav1.ConditionFalse && cv.Reason == memgraphv1.ReasonMembersDown {
					membersDown = true
				}
				line := mgDescribe(c)
				if r := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionReady); r != nil {
					line += fmt.Sprintf(" Ready=%s %s: %s", r.Status, r.Reason, r.Message)
				}
				if len(reported) == 0 || reported[len(reported)-1] != line {
					reported = append(reported, line)
					t.Logf("+%.1fs operator reports: %s", time.Since(begin).Seconds(), line)
				}
			}
		}
		if newMain != "" && time.Since(begin) > 40*time.Second {
			break
		}
		if time.Since(begin) > 90*time.Second {
			watch.stop(t, "the partition")
			mgDiagnose(ctx, t)
			t.Fatalf("the coordinators promoted no other instance within 90 s of cutting %s off", oldMain)
		}
		time.Sleep(50 * time.Millisecond)
	}
	switch {
	case statusFollowed == 0:
		t.Errorf("the operator never reported %s as MAIN during the partition (40 s)", newMain)
	case statusFollowed-failover > mgStatusFollowBound:
		t.Errorf("the operator reported %s as MAIN %.1fs after the promotion, want within %v", newMain, (statusFollowed - failover).Seconds(), mgStatusFollowBound)
	default:
		t.Logf("the operator reported %s as MAIN %.1fs after the promotion", newMain, (statusFollowed - failover).Seconds())
	}
	if !membersDown {
		t.Errorf("the operator never reported Converged=False %s while %s was cut off", memgraphv1.ReasonMembersDown, oldMain)
	}
	if c, err := mgCluster(ctx); err != nil || c.Status.LastFailoverTime == nil || c.Status.LastFailoverTime.Time.Before(begin.Add(-time.Second)) {
		t.Errorf("status.lastFailoverTime does not record the failover (err %v)", err)
	}
	t.Logf("partition healed after %s: the old MAIN %s acknowledged %d writes, %d more committed unconfirmed (from +%.1fs), %d refused %q",
		cut.heal().Round(100*time.Millisecond), oldMain, len(acked), len(unconfirmed), firstUnconfirmed.Seconds(), len(refused), refused)
	mgScale(ctx, t, "after the MAIN's partition", "", int32(plane.coordinators), int32(plane.data), 4*time.Minute)
	watch.stop(t, "the MAIN's partition from the coordinators")

	// Every acknowledged write on every data instance; the unconfirmed ones are counted.
	main, replicas := plane.view(ctx, t, "after the partition")
	for _, inst := range append([]string{main}, replicas...) {
		res, err := mgRun(ctx, mgPod(inst), "MATCH (n:E2EPartition) RETURN n")
		if err != nil {
			t.Fatalf("reading the partition's nodes on %s: %v", inst, err)
		}
		have := map[int64]bool{}
		for _, rec := range res.Records {
			if n, ok := rec[0].(bolt.Node); ok {
				if i, ok := n.Props["i"].(int64); ok {
					have[i] = true
				}
			}
		}
		var lost []int64
		for _, i := range acked {
			if !have[i] {
				lost = append(lost, i)
			}
		}
		kept := len(slices.DeleteFunc(slices.Clone(unconfirmed), func(i int64) bool { return !have[i] }))
		if len(lost) > 0 {
			t.Errorf("%s lacks %d of the %d writes the old MAIN acknowledged during the partition: %v", inst, len(lost), len(acked), lost)
		}
		t.Logf("%s: all %d acknowledged writes; %d of %d unconfirmed ones kept", inst, len(acked), kept, len(unconfirmed))
	}
	if len(acked) == 0 {
		t.Error("the old MAIN acknowledged no write during the partition: the writer reached nothing")
	}
	plane.check(ctx, t, "the MAIN's partition", plane.coordinators, plane.data)
}
