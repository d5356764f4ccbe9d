package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/planner"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrixtest"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// memberPod stands in for the pod the StatefulSet controller and the kubelet would make
// (neither runs here): the member's labels, Running, containers ready.
func memberPod(t testing.TB, c *veltrixv1.VeltrixCluster, ordinal int32) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	labels := resources.SelectorLabels(c)
	labels[resources.LabelCluster] = c.Name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: resources.PodName(c, ordinal), Namespace: c.Namespace, Labels: labels},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: resources.ContainerName, Image: c.Spec.ImageRef()}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: veltrixv1.SearchReadyGate}},
		},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", Conditions: []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestMembersAndReadinessGate runs the controller against three simulator processes whose
// pods it finds in the API: it sets each pod's search-ready gate from INFO, reports Ready
// with the topology, and scales 3 -> 2 through the admin API: DELETE the highest member,
// wait until its data moved, then lower the StatefulSet.
func TestMembersAndReadinessGate(t *testing.T) {
	ctx := context.Background()
	const token = "integration-admin-token"
	sims := veltrixtest.StartCluster(t, 3, veltrixtest.Options{Name: "vx", ReplicationFactor: 2, AdminToken: token, IndexRebuild: 4 * time.Second})
	f := startFleet(t, operatorTokens(t, "members", true), 1<<30, []string{"node-a", "node-b", "node-c"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin", Namespace: ns}, Data: map[string][]byte{"token": []byte(token)}}); err != nil {
		t.Fatal(err)
	}
	addr := simAddrs(sims)
	writes := &testenv.WriteCounter{}
	startController(t, f, ns, func(cfg *controller.Config, mgr ctrl.Manager) {
		cfg.AdminAddr, cfg.TextAddr = addr(false), addr(true)
		cfg.Resync = time.Second
		cfg.Client = writes.Wrap(mgr.GetClient())
	})
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 3, 2
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
		c.Spec.AdminTokenSecret = &veltrixv1.SecretKeyRef{Name: "admin", Key: "token"}
	})
	for o := range int32(3) {
		memberPod(t, c, o)
	}

	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)
	condition(t, c, veltrixv1.ConditionReplicationFactorMet, metav1.ConditionTrue, veltrixv1.ReasonReplicationFactorMet)
	condition(t, c, veltrixv1.ConditionMembershipSettled, metav1.ConditionTrue, veltrixv1.ReasonSettled)
	for o := range int32(3) {
		var pod corev1.Pod
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PodName(c, o)}, &pod); err != nil {
			t.Fatal(err)
		}
		gate := false
		for _, cond := range pod.Status.Conditions {
			gate = gate || cond.Type == veltrixv1.SearchReadyGate && cond.Status == corev1.ConditionTrue
		}
		if !gate {
			t.Errorf("pod %s: search-ready gate not True: %v", pod.Name, pod.Status.Conditions)
		}
	}
	var live veltrixv1.VeltrixCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	// Steady state: passes every second (Resync), nothing written.
	time.Sleep(time.Second)
	before := writes.Count()
	time.Sleep(4 * time.Second)
	n := writes.Count() - before
	t.Logf("writes in 4 resyncs at steady state: %d", n)
	if n != 0 {
		t.Errorf("%d writes in 4 resyncs of a settled cluster, want 0", n)
	}
	if live.Status.State != veltrixv1.StateReady || live.Status.Reason != veltrixv1.ReasonReady || live.Status.ReadyMembers != 3 || len(live.Status.Members) != 3 || live.Status.PartitionCount == 0 || live.Status.PartitionMap == "" {
		t.Errorf("status %+v", live.Status)
	}
	wantSeries(t, ns, "vx", map[string]float64{stateSeries(live.Status.State): 1, "veltrix_operator_cluster_ready_members": 3,
		"veltrix_operator_cluster_size": 3, "veltrix_operator_member_removals_total": 0, "veltrix_operator_failovers_total": 0})

	// A member restarting rebuilds its search index: its gate goes False (the pod is not
	// ready, so a rolling update would wait) and True again once INFO says search_ready=1.
	conn := sims.Server(1).Conn()
	for i := range 20 {
		if err := conn.Put(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	sims.Server(1).Restart() // with data: the index rebuild takes IndexRebuild
	gate := func(want corev1.ConditionStatus, reason string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("vx-1 gate %s (%s)", want, reason), func() (bool, string) {
			var pod corev1.Pod
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx-1"}, &pod); err != nil {
				return false, err.Error()
			}
			for _, cond := range pod.Status.Conditions {
				if cond.Type == veltrixv1.SearchReadyGate {
					return cond.Status == want && cond.Reason == reason, fmt.Sprintf("%s %s", cond.Status, cond.Reason)
				}
			}
			return false, "no gate condition"
		})
	}
	gate(corev1.ConditionFalse, "IndexRebuilding")
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionUnknown, veltrixv1.ReasonMembersNotReady)
	gate(corev1.ConditionTrue, "SearchReady")
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)

	// Scale down: the member leaves first, then the StatefulSet shrinks.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Size = 2
	if err := env.Client.Update(ctx, &live); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, "StatefulSet at 2 replicas", func() (bool, string) {
		var sts appsv1.StatefulSet
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &sts); err != nil {
			return false, err.Error()
		}
		return *sts.Spec.Replicas == 2, fmt.Sprintf("replicas %d", *sts.Spec.Replicas)
	})
	members, err := sims.Client().Members(ctx, sims.Server(0).AdminAddr)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.ID == "vx-2" {
			t.Errorf("the StatefulSet shrank while vx-2 is still a member (%s)", m.State)
		}
	}
	// The StatefulSet controller would now delete the pod.
	sims.Server(2).Stop()
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vx-2", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "Ready with 2 members", func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return false, err.Error()
		}
		return live.Status.ReadyMembers == 2 && len(live.Status.Members) == 2 && live.Status.State == veltrixv1.StateReady,
			fmt.Sprintf("ready %d members %v state %s", live.Status.ReadyMembers, live.Status.Members, live.Status.State)
	})
	if live.Status.LastScaleTime == nil {
		t.Error("lastScaleTime not set by the scale-down")
	}
	wantSeries(t, ns, "vx", map[string]float64{stateSeries(live.Status.State): 1, "veltrix_operator_cluster_ready_members": 2,
		"veltrix_operator_cluster_size": 2, "veltrix_operator_member_removals_total": 1})

	// Deletion: the finalizer asks both running members for a checkpoint through the
	// admin API (with the cluster's token) before it lets the cluster go.
	if err := env.Client.Delete(ctx, &live); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the cluster gone", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &veltrixv1.VeltrixCluster{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	wantSeries(t, ns, "vx", nil)
	testenv.Eventually(t, 10*time.Second, "the Checkpointed event", func() (bool, string) {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name != c.Name {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Note)
			if e.Reason == controller.EventCheckpointSkipped {
				t.Errorf("a member skipped its checkpoint: %s", e.Note)
			}
			if e.Reason == controller.EventCheckpointed && e.Note == "2 members wrote a checkpoint" && e.Type == corev1.EventTypeNormal {
				return true, ""
			}
		}
		return false, fmt.Sprint(seen)
	})
}

