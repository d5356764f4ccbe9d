package veltrixsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// OpError is a refused membership change with the HTTP status it maps to.
type OpError struct {
	Code int
	Msg  string
}

func (e *OpError) Error() string { return e.Msg }

func opErr(code int, format string, args ...any) error {
	return &OpError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Membership operations, carried between members as "_OP <hops> <kind> <args...>".
const (
	opJoin     = "JOIN"
	opRemove   = "REMOVE"
	opLeft     = "LEFT"
	opActivate = "ACTIVATE"
)

// PlanOp applies one membership operation to cur and returns the next view (epoch not yet
// raised) and whether anything changed. It is pure; the leader runs it.
func PlanOp(cur View, kind string, args []string) (View, bool, error) {
	next := cur.Epoch + 1
	need := func(k int) error {
		if len(args) < k {
			return opErr(http.StatusBadRequest, "%s needs %d arguments", kind, k)
		}
		return nil
	}
	switch kind {
	case opJoin:
		if err := need(2); err != nil {
			return cur, false, err
		}
		id, addr := args[0], args[1]
		if m, ok := cur.Member(id); ok {
			if m.State == StateLeaving {
				return cur, false, opErr(http.StatusConflict, "member %s is leaving; it can join again once it is gone", id)
			}
			if m.Addr == addr {
				return cur, false, nil
			}
			m.Addr = addr
			return cur.withMember(m), true, nil
		}
		return cur.withMember(Member{ID: id, Addr: addr, State: StateJoining, Since: next}), true, nil
	case opRemove:
		if err := need(1); err != nil {
			return cur, false, err
		}
		id := args[0]
		force := len(args) > 1 && args[1] == "force"
		m, ok := cur.Member(id)
		if !ok {
			return cur, false, opErr(http.StatusNotFound, "member %s is not in the cluster", id)
		}
		if force {
			return cur.without(id), true, nil
		}
		if m.State == StateLeaving {
			return cur, false, nil
		}
		remaining := 0
		for _, t := range cur.Targets() {
			if t.ID != id {
				remaining++
			}
		}
		if remaining < cur.ReplicationFactor {
			return cur, false, opErr(http.StatusConflict, "removing %s would leave %d members, fewer than the replication factor %d", id, remaining, cur.ReplicationFactor)
		}
		m.State, m.Since = StateLeaving, next
		return cur.withMember(m), true, nil
	case opLeft:
		if err := need(1); err != nil {
			return cur, false, err
		}
		m, ok := cur.Member(args[0])
		if !ok {
			return cur, false, nil
		}
		if m.State != StateLeaving {
			return cur, false, opErr(http.StatusConflict, "member %s is not leaving", m.ID)
		}
		return cur.without(m.ID), true, nil
	case opActivate:
		if err := need(1); err != nil {
			return cur, false, err
		}
		m, ok := cur.Member(args[0])
		if !ok || m.State != StateJoining {
			return cur, false, nil
		}
		m.State, m.Since = StateActive, next
		return cur.withMember(m), true, nil
	}
	return cur, false, opErr(http.StatusBadRequest, "unknown membership operation %q", kind)
}

// memberOp runs a membership operation on the leader, forwarding it there when this node
// is not the leader; hops bounds forwarding while views disagree.
func (n *Node) memberOp(hops int, kind string, args ...string) (View, error) {
	if n.cfg.Mode == ModeStandalone {
		return View{}, opErr(http.StatusConflict, "standalone mode has no online membership; use -mode raft or replicated")
	}
	v := n.snapshot()
	leader, ok := v.Leader()
	if !ok || v.Epoch == 0 {
		return View{}, opErr(http.StatusServiceUnavailable, "membership is not known yet")
	}
	if leader.ID == n.cfg.NodeID {
		return n.leaderOp(kind, args)
	}
	if hops >= 2 {
		return View{}, opErr(http.StatusServiceUnavailable, "membership leader %s is changing; retry", leader.ID)
	}
	ans, err := n.peers.Do(leader.Addr, fmt.Sprintf("_OP %d %s %s", hops+1, kind, strings.Join(args, " ")))
	if err != nil {
		return View{}, opErr(http.StatusServiceUnavailable, "membership leader %s is unreachable: %v", leader.ID, err)
	}
	return parseOpAnswer(ans)
}

func (n *Node) leaderOp(kind string, args []string) (View, error) {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	cur := n.snapshot()
	if l, _ := cur.Leader(); l.ID != n.cfg.NodeID {
		return View{}, opErr(http.StatusServiceUnavailable, "%s is no longer the membership leader; retry", n.cfg.NodeID)
	}
	next, changed, err := PlanOp(cur, kind, args)
	if err != nil || !changed {
		return cur, err
	}
	next.Epoch = cur.Epoch + 1
	n.adopt(next)
	n.log.Info("Changed membership", "op", kind, "args", args, "epoch", next.Epoch)
	n.broadcast(next, cur)
	return next, nil
}

func formatOpAnswer(v View, err error) string {
	if err != nil {
		var oe *OpError
		if errors.As(err, &oe) {
			return fmt.Sprintf("ERR %d %s", oe.Code, oe.Msg)
		}
		return fmt.Sprintf("ERR %d %s", http.StatusInternalServerError, err)
	}
	return "OK " + mustJSON(v)
}

func parseOpAnswer(ans string) (View, error) {
	if rest, ok := strings.CutPrefix(ans, "OK "); ok {
		var v View
		if err := json.Unmarshal([]byte(rest), &v); err != nil {
			return View{}, fmt.Errorf("bad answer from the leader: %w", err)
		}
		return v, nil
	}
	if rest, ok := strings.CutPrefix(ans, "ERR "); ok {
		codeS, msg, _ := strings.Cut(rest, " ")
		if code, err := strconv.Atoi(codeS); err == nil {
			return View{}, &OpError{Code: code, Msg: msg}
		}
		return View{}, opErr(http.StatusInternalServerError, "%s", rest)
	}
	return View{}, fmt.Errorf("bad answer from the leader: %q", ans)
}

// broadcast pushes v to every member of v and of prev (a removed member learns it is
// gone), in parallel: a member whose name does not resolve yet costs a dial timeout.
func (n *Node) broadcast(v, prev View) {
	line := "_MEMBERS " + mustJSON(v)
	seen := map[string]bool{n.cfg.NodeID: true}
	var wg sync.WaitGroup
	for _, m := range append(slicesConcat(v.Members, prev.Members), Member{}) {
		if m.ID == "" || seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		wg.Add(1)
		go func(m Member) {
			defer wg.Done()
			if ans, err := n.peers.Do(m.Addr, line); err == nil {
				n.takeGossip(m.ID, ans)
			}
		}(m)
	}
	wg.Wait()
}

func slicesConcat(a, b []Member) []Member {
	out := make([]Member, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// gossipAnswer is a member's answer to _MEMBERS: its view and how far its data moved.
type gossipAnswer struct {
	NodeID    string `json:"node_id"`
	MoveEpoch int64  `json:"move_epoch"`
	View      View   `json:"view"`
}

func (n *Node) gossipAnswer() string {
	n.mu.Lock()
	a := gossipAnswer{NodeID: n.cfg.NodeID, MoveEpoch: n.moveEpoch, View: n.view.Clone()}
	n.mu.Unlock()
	return mustJSON(a)
}

func (n *Node) takeGossip(id, ans string) {
	var a gossipAnswer
	if err := json.Unmarshal([]byte(ans), &a); err != nil {
		return
	}
	n.mu.Lock()
	n.peerMoves[id] = a.MoveEpoch
	n.mu.Unlock()
	n.adopt(a.View)
}

// gossipLoop spreads the newest view (a member that was down or restarted with an older
// one catches up), finishes joins and leaves, and resends missed writes.
func (n *Node) gossipLoop(ctx context.Context) {
	if n.cfg.Mode == ModeStandalone {
		return
	}
	every(ctx, n.cfg.GossipInterval, nil, func() {
		v := n.snapshot()
		n.broadcast(v, v)
		n.activateJoined()
		n.finishLeaving()
		n.retryHints()
	})
}

// every runs f each interval (and whenever wake fires) until ctx ends.
func every(ctx context.Context, interval time.Duration, wake <-chan struct{}, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
		f()
	}
}

// activateJoined (leader only): a joining member turns active once every member has
// finished moving data for the epoch it joined at.
func (n *Node) activateJoined() {
	v := n.snapshot()
	if l, ok := v.Leader(); !ok || l.ID != n.cfg.NodeID {
		return
	}
	for _, j := range v.Members {
		if j.State != StateJoining {
			continue
		}
		done := true
		n.mu.Lock()
		for _, m := range v.Members {
			e := n.peerMoves[m.ID]
			if m.ID == n.cfg.NodeID {
				e = n.moveEpoch
			}
			if e < j.Since {
				done = false
			}
		}
		n.mu.Unlock()
		if done {
			if _, err := n.leaderOp(opActivate, []string{j.ID}); err != nil {
				n.log.Info("Could not activate a joined member", "member", j.ID, "err", err)
			}
		}
	}
}

// finishLeaving: a leaving member whose data has all moved asks the leader to remove it.
func (n *Node) finishLeaving() {
	v := n.snapshot()
	m, ok := v.Member(n.cfg.NodeID)
	if !ok || m.State != StateLeaving {
		return
	}
	st := n.store.Load()
	_, all := st.Len()
	n.mu.Lock()
	drained := n.moveEpoch == v.Epoch && all == 0 && len(n.hints) == 0
	n.mu.Unlock()
	if !drained {
		return
	}
	if _, err := n.memberOp(0, opLeft, n.cfg.NodeID); err != nil {
		n.log.Info("Could not finish leaving", "err", err)
		return
	}
	n.log.Info("Left the cluster: every partition moved")
}

// joinLoop: a node that is not a member asks the --join members to add it, at start and
// whenever it finds itself absent without having left (a bootstrap member whose data dir
// was replaced, after the cluster removed it, starts from --peers and learns it is out).
// A member that left stays out until it restarts, or the scale-down would undo itself.
func (n *Node) joinLoop(ctx context.Context) {
	if n.cfg.Mode == ModeStandalone {
		return
	}
	if len(n.cfg.Join) == 0 {
		if _, in := n.snapshot().Member(n.cfg.NodeID); !in {
			n.log.Info("Not a member and no --join: serving as a coordinator only")
		}
		return
	}
	n.tryJoin()
	every(ctx, 500*time.Millisecond, nil, n.tryJoin)
}

func (n *Node) tryJoin() {
	v := n.snapshot()
	if _, in := v.Member(n.cfg.NodeID); in {
		return
	}
	n.mu.Lock()
	left := n.left
	n.mu.Unlock()
	if left {
		return
	}
	self := n.cfg.selfAddr()
	for _, addr := range n.cfg.Join {
		if addr == self {
			continue
		}
		ans, err := n.peers.Do(addr, fmt.Sprintf("_OP 0 %s %s %s", opJoin, n.cfg.NodeID, self))
		if err != nil {
			continue
		}
		v, err := parseOpAnswer(ans)
		if err != nil {
			n.log.Info("Join refused", "via", addr, "err", err)
			continue
		}
		n.adopt(v)
		n.log.Info("Joined the cluster", "via", addr, "epoch", v.Epoch)
		return
	}
}

// moveLoop hands keys to the owners the current view gives them, at the move rate.
func (n *Node) moveLoop(ctx context.Context) {
	every(ctx, 200*time.Millisecond, n.wake, func() { n.movePass(ctx) })
}

// movePass: for a partition this node owns, its keys go to owners that are new since it
// last synced them; for one it does not own, to every owner, and then they are dropped
// here. It records the epoch once every partition is in place.
func (n *Node) movePass(ctx context.Context) {
	n.mu.Lock()
	v := n.view.Clone()
	if n.moveEpoch == v.Epoch && !n.moveDirty {
		n.mu.Unlock()
		return
	}
	n.moveDirty = false
	synced := make(map[int][]string, len(n.synced))
	for k, s := range n.synced {
		synced[k] = s
	}
	n.mu.Unlock()

	st := n.store.Load()
	byPart := map[int][]KeyEntry{}
	for _, ke := range st.Entries() {
		p := Partition(ke.Key, v.PartitionCount)
		byPart[p] = append(byPart[p], ke)
	}
	type task struct {
		p        int
		owners   []string
		need     []string
		selfOwns bool
	}
	var tasks []task
	pending := 0
	for p, kes := range byPart {
		owners := v.Owners(p)
		selfOwns := containsID(owners, n.cfg.NodeID)
		var need []string
		for _, id := range owners {
			if id != n.cfg.NodeID && (!selfOwns || !containsID(synced[p], id)) {
				need = append(need, id)
			}
		}
		if selfOwns && len(need) == 0 {
			continue
		}
		tasks = append(tasks, task{p, owners, need, selfOwns})
		pending += len(kes) * len(need)
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].p < tasks[j].p })
	n.setPending(pending)

	complete := true
	for _, t := range tasks {
		ok := true
		for _, id := range t.need {
			for _, ke := range byPart[t.p] {
				if ctx.Err() != nil || n.epoch() != v.Epoch || !n.waitMoveRate(ctx) {
					n.markDirty()
					return
				}
				if err := n.replicate(v, id, ke.Key, ke.Entry); err != nil {
					ok = false
					break
				}
				pending--
				n.setPending(pending)
				if n.moved() {
					return
				}
			}
			if !ok {
				break
			}
		}
		if !ok {
			complete = false
			continue
		}
		n.mu.Lock()
		n.synced[t.p] = t.owners
		n.mu.Unlock()
		if !t.selfOwns {
			for _, ke := range byPart[t.p] {
				if err := st.Drop(ke.Key, ke.Ver); err != nil {
					n.log.Error("Could not drop a moved key", "err", err)
				}
			}
		}
	}
	n.mu.Lock()
	if complete && n.view.Epoch == v.Epoch {
		n.moveEpoch = v.Epoch
	} else {
		n.moveDirty = true
	}
	n.movesPending = 0
	n.mu.Unlock()
	if err := n.persist(); err != nil {
		n.log.Error("Could not persist the move state", "err", err)
	}
	if len(tasks) > 0 {
		n.log.Info("Moved data", "epoch", v.Epoch, "partitions", len(tasks), "complete", complete)
	}
}

