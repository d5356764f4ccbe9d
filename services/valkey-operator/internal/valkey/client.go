package valkey

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
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

// FailoverMode picks CLUSTER FAILOVER's flavour.
type FailoverMode string

// Failover modes.
const (
	FailoverDefault  FailoverMode = ""
	FailoverForce    FailoverMode = "FORCE"
	FailoverTakeover FailoverMode = "TAKEOVER"
)

// Conn is one member's admin connection: the narrow set of commands the operator sends.
type Conn interface {
	Addr() string
	ClusterNodes(ctx context.Context) (View, error)
	ClusterInfo(ctx context.Context) (map[string]string, error)
	ClusterShards(ctx context.Context) ([]Shard, error)
	Capabilities(ctx context.Context) (Capabilities, error)
	Meet(ctx context.Context, addr string, busPort int) error
	AddSlotsRange(ctx context.Context, ranges ...SlotRange) error
	Replicate(ctx context.Context, primaryID string) error
	SetSlotImporting(ctx context.Context, slot int, fromID string) error
	SetSlotMigrating(ctx context.Context, slot int, toID string) error
	SetSlotNode(ctx context.Context, slot int, ownerID string) error
	SetSlotStable(ctx context.Context, slot int) error
	// MigrateSlotKeys moves up to batch keys of slot to addr with one MIGRATE and returns
	// how many it moved; 0 means the slot is empty here.
	MigrateSlotKeys(ctx context.Context, slot int, addr string, batch int) (int, error)
	// MigrateSlotsKeys empties every slot of slots here into addr, pipelining one
	// GETKEYSINSLOT and one MIGRATE (of up to batch keys) per slot and round; it returns
	// how many keys it moved.
	MigrateSlotsKeys(ctx context.Context, slots []int, addr string, batch int) (int, error)
	// SetSlots pipelines CLUSTER SETSLOT commands, SetSlotChunk per round trip (each
	// stands alone; no chunk is sent after one with a refusal), and returns how many of
	// them, from the start, succeeded.
	SetSlots(ctx context.Context, cmds ...SetSlot) (int, error)
	Forget(ctx context.Context, id string) error
	// SetConfigEpoch is CLUSTER SET-CONFIG-EPOCH: only a node that knows no peer and has
	// config epoch 0 accepts it.
	SetConfigEpoch(ctx context.Context, epoch uint64) error
	// BumpEpoch is CLUSTER BUMPEPOCH; it reports whether the node's config epoch changed
	// (BUMPED) or was already the greatest it knows of (STILL).
	BumpEpoch(ctx context.Context) (bool, error)
	Failover(ctx context.Context, mode FailoverMode) error
	// ReplicationState is INFO replication: the role and offsets failover decisions need.
	ReplicationState(ctx context.Context) (ReplicationState, error)
	// Reset is CLUSTER RESET SOFT: a replica becomes an empty primary knowing no peers.
	Reset(ctx context.Context) error
	Close()
}

// SlotState is the subcommand of CLUSTER SETSLOT.
type SlotState string

// Slot states.
const (
	SlotImporting SlotState = "IMPORTING"
	SlotMigrating SlotState = "MIGRATING"
	SlotNode      SlotState = "NODE"
	SlotStable    SlotState = "STABLE"
)

// SetSlot is one CLUSTER SETSLOT Slot State [NodeID].
type SetSlot struct {
	Slot   int
	State  SlotState
	NodeID string // empty for STABLE
}

// Shard is one entry of CLUSTER SHARDS.
type Shard struct {
	Slots []SlotRange
	Nodes []ShardNode
}

// ShardNode is a member as CLUSTER SHARDS describes it.
type ShardNode struct {
	ID                string
	IP                string
	Port              int
	Role              string // master or replica
	Health            string // online, failed, loading
	ReplicationOffset int64
}

// Options are what Dial needs beyond the address.
type Options struct {
	Username, Password string
	DialTimeout        time.Duration
	// TLS, when set, makes every connection (admin and data) a TLS one.
	TLS *tls.Config
}

type conn struct {
	addr string
	c    valkeygo.Client
	// user and pass are repeated in MIGRATE: the target authenticates the source's
	// connection itself, and the default user may be off.
	user, pass string
}

// Buffer sizes of an admin connection.
const (
	adminBuffer    = 64 << 10
	adminRingScale = 8
)