// simAddrs maps a member pod to its simulator process's text (true) or admin address.
func simAddrs(sims *veltrixtest.Cluster) func(text bool) func(*veltrixv1.VeltrixCluster, *corev1.Pod) string {
	return func(text bool) func(*veltrixv1.VeltrixCluster, *corev1.Pod) string {
		return func(_ *veltrixv1.VeltrixCluster, p *corev1.Pod) string {
			var o int32
			if _, err := fmt.Sscanf(p.Name, "vx-%d", &o); err != nil || sims.Server(o) == nil || !sims.Server(o).Running() {
				return ""
			}
			if text {
				return sims.Server(o).Addr
			}
			return sims.Server(o).AdminAddr
		}
	}
}

// TestRemovalRefused: a member DELETE the server refuses is MembershipSettled=False and
// Ready=False (RemovalRefused) with a Warning event, and the StatefulSet is not shrunk.
func TestRemovalRefused(t *testing.T) {
	ctx := context.Background()
	sims := veltrixtest.StartCluster(t, 3, veltrixtest.Options{Name: "vx", ReplicationFactor: 2, RefuseDelete: 409, IndexRebuild: time.Second})
	c := shrinkReadyCluster(t, sims, "refused", 0)
	ns := c.Namespace
	var live veltrixv1.VeltrixCluster
	cond := condition(t, c, veltrixv1.ConditionMembershipSettled, metav1.ConditionFalse, planner.ReasonRemovalRefused)
	if cond.Message != "the server refused to remove member vx-2; the StatefulSet is not shrunk" {
		t.Errorf("message %q", cond.Message)
	}
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionFalse, planner.ReasonRemovalRefused)
	testenv.Eventually(t, 10*time.Second, "a Warning event RemovalRefused", func() (bool, string) {
		ev := eventReasons(t, c)
		return ev[planner.ReasonRemovalRefused] == corev1.EventTypeWarning, fmt.Sprint(ev)
	})
	time.Sleep(2 * time.Second)
	var sts appsv1.StatefulSet
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &sts); err != nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet after a refused removal: %v, replicas %d, want 3", err, *sts.Spec.Replicas)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil || live.Status.State != veltrixv1.StateDegraded || live.Status.Reason != planner.ReasonRemovalRefused {
		t.Errorf("state %s (%s, %v), want Degraded (RemovalRefused)", live.Status.State, live.Status.Reason, err)
	}
}

