package executor

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/veltrix-operator/internal/planner"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrixtest"
	"github.com/opsuite/suite/shared/testenv"
)

// These tests run Step against real simulator processes; the test plays the StatefulSet:
// a process runs for every ordinal below replicas, and the highest one is stopped only when
// a Decision lowers Replicas.

// statefulSet plays the StatefulSet of a veltrixtest.Cluster.
type statefulSet struct {
	t        *testing.T
	c        *veltrixtest.Cluster
	replicas int32
	admin    veltrix.Admin
}

// readyPods counts running processes whose INFO says search_ready=1, as the readiness gate.
func (s *statefulSet) readyPods() int32 {
	var n int32
	for _, srv := range s.c.Servers() {
		if srv.Ordinal >= s.replicas || !srv.Running() {
			continue
		}
		if ok, err := SearchReady(context.Background(), s.admin, srv.Addr); err == nil && ok {
			n++
		}
	}
	return n
}

func (s *statefulSet) input(size, rf int32) planner.Input {
	var admins []planner.Endpoint
	for _, srv := range s.c.Servers() {
		if srv.Ordinal < s.replicas && srv.Running() {
			admins = append(admins, planner.Endpoint{Pod: srv.ID, Addr: srv.AdminAddr})
		}
	}
	return planner.Input{SpecSize: size, ReplicationFactor: rf, StatefulSetReplicas: s.replicas, ReadyPods: s.readyPods(),
		PodName: s.c.PodName, MemberAddr: s.c.MemberAddr, Admins: admins, Now: time.Now()}
}

// apply lowers the StatefulSet as d says: a lowered one stops its highest process
// (SIGTERM, as a deleted pod). This test StatefulSet never grows.
func (s *statefulSet) apply(d planner.Decision) {
	s.t.Helper()
	if d.Replicas > s.replicas {
		s.t.Fatalf("Decision %+v grows the StatefulSet; this test only shrinks", d)
	}
	for d.Replicas < s.replicas {
		s.replicas--
		if srv := s.c.Server(s.replicas); srv != nil {
			srv.Stop()
		}
	}
}

// restartCrashed starts again every process below replicas that exited, as the kubelet
// restarts a crashed container.
func (s *statefulSet) restartCrashed() {
	s.t.Helper()
	for _, srv := range s.c.Servers() {
		if srv.Ordinal < s.replicas && !srv.Running() {
			s.t.Logf("%s exited (%v); restarting it", srv.ID, srv.ExitErr())
			srv.Start()
		}
	}
}