// Dial opens an admin connection to the single member at addr; it never follows the
// cluster topology, so every command lands on exactly that member.
func Dial(addr string, o Options) (Conn, error) {
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	c, err := valkeygo.NewClient(valkeygo.ClientOption{
		InitAddress:       []string{addr},
		ForceSingleClient: true,
		DisableCache:      true,
		DisableRetry:      true,
		Username:          o.Username,
		Password:          o.Password,
		Dialer:            net.Dialer{Timeout: o.DialTimeout},
		TLSConfig:         o.TLS,
		// Admin traffic is small replies and short pipelines; the defaults (0.5 MiB read
		// and write buffers, a 1024-slot ring) cost 1.4 MiB per member, 85 % of the
		// operator's heap at 20 clusters.
		ReadBufferEachConn:  adminBuffer,
		WriteBufferEachConn: adminBuffer,
		RingScaleEachConn:   adminRingScale,
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	return &conn{addr: addr, c: c, user: o.Username, pass: o.Password}, nil
}

func (c *conn) Addr() string { return c.addr }
func (c *conn) Close()       { c.c.Close() }

func (c *conn) do(ctx context.Context, args ...string) valkeygo.ValkeyResult {
	return c.c.Do(ctx, c.c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
}

func (c *conn) ok(ctx context.Context, args ...string) error {
	if err := c.do(ctx, args...).Error(); err != nil {
		return fmt.Errorf("%s on %s: %w", strings.Join(args[:min(len(args), 2)], " "), c.addr, err)
	}
	return nil
}

func (c *conn) text(ctx context.Context, args ...string) (string, error) {
	s, err := c.do(ctx, args...).ToString()
	if err != nil {
		return "", fmt.Errorf("%s on %s: %w", strings.Join(args, " "), c.addr, err)
	}
	return StripVerbatim(s), nil
}

func (c *conn) ClusterNodes(ctx context.Context) (View, error) {
	s, err := c.text(ctx, "CLUSTER", "NODES")
	if err != nil {
		return View{}, err
	}
	return ParseNodes(c.addr, s)
}

func (c *conn) ClusterInfo(ctx context.Context) (map[string]string, error) {
	s, err := c.text(ctx, "CLUSTER", "INFO")
	if err != nil {
		return nil, err
	}
	return ParseInfo(s), nil
}

func (c *conn) ClusterShards(ctx context.Context) ([]Shard, error) {
	arr, err := c.do(ctx, "CLUSTER", "SHARDS").ToArray()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SHARDS on %s: %w", c.addr, err)
	}
	out := make([]Shard, 0, len(arr))
	for _, e := range arr {
		m, err := e.AsMap()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER SHARDS on %s: %w", c.addr, err)
		}
		var sh Shard
		if slots, ok := m["slots"]; ok {
			ints, err := slots.AsIntSlice()
			if err != nil {
				return nil, fmt.Errorf("CLUSTER SHARDS slots on %s: %w", c.addr, err)
			}
			for i := 0; i+1 < len(ints); i += 2 {
				sh.Slots = append(sh.Slots, SlotRange{Start: int(ints[i]), End: int(ints[i+1])})
			}
		}
		if nodes, ok := m["nodes"]; ok {
			list, err := nodes.ToArray()
			if err != nil {
				return nil, fmt.Errorf("CLUSTER SHARDS nodes on %s: %w", c.addr, err)
			}
			for _, ne := range list {
				nm, err := ne.AsMap()
				if err != nil {
					return nil, fmt.Errorf("CLUSTER SHARDS node on %s: %w", c.addr, err)
				}
				str := func(k string) string {
					m := nm[k]
					v, _ := m.ToString()
					return v
				}
				num := func(k string) int64 {
					m := nm[k]
					v, _ := m.AsInt64()
					return v
				}
				sn := ShardNode{ID: str("id"), IP: str("ip"), Port: int(num("port")), Role: str("role"),
					Health: str("health"), ReplicationOffset: num("replication-offset")}
				sh.Nodes = append(sh.Nodes, sn)
			}
		}
		out = append(out, sh)
	}
	return out, nil
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

func (c *conn) Meet(ctx context.Context, addr string, busPort int) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("meet address %q: %w", addr, err)
	}
	args := []string{"CLUSTER", "MEET", host, port}
	if busPort != 0 {
		args = append(args, strconv.Itoa(busPort))
	}
	return c.ok(ctx, args...)
}

