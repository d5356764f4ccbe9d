package valkey

import (
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
