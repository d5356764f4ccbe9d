package executor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
)

var dialer = &timedDialer{Dialer: memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second}), took: map[string]time.Duration{}}

// timedDialer is the real Dialer, remembering how long each admin command's round trip
// took (the last time it ran), so a MAIN-less window can be compared with round trips.
type timedDialer struct {
	memgraph.Dialer
	mu   sync.Mutex
	took map[string]time.Duration
}

func (d *timedDialer) Dial(ctx context.Context, addr string) (memgraph.Session, error) {
	s, err := d.Dialer.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return timedSession{Session: s, d: d}, nil
}

func (d *timedDialer) roundTrip(q string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.took[q]
}

type timedSession struct {
	memgraph.Session
	d *timedDialer
}

func (s timedSession) Exec(ctx context.Context, q string) error {
	start := time.Now()
	err := s.Session.Exec(ctx, q)
	s.d.mu.Lock()
	s.d.took[q] = time.Since(start)
	s.d.mu.Unlock()
	return err
}

// converge runs passes until one converges; it returns every pass's Outcome.
func converge(t *testing.T, ctx context.Context, want executor.Desired) []executor.Outcome {
	t.Helper()
	return passUntil(t, ctx, want, func(o executor.Outcome) bool { return o.Converged })
}

// passUntil runs passes 300 ms apart until done accepts one; it returns them all.
func passUntil(t *testing.T, ctx context.Context, want executor.Desired, done func(executor.Outcome) bool) []executor.Outcome {
	t.Helper()
	return passUntilAs(t, ctx, dialer, want, done)
}

