package valkey

import (
	"context"
	"fmt"
	"net"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// DataOptions tune the cluster-mode data client for checks that keep writing through
// topology changes (scaling, rolling restarts, failovers), where members come and go.
type DataOptions struct {
	Options
	// RefreshInterval rescans the slot map in the background besides the rescans MOVED
	// and connection errors trigger; 0 leaves only those.
	RefreshInterval time.Duration
	// ConnTimeout bounds every read and write on a connection, so a member that stopped
	// answering fails the command instead of holding it until the caller's deadline.
	ConnTimeout time.Duration
}

// DialClusterData opens a cluster-mode data client (it follows MOVED and ASK) seeded with
// addrs, tuned by o.
func DialClusterData(addrs []string, o DataOptions) (Cluster, error) {
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	c, err := valkeygo.NewClient(valkeygo.ClientOption{
		InitAddress:      addrs,
		DisableCache:     true,
		Username:         o.Username,
		Password:         o.Password,
		Dialer:           net.Dialer{Timeout: o.DialTimeout},
		TLSConfig:        o.TLS,
		ConnWriteTimeout: o.ConnTimeout,
		ClusterOption:    valkeygo.ClusterOption{ShardsRefreshInterval: o.RefreshInterval},
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to cluster %v: %w", addrs, err)
	}
	return &cluster{c: c}, nil
}

// IsNil reports whether err is the server's nil reply (GET of a key that does not exist),
// as opposed to a failure to ask.
func IsNil(err error) bool { return valkeygo.IsValkeyNil(err) }

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
