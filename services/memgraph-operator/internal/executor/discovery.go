package executor

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
)

// View is one coordinator's answer to SHOW INSTANCES (Err when it gave none).
type View struct {
	Coordinator planner.Coordinator
	Rows        []memgraph.Instance
	Err         error
}

// Fresh says whether the coordinator knows nothing but itself: a new pod, or one whose
// storage was wiped, leading (or waiting to join) a cluster of its own.
func (v View) Fresh() bool {
	for _, r := range v.Rows {
		if !r.IsCoordinator() || r.Name != v.Coordinator.Name {
			return false
		}
	}
	return true
}

// Choice is PickLeader's answer: the view to act through (Index >= 0), or a leader
// outside the declared set to dial at BoltServer, or neither with Reason and Message.
type Choice struct {
	Index      int
	Leader     string
	BoltServer string
	Reason     string
	Message    string
}

// PickLeader decides, from every declared coordinator's view (id order), which
// coordinator the pass acts through. It is pure; see the package comment for the rules.
func PickLeader(views []View) Choice {
	no := func(reason, format string, args ...any) Choice {
		return Choice{Index: -1, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	var answered, unreachable, fresh int
	votes := map[string]int{}
	firstVote := map[string]int{}
	leaderRow := map[string]memgraph.Instance{}
	for i, v := range views {
		if v.Err != nil {
			unreachable++
			continue
		}
		answered++
		if v.Fresh() {
			fresh++
			continue
		}
		l, ok := memgraph.LeaderOf(v.Rows)
		if !ok {
			continue // names no leader: its view may be arbitrarily stale
		}
		if _, seen := votes[l.Name]; !seen {
			firstVote[l.Name] = i
			leaderRow[l.Name] = l
		}
		votes[l.Name]++
	}

	if len(votes) == 0 {
		switch {
		case answered == 0:
			return no(ReasonCoordinatorUnreachable, "none of the %d coordinators answered", len(views))
		case fresh == answered && unreachable > 0:
			return no(ReasonCoordinatorUnreachable, "%d of %d coordinators did not answer; a new cluster is formed only when all answer", unreachable, len(views))
		case fresh == answered:
			// Bootstrap: the lowest id leading its own one-member cluster forms the cluster.
			for i, v := range views {
				if l, ok := memgraph.LeaderOf(v.Rows); ok && l.Name == v.Coordinator.Name {
					return Choice{Index: i, Leader: l.Name}
				}
			}
			return no(ReasonNoCoordinatorLeader, "none of the %d new coordinators leads yet", len(views))
		}
		return no(ReasonNoCoordinatorLeader, "no coordinator names a leader (%d of %d answered)", answered, len(views))
	}

	names := make([]string, 0, len(votes))
	for n := range votes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if votes[names[i]] != votes[names[j]] {
			return votes[names[i]] > votes[names[j]]
		}
		return firstVote[names[i]] < firstVote[names[j]]
	})
	leader := names[0]
	for i, v := range views {
		if v.Coordinator.Name != leader {
			continue
		}
		if v.Err != nil {
			return no(ReasonCoordinatorUnreachable, "leader %s does not answer", leader)
		}
		// The leader must confirm, from a view of the same cluster: a wiped coordinator
		// the others still name (their heartbeat timeout has not run out) leads only a
		// new cluster of its own.
		if l, ok := memgraph.LeaderOf(v.Rows); !ok || l.Name != leader || v.Fresh() {
			return no(ReasonNoCoordinatorLeader, "coordinators name %s leader but it does not lead their cluster", leader)
		}
		return Choice{Index: i, Leader: leader}
	}
	if addr := leaderRow[leader].BoltServer; addr != "" {
		return Choice{Index: -1, Leader: leader, BoltServer: addr}
	}
	return no(ReasonNoCoordinatorLeader, "leader %s is not declared and shows no bolt server", leader)
}

// Behind names the coordinators whose own view differs from the leader's: one that did
// not answer, or whose SHOW INSTANCES lists other members, another leader or another MAIN
// than the leader's rows (a follower answers from its own Raft state, so a difference
// means it has not applied the leader's log yet). The leader's own view is skipped. Pure.
func Behind(views []View, leader string, leaderRows []memgraph.Instance) []string {
	want := viewSummary(leaderRows)
	var out []string
	for _, v := range views {
		if v.Coordinator.Name == leader {
			continue
		}
		if v.Err != nil || viewSummary(v.Rows) != want {
			out = append(out, v.Coordinator.Name)
		}
	}
	return out
}

