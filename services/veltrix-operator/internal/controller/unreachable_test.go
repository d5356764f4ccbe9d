package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrixtest"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestOperatorCutOffFromMembers (issue "Faults across the suite", item 2): the operator's
// connections to members go to a black hole (taken, never answered, as when a partition
// drops the packets) while the members still reach each other and their pods stay Ready.
// Cut off from every member: Ready=False MembersUnreachable names the three with the cause,
// the state is Degraded, and the search-ready gates stay True. Cut off from one member with
// a scale-down due: the same, naming it, and no member is removed nor the StatefulSet
// lowered; healed, the scale-down goes on. One Warning event per cut.
func TestOperatorCutOffFromMembers(t *testing.T) {
	ctx := context.Background()
	sims := veltrixtest.StartCluster(t, 3, veltrixtest.Options{Name: "vx", ReplicationFactor: 2, MoveRate: 5000, IndexRebuild: time.Second})
	f := startFleet(t, operatorTokens(t, "cutoff", true), 1<<30, []string{"node-a", "node-b", "node-c"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	hole := testenv.BlackHole(t)
	var mu sync.Mutex
	cut := map[string]bool{}
	setCut := func(pods ...string) {
		mu.Lock()
		defer mu.Unlock()
		clear(cut)
		for _, p := range pods {
			cut[p] = true
		}
	}
	addr := simAddrs(sims)
	through := func(text bool) func(*veltrixv1.VeltrixCluster, *corev1.Pod) string {
		real := addr(text)
		return func(c *veltrixv1.VeltrixCluster, p *corev1.Pod) string {
			mu.Lock()
			defer mu.Unlock()
			if cut[p.Name] {
				return hole
			}
			return real(c, p)
		}
	}
	startController(t, f, ns, func(cfg *controller.Config, _ ctrl.Manager) {
		cfg.AdminAddr, cfg.TextAddr = through(false), through(true)
		cfg.Admin = func(string) veltrix.Admin { return veltrix.New(veltrix.Options{Timeout: 3 * time.Second}) }
		cfg.Resync = time.Second
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

	unreachable := func(what string, pods ...string) {
		t.Helper()
		begin := time.Now()
		setCut(pods...)
		got := condition(t, c, veltrixv1.ConditionReady, metav1.ConditionFalse, veltrixv1.ReasonMembersUnreachable)
		t.Logf("cut off from %s: reported after %.1fs: %s", what, time.Since(begin).Seconds(), got.Message)
		for _, p := range pods {
			if !strings.Contains(got.Message, p+" (no answer within 3s)") {
				t.Errorf("cut off from %s: Ready's message does not name %s with the cause: %q", what, p, got.Message)
			}
		}
		var live veltrixv1.VeltrixCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			t.Fatal(err)
		}
		if live.Status.State != veltrixv1.StateDegraded || live.Status.ReadyMembers != 3 {
			t.Errorf("cut off from %s: state %s, %d ready members; want Degraded, 3", what, live.Status.State, live.Status.ReadyMembers)
		}
	}
	gatesTrue := func(what string) {
		t.Helper()
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == veltrixv1.SearchReadyGate && cond.Status != corev1.ConditionTrue {
					t.Errorf("%s: pod %s's search-ready gate %s %s", what, p.Name, cond.Status, cond.Reason)
				}
			}
		}
	}

	unreachable("every member", "vx-0", "vx-1", "vx-2")
	time.Sleep(5 * time.Second) // passes every second while cut off
	gatesTrue("cut off from every member")
	setCut()
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)

	// A scale-down due while the operator cannot reach vx-1: nothing is removed.
	unreachable("vx-1", "vx-1")
	size := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`))
	if err := env.Client.Patch(ctx, &veltrixv1.VeltrixCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name}}, size); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	gatesTrue("cut off from vx-1")
	members, err := sims.Client().Members(ctx, sims.Server(0).AdminAddr)
	if err != nil {
		t.Fatal(err)
	}
	var sts appsv1.StatefulSet
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &sts); err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 || *sts.Spec.Replicas != 3 || slices.ContainsFunc(members, func(m veltrix.Member) bool { return m.State != veltrix.MemberActive }) {
		t.Errorf("cut off from vx-1 with spec.size 2: members %v, StatefulSet at %d; want all three active, 3", members, *sts.Spec.Replicas)
	}
	setCut()
	testenv.Eventually(t, 90*time.Second, "the scale-down after healing: StatefulSet at 2", func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &sts); err != nil {
			return false, err.Error()
		}
		return *sts.Spec.Replicas == 2, fmt.Sprintf("replicas %d", *sts.Spec.Replicas)
	})

	var list eventsv1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	for _, e := range list.Items {
		if e.Regarding.Name == c.Name && e.Reason == veltrixv1.ReasonMembersUnreachable && e.Action == veltrixv1.ConditionReady {
			warnings = append(warnings, e.Type)
		}
	}
	if !slices.Equal(warnings, []string{corev1.EventTypeWarning, corev1.EventTypeWarning}) {
		t.Errorf("Ready %s events %q, want one Warning per cut", veltrixv1.ReasonMembersUnreachable, warnings)
	}
}