// passUntilAs is passUntil dialing with d (e.g. as a user).
func passUntilAs(t *testing.T, ctx context.Context, d memgraph.Dialer, want executor.Desired, done func(executor.Outcome) bool) []executor.Outcome {
	t.Helper()
	var outs []executor.Outcome
	for {
		out, err := executor.Reconcile(ctx, d, want)
		if err != nil {
			t.Fatalf("Reconcile after %d passes: %v (last %+v)", len(outs), err, last(outs))
		}
		outs = append(outs, out)
		if done(out) {
			return outs
		}
		t.Logf("pass %d: %s %q executed %q", len(outs), out.Reason, out.Message, out.Executed)
		select {
		case <-ctx.Done():
			t.Fatalf("gave up after %d passes: last %+v", len(outs), out)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func last(outs []executor.Outcome) executor.Outcome {
	if len(outs) == 0 {
		return executor.Outcome{}
	}
	return outs[len(outs)-1]
}

func executed(outs []executor.Outcome) []string {
	var q []string
	for _, o := range outs {
		q = append(q, o.Executed...)
	}
	return q
}

// bootstrap starts coordinators 1..nc and data instances d_0.. and registers them.
func bootstrap(t *testing.T, ctx context.Context, nc, nd int) (*memgraphtest.Cluster, []executor.Outcome) {
	t.Helper()
	cl := memgraphtest.NewCluster(t)
	for id := 1; id <= nc; id++ {
		cl.StartCoordinator(id)
	}
	for i := 0; i < nd; i++ {
		cl.StartData(fmt.Sprintf("d_%d", i))
	}
	return cl, converge(t, ctx, cl.Desired(nil, nil))
}

func assertMembership(t *testing.T, out executor.Outcome, coords []string, data []string) {
	t.Helper()
	var gotC, gotD []string
	mains := 0
	for _, in := range out.Instances {
		if in.IsCoordinator() {
			if in.BoltServer == "" {
				t.Errorf("%s listed without its bolt server", in.Name)
			}
			gotC = append(gotC, in.Name)
			continue
		}
		gotD = append(gotD, in.Name)
		if in.Role == memgraph.RoleMain {
			mains++
		}
	}
	slices.Sort(gotC)
	slices.Sort(gotD)
	if !slices.Equal(gotC, coords) || !slices.Equal(gotD, data) {
		t.Errorf("membership %v %v, want %v %v", gotC, gotD, coords, data)
	}
	if mains != 1 || out.Main == "" {
		t.Errorf("%d MAINs listed, Main %q; want exactly one", mains, out.Main)
	}
}

func assertOneMainAtATime(t *testing.T, cl *memgraphtest.Cluster) {
	t.Helper()
	if most, _ := memgraphtest.WritableMains(cl.Events()); most > 1 {
		t.Errorf("the invariant log shows %d writable MAINs at once", most)
	}
}

func leaderSession(t *testing.T, ctx context.Context, cl *memgraphtest.Cluster, leader string) memgraph.Session {
	t.Helper()
	id, ok := memgraph.CoordinatorID(leader)
	if !ok {
		t.Fatalf("leader %q", leader)
	}
	s, err := dialer.Dial(ctx, cl.Coordinators[id].Bolt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func TestBootstrap3Plus2(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	cl, outs := bootstrap(t, ctx, 3, 2)
	t.Logf("3+2 registered in %v over %d passes; executed %q", time.Since(start).Round(time.Millisecond), len(outs), executed(outs))
	out := last(outs)
	assertMembership(t, out, []string{"coordinator_1", "coordinator_2", "coordinator_3"}, []string{"d_0", "d_1"})
	if out.Leader != "coordinator_1" || out.Main != "d_0" || out.Reason != "" {
		t.Errorf("Leader %q Main %q Reason %q; want coordinator_1, d_0, converged", out.Leader, out.Main, out.Reason)
	}
	// Steady state: a resync writes nothing, and the followers' own views match the
	// leader's once they have applied its log.
	passUntil(t, ctx, cl.Desired(nil, nil), func(o executor.Outcome) bool { return len(o.CoordinatorsBehind) == 0 })
	for i := 0; i < 3; i++ {
		again, err := executor.Reconcile(ctx, dialer, cl.Desired(nil, nil))
		if err != nil || !again.Converged || len(again.Executed) != 0 || len(again.CoordinatorsBehind) != 0 {
			t.Fatalf("resync %d: %+v %v; want converged with no write and no coordinator behind", i, again, err)
		}
	}
	// A follower stopped is behind; back, it catches up.
	cl.Stop(cl.Coordinators[3])
	if out, err := executor.Reconcile(ctx, dialer, cl.Desired(nil, nil)); err != nil || !slices.Equal(out.CoordinatorsBehind, []string{"coordinator_3"}) {
		t.Errorf("with coordinator_3 stopped: behind %v (%v), want coordinator_3", out.CoordinatorsBehind, err)
	}
	cl.Restart(cl.Coordinators[3])
	passUntil(t, ctx, cl.Desired(nil, nil), func(o executor.Outcome) bool { return o.Converged && len(o.CoordinatorsBehind) == 0 })
	assertOneMainAtATime(t, cl)
}

func TestReregistrationAfterUnregisterByHand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, outs := bootstrap(t, ctx, 3, 3)
	out := last(outs)
	replica := "d_1"
	if out.Main == replica {
		replica = "d_2"
	}
	s := leaderSession(t, ctx, cl, out.Leader)
	if err := s.Exec(ctx, memgraph.UnregisterInstance(replica)); err != nil {
		t.Fatal(err)
	}
	outs = converge(t, ctx, cl.Desired(nil, nil))
	want := memgraph.RegisterInstance(replica, "", cl.Data[replica].Bolt, cl.Data[replica].Mgmt, cl.Data[replica].Repl)
	if got := executed(outs); !slices.Equal(got, []string{want}) {
		t.Errorf("executed %q, want only %q", got, want)
	}
	if last(outs).Main != out.Main {
		t.Errorf("MAIN moved from %s to %s", out.Main, last(outs).Main)
	}
	assertMembership(t, last(outs), []string{"coordinator_1", "coordinator_2", "coordinator_3"}, []string{"d_0", "d_1", "d_2"})
	assertOneMainAtATime(t, cl)
}

func TestDataScaleDownWithMainOnRetiring(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const nodes = 25
	cl, _, _ := parkedCluster(t, ctx, 3, 3, nodes)
	parked := time.Now()

	outs := converge(t, ctx, cl.Desired(nil, []string{"d_2"}))
	got := executed(outs)
	t.Logf("executed %q", got)
	wantOrder := []string{memgraph.DemoteInstance("d_2"), memgraph.SetInstanceToMain("d_0"), memgraph.UnregisterInstance("d_2")}
	if !slices.Equal(got, wantOrder) {
		t.Errorf("executed %q, want %q", got, wantOrder)
	}
	out := last(outs)
	if out.Main != "d_0" || !slices.Equal(out.RetiredData, []string{"d_2"}) {
		t.Errorf("Main %q RetiredData %v; want d_0 and [d_2]", out.Main, out.RetiredData)
	}
	assertMembership(t, out, []string{"coordinator_1", "coordinator_2", "coordinator_3"}, []string{"d_0", "d_1"})
	if n := countNodes(t, ctx, cl.Data["d_0"].Bolt); n != nodes {
		t.Errorf("new MAIN d_0 holds %d Probe nodes, want %d", n, nodes)
	}
	assertOneMainAtATime(t, cl)
	_, windows := memgraphtest.WritableMains(cl.Events())
	var handover []time.Duration
	for _, w := range windows {
		if w.From.After(parked) {
			handover = append(handover, w.To.Sub(w.From))
		}
	}
	if len(handover) != 1 {
		t.Fatalf("MAIN-less windows after the MAIN was parked: %v, want exactly the handover's", handover)
	}
	// The window opens inside DEMOTE and closes inside SET MAIN: at most their two
	// Bolt round trips.
	rt := dialer.roundTrip(memgraph.DemoteInstance("d_2")) + dialer.roundTrip(memgraph.SetInstanceToMain("d_0"))
	t.Logf("MAIN-less window during the planned handover: %v (DEMOTE + SET MAIN round trips: %v)", handover[0], rt)
	if handover[0] > rt {
		t.Errorf("MAIN-less window %v is longer than the two round trips %v", handover[0], rt)
	}
}

func TestCoordinatorScaleDownWithLeaderRetiring(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cl, outs := bootstrap(t, ctx, 5, 2)
	leader := forceLeader(t, ctx, cl, last(outs).Leader, 4, 5)
	t.Logf("leadership forced onto %s", leader)

	outs = converge(t, ctx, cl.Desired([]int{4, 5}, nil))
	yielded := false
	for _, o := range outs {
		if o.Reason == executor.ReasonLeadershipTransferInProgress {
			yielded = true
		}
		for _, q := range o.Executed {
			if id, ok := memgraph.CoordinatorID(o.Leader); ok && q == memgraph.RemoveCoordinator(id) {
				t.Errorf("REMOVE COORDINATOR aimed at the pass's leader %s", o.Leader)
			}
		}
		if i := slices.Index(o.Executed, memgraph.YieldLeadershipQuery); i >= 0 && i != len(o.Executed)-1 {
			t.Errorf("commands after YIELD LEADERSHIP: %q", o.Executed)
		}
	}
	if !yielded {
		t.Errorf("no pass yielded leadership: %q", executed(outs))
	}
	out := last(outs)
	if !slices.Equal(out.RetiredCoordinators, []int{4, 5}) {
		t.Errorf("RetiredCoordinators %v, want [4 5]", out.RetiredCoordinators)
	}
	if id, _ := memgraph.CoordinatorID(out.Leader); id < 1 || id > 3 {
		t.Errorf("leader %s is not a survivor", out.Leader)
	}
	assertMembership(t, out, []string{"coordinator_1", "coordinator_2", "coordinator_3"}, []string{"d_0", "d_1"})
	assertOneMainAtATime(t, cl)
}

// forceLeader moves Raft leadership onto one of ids: YIELD hands it to the first caught-up
// follower in configuration order, so the leaders in the way are stopped first (at most
// two of five, keeping the quorum), then restarted.
func forceLeader(t *testing.T, ctx context.Context, cl *memgraphtest.Cluster, leader string, ids ...int) string {
	t.Helper()
	var stopped []*memgraphtest.Process
	defer func() {
		for _, p := range stopped {
			cl.Restart(p)
		}
	}()
	for attempt := 0; attempt < 12; attempt++ {
		id, _ := memgraph.CoordinatorID(leader)
		if slices.Contains(ids, id) {
			return leader
		}
		if len(stopped) < 2 {
			p := cl.Coordinators[id]
			cl.Stop(p)
			stopped = append(stopped, p)
		} else {
			s := leaderSession(t, ctx, cl, leader)
			if err := s.Exec(ctx, memgraph.YieldLeadershipQuery); err != nil {
				t.Logf("YIELD LEADERSHIP on %s: %v", leader, err)
			}
		}
		leader = waitNewLeader(t, ctx, cl, leader)
	}
	t.Fatalf("could not move leadership onto %v", ids)
	return ""
}

// waitNewLeader polls the running coordinators until one names a leader other than old.
func waitNewLeader(t *testing.T, ctx context.Context, cl *memgraphtest.Cluster, old string) string {
	t.Helper()
	for {
		for _, p := range cl.Coordinators {
			if !p.Running() {
				continue
			}
			s, err := dialer.Dial(ctx, p.Bolt)
			if err != nil {
				continue
			}
			rows, err := s.ShowInstances(ctx)
			_ = s.Close(ctx)
			if l, ok := memgraph.LeaderOf(rows); err == nil && ok && l.Name != old {
				return l.Name
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no new leader after %s", old)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitCaughtUp runs passes with ReadLag until one converges with every replica caught up.
func waitCaughtUp(t *testing.T, ctx context.Context, want executor.Desired) executor.Outcome {
	t.Helper()
	want.ReadLag = true
	return last(passUntil(t, ctx, want, func(o executor.Outcome) bool {
		if !o.Converged || len(o.Lag) == 0 {
			return false
		}
		for _, l := range o.Lag {
			if !l.CaughtUp() {
				return false
			}
		}
		return true
	}))
}

// parkMain moves the MAIN onto to by hand (DEMOTE + SET), as a human or a failover might.
//
// A coordinator refuses DEMOTE when the instance did not answer within its replication
// timeout (a loaded CI host); the instance is then still MAIN and the command is sent
// again, a few times at most.
func parkMain(t *testing.T, ctx context.Context, leader memgraph.Session, from, to string) {
	t.Helper()
	for _, q := range []string{memgraph.DemoteInstance(from), memgraph.SetInstanceToMain(to)} {
		for attempt := 1; ; attempt++ {
			err := leader.Exec(ctx, q)
			if err == nil {
				break
			}
			if attempt == 5 || !strings.Contains(err.Error(), "failed to demote") {
				t.Fatalf("%s (attempt %d): %v", q, attempt, err)
			}
			t.Logf("%s (attempt %d): %v; again", q, attempt, err)
			time.Sleep(time.Second)
		}
	}
}

// parkedCluster bootstraps nc coordinators and nd data instances, parks the MAIN on the
// last data instance, writes nodes through it and waits until every replica has them
// (so the first survivor in order is the one proven caught up). It returns the cluster,
// the bootstrap's last Outcome and a session to its leader.
func parkedCluster(t *testing.T, ctx context.Context, nc, nd, nodes int) (*memgraphtest.Cluster, executor.Outcome, memgraph.Session) {
	t.Helper()
	cl, outs := bootstrap(t, ctx, nc, nd)
	out := last(outs)
	s := leaderSession(t, ctx, cl, out.Leader)
	parked := fmt.Sprintf("d_%d", nd-1)
	parkMain(t, ctx, s, out.Main, parked)
	writeNodes(t, ctx, cl.Data[parked].Bolt, nodes)
	waitCaughtUp(t, ctx, cl.Desired(nil, nil))
	return cl, out, s
}

func writeNodes(t *testing.T, ctx context.Context, bolt string, n int) {
	t.Helper()
	s, err := dialer.Dial(ctx, bolt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	var b strings.Builder
	b.WriteString("CREATE ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(:Probe {i: %d})", i)
	}
	if err := s.Exec(ctx, b.String()); err != nil {
		t.Fatalf("write through %s: %v", bolt, err)
	}
}

func countNodes(t *testing.T, ctx context.Context, bolt string) int64 {
	t.Helper()
	s, err := dialer.Dial(ctx, bolt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	rows, err := s.Query(ctx, "MATCH (n:Probe) RETURN count(n) AS c")
	if err != nil || len(rows) != 1 {
		t.Fatalf("count on %s: %v %v", bolt, rows, err)
	}
	n, _ := rows[0]["c"].(int64)
	return n
}

// TestDrainForRollingRestart: draining the MAIN hands it to a caught-up replica and keeps
// the drained instance registered; draining the leader makes it yield; ReadLag reports lag.
func TestDrainForRollingRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, outs := bootstrap(t, ctx, 3, 2)
	out := last(outs)
	writeNodes(t, ctx, cl.Data[out.Main].Bolt, 4)
	oldMain, oldLeader := out.Main, out.Leader
	id, _ := memgraph.CoordinatorID(oldLeader)

	want := cl.Desired(nil, nil)
	want.DrainData, want.DrainCoordinators, want.ReadLag = []string{oldMain}, []int{id}, true
	outs = converge(t, ctx, want)
	out = last(outs)
	if out.Main == oldMain || out.Leader == oldLeader {
		t.Errorf("MAIN %s (was %s), leader %s (was %s): both should have moved", out.Main, oldMain, out.Leader, oldLeader)
	}
	assertMembership(t, out, []string{"coordinator_1", "coordinator_2", "coordinator_3"}, []string{"d_0", "d_1"})
	if len(out.RetiredData) != 0 || len(out.RetiredCoordinators) != 0 {
		t.Errorf("drained members reported retired: %v %v", out.RetiredData, out.RetiredCoordinators)
	}
	if got := executed(outs); slices.ContainsFunc(got, func(q string) bool { return strings.HasPrefix(q, "UNREGISTER") || strings.HasPrefix(q, "REMOVE") }) {
		t.Errorf("a drain removed a member: %q", got)
	}
	// ReadLag is how a rolling restart waits for the demoted MAIN to catch up before it
	// restarts it: passes report the lag until every replica is caught up.
	caughtUp := waitCaughtUp(t, ctx, want)
	if !slices.ContainsFunc(caughtUp.Lag, func(l memgraph.Lag) bool { return l.Instance == oldMain }) {
		t.Errorf("lag %v does not list the drained %s", caughtUp.Lag, oldMain)
	}
	if n := countNodes(t, ctx, cl.Data[out.Main].Bolt); n != 4 {
		t.Errorf("new MAIN holds %d nodes, want 4", n)
	}
	assertOneMainAtATime(t, cl)
}
