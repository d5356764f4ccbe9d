package memgraphsim

import (
	"context"
	"fmt"
	"strconv"

	"github.com/opsuite/suite/tools/internal/bolt"
)

// failure is a query error with Memgraph's generic code.
func failure(format string, args ...any) *bolt.Failure {
	return &bolt.Failure{Code: bolt.CodeMemgraphError, Message: fmt.Sprintf(format, args...)}
}

// dataConn serves one Bolt connection of a data instance.
type dataConn struct {
	d *dataInstance
	// user is who logged in ("" while the instance has no users).
	user    string
	inTx    bool
	pending Write
}

var _ bolt.Conn = (*dataConn)(nil)

// Authenticate checks the login against the instance's users (any login while it has none).
func (c *dataConn) Authenticate(_ string, a bolt.Auth) error {
	user, err := c.d.auth.Authenticate(a)
	c.user = user
	return err
}

func (c *dataConn) Run(_ context.Context, q bolt.Query) (*bolt.Result, error) {
	if aq, ok, err := ParseAuthQuery(q.Text); ok {
		switch {
		case err != nil:
			return nil, failure("%s", err.Error())
		case q.InTx:
			return nil, failure(ErrAuthInTx)
		}
		rows, err := c.d.runAuth(aq, c.user)
		if err != nil {
			return nil, err
		}
		if aq.Verb == "SHOW USERS" {
			return &bolt.Result{Fields: []string{"user"}, Records: rows, Type: "r"}, nil
		}
		return &bolt.Result{Type: "s"}, nil
	}
	cmd, err := ParseQuery(q.Text, q.Params)
	if err != nil {
		return nil, failure("%s", err.Error())
	}
	if cmd.IsCoordinatorQuery() {
		return nil, failure("Only coordinator can run %s.", cmd.Verb())
	}
	switch cmd.Kind {
	case KindShowReplicationRole:
		if q.InTx {
			return nil, failure(ErrReplicationInTx)
		}
		return &bolt.Result{Fields: []string{"replication role"}, Records: [][]any{{c.d.role()}}, Type: "s"}, nil
	case KindShowReplicas:
		if q.InTx {
			return nil, failure(ErrReplicationInTx)
		}
		return c.showReplicas()
	case KindShowStorageInfo:
		if q.InTx {
			return nil, failure(ErrInfoInTx)
		}
		vertices, edges, committed := c.d.store.Stats()
		rows := [][]any{
			{"name", "memgraph"}, {"vertex_count", vertices}, {"edge_count", edges},
			{"average_degree", 0.0}, {"storage_mode", "IN_MEMORY_TRANSACTIONAL"},
			{"isolation_level", "SNAPSHOT_ISOLATION"}, {"durability", "sim"},
			{"committed_transactions", int64(committed)},
		}
		return &bolt.Result{Fields: []string{"storage info", "value"}, Records: rows, Type: "s"}, nil
	case KindCreate:
		return c.create(cmd, q.InTx)
	case KindCount:
		n := c.d.store.Count(cmd.Label, c.pending.Nodes)
		return &bolt.Result{Fields: []string{cmd.Column}, Records: [][]any{{n}}, Type: "r"}, nil
	case KindCountEdges:
		n := c.d.store.CountEdges(cmd.Label, c.pending.Edges)
		return &bolt.Result{Fields: []string{cmd.Column}, Records: [][]any{{n}}, Type: "r"}, nil
	case KindCreateSnapshot, KindShowSnapshots, KindLockDataDirectory, KindUnlockDataDirectory, KindDataDirectoryLockStatus:
		if q.InTx {
			return nil, failure("%s is not allowed in multicommand transactions.", cmd.Verb())
		}
		return c.durability(cmd)
	case KindShowVersion:
		return &bolt.Result{Fields: []string{"version"}, Records: [][]any{{Version}}, Type: "r"}, nil
	case KindMatchReturn:
		var rows [][]any
		for _, n := range c.d.store.Match(cmd.Label) {
			rows = append(rows, []any{bolt.Node{ID: n.ID, ElementID: strconv.FormatInt(n.ID, 10), Labels: n.Labels, Props: n.Props}})
		}
		return &bolt.Result{Fields: []string{cmd.Column}, Records: rows, Type: "r"}, nil
	case KindReturnLiteral:
		return &bolt.Result{Fields: []string{cmd.Column}, Records: [][]any{{cmd.Value}}, Type: "r"}, nil
	}
	return nil, failure("unsupported query")
}

