package memgraphsim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Memgraph's error texts for data instances.
const (
	ErrWriteOnReplica      = "Write queries are forbidden on the replica instance."
	ErrWriteOnReadOnlyMain = "Write queries currently forbidden on the main instance. Either the cluster is in read-only mode, or a new main instance is being set up. Please retry the query later on if this is transient."
	// ErrSyncReplica is returned for a transaction a SYNC replica did not confirm: it is
	// committed on the MAIN all the same, and the replica catches up later.
	ErrSyncReplica = "Replication Exception: At least one SYNC replica has not confirmed committing last transaction. Check the status of the replicas using 'SHOW REPLICAS' query."
	// ErrStrictSyncReplica refuses a transaction before it commits anywhere.
	ErrStrictSyncReplica   = "At least one STRICT_SYNC replica has not confirmed committing last transaction. Transaction will be aborted on all instances."
	ErrReplicaShowReplicas = "Replica can't show registered replicas (it shouldn't have any)!"
	ErrRouteOnDataInstance = "Route message is not supported on a data instance; connect to a coordinator for routing."
	ErrReplicationInTx     = "Replication queries are not allowed in multicommand transactions."
	ErrInfoInTx            = "Info reporting queries are not allowed in multicommand transactions."
)

// replState is a data instance's replication role as persisted in the data directory and
// restored on startup (--replication-restore-state-on-startup).
type replState struct {
	// Name is what the coordinators registered this instance as ("" until they did).
	Name  string `json:"name"`
	Role  string `json:"role"`
	Epoch uint64 `json:"epoch"`
	// ReplicationServer is where a replica listens.
	ReplicationServer string        `json:"replication_server,omitempty"`
	Replicas          []replicaSpec `json:"replicas,omitempty"`
}

const replStateFile = "sim-replication.json"

// dataInstance is a Memgraph data instance: graph store, Bolt queries, the management
// server coordinators drive it through, and replication (as MAIN: a link per replica; as
// REPLICA: a replication server).
type dataInstance struct {
	opts  Options
	store *Store
	auth  *AuthStore
	ilog  *invariantLog
	log   *slog.Logger

	mu       sync.Mutex
	st       replState
	writable bool
	// awaitingMain: a replica restored from disk under HA follows no MAIN until a
	// coordinator names the current one (Memgraph resets the restored replica's MAIN UUID
	// and waits for SwapMainUUID); until then it refuses every replication stream and its
	// health answers report no epoch, so the leader sends it the current one.
	awaitingMain bool
	replSrv      *rpcServer
	links        map[string]*replicaLink

	// dirLocked is LOCK DATA DIRECTORY's state: while set, no durability file is removed.
	dirLocked bool
	// snapshotRunning: a CREATE SNAPSHOT is writing its file.
	snapshotRunning atomic.Bool

	// writeMu serialises commits, so replicas see transactions in commit order.
	writeMu sync.Mutex
	mgmt    *rpcServer
	stop    chan struct{}
	wg      sync.WaitGroup

	// paused names the replicas this instance, as MAIN, sends nothing to (the
	// PauseReplicationTo fault knob); its own mutex, as it is read under a link's.
	pauseMu sync.Mutex
	paused  map[string]bool
}

// errReplicationPaused is what a send to a paused replica fails with.
var errReplicationPaused = errors.New("replication to this replica is paused (MEMGRAPH_SIM_PAUSE_REPLICATION_TO)")

// replicaLink is a MAIN's view of one replica.
type replicaLink struct {
	spec replicaSpec
	mu   sync.Mutex
	// acked is the replica's commit count as last confirmed.
	acked uint64
	// synced is false until the replica has taken a snapshot from this MAIN (a new link
	// always starts with one, so a replica whose history diverged is overwritten).
	synced bool
	// failedAt is the last failed send: a write does not wait for a replica that failed
	// within the last second (Memgraph's replica in RECOVERY); the catch-up loop serves it.
	failedAt time.Time
	// checkedAt is the last check of a replica that had nothing to catch up: the MAIN
	// pings it every second (Memgraph's --replication-replica-check-frequency-sec), so a
	// replica that went away shows "invalid" in SHOW REPLICAS even when no write failed.
	checkedAt time.Time
	// authSent and authAcked: the replica holds the MAIN's users as of authAcked.
	authSent  bool
	authAcked uint64
}

