package memgraphsim

import (
	"context"

	"github.com/opsuite/suite/tools/internal/bolt"
)

// coordConn serves one Bolt connection of a coordinator.
type coordConn struct {
	c *coordinator
}

var _ bolt.Conn = (*coordConn)(nil)

// Authenticate accepts every login: coordinators store no users, and basic auth is a
// passthrough with full access (Memgraph before 3.13, and 3.13+ without SSO).
func (cc *coordConn) Authenticate(string, bolt.Auth) error { return nil }

func (cc *coordConn) Run(_ context.Context, q bolt.Query) (*bolt.Result, error) {
	if _, ok, _ := ParseAuthQuery(q.Text); ok {
		return nil, failure(ErrCoordinatorOnly)
	}
	cmd, err := ParseQuery(q.Text, q.Params)
	if err != nil {
		return nil, failure("%s", err.Error())
	}
	if !cmd.IsCoordinatorQuery() {
		if cmd.Kind == KindShowStorageInfo {
			return nil, failure(ErrNoStorage)
		}
		return nil, failure(ErrCoordinatorOnly)
	}
	if q.InTx {
		return nil, failure(ErrCoordinatorInTx)
	}
	rows, err := cc.c.exec(cmd, q.Text)
	if err != nil {
		return nil, err
	}
	switch cmd.Kind {
	case KindShowInstances:
		return &bolt.Result{Fields: showInstancesFields, Records: rows, Type: "r"}, nil
	case KindShowInstance:
		return &bolt.Result{Fields: []string{"name", "bolt_server", "coordinator_server", "management_server", "role"}, Records: rows, Type: "r"}, nil
	case KindShowReplicationLag:
		return &bolt.Result{Fields: []string{"instance_name", "data_info"}, Records: rows, Type: "r"}, nil
	case KindShowCoordinatorSettings:
		return &bolt.Result{Fields: []string{"setting_name", "setting_value"}, Records: rows, Type: "r"}, nil
	}
	return &bolt.Result{Type: "s"}, nil
}

func (cc *coordConn) Begin(string, string) error { return nil }
func (cc *coordConn) Commit() (string, error)    { return "", nil }
func (cc *coordConn) Rollback() error            { return nil }

func (cc *coordConn) Route(db string) (*bolt.RoutingTable, error) {
	routers, writers, readers := cc.c.routingTable()
	return &bolt.RoutingTable{TTL: 300, DB: db, Routers: routers, Writers: writers, Readers: readers}, nil
}

func (cc *coordConn) Close() {}