func (c *conn) AddSlotsRange(ctx context.Context, ranges ...SlotRange) error {
	if len(ranges) == 0 {
		return errors.New("ADDSLOTSRANGE needs at least one range")
	}
	args := []string{"CLUSTER", "ADDSLOTSRANGE"}
	for _, r := range ranges {
		args = append(args, strconv.Itoa(r.Start), strconv.Itoa(r.End))
	}
	return c.ok(ctx, args...)
}

func (c *conn) Replicate(ctx context.Context, primaryID string) error {
	return c.ok(ctx, "CLUSTER", "REPLICATE", primaryID)
}

func (c *conn) SetSlotImporting(ctx context.Context, slot int, fromID string) error {
	return c.ok(ctx, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "IMPORTING", fromID)
}

func (c *conn) SetSlotMigrating(ctx context.Context, slot int, toID string) error {
	return c.ok(ctx, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "MIGRATING", toID)
}

func (c *conn) SetSlotNode(ctx context.Context, slot int, ownerID string) error {
	return c.ok(ctx, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "NODE", ownerID)
}

func (c *conn) SetSlotStable(ctx context.Context, slot int) error {
	return c.ok(ctx, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "STABLE")
}

func (c *conn) MigrateSlotKeys(ctx context.Context, slot int, addr string, batch int) (int, error) {
	keys, err := c.do(ctx, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), strconv.Itoa(batch)).AsStrSlice()
	if err != nil {
		return 0, fmt.Errorf("CLUSTER GETKEYSINSLOT %d on %s: %w", slot, c.addr, err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("migrate address %q: %w", addr, err)
	}
	if err := c.do(ctx, c.migrateArgs(host, port, keys)...).Error(); err != nil {
		return 0, fmt.Errorf("MIGRATE slot %d from %s to %s: %w", slot, c.addr, addr, err)
	}
	return len(keys), nil
}

func (c *conn) migrateArgs(host, port string, keys []string) []string {
	// REPLACE makes a retried batch idempotent after an interrupted earlier attempt.
	args := []string{"MIGRATE", host, port, "", "0", "10000", "REPLACE"}
	switch {
	case c.pass != "" && c.user != "":
		args = append(args, "AUTH2", c.user, c.pass)
	case c.pass != "":
		args = append(args, "AUTH", c.pass)
	}
	return append(append(args, "KEYS"), keys...)
}

func (c *conn) MigrateSlotsKeys(ctx context.Context, slots []int, addr string, batch int) (int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("migrate address %q: %w", addr, err)
	}
	moved, pending := 0, slots
	for len(pending) > 0 {
		gets := make(valkeygo.Commands, len(pending))
		for i, s := range pending {
			gets[i] = c.c.B().Arbitrary("CLUSTER", "GETKEYSINSLOT").Args(strconv.Itoa(s), strconv.Itoa(batch)).Build()
		}
		var migrates valkeygo.Commands
		var migSlots, counts []int
		var next []int
		for i, r := range c.c.DoMulti(ctx, gets...) {
			keys, err := r.AsStrSlice()
			if err != nil {
				return moved, fmt.Errorf("CLUSTER GETKEYSINSLOT %d on %s: %w", pending[i], c.addr, err)
			}
			if len(keys) == 0 {
				continue
			}
			args := c.migrateArgs(host, port, keys)
			migrates = append(migrates, c.c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
			migSlots, counts = append(migSlots, pending[i]), append(counts, len(keys))
			// A short batch emptied the slot: a key created since would have been
			// redirected to the target by ASK, the slot being MIGRATING here.
			if len(keys) == batch {
				next = append(next, pending[i])
			}
		}
		for i, r := range c.c.DoMulti(ctx, migrates...) {
			if err := r.Error(); err != nil {
				return moved, fmt.Errorf("MIGRATE slot %d from %s to %s: %w", migSlots[i], c.addr, addr, err)
			}
			moved += counts[i]
		}
		pending = next
	}
	return moved, nil
}

