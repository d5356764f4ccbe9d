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
	pending []NodePattern
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
		vertices, committed := c.d.store.Stats()
		rows := [][]any{
			{"name", "memgraph"}, {"vertex_count", vertices}, {"edge_count", int64(0)},
			{"average_degree", 0.0}, {"storage_mode", "IN_MEMORY_TRANSACTIONAL"},
			{"isolation_level", "SNAPSHOT_ISOLATION"}, {"durability", "sim"},
			{"committed_transactions", int64(committed)},
		}
		return &bolt.Result{Fields: []string{"storage info", "value"}, Records: rows, Type: "s"}, nil
	case KindCreate:
		return c.create(cmd, q.InTx)
	case KindCount:
		n := c.d.store.Count(cmd.Label, c.pending)
		return &bolt.Result{Fields: []string{cmd.Column}, Records: [][]any{{n}}, Type: "r"}, nil
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
	stats := createStats(cmd.Nodes)
	if c.d.role() == RoleReplica {
		return nil, failure(ErrWriteOnReplica)
	}
	if inTx {
		c.pending = append(c.pending, cmd.Nodes...)
		return &bolt.Result{Type: "w", Stats: stats}, nil
	}
	if _, err := c.d.commit(cmd.Nodes); err != nil {
		return nil, err
	}
	return &bolt.Result{Type: "w", Stats: stats}, nil
}

func createStats(nodes []NodePattern) map[string]any {
	var labels, props int64
	for _, n := range nodes {
		labels += int64(len(n.Labels))
		props += int64(len(n.Props))
	}
	return map[string]any{"nodes-created": int64(len(nodes)), "labels-added": labels, "properties-set": props}
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
		if l.Behind > 0 {
			status = "recovery"
		}
		rows = append(rows, []any{s.Name, s.ReplicationServer, s.Mode, nil,
			map[string]any{"memgraph": map[string]any{"ts": int64(l.Committed), "behind": int64(l.Behind), "status": status}}})
	}
	return &bolt.Result{Fields: []string{"name", "socket_address", "sync_mode", "system_info", "data_info"}, Records: rows, Type: "s"}, nil
}

func (c *dataConn) Begin(string, string) error {
	c.inTx, c.pending = true, nil
	return nil
}

func (c *dataConn) Commit() (string, error) {
	pending := c.pending
	c.inTx, c.pending = false, nil
	if len(pending) == 0 {
		return "", nil
	}
	if _, err := c.d.commit(pending); err != nil {
		return "", err
	}
	return strconv.FormatUint(c.d.store.Committed(), 10), nil
}

func (c *dataConn) Rollback() error {
	c.inTx, c.pending = false, nil
	return nil
}

func (c *dataConn) Route(string) (*bolt.RoutingTable, error) {
	return nil, failure(ErrRouteOnDataInstance)
}

func (c *dataConn) Close() {}
