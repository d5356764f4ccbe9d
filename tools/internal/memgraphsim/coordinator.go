package memgraphsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// instHealth is the leader's view of one data instance from its health checks.
type instHealth struct {
	lastOK time.Time
	down   bool
	// answered is true once the instance answered this leader (a health check or a
	// promotion): until then role, writable, committed and epoch are unknown, not empty.
	answered  bool
	role      string
	writable  bool
	committed uint64
	epoch     uint64
}

// coordinator is a Memgraph coordinator: a member of the Raft group, and, while leader,
// the health checker and failover driver of the data instances.
type coordinator struct {
	opts Options
	id   int
	ilog *invariantLog
	log  *slog.Logger

	raft      *raft.Raft
	fsm       *fsm
	transport *raft.NetworkTransport
	logStore  *raftboltdb.BoltStore
	mgmt      *rpcServer

	// opMu serialises the leader's mutations and its reconcile passes.
	opMu sync.Mutex

	hmu         sync.Mutex
	health      map[string]*instHealth
	coordOK     map[string]time.Time // coordinator id -> last successful check
	coordDown   map[string]bool      // coordinators this leader declared down
	readySince  time.Time
	leaderReady bool
	// promoted remembers what the MAIN was last told (epoch and replica list), so an
	// unchanged cluster costs no management calls beyond health checks.
	promoted string

	// counts are Memgraph's HighAvailability counters the simulator keeps (metrics.go).
	counts haCounts

	stop chan struct{}
	wg   sync.WaitGroup
}

// streamLayer is the Raft transport's TCP layer: it binds the local address but
// advertises the coordinator's hostname, so the Raft configuration holds the names
// ADD COORDINATOR used, as Memgraph's does; it dials those names through the address map.
type streamLayer struct {
	net.Listener
	advertise hostAddr
	opts      Options
}

type hostAddr string

func (hostAddr) Network() string  { return "tcp" }
func (h hostAddr) String() string { return string(h) }

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.opts.dial(context.Background(), string(a), timeout)
}