func newDataInstance(opts Options, ilog *invariantLog, log *slog.Logger) (*dataInstance, error) {
	store, err := OpenStoreWith(opts.DataDirectory, StoreOptions{Recover: opts.DataRecovery, WAL: opts.WALEnabled, WALFileSize: opts.WALFileSize})
	if err != nil {
		return nil, err
	}
	auth, err := OpenAuthStore(opts.DataDirectory, opts.User, opts.Password)
	if err != nil {
		return nil, err
	}
	// Every instance starts as a MAIN; under HA (a management port) it refuses writes until
	// a coordinator promotes it, whether it is fresh or restored a MAIN from disk, as
	// Memgraph 3.12's ReplicationState does (writing_enabled_ false while part of an HA
	// cluster): a pod that just started is never a second writable MAIN.
	d := &dataInstance{opts: opts, store: store, auth: auth, ilog: ilog, log: log, links: map[string]*replicaLink{},
		st: replState{Role: RoleMain}, writable: !opts.IsHA(), stop: make(chan struct{})}
	d.pauseReplicationTo(opts.PauseReplicationTo...)
	if opts.RestoreReplication {
		var st replState
		switch err := readJSON(filepath.Join(opts.DataDirectory, replStateFile), &st); {
		case err == nil:
			d.st = st
			// A MAIN restored under HA refuses writes until a coordinator confirms it: the
			// cluster may have failed over while this process was away.
			d.writable = st.Role != RoleMain || !opts.IsHA()
			d.awaitingMain = st.Role == RoleReplica && opts.IsHA()
			if st.Name != "" {
				d.ilog.record(Event{Instance: st.Name, Role: st.Role, Epoch: st.Epoch, Writable: d.writable && st.Role == RoleMain})
			}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	store.SetEpoch(d.st.Epoch)
	if store.LoadedSnapshot() != "" || store.ReplayedWAL() > 0 {
		log.Info("Recovered from durability files", "snapshot", store.LoadedSnapshot(), "walRecords", store.ReplayedWAL(), "timestamp", store.Committed())
	}
	return d, nil
}

func (d *dataInstance) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.st.Role == RoleReplica && d.st.ReplicationServer != "" {
		if err := d.listenReplicationLocked(d.st.ReplicationServer); err != nil {
			return err
		}
	}
	if d.st.Role == RoleMain {
		d.setLinksLocked(d.st.Replicas)
	}
	if d.opts.ManagementPort > 0 {
		ln, err := net.Listen("tcp", d.opts.Addr(d.opts.ManagementPort))
		if err != nil {
			return fmt.Errorf("management server: %w", err)
		}
		d.mgmt = serveRPC(ln, d.handleManagement)
	}
	d.wg.Add(1)
	go d.catchUpLoop()
	return nil
}

func (d *dataInstance) close() {
	close(d.stop)
	d.wg.Wait()
	if d.mgmt != nil {
		d.mgmt.Close()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.replSrv != nil {
		d.replSrv.Close()
		d.replSrv = nil
	}
	if d.st.Name != "" {
		d.ilog.record(Event{Instance: d.st.Name, Role: RoleDown, Epoch: d.st.Epoch})
	}
	if err := d.store.Close(); err != nil {
		d.log.Warn("Finalizing the WAL file failed", "error", err)
	}
}

// listenReplicationLocked starts the replication server on the port of addr (the host is
// always this process's bind host: addr is how others reach it, not what it binds). With
// an address map the port is that of addr's mapping, where the MAIN's dials arrive.
func (d *dataInstance) listenReplicationLocked(addr string) error {
	_, port, err := net.SplitHostPort(d.opts.AddressMap.Resolve(addr))
	if err != nil {
		return fmt.Errorf("replication server %q: %w", addr, err)
	}
	bind := net.JoinHostPort(d.opts.BoltAddress, port)
	if d.replSrv != nil {
		if d.replSrv.ln.Addr().(*net.TCPAddr).Port == mustAtoi(port) {
			return nil
		}
		// Registered again with another replication port.
		d.replSrv.Close()
		d.replSrv = nil
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return fmt.Errorf("replication server: %w", err)
	}
	d.replSrv = serveRPC(ln, d.handleReplication)
	return nil
}

func (d *dataInstance) persistLocked() error {
	if !d.opts.RestoreReplication {
		return nil
	}
	return writeJSON(filepath.Join(d.opts.DataDirectory, replStateFile), d.st)
}

// setRoleLocked records a role change in the invariant log when it is one.
func (d *dataInstance) setRoleLocked(name, role string, epoch uint64, writable bool) {
	changed := d.st.Name != name || d.st.Role != role || d.st.Epoch != epoch || d.writable != writable
	d.st.Name, d.st.Role, d.st.Epoch, d.writable = name, role, epoch, writable
	d.store.SetEpoch(epoch)
	if changed {
		d.log.Info("Replication role changed", "instance", name, "role", role, "epoch", epoch)
		d.ilog.record(Event{Instance: name, Role: role, Epoch: epoch, Writable: writable && role == RoleMain})
	}
}

func (d *dataInstance) handleManagement(req request) response {
	switch req.Op {
	case "health":
		d.mu.Lock()
		defer d.mu.Unlock()
		epoch := d.st.Epoch
		if d.awaitingMain {
			epoch = 0
		}
		return response{Role: d.st.Role, Writable: d.writable, Committed: d.store.Committed(), Epoch: epoch}
	case "demote":
		return d.demote(req)
	case "promote":
		return d.promote(req)
	case "lag":
		return d.lag()
	}
	return response{Error: "unknown management operation " + req.Op}
}

func (d *dataInstance) demote(req request) response {
	d.mu.Lock()
	defer d.mu.Unlock()
	if req.Epoch < d.st.Epoch {
		return response{Error: fmt.Sprintf("stale epoch %d, instance is at %d", req.Epoch, d.st.Epoch)}
	}
	if err := d.listenReplicationLocked(req.ReplicationServer); err != nil {
		return errResponse(err)
	}
	d.st.ReplicationServer = req.ReplicationServer
	d.st.Replicas = nil
	d.links = map[string]*replicaLink{}
	d.setRoleLocked(req.Name, RoleReplica, req.Epoch, false)
	d.awaitingMain = false
	if err := d.persistLocked(); err != nil {
		return errResponse(err)
	}
	return response{Role: RoleReplica, Committed: d.store.Committed(), Epoch: d.st.Epoch}
}

func (d *dataInstance) promote(req request) response {
	d.mu.Lock()
	defer d.mu.Unlock()
	if req.Epoch < d.st.Epoch {
		return response{Error: fmt.Sprintf("stale epoch %d, instance is at %d", req.Epoch, d.st.Epoch)}
	}
	d.awaitingMain = false
	if d.replSrv != nil {
		d.replSrv.Close()
		d.replSrv = nil
	}
	if d.st.Epoch != req.Epoch {
		d.links = map[string]*replicaLink{}
	}
	d.st.Replicas = req.Replicas
	d.setLinksLocked(req.Replicas)
	d.setRoleLocked(req.Name, RoleMain, req.Epoch, true)
	if err := d.persistLocked(); err != nil {
		return errResponse(err)
	}
	return response{Role: RoleMain, Writable: true, Committed: d.store.Committed(), Epoch: d.st.Epoch}
}

// setLinksLocked keeps the links of replicas still listed and adds new ones.
func (d *dataInstance) setLinksLocked(specs []replicaSpec) {
	links := map[string]*replicaLink{}
	for _, s := range specs {
		if l, ok := d.links[s.Name]; ok && l.spec == s {
			links[s.Name] = l
			continue
		}
		links[s.Name] = &replicaLink{spec: s}
	}
	d.links = links
}

func (d *dataInstance) lag() response {
	d.mu.Lock()
	role, links := d.st.Role, d.sortedLinksLocked()
	d.mu.Unlock()
	if role != RoleMain {
		return response{Error: "replication lag is served by the main instance"}
	}
	committed := d.store.Committed()
	var out []replicaLag
	for _, l := range links {
		l.mu.Lock()
		acked := l.acked
		if !l.synced {
			acked = 0
		}
		l.mu.Unlock()
		out = append(out, replicaLag{Name: l.spec.Name, Committed: acked, Behind: committed - min(acked, committed), Invalid: !l.synced && !l.failedAt.IsZero()})
	}
	return response{Role: role, Committed: committed, Lag: out}
}

func (d *dataInstance) sortedLinksLocked() []*replicaLink {
	out := make([]*replicaLink, 0, len(d.links))
	for _, s := range d.st.Replicas {
		if l, ok := d.links[s.Name]; ok {
			out = append(out, l)
		}
	}
	return out
}

// handleReplication is the replica side of the replication stream.
func (d *dataInstance) handleReplication(req request) response {
	d.mu.Lock()
	if d.st.Role != RoleReplica {
		d.mu.Unlock()
		return response{Error: "instance is not a replica"}
	}
	if d.awaitingMain {
		d.mu.Unlock()
		return response{Error: "replica restarted and follows no main until a coordinator names one"}
	}
	if req.Epoch < d.st.Epoch {
		epoch := d.st.Epoch
		d.mu.Unlock()
		return response{Error: fmt.Sprintf("main epoch %d is older than the replica's %d", req.Epoch, epoch)}
	}
	if req.Epoch > d.st.Epoch {
		d.st.Epoch = req.Epoch
		d.store.SetEpoch(req.Epoch)
		if err := d.persistLocked(); err != nil {
			d.mu.Unlock()
			return errResponse(err)
		}
	}
	d.mu.Unlock()
	switch req.Op {
	case "ping":
		return response{Committed: d.store.Committed()}
	case "append":
		// The stream is JSON: property numbers arrive as json.Number.
		(&graph{Nodes: req.Nodes, Edges: req.Edges}).normalize()
		committed, ok, err := d.store.Append(req.Prev, req.Nodes, req.Edges)
		if err != nil {
			return errResponse(err)
		}
		return response{Committed: committed, Snapshot: !ok}
	case "auth":
		if req.Auth == nil {
			return response{Error: "auth replication without users"}
		}
		if err := d.auth.Replace(*req.Auth); err != nil {
			return errResponse(err)
		}
		return response{Committed: req.Auth.Version}
	case "snapshot":
		if req.Graph == nil {
			return response{Error: "snapshot without a graph"}
		}
		req.Graph.normalize()
		if err := d.store.Replace(*req.Graph); err != nil {
			return errResponse(err)
		}
		return response{Committed: req.Graph.Committed}
	}
	return response{Error: "unknown replication operation " + req.Op}
}

// pauseReplicationTo replaces the set of replicas (by registered name) this instance, as
// MAIN, sends nothing to: no transaction, snapshot or users, not even the STRICT_SYNC
// reachability check, so SYNC writes are answered as if the replica were unreachable and
// the replica stays behind until the pause ends. Tests call it to change the knob at run
// time; a process takes it from MEMGRAPH_SIM_PAUSE_REPLICATION_TO at start.
func (d *dataInstance) pauseReplicationTo(names ...string) {
	d.pauseMu.Lock()
	defer d.pauseMu.Unlock()
	d.paused = map[string]bool{}
	for _, n := range names {
		d.paused[n] = true
	}
}

// callReplica sends one replication request to a replica, unless replication to it is
// paused.
func (d *dataInstance) callReplica(spec replicaSpec, req request) (response, error) {
	d.pauseMu.Lock()
	paused := d.paused[spec.Name]
	d.pauseMu.Unlock()
	if paused {
		return response{}, errReplicationPaused
	}
	return d.opts.call(context.Background(), spec.ReplicationServer, req, d.opts.ReplicationTimeout)
}

// send brings one replica up to date with the MAIN: the new transaction when the replica
// holds everything before it, else a snapshot.
func (d *dataInstance) send(l *replicaLink, epoch, prev uint64, nodes []StoredNode, edges []StoredEdge) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.synced && nodes != nil {
		resp, err := d.callReplica(l.spec, request{Op: "append", Epoch: epoch, Prev: prev, Nodes: nodes, Edges: edges})
		if err != nil {
			l.synced, l.failedAt = false, time.Now()
			return err
		}
		if !resp.Snapshot {
			l.acked = resp.Committed
			return nil
		}
	}
	g := d.store.Snapshot()
	resp, err := d.callReplica(l.spec, request{Op: "snapshot", Epoch: epoch, Graph: &g})
	if err != nil {
		l.synced, l.failedAt = false, time.Now()
		return err
	}
	l.acked, l.synced = resp.Committed, true
	return nil
}

// catchUpLoop resends to replicas a SYNC write left behind (down, refused, slow), as
// Memgraph's MAIN recovers a replica in the background.
func (d *dataInstance) catchUpLoop() {
	defer d.wg.Done()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.mu.Lock()
		epoch, links := d.st.Epoch, d.sortedLinksLocked()
		active := d.st.Role == RoleMain && d.writable
		d.mu.Unlock()
		if !active {
			continue
		}
		committed := d.store.Committed()
		d.replicateAuth(epoch, links)
		for _, l := range links {
			l.mu.Lock()
			behind := !l.synced || l.acked != committed
			check := !behind && time.Since(l.checkedAt) >= time.Second
			l.mu.Unlock()
			switch {
			case behind:
				if err := d.send(l, epoch, 0, nil, nil); err != nil {
					d.log.Debug("Replica catch-up failed", "replica", l.spec.Name, "error", err)
				}
			case check:
				d.check(l, epoch)
			}
		}
	}
}

