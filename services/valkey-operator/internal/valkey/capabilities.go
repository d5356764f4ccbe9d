package valkey

import (
	"context"
	"fmt"
	"strings"
)

// Capabilities are the optional cluster commands a member offers, as the member itself
// says (INFO server, COMMAND INFO, COMMAND DOCS), never inferred from an image tag or a
// version number: Redis 7.0 has none of them; Valkey 8.0 adds CLUSTER MYSHARDID and
// SETSLOT's TIMEOUT, Valkey 9.0 CLUSTER MIGRATESLOTS.
type Capabilities struct {
	Server         string // "redis" or "valkey"
	Version        string
	MyShardID      bool // CLUSTER MYSHARDID
	SetSlotTimeout bool // CLUSTER SETSLOT ... TIMEOUT (Valkey 8.0+; COMMAND DOCS lists the argument)
	MigrateSlots   bool // CLUSTER MIGRATESLOTS (atomic slot migration)
}

// Capabilities asks the server rather than trusting a version number where it can:
// COMMAND INFO answers nil for a subcommand the server lacks.
func (c *conn) Capabilities(ctx context.Context) (Capabilities, error) {
	s, err := c.text(ctx, "INFO", "server")
	if err != nil {
		return Capabilities{}, err
	}
	info := ParseInfo(s)
	caps := Capabilities{Server: "redis", Version: info["redis_version"]}
	if v, ok := info["valkey_version"]; ok {
		caps.Server, caps.Version = "valkey", v
	}
	arr, err := c.do(ctx, "COMMAND", "INFO", "cluster|myshardid", "cluster|migrateslots").ToArray()
	if err != nil {
		return Capabilities{}, fmt.Errorf("COMMAND INFO on %s: %w", c.addr, err)
	}
	present := func(i int) bool { return i < len(arr) && !arr[i].IsNil() }
	caps.MyShardID, caps.MigrateSlots = present(0), present(1)
	// SETSLOT's TIMEOUT is an argument, not a subcommand: COMMAND DOCS lists it.
	if caps.SetSlotTimeout, err = c.hasArgument(ctx, "cluster|setslot", "timeout"); err != nil {
		return Capabilities{}, err
	}
	return caps, nil
}

// hasArgument reports whether COMMAND DOCS of command (lower case, "container|sub") lists
// a top-level argument named arg. A command the server does not know has no arguments.
func (c *conn) hasArgument(ctx context.Context, command, arg string) (bool, error) {
	docs, err := c.do(ctx, "COMMAND", "DOCS", command).AsMap()
	if err != nil {
		return false, fmt.Errorf("COMMAND DOCS %s on %s: %w", command, c.addr, err)
	}
	doc, ok := docs[command]
	if !ok {
		return false, nil
	}
	fields, err := doc.AsMap()
	if err != nil {
		return false, fmt.Errorf("COMMAND DOCS %s on %s: %w", command, c.addr, err)
	}
	args, ok := fields["arguments"]
	if !ok {
		return false, nil
	}
	list, err := args.ToArray()
	if err != nil {
		return false, fmt.Errorf("COMMAND DOCS %s arguments on %s: %w", command, c.addr, err)
	}
	for _, a := range list {
		m, err := a.AsMap()
		if err != nil {
			return false, fmt.Errorf("COMMAND DOCS %s argument on %s: %w", command, c.addr, err)
		}
		name := m["name"]
		if v, _ := name.ToString(); strings.EqualFold(v, arg) {
			return true, nil
		}
	}
	return false, nil
}