func newCoordinator(opts Options, ilog *invariantLog, log *slog.Logger) (*coordinator, error) {
	c := &coordinator{opts: opts, id: opts.CoordinatorID, ilog: ilog, log: log, fsm: newFSM(),
		health: map[string]*instHealth{}, coordOK: map[string]time.Time{}, coordDown: map[string]bool{}, stop: make(chan struct{})}
	dir := filepath.Join(opts.DataDirectory, "sim-raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var err error
	if c.logStore, err = raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db")); err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	raftLog := io.Discard
	if opts.AlsoLogToStderr && logLevel(opts.LogLevel) <= slog.LevelInfo {
		raftLog = os.Stderr
	}
	snaps, err := raft.NewFileSnapshotStore(dir, 2, raftLog)
	if err != nil {
		return nil, fmt.Errorf("raft snapshots: %w", err)
	}
	ln, err := net.Listen("tcp", opts.Addr(opts.CoordinatorPort))
	if err != nil {
		return nil, fmt.Errorf("coordinator server: %w", err)
	}
	c.transport = raft.NewNetworkTransport(&streamLayer{Listener: ln, advertise: hostAddr(opts.CoordinatorServer()), opts: opts}, 3, 5*time.Second, raftLog)

	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(strconv.Itoa(c.id))
	cfg.HeartbeatTimeout = opts.RaftHeartbeat
	cfg.ElectionTimeout = opts.RaftElection
	cfg.LeaderLeaseTimeout = opts.RaftHeartbeat / 2
	cfg.LogOutput = raftLog
	cfg.LogLevel = "WARN"
	existing, err := raft.HasExistingState(c.logStore, c.logStore, snaps)
	if err != nil {
		return nil, err
	}
	if c.raft, err = raft.NewRaft(cfg, c.fsm, c.logStore, c.logStore, snaps, c.transport); err != nil {
		return nil, err
	}
	// Only coordinator 1 starts a cluster: the others join when the leader adds them
	// (ADD COORDINATOR), so two fresh coordinators never form two clusters.
	if !existing && c.id == 1 {
		boot := raft.Configuration{Servers: []raft.Server{{ID: cfg.LocalID, Address: raft.ServerAddress(opts.CoordinatorServer())}}}
		if err := c.raft.BootstrapCluster(boot).Error(); err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	if opts.ManagementPort > 0 {
		mln, err := net.Listen("tcp", opts.Addr(opts.ManagementPort))
		if err != nil {
			return nil, fmt.Errorf("management server: %w", err)
		}
		c.mgmt = serveRPC(mln, c.handleManagement)
	}
	c.wg.Add(2)
	go c.watchLeadership()
	go c.healthLoop()
	return c, nil
}

func (c *coordinator) name() string { return "coordinator_" + strconv.Itoa(c.id) }

func (c *coordinator) close() {
	close(c.stop)
	c.wg.Wait()
	if c.mgmt != nil {
		c.mgmt.Close()
	}
	if err := c.raft.Shutdown().Error(); err != nil {
		c.log.Warn("Raft shutdown failed", "error", err)
	}
	_ = c.transport.Close()
	_ = c.logStore.Close()
	c.ilog.record(Event{Instance: c.name(), Role: RoleDown})
}

func (c *coordinator) isLeader() bool { return c.raft.State() == raft.Leader }

// watchLeadership logs every leadership change and readies the new leader: it waits for
// the log to be applied (Barrier) and starts its health view afresh, counting every
// instance alive from now on, so a new leader does not fail over at once.
func (c *coordinator) watchLeadership() {
	defer c.wg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		role := RoleFollower
		if c.isLeader() {
			role = RoleLeader
		}
		if role == last {
			continue
		}
		last = role
		c.log.Info("Coordinator role changed", "role", role, "term", c.raft.CurrentTerm())
		c.ilog.record(Event{Instance: c.name(), Role: role, Term: c.raft.CurrentTerm()})
		c.hmu.Lock()
		c.leaderReady = false
		c.hmu.Unlock()
		if role == RoleLeader {
			if err := c.raft.Barrier(10 * time.Second).Error(); err != nil {
				c.log.Warn("Leader could not apply its log", "error", err)
				last = ""
				continue
			}
			now := time.Now()
			c.hmu.Lock()
			c.health = map[string]*instHealth{}
			for _, i := range c.fsm.state().Instances {
				c.health[i.Name] = &instHealth{lastOK: now}
			}
			c.coordOK, c.coordDown, c.readySince = map[string]time.Time{}, map[string]bool{}, now
			c.promoted = ""
			c.leaderReady = true
			c.hmu.Unlock()
			c.counts.becameLeader.Add(1)
		}
	}
}

func (c *coordinator) ready() bool {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	return c.leaderReady && c.isLeader()
}

// waitReady waits while this coordinator is a leader still applying its log, so a query
// arriving right after an election is served instead of refused.
func (c *coordinator) waitReady() bool {
	deadline := time.Now().Add(5 * time.Second)
	for c.isLeader() && !c.ready() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return c.ready()
}

// healthLoop checks every instance each interval while leader, then reconciles roles.
func (c *coordinator) healthLoop() {
	defer c.wg.Done()
	for {
		// instance_health_check_frequency_sec may change at any time.
		t := time.NewTimer(c.checkInterval())
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if !c.ready() {
			continue
		}
		c.checkHealth()
		c.opMu.Lock()
		if c.ready() {
			c.reconcileLocked()
		}
		c.opMu.Unlock()
	}
}

func (c *coordinator) checkTimeout() time.Duration {
	return min(c.checkInterval(), time.Second)
}

func (c *coordinator) checkHealth() {
	st := c.fsm.state()
	var wg sync.WaitGroup
	for _, inst := range st.Instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.opts.call(context.Background(), inst.ManagementServer, request{Op: "health"}, c.checkTimeout())
			now := time.Now()
			c.hmu.Lock()
			defer c.hmu.Unlock()
			h := c.health[inst.Name]
			if h == nil {
				h = &instHealth{lastOK: now}
				c.health[inst.Name] = h
			}
			if err == nil {
				h.lastOK, h.down, h.answered = now, false, true
				h.role, h.writable, h.committed, h.epoch = resp.Role, resp.Writable, resp.Committed, resp.Epoch
				return
			}
			if !h.down && now.Sub(h.lastOK) >= c.downTimeout() {
				h.down = true
				c.log.Warn("Instance is down", "instance", inst.Name, "error", err)
				c.ilog.record(Event{Instance: inst.Name, Role: RoleDown, ObservedBy: c.name()})
			}
		}()
	}
	for id, meta := range st.Coordinators {
		if id == strconv.Itoa(c.id) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if meta.ManagementServer != "" {
				_, err = c.opts.call(context.Background(), meta.ManagementServer, request{Op: "health"}, c.checkTimeout())
			} else {
				var conn net.Conn
				if conn, err = c.opts.dial(context.Background(), meta.CoordinatorServer, c.checkTimeout()); err == nil {
					_ = conn.Close()
				}
			}
			now := time.Now()
			c.hmu.Lock()
			defer c.hmu.Unlock()
			if err == nil {
				c.coordOK[id] = now
				delete(c.coordDown, id)
				return
			}
			last, seen := c.coordOK[id]
			if !seen {
				last = c.readySince
			}
			if !c.coordDown[id] && now.Sub(last) >= c.downTimeout() {
				// A killed coordinator writes nothing itself; without this line the log
				// would show it leading forever.
				c.coordDown[id] = true
				c.ilog.record(Event{Instance: "coordinator_" + id, Role: RoleDown, ObservedBy: c.name()})
			}
		}()
	}
	wg.Wait()
}

