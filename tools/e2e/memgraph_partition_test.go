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
		cut.Heal().Round(100*time.Millisecond), oldMain, len(acked), len(unconfirmed), firstUnconfirmed.Seconds(), len(refused), refused)
	mgScale(ctx, t, "after the MAIN's partition", "", int32(plane.coordinators), int32(plane.data), 4*time.Minute)
	watch.stop(t, "the MAIN's partition from the coordinators")

	// Every acknowledged write on every data instance; the unconfirmed ones are counted.
	main, replicas := plane.view(ctx, t, "after the partition")
	for _, inst := range append([]string{main}, replicas...) {
		have, lost := mgHeld(ctx, t, inst, "E2EPartition", acked)
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

// mgOperatorCut is how long each of mgCutOperatorOff's cuts lasts at least; mgOperatorReport
// is how long a cut may go on before the operator has said what it sees: generous for a
// loaded machine (one observation takes a Bolt timeout, 5 s, and the failover watch reads
// the coordinators every 5 s), and the test fails if it never says it.
const (
	mgOperatorCut    = 30 * time.Second
	mgOperatorReport = 60 * time.Second
)

// mgCutOperatorOff cuts the Memgraph operator off from its data plane (issue "Faults across
// the suite", item 2) while a client keeps writing to the MAIN: first from the MAIN alone
// (the coordinators still reach it and see it up), then from every member, mgOperatorCut
// each. The data plane does not need the operator: every write the MAIN acknowledged is on
// the MAIN and every replica afterwards. The operator must say what it sees (Ready=False
// MembersUnreachable naming each member it cannot reach with the cause, state Degraded,
// one Warning event) and must change nothing it cannot see: no registration command, no
// failover of its own, every pod kept, the same MAIN and replicas. After healing it is
// Ready and Converged again.
func mgCutOperatorOff(ctx context.Context, t *testing.T, plane *mgPlane) {
	t.Helper()
	uid := operatorUser(ctx, t, "memgraph-operator")
	main, replicas := plane.view(ctx, t, "before the operator's partition")
	var all []string
	for i := 1; i <= plane.coordinators; i++ {
		all = append(all, mgPodIP(ctx, t, fmt.Sprintf("%s-coordinator-%d", mgName, i)))
	}
	for _, inst := range append([]string{main}, replicas...) {
		all = append(all, mgPodIP(ctx, t, mgPod(inst)))
	}
	slices.Sort(all)
	w := startMgDirectWriter(ctx, main)
	mgCutOperatorFrom(ctx, t, plane, uid, []string{mgPodIP(ctx, t, mgPod(main))}, "the MAIN "+main, 1)
	mgCutOperatorFrom(ctx, t, plane, uid, all, "every member", plane.coordinators+plane.data)
	acked, unconfirmed, failed, firstErr := w.stop()
	t.Logf("writer on the MAIN %s during the operator's partitions: %d acknowledged, %d committed unconfirmed, %d failed (first error: %s)",
		main, len(acked), unconfirmed, failed, firstErr)
	if len(acked) == 0 {
		t.Error("the MAIN acknowledged no write while the operator was cut off")
	}
	for _, inst := range append([]string{main}, replicas...) {
		_, lost := mgHeld(ctx, t, inst, "E2EOperatorCut", acked)
		if len(lost) > 0 {
			t.Errorf("%s lacks %d of the %d writes the MAIN acknowledged while the operator was cut off: %v", inst, len(lost), len(acked), lost)
		}
		t.Logf("%s: %d of %d acknowledged writes lost", inst, len(lost), len(acked))
	}
	plane.check(ctx, t, "the operator's partitions", plane.coordinators, plane.data)
}

// mgHeld reads the nodes labelled label on data instance inst: the writes' numbers it holds
// (property i), and those of acked it lacks.
func mgHeld(ctx context.Context, t *testing.T, inst, label string, acked []int64) (have map[int64]bool, lost []int64) {
	t.Helper()
	res, err := mgRun(ctx, mgPod(inst), "MATCH (n:"+label+") RETURN n")
	if err != nil {
		t.Fatalf("reading the %s nodes on %s: %v", label, inst, err)
	}
	have = map[int64]bool{}
	for _, rec := range res.Records {
		if n, ok := rec[0].(bolt.Node); ok {
			if i, ok := n.Props["i"].(int64); ok {
				have[i] = true
			}
		}
	}
	for _, i := range acked {
		if !have[i] {
			lost = append(lost, i)
		}
	}
	return have, lost
}

// mgCutOperatorFrom is one cut of mgCutOperatorOff: the operator (uid) cut off from addrs,
// which are members in number.
func mgCutOperatorFrom(ctx context.Context, t *testing.T, plane *mgPlane, uid int64, addrs []string, what string, members int) {
	t.Helper()
	type identity struct {
		main, leader string
		roles        string
		failover     *metav1.Time
		pods         map[string]string
	}
	look := func(step string) identity {
		t.Helper()
		main, replicas := plane.view(ctx, t, step)
		leader, _, _ := mgLeaderView(ctx, plane.coordinators)
		c, err := mgCluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pods, err := env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgName})
		if err != nil {
			t.Fatal(err)
		}
		id := identity{main: main, leader: leader, roles: fmt.Sprintf("MAIN %s, replicas %v", main, replicas),
			failover: c.Status.LastFailoverTime, pods: map[string]string{}}
		for _, p := range pods.Items {
			id.pods[p.Name] = string(p.UID)
		}
		return id
	}
	before := look("before the operator's partition from " + what)
	cut := partitionUser(t, uid, addrs, 2*time.Minute)
	begin := time.Now()
	var reported time.Duration
	var lines []string
	for time.Since(begin) < mgOperatorCut || (reported == 0 && time.Since(begin) < mgOperatorReport) {
		if c, err := mgCluster(ctx); err == nil {
			conv := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionConverged)
			rd := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionReady)
			line := fmt.Sprintf("state %s", c.Status.State)
			for _, cond := range []*metav1.Condition{rd, conv} {
				if cond != nil {
					line += fmt.Sprintf("; %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, head(cond.Message, 300))
				}
			}
			if len(lines) == 0 || lines[len(lines)-1] != line {
				lines = append(lines, line)
				t.Logf("+%.1fs operator cut off from %s reports: %s", time.Since(begin).Seconds(), what, line)
			}
			if reported == 0 && rd != nil && rd.Status == metav1.ConditionFalse && rd.Reason == memgraphv1.ReasonMembersUnreachable &&
				strings.Count(rd.Message, "(no answer within") == members && c.Status.State == memgraphv1.StateDegraded {
				reported = time.Since(begin)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	lasted := cut.Heal()
	healed := time.Now()
	t.Logf("operator partition from %s healed after %s", what, lasted.Round(100*time.Millisecond))
	if reported == 0 {
		mgDiagnose(ctx, t)
		t.Errorf("cut off from %s for %s, the operator never reported Ready=False %s (state Degraded) naming %d members", what, lasted.Round(time.Second), memgraphv1.ReasonMembersUnreachable, members)
	} else {
		t.Logf("cut off from %s: Ready=False %s naming %d members after %.1fs", what, memgraphv1.ReasonMembersUnreachable, members, reported.Seconds())
	}
	mgScale(ctx, t, "after the operator's partition from "+what, "", int32(plane.coordinators), int32(plane.data), 4*time.Minute)
	t.Logf("after the operator's partition from %s: Ready and Converged %s after healing", what, since(healed))
	after := look("after the operator's partition from " + what)
	if after.roles != before.roles {
		t.Errorf("roles changed while the operator was cut off from %s: %s, before %s", what, after.roles, before.roles)
	}
	if after.leader != before.leader {
		t.Logf("Raft leadership moved during the cut (the coordinators' own election): %s -> %s", before.leader, after.leader)
	}
	if !after.failover.Equal(before.failover) {
		t.Errorf("lastFailoverTime moved while the operator was cut off from %s: %v, before %v", what, after.failover, before.failover)
	}
	for pod, uid := range before.pods {
		if after.pods[pod] != uid {
			t.Errorf("pod %s was replaced or deleted while the operator was cut off from %s", pod, what)
		}
	}
	if ran := mgRanSince(ctx, t, begin, ""); len(ran) > 0 {
		t.Errorf("the operator ran commands while cut off from %s (or right after): %q", what, ran)
	}
	events := eventsSince(ctx, t, mgNamespace, "MemgraphCluster", mgName, memgraphv1.ReasonMembersUnreachable, begin)
	t.Logf("cut off from %s: %s events %q", what, memgraphv1.ReasonMembersUnreachable, events)
	warnings := slices.DeleteFunc(slices.Clone(events), func(e string) bool { return !strings.HasPrefix(e, "Warning ") })
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "Warning "+memgraphv1.ConditionReady+":") {
		t.Errorf("cut off from %s: %d Warning %s events, want one on Ready: %q", what, len(warnings), memgraphv1.ReasonMembersUnreachable, warnings)
	}
}

