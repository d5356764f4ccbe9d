package veltrixsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCrashedMidMove is returned by Run when the crash-mid-move knob fired; the process
// exits non-zero without a checkpoint, as a crash would.
var ErrCrashedMidMove = errors.New("crashed mid-move (--sim-crash-mid-move)")

// Node is one simulated server.
type Node struct {
	cfg   Config
	log   *slog.Logger
	peers *peerPool

	store        atomic.Pointer[Store]
	searchReady  atomic.Int64 // unix nanos at which search_ready turns 1; 0 = not opened
	keysMoved    atomic.Int64
	commands     sync.Map // verb -> *atomic.Int64
	crashed      atomic.Bool
	stopInternal context.CancelFunc

	opMu sync.Mutex // serialises the leader's membership changes

	mu           sync.Mutex
	moveNext     time.Time // pacing of moves
	view         View
	synced       map[int][]string // partition -> owners known to hold this node's keys of it
	moveEpoch    int64            // last epoch a full move pass completed at
	moveDirty    bool
	left         bool // this node was leaving: once absent it stays out until restarted
	movesPending int
	peerMoves    map[string]int64 // member -> its move epoch, from gossip answers
	hints        map[string]map[string]Entry
	lastVer      int64
	refuseDelete int
	moveRate     float64
	wake         chan struct{}

	// uringBridge is INFO's uring_bridge (fixed at start); uringErr why it fell back.
	uringBridge string
	uringErr    error

	// rawVLogs are the --raw-vlogs devices, open from open() on (see rawvlog.go).
	rawVLogs atomic.Pointer[[]*rawVLog]
}

// NewNode checks cfg and returns a node ready to Run.
func NewNode(cfg Config, log *slog.Logger) (*Node, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	n := &Node{
		cfg: cfg, log: log.With("node", cfg.NodeID), peers: newPeerPool(cfg.Addr),
		peerMoves: map[string]int64{}, hints: map[string]map[string]Entry{},
		refuseDelete: cfg.RefuseDelete, moveRate: cfg.MoveRate, wake: make(chan struct{}, 1),
	}
	n.uringBridge, n.uringErr = cfg.uringBridgeState()
	return n, nil
}

// Run listens on cfg.Addr and cfg.MetricsAddr and serves until ctx ends.
func (n *Node) Run(ctx context.Context) error {
	textLn, err := net.Listen("tcp", n.cfg.Addr)
	if err != nil {
		return err
	}
	httpLn, err := net.Listen("tcp", n.cfg.MetricsAddr)
	if err != nil {
		textLn.Close()
		return err
	}
	return n.Serve(ctx, textLn, httpLn)
}