func (c *dataConn) create(cmd Command, inTx bool) (*bolt.Result, error) {
	stats := createStats(cmd.Nodes, cmd.Edges)
	if c.d.role() == RoleReplica {
		return nil, failure(ErrWriteOnReplica)
	}
	if inTx {
		base := len(c.pending.Nodes)
		c.pending.Nodes = append(c.pending.Nodes, cmd.Nodes...)
		for _, e := range cmd.Edges {
			e.From, e.To = e.From+base, e.To+base
			c.pending.Edges = append(c.pending.Edges, e)
		}
		return &bolt.Result{Type: "w", Stats: stats}, nil
	}
	if _, err := c.d.commit(Write{Nodes: cmd.Nodes, Edges: cmd.Edges}); err != nil {
		return nil, err
	}
	return &bolt.Result{Type: "w", Stats: stats}, nil
}

// durability serves CREATE SNAPSHOT, SHOW SNAPSHOTS and the data directory lock.
func (c *dataConn) durability(cmd Command) (*bolt.Result, error) {
	d := c.d
	switch cmd.Kind {
	case KindCreateSnapshot:
		f, err := d.createSnapshot()
		if err != nil {
			return nil, failure("Failed to create snapshot: %s", err.Error())
		}
		d.log.Info("Snapshot created", "path", f.Path, "timestamp", f.Committed)
		return &bolt.Result{Fields: []string{"path"}, Records: [][]any{{f.Path}}, Type: "s"}, nil
	case KindShowSnapshots:
		rows, err := snapshotRows(d.opts.DataDirectory)
		if err != nil {
			return nil, failure("%s", err.Error())
		}
		return &bolt.Result{Fields: []string{"path", "timestamp", "creation_time", "size"}, Records: rows, Type: "r"}, nil
	case KindLockDataDirectory, KindUnlockDataDirectory:
		d.mu.Lock()
		d.dirLocked = cmd.Kind == KindLockDataDirectory
		d.mu.Unlock()
		return &bolt.Result{Type: "s"}, nil
	}
	d.mu.Lock()
	locked := d.dirLocked
	d.mu.Unlock()
	status := "unlocked"
	if locked {
		status = "locked"
	}
	return &bolt.Result{Fields: []string{"lock_status"}, Records: [][]any{{status}}, Type: "r"}, nil
}

func createStats(nodes []NodePattern, edges []EdgePattern) map[string]any {
	var labels, props int64
	for _, n := range nodes {
		labels += int64(len(n.Labels))
		props += int64(len(n.Props))
	}
	for _, e := range edges {
		props += int64(len(e.Props))
	}
	stats := map[string]any{"nodes-created": int64(len(nodes)), "labels-added": labels, "properties-set": props}
	if len(edges) > 0 {
		stats["relationships-created"] = int64(len(edges))
	}
	return stats
}

func (c *dataConn) showReplicas() (*bolt.Result, error) {
	resp := c.d.lag()
	if resp.Error != "" {
		return nil, failure(ErrReplicaShowReplicas)
	}
	c.d.mu.Lock()
	specs := append([]replicaSpec(nil), c.d.st.Replicas...)
	c.d.mu.Unlock()
	behind := map[string]replicaLag{}
	for _, l := range resp.Lag {
		behind[l.Name] = l
	}
	var rows [][]any
	for _, s := range specs {
		l := behind[s.Name]
		status := "ready"
		switch {
		case l.Invalid:
			status = "invalid"
		case l.Behind > 0:
			status = "recovery"
		}
		rows = append(rows, []any{s.Name, s.ReplicationServer, s.Mode, nil,
			map[string]any{"memgraph": map[string]any{"ts": int64(l.Committed), "behind": int64(l.Behind), "status": status}}})
	}
	return &bolt.Result{Fields: []string{"name", "socket_address", "sync_mode", "system_info", "data_info"}, Records: rows, Type: "s"}, nil
}

func (c *dataConn) Begin(string, string) error {
	c.inTx, c.pending = true, Write{}
	return nil
}

func (c *dataConn) Commit() (string, error) {
	pending := c.pending
	c.inTx, c.pending = false, Write{}
	if len(pending.Nodes) == 0 {
		return "", nil
	}
	if _, err := c.d.commit(pending); err != nil {
		return "", err
	}
	return strconv.FormatUint(c.d.store.Committed(), 10), nil
}

func (c *dataConn) Rollback() error {
	c.inTx, c.pending = false, Write{}
	return nil
}

func (c *dataConn) Route(string) (*bolt.RoutingTable, error) {
	return nil, failure(ErrRouteOnDataInstance)
}

func (c *dataConn) Close() {}