// converge runs Step until it converges, applying each Decision and checking that the
// StatefulSet is lowered one at a time and only once the member Step read is gone; it
// returns the members removed in order.
func (s *statefulSet) converge(size, rf int32, timeout time.Duration) []string {
	s.t.Helper()
	var removed []string
	last := planner.Decision{Replicas: -1}
	deadline := time.Now().Add(timeout)
	for {
		s.restartCrashed()
		in := s.input(size, rf)
		d, err := Step(context.Background(), s.admin, in)
		if err != nil {
			// A process that crashed between the reads: the next pass asks another.
			s.t.Logf("Step: %v (decision %+v)", err, d)
		}
		if d.Reason == planner.ReasonRemovalRefused || d.Reason == planner.ReasonRemovalStuck {
			s.t.Fatalf("Step: %+v", d)
		}
		if d.Remove != "" {
			removed = append(removed, d.Remove)
		}
		if d.Replicas < s.replicas {
			if d.Replicas != s.replicas-1 {
				s.t.Fatalf("Step lowered from %d to %d at once", s.replicas, d.Replicas)
			}
			// Epochs only grow, so asking the same member again sees no older membership;
			// other members may lag a gossip round behind, which is why keys are checked
			// at the end.
			victim := s.c.PodName(s.replicas - 1)
			if st, ok := memberIDs(s.t, s.admin, in.Admins[0].Addr)[victim]; ok {
				s.t.Fatalf("Step lowered to %d while %s reports %s as %s", d.Replicas, in.Admins[0].Addr, victim, st)
			}
		}
		if d.Remove != "" || d.Replicas != last.Replicas || d.Reason != last.Reason || d.Leaving != last.Leaving {
			s.t.Logf("replicas=%d remove=%q leaving=%q %s: %s", d.Replicas, d.Remove, d.Leaving, d.Reason, d.Waiting)
			last = d
		}
		s.apply(d)
		if err == nil && d.Converged() {
			return removed
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("not converged after %s: %+v", timeout, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func writeKeys(t *testing.T, conn *veltrix.Conn, n int) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("key-%04d", i), fmt.Sprintf("value-%04d", i)
		if err := conn.Put(context.Background(), k, v); err != nil {
			t.Fatalf("PUT %s: %v", k, err)
		}
		keys[k] = v
	}
	return keys
}

// lostKeys reads every key through conn and returns those missing or wrong.
func lostKeys(t *testing.T, conn *veltrix.Conn, keys map[string]string) []string {
	t.Helper()
	var lost []string
	for k, v := range keys {
		got, err := conn.Get(context.Background(), k)
		if err != nil || got != v {
			lost = append(lost, fmt.Sprintf("%s=%q (%v)", k, got, err))
		}
	}
	slices.Sort(lost)
	return lost
}

func memberIDs(t *testing.T, admin veltrix.Admin, addr string) map[string]veltrix.MemberState {
	t.Helper()
	ms, err := admin.Members(context.Background(), addr)
	if err != nil {
		t.Fatalf("members from %s: %v", addr, err)
	}
	out := map[string]veltrix.MemberState{}
	for _, m := range ms {
		out[m.ID] = m.State
	}
	return out
}

func TestStepScalesDown5To3WithoutLosingKeys(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{ReplicationFactor: 2, MoveRate: 2000})
	c.Join()
	c.Join()
	c.WaitMembers(5, nil)
	keys := writeKeys(t, c.Server(4).Conn(), 600)

	s := &statefulSet{t: t, c: c, replicas: 5, admin: c.Client()}
	start := time.Now()
	removed := s.converge(3, 2, 2*time.Minute)
	if s.replicas != 3 || !slices.Equal(removed, []string{"vx-4", "vx-3"}) {
		t.Fatalf("converged at %d replicas having removed %v, want 3 having removed [vx-4 vx-3]", s.replicas, removed)
	}
	t.Logf("5 -> 3 with 600 keys at 2000 keys/s took %s (%s per member)", time.Since(start).Round(time.Millisecond),
		(time.Since(start) / 2).Round(time.Millisecond))
	c.WaitMembers(3, []string{"vx-0", "vx-1", "vx-2"})
	for _, srv := range c.Servers()[:3] {
		if lost := lostKeys(t, srv.Conn(), keys); len(lost) > 0 {
			t.Errorf("%d of %d keys lost reading through %s: %v", len(lost), len(keys), srv.ID, lost[:min(len(lost), 10)])
		}
	}
}

// TestStepScaleDownSurvivesACrashMidMove: the leaving member crashes halfway through
// handing its data over; restarted (as the kubelet would), it finishes, and only then is
// the StatefulSet lowered.
func TestStepScaleDownSurvivesACrashMidMove(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{ReplicationFactor: 2, MoveRate: 500})
	leaver := c.Join("--sim-crash-mid-move", "20")
	c.WaitMembers(4, nil)
	keys := writeKeys(t, c.Server(0).Conn(), 300)

	s := &statefulSet{t: t, c: c, replicas: 4, admin: c.Client()}
	if removed := s.converge(3, 2, 2*time.Minute); !slices.Equal(removed, []string{"vx-3"}) || s.replicas != 3 {
		t.Fatalf("converged at %d replicas having removed %v, want 3 having removed [vx-3]", s.replicas, removed)
	}
	if !strings.Contains(leaver.Log(), "Crashing mid-move") {
		t.Fatalf("%s never crashed mid-move: the test proved nothing about crashes", leaver.ID)
	}
	for _, srv := range c.Servers()[:3] {
		if lost := lostKeys(t, srv.Conn(), keys); len(lost) > 0 {
			t.Errorf("%d of %d keys lost reading through %s: %v", len(lost), len(keys), srv.ID, lost[:min(len(lost), 10)])
		}
	}
}