// alive reports whether the leader currently counts the instance as up.
func (c *coordinator) alive(name string) (instHealth, bool) {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	h := c.health[name]
	if h == nil {
		return instHealth{}, false
	}
	return *h, !h.down
}

func replicaSpecs(st clusterState, main string) []replicaSpec {
	var out []replicaSpec
	for _, i := range st.Instances {
		if i.Name != main {
			out = append(out, replicaSpec{Name: i.Name, ReplicationServer: i.ReplicationServer, Mode: i.Mode})
		}
	}
	return out
}

// reconcileLocked drives data instances to the roles Raft records: the MAIN promoted (with
// its replica list), every other alive instance a replica of the current epoch; a MAIN
// down for the timeout is replaced by the most up-to-date replica.
func (c *coordinator) reconcileLocked() {
	st := c.fsm.state()
	if st.Main != "" {
		h, up := c.alive(st.Main)
		switch {
		case !up || (h.answered && !c.isCurrentMain(st, h) && c.replicaAhead(st, h.committed)):
			// Down, or back without the current epoch and behind a replica (restarted
			// on an empty or older data directory): promoting it again would make the
			// replicas copy its older graph. A MAIN this leader has not heard from yet
			// (its view starts afresh at election, and a first check may time out under
			// load) is neither: it may be up and writable, so only the down timeout lets
			// another take its place.
			if err := c.failoverLocked(st); err != nil {
				c.log.Warn("Failover failed", "error", err)
				if errors.Is(err, errNoAliveReplica) {
					c.counts.noAliveFailovers.Add(1)
				} else {
					c.counts.raftFailedFailovers.Add(1)
				}
			} else {
				c.counts.failovers.Add(1)
			}
			st = c.fsm.state()
		default:
			c.ensureMainLocked(st, h)
		}
	}
	for _, inst := range st.Instances {
		if inst.Name == st.Main {
			continue
		}
		h, up := c.alive(inst.Name)
		if !up || (h.role == RoleReplica && h.epoch == st.Epoch) {
			continue
		}
		req := request{Op: "demote", Name: inst.Name, Epoch: st.Epoch, ReplicationServer: inst.ReplicationServer}
		if _, err := c.opts.call(context.Background(), inst.ManagementServer, req, c.checkTimeout()); err != nil {
			c.log.Warn("Demote failed", "instance", inst.Name, "error", err)
			continue
		}
		c.hmu.Lock()
		if hh := c.health[inst.Name]; hh != nil {
			hh.role, hh.epoch, hh.writable = RoleReplica, st.Epoch, false
		}
		c.hmu.Unlock()
	}
}

func (c *coordinator) isCurrentMain(st clusterState, h instHealth) bool {
	return h.role == RoleMain && h.writable && h.epoch == st.Epoch
}

// replicaAhead says whether an alive replica has committed more than the MAIN.
func (c *coordinator) replicaAhead(st clusterState, committed uint64) bool {
	for _, inst := range st.Instances {
		if h, up := c.alive(inst.Name); up && inst.Name != st.Main && h.committed > committed {
			return true
		}
	}
	return false
}

// ensureMainLocked (re)sends the promotion when the MAIN is not the writable MAIN of the
// current epoch or its replica list changed.
func (c *coordinator) ensureMainLocked(st clusterState, h instHealth) {
	inst, _ := st.instance(st.Main)
	specs := replicaSpecs(st, st.Main)
	key, _ := json.Marshal(struct {
		E uint64
		R []replicaSpec
	}{st.Epoch, specs})
	c.hmu.Lock()
	same := c.promoted == string(key)
	c.hmu.Unlock()
	if same && c.isCurrentMain(st, h) {
		return
	}
	if err := c.promote(inst, st.Epoch, specs); err != nil {
		c.log.Warn("Promote failed", "instance", inst.Name, "error", err)
		return
	}
	c.hmu.Lock()
	c.promoted = string(key)
	c.hmu.Unlock()
}