// check pings a replica that has nothing to catch up; one that does not answer is no
// longer counted in sync, and the catch-up loop sends it a snapshot once it answers.
func (d *dataInstance) check(l *replicaLink, epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkedAt = time.Now()
	if _, err := d.callReplica(l.spec, request{Op: "ping", Epoch: epoch}); err != nil {
		l.synced, l.failedAt = false, time.Now()
		d.log.Debug("Replica check failed", "replica", l.spec.Name, "error", err)
	}
}

// commit writes one transaction on the MAIN and replicates it: SYNC and STRICT_SYNC
// replicas before returning, ASYNC ones in the background. A SYNC replica that does not
// confirm leaves the transaction committed on the MAIN and the client told so (Memgraph's
// replication exception); the replica is caught up in the background. A STRICT_SYNC
// replica that cannot be reached refuses the transaction before it commits anywhere (a
// reachability check stands in for Memgraph's two-phase commit).
func (d *dataInstance) commit(w Write) ([]StoredNode, error) {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	d.mu.Lock()
	role, writable, epoch, links := d.st.Role, d.writable, d.st.Epoch, d.sortedLinksLocked()
	d.mu.Unlock()
	switch {
	case role == RoleReplica:
		return nil, failure(ErrWriteOnReplica)
	case !writable:
		return nil, failure(ErrWriteOnReadOnlyMain)
	}
	for _, l := range links {
		if l.spec.Mode != "strict_sync" {
			continue
		}
		if _, err := d.callReplica(l.spec, request{Op: "ping", Epoch: epoch}); err != nil {
			return nil, failure(ErrStrictSyncReplica)
		}
	}
	created, edges, committed, err := d.store.CommitWrite(w)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	var unconfirmed atomic.Bool
	for _, l := range links {
		l.mu.Lock()
		recovering := !l.synced && time.Since(l.failedAt) < time.Second
		l.mu.Unlock()
		if l.spec.Mode == "async" {
			go func() { _ = d.send(l, epoch, committed-1, created, edges) }()
			continue
		}
		if recovering {
			unconfirmed.Store(true)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.send(l, epoch, committed-1, created, edges); err != nil {
				unconfirmed.Store(true)
				d.log.Warn("Replica did not confirm a SYNC transaction", "replica", l.spec.Name, "error", err)
			}
		}()
	}
	wg.Wait()
	if unconfirmed.Load() {
		return created, failure(ErrSyncReplica)
	}
	return created, nil
}