func TestStepRefusedRemovalDoesNotShrink(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{ReplicationFactor: 2, RefuseDelete: 409})
	keys := writeKeys(t, c.Server(0).Conn(), 100)
	admin := c.Client()
	s := &statefulSet{t: t, c: c, replicas: 3, admin: admin}
	for pass := range 3 { // refused every pass, never shrunk
		d, err := Step(context.Background(), admin, s.input(2, 2))
		if err != nil {
			t.Fatalf("pass %d: Step: %v", pass, err)
		}
		want := planner.Decision{Replicas: 3, Remove: "vx-2", Reason: planner.ReasonRemovalRefused,
			Waiting: "the server refused to remove member vx-2; the StatefulSet is not shrunk", Detail: d.Detail}
		if !reflect.DeepEqual(d, want) || !strings.Contains(d.Detail, "refused") {
			t.Fatalf("pass %d: Step = %+v, want %+v with the server's message in Detail", pass, d, want)
		}
		s.apply(d)
	}
	if st := memberIDs(t, admin, c.Server(0).AdminAddr)["vx-2"]; st != veltrix.MemberActive {
		t.Fatalf("vx-2 is %q after refused removals, want active", st)
	}
	// Once the server accepts, the same plan proceeds.
	c.SetFaults(veltrixtest.Faults{MoveRate: 1000})
	if removed := s.converge(2, 2, time.Minute); !slices.Equal(removed, []string{"vx-2"}) || s.replicas != 2 {
		t.Fatalf("after the refusal ended: %d replicas, removed %v; want 2 and [vx-2]", s.replicas, removed)
	}
	if lost := lostKeys(t, c.Server(1).Conn(), keys); len(lost) > 0 {
		t.Errorf("%d keys lost: %v", len(lost), lost[:min(len(lost), 10)])
	}
}

// TestStepRemovalTheServerRefuses: a spec replicationFactor below the server's lets Plan
// ask for a removal the server itself declines (it would leave fewer owners than its own
// replication factor).
func TestStepRemovalTheServerRefuses(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{ReplicationFactor: 3})
	d, err := Step(context.Background(), c.Client(), (&statefulSet{t: t, c: c, replicas: 3, admin: c.Client()}).input(2, 2))
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	if d.Reason != planner.ReasonRemovalRefused || d.Replicas != 3 || d.Remove != "vx-2" || d.Detail == "" {
		t.Fatalf("Step = %+v, want RemovalRefused of vx-2 with 3 replicas and the server's reason", d)
	}
	t.Logf("server's reason: %s", d.Detail)
}

func TestStepStuckRemoval(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{ReplicationFactor: 1, Paused: true})
	keys := writeKeys(t, c.Server(0).Conn(), 50) // something to move, so vx-2 stays leaving
	admin := c.Client()
	s := &statefulSet{t: t, c: c, replicas: 3, admin: admin}
	d, err := Step(context.Background(), admin, s.input(2, 1))
	if err != nil || d.Remove != "vx-2" || d.Leaving != "vx-2" || d.Reason != planner.ReasonRemoving {
		t.Fatalf("first Step = %+v, %v; want vx-2 removed and leaving", d, err)
	}
	if d.Removal.Member != "vx-2" || d.Removal.Since.IsZero() {
		t.Fatalf("first Step's removal record %+v, want vx-2 since the DELETE", d.Removal)
	}
	since := d.Removal.Since
	in := s.input(2, 1)
	in.Removal, in.StuckAfter = d.Removal, time.Minute
	in.Now = since.Add(30 * time.Second)
	first := d
	if d, err = Step(context.Background(), admin, in); err != nil || d.Reason != planner.ReasonRemoving || d.Leaving != "vx-2" || d.Remove != "" {
		t.Fatalf("Step within StuckAfter = %+v, %v; want Removing, no second DELETE", d, err)
	}
	if d.Waiting != first.Waiting {
		t.Errorf("the message changed between the DELETE's pass and the next: %q, then %q", first.Waiting, d.Waiting)
	}
	in.Now = since.Add(2 * time.Minute)
	if d, err = Step(context.Background(), admin, in); err != nil || d.Reason != planner.ReasonRemovalStuck || d.Replicas != 3 || d.Remove != "" {
		t.Fatalf("Step past StuckAfter = %+v, %v; want RemovalStuck at 3 replicas", d, err)
	}
	// Moves resume: the removal finishes and the StatefulSet shrinks.
	c.SetFaults(veltrixtest.Faults{MoveRate: 1000})
	if removed := s.converge(2, 1, time.Minute); len(removed) != 0 || s.replicas != 2 {
		t.Fatalf("after moves resumed: %d replicas, removed again %v; want 2 and no second DELETE", s.replicas, removed)
	}
	if lost := lostKeys(t, c.Server(0).Conn(), keys); len(lost) > 0 {
		t.Errorf("%d keys lost: %v", len(lost), lost[:min(len(lost), 10)])
	}
}