func (c *coordinator) promote(inst dataMeta, epoch uint64, specs []replicaSpec) error {
	req := request{Op: "promote", Name: inst.Name, Epoch: epoch, Replicas: specs}
	resp, err := c.opts.call(context.Background(), inst.ManagementServer, req, c.opts.ReplicationTimeout)
	if err != nil {
		return err
	}
	c.hmu.Lock()
	if h := c.health[inst.Name]; h != nil {
		h.role, h.writable, h.epoch, h.committed, h.answered = resp.Role, resp.Writable, resp.Epoch, resp.Committed, true
	}
	c.hmu.Unlock()
	return nil
}

// failoverCandidate is a replica as failover weighs it.
type failoverCandidate struct {
	inst      dataMeta
	committed uint64
}

// moreUpToDate orders failover candidates: the higher commit count, then, of equals, the
// smaller name in byte order (Memgraph collects the candidates in a std::map keyed by name
// and keeps the first of equals). Which replicas are candidates at all is failoverLocked's.
func (a failoverCandidate) moreUpToDate(b failoverCandidate) bool {
	if a.committed != b.committed {
		return a.committed > b.committed
	}
	return a.inst.Name < b.inst.Name
}

// failoverLocked records the most up-to-date alive replica as MAIN and promotes it. As
// Memgraph's coordinator does (GetInstanceForFailover), it asks every replica it counts
// alive for its commit count at this moment rather than trusting the last health check,
// and leaves out one that does not answer, an ASYNC replica while sync_failover_only is
// true (the default: then a cluster of ASYNC replicas never fails over), and one more
// than max_failover_replica_lag transactions behind the MAIN's last known count;
// moreUpToDate then picks.
func (c *coordinator) failoverLocked(st clusterState) error {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		cands []failoverCandidate
	)
	syncOnly, maxLag := c.failoverRules(st)
	mainHealth, _ := c.alive(st.Main)
	for _, inst := range st.Instances {
		if inst.Name == st.Main {
			continue
		}
		if syncOnly && inst.Mode == "async" {
			c.log.Info("Failover: ASYNC replica left out (sync_failover_only)", "instance", inst.Name)
			continue
		}
		if _, up := c.alive(inst.Name); !up {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.opts.call(context.Background(), inst.ManagementServer, request{Op: "health"}, c.checkTimeout())
			if err != nil {
				c.log.Warn("Failover: replica did not report its commit count; left out", "instance", inst.Name, "error", err)
				return
			}
			if mainHealth.committed > resp.Committed && mainHealth.committed-resp.Committed > maxLag {
				c.log.Info("Failover: replica too far behind (max_failover_replica_lag)", "instance", inst.Name)
				return
			}
			mu.Lock()
			cands = append(cands, failoverCandidate{inst: inst, committed: resp.Committed})
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(cands) == 0 {
		return errNoAliveReplica
	}
	best := cands[0]
	for _, cand := range cands[1:] {
		if cand.moreUpToDate(best) {
			best = cand
		}
	}
	epoch := st.Epoch + 1
	if err := c.apply(fsmCommand{Op: "set_main", Name: best.inst.Name, Epoch: epoch}); err != nil {
		return err
	}
	c.log.Info("Failover", "from", st.Main, "to", best.inst.Name, "committed", best.committed, "candidates", len(cands), "epoch", epoch)
	return c.promote(best.inst, epoch, replicaSpecs(c.fsm.state(), best.inst.Name))
}

// errNoAliveReplica is a failover with no candidate (Memgraph counts it apart:
// NoAliveInstanceFailedFailovers).
var errNoAliveReplica = errors.New("no alive replica to fail over to")

// apply proposes one command and waits for it to commit.
func (c *coordinator) apply(cmd fsmCommand) error {
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	f := c.raft.Apply(b, 10*time.Second)
	if err := f.Error(); err != nil {
		c.log.Warn("Raft apply failed", "op", cmd.Op, "error", err)
		return failure(ErrRaftWrite)
	}
	if err, ok := f.Response().(error); ok && err != nil {
		return err
	}
	return nil
}