// TestRemovalStuck: a member that stays leaving (its data does not move) past the limit is
// MembershipSettled=False RemovalStuck with a Warning event, and the StatefulSet stays.
func TestRemovalStuck(t *testing.T) {
	ctx := context.Background()
	sims := veltrixtest.StartCluster(t, 3, veltrixtest.Options{Name: "vx", ReplicationFactor: 2, Paused: true, IndexRebuild: time.Second})
	// Keys to move, so that the paused removal cannot finish at once.
	conn := sims.Server(0).Conn()
	for i := range 50 {
		if err := conn.Put(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c := shrinkReadyCluster(t, sims, "stuck", 2*time.Second)
	ns := c.Namespace
	condition(t, c, veltrixv1.ConditionMembershipSettled, metav1.ConditionUnknown, planner.ReasonRemoving)
	cond := condition(t, c, veltrixv1.ConditionMembershipSettled, metav1.ConditionFalse, planner.ReasonRemovalStuck)
	if !strings.Contains(cond.Message, "vx-2") {
		t.Errorf("message %q does not name the member", cond.Message)
	}
	testenv.Eventually(t, 10*time.Second, "a Warning event RemovalStuck", func() (bool, string) {
		ev := eventReasons(t, c)
		return ev[planner.ReasonRemovalStuck] == corev1.EventTypeWarning, fmt.Sprint(ev)
	})
	var sts appsv1.StatefulSet
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &sts); err != nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet during a stuck removal: %v, replicas %d, want 3", err, *sts.Spec.Replicas)
	}
}