func TestStepAddsBackAMemberRemovedBeforeItsPodWent(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{ReplicationFactor: 2, MoveRate: 5000})
	admin := c.Client()
	keys := writeKeys(t, c.Server(0).Conn(), 100)
	s := &statefulSet{t: t, c: c, replicas: 3, admin: admin}
	// Size 2: vx-2 is removed; before the StatefulSet is lowered, size goes back to 3.
	d, err := Step(context.Background(), admin, s.input(2, 2))
	if err != nil || d.Remove != "vx-2" {
		t.Fatalf("Step to 2 = %+v, %v; want vx-2 removed", d, err)
	}
	c.WaitMembers(2, []string{"vx-0", "vx-1"})
	testenv.Eventually(t, time.Minute, "vx-2 added back and active", func() (bool, string) {
		d, err := Step(context.Background(), admin, s.input(3, 2))
		if err != nil {
			return false, err.Error()
		}
		if d.Replicas != 3 {
			t.Fatalf("Step to 3 = %+v, want 3 replicas", d)
		}
		return d.Converged(), fmt.Sprintf("%+v", d)
	})
	if lost := lostKeys(t, c.Server(2).Conn(), keys); len(lost) > 0 {
		t.Errorf("%d keys lost reading through vx-2: %v", len(lost), lost[:min(len(lost), 10)])
	}
}

// TestStepAsksEveryPodAndHoldsForTheUnreachable: a serving pod whose admin API gives no
// answer (a black hole: packets dropped) is named with the cause, the members are read
// from the others, and nothing is changed: a removal that is due waits. A pod where nobody
// listens (its process down; its probes see that) is no partition: the members are read
// from the next pod and the removal goes on. With no pod answering the members are
// unknown; a wrong token is no unreachability.
func TestStepAsksEveryPodAndHoldsForTheUnreachable(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{AdminToken: "tok"})
	dead, hole := testenv.FreeAddr(t), testenv.BlackHole(t)
	s := &statefulSet{t: t, c: c, replicas: 3, admin: c.Client()}
	admin := veltrix.New(veltrix.Options{Token: "tok", Timeout: 3 * time.Second})

	in := s.input(2, 1) // vx-2 is due for removal
	in.Admins = append([]planner.Endpoint{{Pod: "vx-0", Addr: hole}}, in.Admins[1:]...)
	d, err := Step(context.Background(), admin, in)
	if !errors.Is(err, veltrix.ErrUnreachable) || d.Reason != planner.ReasonMembersUnreachable || d.Remove != "" || d.Replicas != 3 ||
		!slices.Equal(d.Unreachable, []string{"vx-0"}) || !strings.Contains(d.Waiting, "vx-0 (no answer within 3s)") {
		t.Fatalf("Step with vx-0 unanswered = %+v, %v; want MembersUnreachable naming it, nothing removed", d, err)
	}

	in.Admins = []planner.Endpoint{{Pod: "vx-0", Addr: dead}}
	d, err = Step(context.Background(), admin, in)
	if !errors.Is(err, veltrix.ErrUnreachable) || d.Reason != planner.ReasonMembersUnknown || d.Replicas != 3 {
		t.Fatalf("Step with only a refused address = %+v, %v; want MembersUnknown and ErrUnreachable", d, err)
	}

	in = s.input(2, 1)
	wrong := veltrix.New(veltrix.Options{Token: "wrong"})
	d, err = Step(context.Background(), wrong, in)
	if !errors.Is(err, veltrix.ErrUnauthorized) || d.Reason != planner.ReasonMembersUnknown || d.Remove != "" || d.Replicas != 3 {
		t.Fatalf("Step with a wrong token = %+v, %v; want MembersUnknown and ErrUnauthorized", d, err)
	}

	in.Admins = nil
	if _, err := Step(context.Background(), admin, in); !errors.Is(err, ErrNoAdminAddr) {
		t.Fatalf("Step without addresses: %v, want ErrNoAdminAddr", err)
	}

	in = s.input(2, 1)
	in.Admins = append([]planner.Endpoint{{Pod: "vx-0", Addr: dead}}, in.Admins[1:]...)
	d, err = Step(context.Background(), admin, in)
	if err != nil || d.Remove != "vx-2" || d.Reason != planner.ReasonRemoving {
		t.Fatalf("Step with vx-0 not listening = %+v, %v; want the removal of vx-2 through the next pod", d, err)
	}
}

