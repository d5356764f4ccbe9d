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
	// Reset is CLUSTER RESET HARD: a replica becomes an empty primary knowing no peers,
	// under a new node id and (Valkey 8+) a new shard id. A soft reset keeps the shard id
	// of the primary it followed, so once it serves slots CLUSTER SHARDS lists two
	// primaries in one shard and clients mapping slots from it lose the second's.
	Reset(ctx context.Context) error
	// ShardID is CLUSTER MYSHARDID, "" where the server has no shard ids (Redis 7.0).
	ShardID(ctx context.Context) (string, error)
	Close()
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

// adminPipelineTimeout bounds how long an admin connection waits for the replies of one
// pipeline before the client closes it (valkey-go's ConnWriteTimeout, 10 s by default):
// a SetSlots chunk may wait for SetSlotChunk replica acknowledgements of up to 2 s each.
// Every call also has its context's deadline.
const adminPipelineTimeout = 2*time.Second*SetSlotChunk + 8*time.Second

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
		ConnWriteTimeout:  adminPipelineTimeout,
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

func (c *conn) Reset(ctx context.Context) error {
	return c.ok(ctx, "CLUSTER", "RESET", "HARD")
}

func (c *conn) ShardID(ctx context.Context) (string, error) {
	id, err := c.text(ctx, "CLUSTER", "MYSHARDID")
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown subcommand") {
		return "", nil
	}
	return id, err
}