// viewSummary is what two coordinators must agree on: the members, the leader and the
// MAIN (health and last response differ between any two readers).
func viewSummary(rows []memgraph.Instance) string {
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	l, _ := memgraph.LeaderOf(rows)
	m, _ := memgraph.MainOf(rows)
	return fmt.Sprintf("%q leader=%q main=%q", names, l.Name, m.Name)
}

type leaderConn struct {
	name string
	sess memgraph.Session
	rows []memgraph.Instance
}

// discovery holds the sessions a pass opened; close releases them.
type discovery struct {
	sessions        []memgraph.Session
	views           []View
	reason, message string
	// unreachable are the declared members the operator could not reach, by name, with
	// memgraph.Cause's account of the failure.
	unreachable map[string]string
}

// probeData dials every declared data instance at once, each within the Dialer's
// timeout, and returns those that did not answer, by name, with the error. The pass talks
// to data instances only through the leader, but what the operator can reach itself is
// part of what it reports (a partition between the operator and the data plane) and of
// what it may change (planner rule 0).
func probeData(ctx context.Context, d memgraph.Dialer, want Desired) map[string]error {
	errs := make([]error, len(want.Data))
	var wg sync.WaitGroup
	for i, di := range want.Data {
		if di.BoltServer == "" {
			continue
		}
		wg.Go(func() {
			s, err := d.Dial(ctx, di.BoltServer)
			if err != nil {
				errs[i] = err
				return
			}
			_ = s.Close(ctx)
		})
	}
	wg.Wait()
	out := map[string]error{}
	for i, err := range errs {
		if err != nil {
			out[want.Data[i].Name] = err
		}
	}
	return out
}

func (f *discovery) close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for _, s := range f.sessions {
		if s != nil {
			_ = s.Close(ctx)
		}
	}
}

// discover asks every declared coordinator at once, then PickLeader decides; nil with a
// reason when there is no leader to act through.
func discover(ctx context.Context, d memgraph.Dialer, want Desired) (*leaderConn, *discovery) {
	coords := slices.Clone(want.Coordinators)
	slices.SortStableFunc(coords, func(a, b planner.Coordinator) int { return a.ID - b.ID })
	f := &discovery{sessions: make([]memgraph.Session, len(coords))}
	views := make([]View, len(coords))
	f.views = views
	var wg sync.WaitGroup
	for i, c := range coords {
		if c.Name == "" {
			c.Name = memgraph.CoordinatorName(c.ID)
		}
		views[i].Coordinator = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.Dial(ctx, c.BoltServer)
			if err != nil {
				views[i].Err = err
				return
			}
			f.sessions[i] = s
			views[i].Rows, views[i].Err = s.ShowInstances(ctx)
		}()
	}
	wg.Wait()

	ch := PickLeader(views)
	switch {
	case ch.Index >= 0:
		return &leaderConn{name: ch.Leader, sess: f.sessions[ch.Index], rows: views[ch.Index].Rows}, f
	case ch.BoltServer == "":
		f.reason, f.message = ch.Reason, ch.Message
		return nil, f
	}
	// A leader outside the declared set (an id a human added): reach it by the address
	// it was added with, and let it confirm.
	s, err := d.Dial(ctx, ch.BoltServer)
	if err != nil {
		f.reason, f.message = ReasonCoordinatorUnreachable, fmt.Sprintf("leader %s does not answer", ch.Leader)
		return nil, f
	}
	f.sessions = append(f.sessions, s)
	rows, err := s.ShowInstances(ctx)
	if err != nil {
		f.reason, f.message = ReasonCoordinatorUnreachable, fmt.Sprintf("leader %s does not answer", ch.Leader)
		return nil, f
	}
	if l, ok := memgraph.LeaderOf(rows); !ok || l.Name != ch.Leader {
		f.reason, f.message = ReasonNoCoordinatorLeader, fmt.Sprintf("coordinators name %s leader but it does not lead their cluster", ch.Leader)
		return nil, f
	}
	return &leaderConn{name: ch.Leader, sess: s, rows: rows}, f
}