// shrinkReadyCluster runs the controller (as ServiceAccount sa) against the simulators of
// three members, waits until the cluster is Ready and sets its size to 2.
func shrinkReadyCluster(t *testing.T, sims *veltrixtest.Cluster, sa string, stuckAfter time.Duration) *veltrixv1.VeltrixCluster {
	t.Helper()
	ctx := context.Background()
	f := startFleet(t, operatorTokens(t, sa, true), 1<<30, []string{"node-a", "node-b", "node-c"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	addr := simAddrs(sims)
	startController(t, f, ns, func(cfg *controller.Config, _ ctrl.Manager) {
		cfg.AdminAddr, cfg.TextAddr = addr(false), addr(true)
		// The simulators run without a token: the admin API admits loopback callers.
		cfg.Admin = func(string) veltrix.Admin { return sims.Client() }
		cfg.RemovalStuckAfter = stuckAfter
	})
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 3, 2
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
	})
	for o := range int32(3) {
		memberPod(t, c, o)
	}
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)
	var live veltrixv1.VeltrixCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Size = 2
	if err := env.Client.Update(ctx, &live); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRemovalStuckSurvivesRestart: the time a removal started is in the status
// (status.memberRemoval), so an operator that restarts mid-removal still reports
// RemovalStuck once the removal is older than the limit, counted from its DELETE and not
// from the new process's start.
func TestRemovalStuckSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	const stuckAfter = 8 * time.Second
	const down = 5 * time.Second // the operator's downtime; a restarted clock would add it
	sims := veltrixtest.StartCluster(t, 3, veltrixtest.Options{Name: "vx", ReplicationFactor: 2, Paused: true, IndexRebuild: time.Second})
	conn := sims.Server(0).Conn()
	for i := range 50 {
		if err := conn.Put(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	f := startFleet(t, operatorTokens(t, "restart", true), 1<<30, []string{"node-a", "node-b", "node-c"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	addr := simAddrs(sims)
	operator := func(t testing.TB) {
		startController(t, f, ns, func(cfg *controller.Config, _ ctrl.Manager) {
			cfg.AdminAddr, cfg.TextAddr = addr(false), addr(true)
			cfg.Admin = func(string) veltrix.Admin { return sims.Client() }
			cfg.RemovalStuckAfter = stuckAfter
		})
	}
	var c *veltrixv1.VeltrixCluster
	var started metav1.Time
	// The first operator's manager stops when this subtest ends.
	if !t.Run("first operator", func(t *testing.T) {
		operator(t)
		c = newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
			c.Spec.Size, c.Spec.ReplicationFactor = 3, 2
			c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
			c.Spec.IndexMapFallback = true
		})
		for o := range int32(3) {
			memberPod(t, c, o)
		}
		condition(t, c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)
		var live veltrixv1.VeltrixCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			t.Fatal(err)
		}
		live.Spec.Size = 2
		if err := env.Client.Update(ctx, &live); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "status.memberRemoval names vx-2", func() (bool, string) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
				return false, err.Error()
			}
			r := live.Status.MemberRemoval
			if r == nil {
				return false, "no memberRemoval"
			}
			started = r.StartedAt
			return r.Member == "vx-2" && !started.IsZero(), fmt.Sprintf("%+v", *r)
		})
		condition(t, c, veltrixv1.ConditionMembershipSettled, metav1.ConditionUnknown, planner.ReasonRemoving)
	}) {
		return
	}
	time.Sleep(down)
	restarted := time.Now()
	operator(t)
	cond := condition(t, c, veltrixv1.ConditionMembershipSettled, metav1.ConditionFalse, planner.ReasonRemovalStuck)
	after := cond.LastTransitionTime.Sub(started.Time)
	t.Logf("removal started %s, operator restarted %s later, RemovalStuck %s after the start (limit %s)",
		started.Format(time.RFC3339), restarted.Sub(started.Time).Round(time.Second), after, stuckAfter)
	// Timestamps are whole seconds; a clock restarted with the operator would report it no
	// sooner than down + stuckAfter after the start.
	if after < stuckAfter-time.Second || after > stuckAfter+3*time.Second {
		t.Errorf("RemovalStuck %s after the removal started, want about %s (the restarted operator measured from its own start?)", after, stuckAfter)
	}
	var live veltrixv1.VeltrixCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	if r := live.Status.MemberRemoval; r == nil || r.Member != "vx-2" || !r.StartedAt.Equal(&started) {
		t.Errorf("memberRemoval after the restart %+v, want vx-2 since %s", r, started)
	}
	var sts appsv1.StatefulSet
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &sts); err != nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet during a stuck removal: %v, replicas %d, want 3", err, *sts.Spec.Replicas)
	}
	// Moves resume: the removal ends and its record goes.
	sims.SetFaults(veltrixtest.Faults{MoveRate: 1000})
	testenv.Eventually(t, 60*time.Second, "memberRemoval cleared and the StatefulSet at 2", func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return false, err.Error()
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &sts); err != nil {
			return false, err.Error()
		}
		return live.Status.MemberRemoval == nil && *sts.Spec.Replicas == 2,
			fmt.Sprintf("memberRemoval %+v, replicas %d", live.Status.MemberRemoval, *sts.Spec.Replicas)
	})
}