func (n *Node) epoch() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view.Epoch
}

func (n *Node) markDirty() {
	n.mu.Lock()
	n.moveDirty = true
	n.mu.Unlock()
}

func (n *Node) setPending(p int) {
	n.mu.Lock()
	n.movesPending = p
	n.mu.Unlock()
}

// moved counts one moved key and fires the crash-mid-move knob once per data dir.
func (n *Node) moved() bool {
	total := n.keysMoved.Add(1)
	if n.cfg.CrashMidMove <= 0 || total < int64(n.cfg.CrashMidMove) {
		return false
	}
	marker := n.store.Load().MetaPath(crashMarker)
	if _, err := os.Stat(marker); err == nil {
		return false
	}
	_ = os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
	n.log.Error("Crashing mid-move (--sim-crash-mid-move)", "moved", total)
	n.crashed.Store(true)
	n.stopInternal()
	return true
}

// waitMoveRate paces moves at the move rate; a rate of 0 holds them until it changes.
func (n *Node) waitMoveRate(ctx context.Context) bool {
	for {
		rate := n.faults().MoveRate
		if rate > 0 {
			interval := time.Duration(float64(time.Second) / rate)
			n.mu.Lock()
			now := time.Now()
			if n.moveNext.Before(now.Add(-100 * time.Millisecond)) {
				n.moveNext = now
			}
			wait := n.moveNext.Sub(now)
			n.moveNext = n.moveNext.Add(interval)
			n.mu.Unlock()
			if wait <= 0 {
				return true
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(wait):
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (n *Node) checkpointLoop(ctx context.Context) {
	if n.cfg.CheckpointEvery <= 0 {
		return
	}
	every(ctx, n.cfg.CheckpointEvery, nil, func() {
		if st := n.store.Load(); st.Pending() > 0 {
			if err := st.Checkpoint(); err != nil {
				n.log.Error("Periodic checkpoint failed", "err", err)
			}
		}
	})
}
