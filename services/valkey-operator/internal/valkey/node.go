package valkey

import (
	"context"
	"fmt"
	"strings"
)

// NodeAdmin is what the ValkeyNode controller sends to its own member: who it is, and the
// live config and ACL users it applies. CONFIG SET and ACL SETUSER act on one server only.
type NodeAdmin interface {
	Addr() string
	// ReplicationRole is INFO replication's role: "master" or "slave".
	ReplicationRole(ctx context.Context) (string, error)
	// MyID is CLUSTER MYID.
	MyID(ctx context.Context) (string, error)
	// ClusterNodes is the member's CLUSTER NODES.
	ClusterNodes(ctx context.Context) (View, error)
	// ConfigSet sets every pair with one CONFIG SET, which the server applies all or
	// nothing.
	ConfigSet(ctx context.Context, pairs [][2]string) error
	// ConfigGet is CONFIG GET of one parameter; ok is false when the server has none of
	// that name.
	ConfigGet(ctx context.Context, key string) (value string, ok bool, err error)
	// ACLSetUser is ACL SETUSER name rules...; the rules are sent as separate arguments.
	ACLSetUser(ctx context.Context, name string, rules []string) error
	// ACLUsers is ACL USERS.
	ACLUsers(ctx context.Context) ([]string, error)
	// ACLDelUser is ACL DELUSER names...
	ACLDelUser(ctx context.Context, names ...string) error
	Close()
}

var _ NodeAdmin = (*conn)(nil)

// DialNodeAdmin opens an admin connection to the single member at addr, as Dial does.
func DialNodeAdmin(addr string, o Options) (NodeAdmin, error) {
	c, err := Dial(addr, o)
	if err != nil {
		return nil, err
	}
	a, ok := c.(NodeAdmin)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("connection to %s offers no node admin commands", addr)
	}
	return a, nil
}

func (c *conn) ReplicationRole(ctx context.Context) (string, error) {
	s, err := c.text(ctx, "INFO", "replication")
	if err != nil {
		return "", err
	}
	role, ok := ParseInfo(s)["role"]
	if !ok {
		return "", fmt.Errorf("INFO replication on %s has no role", c.addr)
	}
	return role, nil
}

func (c *conn) MyID(ctx context.Context) (string, error) {
	return c.text(ctx, "CLUSTER", "MYID")
}

func (c *conn) ConfigSet(ctx context.Context, pairs [][2]string) error {
	if len(pairs) == 0 {
		return nil
	}
	args := []string{"CONFIG", "SET"}
	for _, p := range pairs {
		args = append(args, p[0], p[1])
	}
	// The server's own message, unwrapped: it names the refused argument, and it is what
	// the LiveConfigApplied condition shows.
	return c.do(ctx, args...).Error()
}

func (c *conn) ConfigGet(ctx context.Context, key string) (string, bool, error) {
	m, err := c.do(ctx, "CONFIG", "GET", key).AsStrMap()
	if err != nil {
		return "", false, fmt.Errorf("CONFIG GET %s on %s: %w", key, c.addr, err)
	}
	v, ok := m[key]
	return v, ok, nil
}

func (c *conn) ACLSetUser(ctx context.Context, name string, rules []string) error {
	args := append([]string{"ACL", "SETUSER", name}, rules...)
	if err := c.do(ctx, args...).Error(); err != nil {
		return fmt.Errorf("ACL SETUSER %s: %w", name, err)
	}
	return nil
}

func (c *conn) ACLUsers(ctx context.Context) ([]string, error) {
	users, err := c.do(ctx, "ACL", "USERS").AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("ACL USERS on %s: %w", c.addr, err)
	}
	return users, nil
}

func (c *conn) ACLDelUser(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	if err := c.do(ctx, append([]string{"ACL", "DELUSER"}, names...)...).Error(); err != nil {
		return fmt.Errorf("ACL DELUSER %s: %w", strings.Join(names, " "), err)
	}
	return nil
}