// SetSlotChunk is how many CLUSTER SETSLOT commands one round trip of SetSlots carries.
// Valkey 8.0+ replicates SETSLOT to a primary's replicas and answers only once they have
// acknowledged it (up to 2 s each), so a pipeline costs one replication round trip per
// command: 4096 of them took 25 s on a loaded 2-core machine, past the 10 s the client
// waits for a pipeline. Redis 7.0 answers at once; for it the chunks only add round trips.
const SetSlotChunk = 64

func (c *conn) SetSlots(ctx context.Context, cmds ...SetSlot) (int, error) {
	for start := 0; start < len(cmds); start += SetSlotChunk {
		chunk := cmds[start:min(start+SetSlotChunk, len(cmds))]
		multi := make(valkeygo.Commands, len(chunk))
		for i, x := range chunk {
			args := []string{strconv.Itoa(x.Slot), string(x.State)}
			if x.NodeID != "" {
				args = append(args, x.NodeID)
			}
			multi[i] = c.c.B().Arbitrary("CLUSTER", "SETSLOT").Args(args...).Build()
		}
		// A failed chunk ends the run: the later commands are not sent (they would each
		// wait out the same missing acknowledgement), and the next observation shows what
		// was applied.
		for i, r := range c.c.DoMulti(ctx, multi...) {
			if err := r.Error(); err != nil {
				return start + i, fmt.Errorf("CLUSTER SETSLOT %d %s on %s: %w", chunk[i].Slot, chunk[i].State, c.addr, err)
			}
		}
	}
	return len(cmds), nil
}

func (c *conn) Forget(ctx context.Context, id string) error {
	return c.ok(ctx, "CLUSTER", "FORGET", id)
}

func (c *conn) SetConfigEpoch(ctx context.Context, epoch uint64) error {
	return c.ok(ctx, "CLUSTER", "SET-CONFIG-EPOCH", strconv.FormatUint(epoch, 10))
}

func (c *conn) BumpEpoch(ctx context.Context) (bool, error) {
	s, err := c.text(ctx, "CLUSTER", "BUMPEPOCH")
	if err != nil {
		return false, err
	}
	return strings.HasPrefix(s, "BUMPED"), nil
}

func (c *conn) Failover(ctx context.Context, mode FailoverMode) error {
	if mode == FailoverDefault {
		return c.ok(ctx, "CLUSTER", "FAILOVER")
	}
	return c.ok(ctx, "CLUSTER", "FAILOVER", string(mode))
}

func (c *conn) ReplicationState(ctx context.Context) (ReplicationState, error) {
	s, err := c.text(ctx, "INFO", "replication")
	if err != nil {
		return ReplicationState{}, err
	}
	return ParseReplication(s), nil
}

func (c *conn) Reset(ctx context.Context) error {
	return c.ok(ctx, "CLUSTER", "RESET", "SOFT")
}

// Cluster is a cluster-mode data client (it follows MOVED and ASK), for checks that the
// data plane serves keys.
type Cluster interface {
	Set(ctx context.Context, key, value string) error
	// SetMany pipelines one SET per key (each routed to its slot's owner).
	SetMany(ctx context.Context, keys, values []string) error
	Get(ctx context.Context, key string) (string, error)
	Close()
}

type cluster struct{ c valkeygo.Client }

// DialCluster opens a cluster-mode client seeded with addrs, with valkey-go's defaults for
// timeouts and slot-map refreshes (DialClusterData tunes them).
func DialCluster(addrs []string, o Options) (Cluster, error) {
	return DialClusterData(addrs, DataOptions{Options: o})
}

func (c *cluster) Set(ctx context.Context, key, value string) error {
	return c.c.Do(ctx, c.c.B().Set().Key(key).Value(value).Build()).Error()
}

func (c *cluster) SetMany(ctx context.Context, keys, values []string) error {
	if len(keys) != len(values) {
		return fmt.Errorf("SetMany: %d keys, %d values", len(keys), len(values))
	}
	cmds := make(valkeygo.Commands, 0, len(keys))
	for i, k := range keys {
		cmds = append(cmds, c.c.B().Set().Key(k).Value(values[i]).Build())
	}
	for i, r := range c.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("SET %s: %w", keys[i], err)
		}
	}
	return nil
}

func (c *cluster) Get(ctx context.Context, key string) (string, error) {
	return c.c.Do(ctx, c.c.B().Get().Key(key).Build()).ToString()
}

func (c *cluster) Close() { c.c.Close() }