// TestMemberAddedBack: a member removed by hand while its pod keeps running Ready is added
// back by the operator (POST /admin/cluster/members with the address the pod advertises),
// and the cluster is Ready again with every member active.
func TestMemberAddedBack(t *testing.T) {
	ctx := context.Background()
	sims := veltrixtest.StartCluster(t, 3, veltrixtest.Options{Name: "vx", ReplicationFactor: 2, MoveRate: 5000, IndexRebuild: time.Second})
	f := startFleet(t, operatorTokens(t, "addback", true), 1<<30, []string{"node-a", "node-b", "node-c"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	addr := simAddrs(sims)
	var memberAddrCalls atomic.Int32
	startController(t, f, ns, func(cfg *controller.Config, _ ctrl.Manager) {
		cfg.AdminAddr, cfg.TextAddr = addr(false), addr(true)
		cfg.Admin = func(string) veltrix.Admin { return sims.Client() }
		// A removal by hand brings no watch event: the resync finds it.
		cfg.Resync = time.Second
		cfg.MemberAddr = func(_ *veltrixv1.VeltrixCluster, pod string) string {
			memberAddrCalls.Add(1)
			var o int32
			if _, err := fmt.Sscanf(pod, "vx-%d", &o); err != nil {
				return ""
			}
			return sims.MemberAddr(o)
		}
	})
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 3, 2
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
	})
	for o := range int32(3) {
		memberPod(t, c, o)
	}
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)
	conn := sims.Server(0).Conn()
	for i := range 50 {
		if err := conn.Put(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	// Someone removes vx-1 by hand; its pod stays.
	if err := sims.Client().RemoveMember(ctx, sims.Server(0).AdminAddr, "vx-1"); err != nil {
		t.Fatal(err)
	}
	// Not waited for: with a resync every second the operator may add vx-1 back before a
	// poll sees two members (the flake of a loaded machine); MemberAddr's calls below show
	// it was added back.
	testenv.Eventually(t, 60*time.Second, "vx-1 a member again, all active", func() (bool, string) {
		members, err := sims.Client().Members(ctx, sims.Server(0).AdminAddr)
		if err != nil {
			return false, err.Error()
		}
		ok := len(members) == 3
		for _, m := range members {
			ok = ok && m.State == veltrix.MemberActive
		}
		return ok, fmt.Sprint(members)
	})
	if memberAddrCalls.Load() == 0 {
		t.Error("the controller never asked Config.MemberAddr")
	}
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)
	condition(t, c, veltrixv1.ConditionMembershipSettled, metav1.ConditionTrue, veltrixv1.ReasonSettled)
	conn1 := sims.Server(1).Conn()
	for i := range 50 {
		if v, err := conn1.Get(ctx, fmt.Sprintf("k%d", i)); err != nil || v != "v" {
			t.Errorf("k%d through vx-1: %q, %v", i, v, err)
		}
	}
}