// Serve serves on the given listeners until ctx ends; a clean stop writes a checkpoint.
func (n *Node) Serve(ctx context.Context, textLn, httpLn net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	n.stopInternal = cancel
	defer cancel()
	var wg sync.WaitGroup
	hs := &http.Server{Handler: n.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
	wg.Add(2)
	go func() { defer wg.Done(); _ = hs.Serve(httpLn) }()
	ts := newTextServer(n, textLn)
	go func() { defer wg.Done(); ts.serve() }()
	n.log.Info("Listening", "addr", textLn.Addr().String(), "metricsAddr", httpLn.Addr().String(), "mode", n.cfg.Mode)
	if n.uringErr != nil {
		n.log.Warn("The io_uring VLog write bridge fell back to pwrite: io_uring_setup was refused (seccomp RuntimeDefault blocks it)",
			"asked", n.cfg.URingBridge, "err", n.uringErr.Error())
	}

	err := n.open(ctx)
	if err == nil {
		for _, f := range []func(context.Context){n.moveLoop, n.gossipLoop, n.checkpointLoop, n.joinLoop} {
			wg.Add(1)
			go func() { defer wg.Done(); f(ctx) }()
		}
		<-ctx.Done()
	}
	shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	_ = hs.Shutdown(shutdownCtx)
	ts.close()
	cancel()
	wg.Wait()
	n.peers.Close()
	st := n.store.Load()
	if st == nil {
		return err
	}
	if n.crashed.Load() {
		_ = st.Close()
		return ErrCrashedMidMove
	}
	cpErr := st.Checkpoint()
	raw := n.openRawVLogs()
	if cpErr == nil {
		for _, v := range raw {
			cpErr = errors.Join(cpErr, v.checkpoint())
		}
	}
	if cpErr == nil {
		live, _ := st.Len()
		n.log.Info("Wrote the shutdown checkpoint", "keys", live, "rawVLogs", len(raw))
	}
	closeRawVLogs(raw)
	return errors.Join(err, cpErr, st.Close())
}

// open opens the data dirs and the membership; /readyz turns 200 after it.
func (n *Node) open(ctx context.Context) error {
	if n.cfg.OpenDelay > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(n.cfg.OpenDelay):
		}
	}
	raw, err := openRawVLogs(n.cfg.RawVLogs, n.cfg.NodeID)
	if err != nil {
		return err
	}
	n.rawVLogs.Store(&raw)
	st, err := OpenStore(n.cfg.DataDirs)
	if err != nil {
		closeRawVLogs(raw)
		n.rawVLogs.Store(nil)
		return err
	}
	view, err := n.initialView(st)
	if err != nil {
		_ = st.Close()
		return err
	}
	synced := map[int][]string{}
	if ok, err := st.ReadMeta(syncFile, &synced); err != nil {
		_ = st.Close()
		return err
	} else if !ok || len(synced) != view.PartitionCount {
		synced = map[int][]string{}
		for p := range view.PartitionCount {
			synced[p] = view.Owners(p)
		}
	}
	n.mu.Lock()
	n.view, n.synced = view, synced
	n.noteLeavingLocked()
	n.mu.Unlock()
	n.store.Store(st)
	if err := n.persist(); err != nil {
		return err
	}
	ready := time.Now()
	if st.Reopened() {
		ready = ready.Add(n.cfg.IndexRebuild)
	}
	n.searchReady.Store(ready.UnixNano())
	live, _ := st.Len()
	n.log.Info("Opened the data", "keys", live, "epoch", view.Epoch, "members", len(view.Members), "searchIndexRebuild", time.Until(ready).Round(time.Millisecond).String())
	return nil
}

// initialView: the persisted membership wins over --peers; a node that is not a member
// starts at epoch 0 and joins.
func (n *Node) initialView(st *Store) (View, error) {
	self := Member{ID: n.cfg.NodeID, Addr: n.cfg.selfAddr(), State: StateActive}
	if self.Addr == "" {
		self.Addr = n.cfg.Addr
	}
	if n.cfg.Mode == ModeStandalone {
		return View{Epoch: 1, PartitionCount: n.cfg.PartitionCount, ReplicationFactor: 1, Members: []Member{self}}, nil
	}
	var v View
	if ok, err := st.ReadMeta(membershipFile, &v); err != nil || ok {
		if ok {
			n.log.Info("Loaded the persisted membership; it wins over --peers", "epoch", v.Epoch, "members", len(v.Members))
		}
		return v, err
	}
	v = View{PartitionCount: n.cfg.PartitionCount, ReplicationFactor: n.cfg.ReplicationFactor}
	for _, p := range n.cfg.Peers {
		v = v.withMember(Member{ID: p.ID, Addr: p.Addr, State: StateActive})
	}
	switch {
	case n.cfg.inPeers():
		v.Epoch = 1
	case len(n.cfg.Peers) == 0 && len(n.cfg.Join) == 0:
		v = v.withMember(self)
		v.Epoch = 1
	}
	return v, nil
}

func (n *Node) persist() error {
	st := n.store.Load()
	n.mu.Lock()
	view := n.view.Clone()
	synced := make(map[int][]string, len(n.synced))
	for k, v := range n.synced {
		synced[k] = v
	}
	n.mu.Unlock()
	// The sync state first: a crash between the two writes leaves the older view with
	// sync state that already covers it.
	if err := st.WriteMeta(syncFile, synced); err != nil {
		return err
	}
	return st.WriteMeta(membershipFile, view)
}

// adopt takes v when it is newer than the current view and persists it.
func (n *Node) adopt(v View) bool {
	n.mu.Lock()
	if v.Epoch <= n.view.Epoch {
		n.mu.Unlock()
		return false
	}
	old := n.view
	if v.PartitionCount != old.PartitionCount {
		// A different partitioning (a node that joined a cluster of another shape): nothing
		// is known to be in place, so every key is offered to its owners.
		n.synced = map[int][]string{}
		for p := range v.PartitionCount {
			n.synced[p] = nil
		}
	}
	n.view = v.Clone()
	n.moveDirty = true
	n.noteLeavingLocked()
	n.mu.Unlock()
	n.kick()
	n.log.Info("Adopted membership", "epoch", v.Epoch, "members", memberSummary(v))
	if err := n.persist(); err != nil {
		n.log.Error("Could not persist the membership", "err", err)
	}
	return true
}