// TestStepCutOffFromEveryPod: the operator's requests to every member go to a black hole
// (taken, never answered: packets dropped). The pods are asked at once, so a pass costs one
// client timeout, not one per pod; every pod is named with "no answer within"; nothing is
// removed. Reached again, the removal that was due goes on.
func TestStepCutOffFromEveryPod(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{AdminToken: "tok"})
	hole := testenv.BlackHole(t)
	s := &statefulSet{t: t, c: c, replicas: 3, admin: c.Client()}
	admin := veltrix.New(veltrix.Options{Token: "tok", Timeout: 3 * time.Second})
	in := s.input(2, 1)
	var cut []planner.Endpoint
	for _, ep := range in.Admins {
		cut = append(cut, planner.Endpoint{Pod: ep.Pod, Addr: hole})
	}
	in.Admins = cut
	begin := time.Now()
	d, err := Step(context.Background(), admin, in)
	took := time.Since(begin)
	t.Logf("cut off from every pod: %s after %s: %s", d.Reason, took.Round(time.Millisecond), d.Waiting)
	if !errors.Is(err, veltrix.ErrUnreachable) || d.Reason != planner.ReasonMembersUnreachable || d.Remove != "" || d.Replicas != 3 ||
		!slices.Equal(d.Unreachable, []string{"vx-0", "vx-1", "vx-2"}) || strings.Count(d.Waiting, "(no answer within 3s)") != 3 {
		t.Fatalf("Step cut off from every pod = %+v, %v; want MembersUnreachable naming the three, nothing removed", d, err)
	}
	if took >= 9*time.Second {
		t.Errorf("a pass cut off from 3 pods took %s: one client timeout (3s) per pod, not one for all", took)
	}
	if removed := s.converge(2, 1, 2*time.Minute); !slices.Equal(removed, []string{"vx-2"}) {
		t.Errorf("reached again: removed %q, want vx-2", removed)
	}
}

func TestSearchReadyDuringIndexRebuild(t *testing.T) {
	c := veltrixtest.StartCluster(t, 3, veltrixtest.Options{IndexRebuild: 8 * time.Second})
	writeKeys(t, c.Server(0).Conn(), 50)
	admin := c.Client()
	srv := c.Server(1)
	if ok, err := SearchReady(context.Background(), admin, srv.Addr); err != nil || !ok {
		t.Fatalf("SearchReady before the restart = %v, %v; want true", ok, err)
	}
	srv.Restart()
	if ok, err := SearchReady(context.Background(), admin, srv.Addr); err != nil || ok {
		t.Fatalf("SearchReady right after the restart = %v, %v; want false while the index rebuilds", ok, err)
	}
	testenv.Eventually(t, 30*time.Second, "search_ready=1 after the rebuild", func() (bool, string) {
		ok, err := SearchReady(context.Background(), admin, srv.Addr)
		return err == nil && ok, fmt.Sprint(ok, err)
	})
	srv.Stop()
	if _, err := SearchReady(context.Background(), admin, srv.Addr); !errors.Is(err, veltrix.ErrUnreachable) {
		t.Fatalf("SearchReady of a stopped member: %v, want ErrUnreachable", err)
	}
}
