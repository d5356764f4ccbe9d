package memgraphsim

import (
	"context"
	"testing"
	"time"

	"github.com/opsuite/suite/tools/internal/bolt/boltclient"
)

// boltClient adapts the repository's raw Bolt client (tools/internal/bolt/boltclient) to
// the process tests: the wire as a driver speaks it, so the binary's flags, listeners and
// Bolt server are exercised together. (The repository's only real driver, neo4j-go-driver,
// belongs to the operator's internal/memgraph package, whose tests run it against this
// simulator.)
type boltClient struct {
	t *testing.T
	c *boltclient.Client
}

func dialBolt(t *testing.T, addr, user, password string) (*boltClient, error) {
	t.Helper()
	c, err := boltclient.Dial(context.Background(), addr, boltclient.Options{Username: user, Password: password, Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return &boltClient{t: t, c: c}, nil
}

// run runs one autocommit query (or one inside begin's transaction) and returns the field
// names and the records; a FAILURE is returned as a *bolt.Failure.
func (c *boltClient) run(query string) ([]string, [][]any, error) {
	c.t.Helper()
	res, err := c.c.Run(c.t.Context(), query, nil)
	if err != nil {
		return nil, nil, err
	}
	return res.Fields, res.Records, nil
}

// begin opens an explicit transaction.
func (c *boltClient) begin() error { return c.c.Begin(c.t.Context()) }

// route sends ROUTE and returns the routing table's servers by role.
func (c *boltClient) route() (map[string][]string, error) {
	c.t.Helper()
	rt, err := c.c.Route(c.t.Context())
	if err != nil {
		return nil, err
	}
	return map[string][]string{"ROUTE": rt.Routers, "WRITE": rt.Writers, "READ": rt.Readers}, nil
}