// noteLeavingLocked records whether this node is leaving; while it is absent the flag
// keeps what it was.
func (n *Node) noteLeavingLocked() {
	if m, ok := n.view.Member(n.cfg.NodeID); ok {
		n.left = m.State == StateLeaving
	}
}

func memberSummary(v View) string {
	s := ""
	for i, m := range v.Members {
		if i > 0 {
			s += ","
		}
		s += m.ID + "=" + m.State
	}
	return s
}

func (n *Node) kick() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Node) snapshot() View {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view.Clone()
}

func (n *Node) opened() bool { return n.store.Load() != nil && n.searchReady.Load() != 0 }

func (n *Node) isSearchReady() bool {
	t := n.searchReady.Load()
	return t != 0 && time.Now().UnixNano() >= t
}

func (n *Node) nextVersion() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := time.Now().UnixNano()
	if v <= n.lastVer {
		v = n.lastVer + 1
	}
	n.lastVer = v
	return v
}

// selfState is this node's state in the view, or "removed" / "joining" before it is in.
func (n *Node) selfState(v View) string {
	if n.cfg.Mode == ModeStandalone {
		return ModeStandalone
	}
	if m, ok := v.Member(n.cfg.NodeID); ok {
		return m.State
	}
	if v.Epoch == 0 {
		return StateJoining
	}
	return "absent"
}

// Faults are the knobs /admin/sim/faults changes at run time.
type Faults struct {
	RefuseDelete int     `json:"refuse_delete"`
	MoveRate     float64 `json:"move_rate"`
}

func (n *Node) faults() Faults {
	n.mu.Lock()
	defer n.mu.Unlock()
	return Faults{RefuseDelete: n.refuseDelete, MoveRate: n.moveRate}
}

func (n *Node) setFaults(f Faults) error {
	if f.RefuseDelete != 0 && f.RefuseDelete != RefuseConflict && f.RefuseDelete != RefuseInternal {
		return fmt.Errorf("refuse_delete=%d: want 0, 409 or 500", f.RefuseDelete)
	}
	if f.MoveRate < 0 {
		return fmt.Errorf("move_rate=%v: want >= 0", f.MoveRate)
	}
	n.mu.Lock()
	n.refuseDelete, n.moveRate = f.RefuseDelete, f.MoveRate
	n.mu.Unlock()
	n.kick()
	return nil
}

func (n *Node) count(verb string) {
	c, _ := n.commands.LoadOrStore(verb, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
}

// Topology is the JSON of GET /admin/cluster and TOPOLOGY.
type Topology struct {
	NodeID            string         `json:"node_id"`
	Mode              string         `json:"mode"`
	Epoch             int64          `json:"epoch"`
	PartitionCount    int            `json:"partition_count"`
	ReplicationFactor int            `json:"replication_factor"`
	Leader            string         `json:"leader,omitempty"`
	Nodes             []TopologyNode `json:"nodes"`
}

// TopologyNode is one member in Topology; Partitions counts the partitions it owns
// (replicas included).
type TopologyNode struct {
	NodeID     string `json:"node_id"`
	Address    string `json:"address"`
	Port       int    `json:"port"`
	State      string `json:"state"`
	Partitions int    `json:"partitions"`
}

func (n *Node) topology() Topology {
	v := n.snapshot()
	t := Topology{NodeID: n.cfg.NodeID, Mode: n.cfg.Mode, Epoch: v.Epoch, PartitionCount: v.PartitionCount,
		ReplicationFactor: v.ReplicationFactor, Nodes: []TopologyNode{}}
	if l, ok := v.Leader(); ok {
		t.Leader = l.ID
	}
	counts := v.PartitionCounts()
	for _, m := range v.Members {
		host, port := splitHostPort(m.Addr)
		t.Nodes = append(t.Nodes, TopologyNode{NodeID: m.ID, Address: host, Port: port, State: m.State, Partitions: counts[m.ID]})
	}
	return t
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return `{"error":"` + err.Error() + `"}`
	}
	return string(b)
}

// openRawVLogs are the raw VLog devices open() opened (none before).
func (n *Node) openRawVLogs() []*rawVLog {
	if p := n.rawVLogs.Load(); p != nil {
		return *p
	}
	return nil
}