// mgPodIP is a pod's address.
func mgPodIP(ctx context.Context, t *testing.T, pod string) string {
	t.Helper()
	p, err := env.client.CoreV1().Pods(mgNamespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil || p.Status.PodIP == "" {
		t.Fatalf("pod %s: no address (err %v)", pod, err)
	}
	return p.Status.PodIP
}

// mgDirectWriter writes numbered nodes (:E2EOperatorCut {i}) to one data instance over Bolt,
// ten a second, from the suite (root, so a cut of the operator's user leaves it alone). A
// write is acknowledged when it succeeded without Memgraph's "SYNC replica has not
// confirmed" (committed on the MAIN only, which may be lost): those are counted apart.
type mgDirectWriter struct {
	cancel context.CancelFunc
	done   chan struct{}

	acked               []int64
	unconfirmed, failed int
	firstErr            string
}

func startMgDirectWriter(ctx context.Context, instance string) *mgDirectWriter {
	ctx, cancel := context.WithCancel(ctx)
	w := &mgDirectWriter{cancel: cancel, done: make(chan struct{}), firstErr: "none"}
	go func() {
		defer close(w.done)
		for i := int64(0); ctx.Err() == nil; i++ {
			_, err := mgRun(ctx, mgPod(instance), fmt.Sprintf("CREATE (:E2EOperatorCut {i: %d})", i))
			switch {
			case ctx.Err() != nil:
				return
			case err == nil:
				w.acked = append(w.acked, i)
			case strings.Contains(err.Error(), "SYNC replica has not confirmed"):
				w.unconfirmed++
			default:
				if w.failed == 0 {
					w.firstErr = err.Error()
				}
				w.failed++
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the writer and returns what it counted.
func (w *mgDirectWriter) stop() (acked []int64, unconfirmed, failed int, firstErr string) {
	w.cancel()
	<-w.done
	return w.acked, w.unconfirmed, w.failed, w.firstErr
}