// ErrSnapshotRunning is Memgraph's answer to a CREATE SNAPSHOT while another runs.
const ErrSnapshotRunning = "Another snapshot creation is already in progress"

// createSnapshot writes the graph as of the last commit to a new snapshot file. Like
// Memgraph's, the snapshot is of the moment it starts (taken between two commits: it
// holds the write lock that long) and commits go on while the file is written
// (SnapshotDelay stands in for the time a large graph takes); they go to the WAL file
// started with it, so the snapshot and the WAL after it hold every commit.
func (d *dataInstance) createSnapshot() (SnapshotFile, error) {
	if !d.snapshotRunning.CompareAndSwap(false, true) {
		return SnapshotFile{}, errors.New(ErrSnapshotRunning) //nolint:staticcheck // Memgraph's own wording, capital and all
	}
	defer d.snapshotRunning.Store(false)
	d.writeMu.Lock()
	g, epoch, err := d.store.snapshotForDurability()
	d.writeMu.Unlock()
	if err != nil {
		return SnapshotFile{}, err
	}
	at := time.Now()
	if d.opts.SnapshotDelay > 0 {
		select {
		case <-time.After(d.opts.SnapshotDelay):
		case <-d.stop:
			return SnapshotFile{}, errors.New("the instance is shutting down")
		}
	}
	d.mu.Lock()
	locked := d.dirLocked
	d.mu.Unlock()
	return writeSnapshot(d.opts.DataDirectory, epoch, g, at, d.opts.SnapshotRetention, locked)
}

// role returns the current role for queries.
func (d *dataInstance) role() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.st.Role
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
