// Package handover is the preStop hook of a member's server container. Before the kubelet
// sends SIGTERM, a primary that serves slots hands its shard to its best in-sync replica
// with a coordinated CLUSTER FAILOVER (the primary pauses writes until the replica has its
// final offset, so no acknowledged write is lost) and waits until it is a replica itself.
// Servers whose shutdown-on-sigterm can fail over (Valkey 9.0+) would do so on SIGTERM as
// well; the hook hands over first on every server, so Valkey 8.0 and Redis 7.0, which
// cannot, leave no shard without a primary when a pod goes away.
//
// The hook runs inside the server container as a copy of the operator's binary (an init
// container puts it on an emptyDir), so it needs nothing from the server's image; it logs
// in as the replication user, whose credentials the container already has (auth.conf),
// over TLS when the server uses it.
package handover

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/executor"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// Config is what one hand-over needs.
type Config struct {
	// Addr is this member's server, host:port.
	Addr string
	// Options log in to every member (this one and its replicas).
	Options valkey.Options
	// Timeout bounds the whole hand-over; the pod's grace period has to outlast it.
	Timeout time.Duration
	// Log receives one line per step.
	Log io.Writer
	// Linger is how long the server is kept after its slots moved (within Timeout): a
	// client that still has the old slot map gets MOVED from it, not a refused connection.
	Linger time.Duration
}

// retryPause is how long the hook waits before asking again when no replica was ready.
const retryPause = 250 * time.Millisecond

// ErrNoReplica is returned (wrapped) when a primary serving slots has no replica that
// could take them over before the timeout.
var ErrNoReplica = errors.New("no replica took over")

// Run hands the member's slots over to a replica when it is a primary serving slots, and
// returns once a replica owns them in its own and this member's view. A replica, or a
// primary without slots, returns at once. It returns an error when no replica took over
// within the timeout; the member's slots are then left to the cluster's own failover (or
// the operator's) after the server stops.
func Run(ctx context.Context, cfg Config) error {
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "handover: "+format+"\n", args...)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	e := executor.New(func(addr string) (valkey.Conn, error) { return valkey.Dial(addr, cfg.Options) })
	defer e.Close()

	tried := map[string]bool{}
	for attempt := 1; ; attempt++ {
		self, err := e.Conn(cfg.Addr)
		if err != nil {
			return fmt.Errorf("connecting to this server: %w", err)
		}
		v, err := self.ClusterNodes(ctx)
		if err != nil {
			return fmt.Errorf("reading this server's CLUSTER NODES: %w", err)
		}
		me, _ := v.Myself()
		if !me.Primary || me.SlotTotal() == 0 {
			if attempt == 1 {
				logf("%s is not a primary serving slots: nothing to hand over", cfg.Addr)
			}
			return nil
		}
		replica, ok := bestReplica(ctx, e, v, me.ID, tried)
		if !ok && !anyConnected(v, me.ID) {
			// Every replica is gone (the whole cluster being deleted, say): nobody to wait for.
			return fmt.Errorf("%w: %s has no connected replica", ErrNoReplica, cfg.Addr)
		}
		if !ok {
			if len(tried) > 0 {
				clear(tried) // every one was tried: ask them all again
			}
			if time.Until(deadline) < retryPause {
				return fmt.Errorf("%w: %s still serves %d slots after %s", ErrNoReplica, cfg.Addr, me.SlotTotal(), cfg.Timeout)
			}
			logf("no replica of %s ready yet", me.ID)
			if err := pause(ctx, retryPause); err != nil {
				return fmt.Errorf("%w: %s still serves %d slots after %s", ErrNoReplica, cfg.Addr, me.SlotTotal(), cfg.Timeout)
			}
			continue
		}
		begin := time.Now()
		logf("asking replica %s to take over the %d slots of %s", replica, me.SlotTotal(), cfg.Addr)
		// Every member this one can talk to must agree on the new owner before the server
		// stops: a client that refreshes its slot map from any of them then finds the
		// replica, not the stopped primary.
		res, err := e.Failover(ctx, replica, observed(v, cfg.Addr), time.Until(deadline))
		if err == nil && res.Outcome == executor.FailoverCompleted {
			logf("%s in %s", res.Message, time.Since(begin).Round(time.Millisecond))
			_ = pause(ctx, min(cfg.Linger, time.Until(deadline)))
			return nil
		}
		logf("replica %s did not take over (%s): %s", replica, res.Outcome, res.Message)
		tried[replica] = true
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s", ErrNoReplica, res.Message)
		}
	}
}

// bestReplica is the replica of primary id, as view v lists it, that this member reaches,
// that is connected and unsuspected, not yet tried, and got furthest in the replication
// stream.
func bestReplica(ctx context.Context, e *executor.Executor, v valkey.View, id string, tried map[string]bool) (string, bool) {
	type candidate struct {
		addr   string
		offset int64
	}
	var cs []candidate
	for _, r := range v.ReplicasOf(id) {
		if !r.Healthy() || tried[r.Addr] {
			continue
		}
		c, err := e.Conn(r.Addr)
		if err != nil {
			continue
		}
		st, err := c.ReplicationState(ctx)
		if err != nil || !st.Replica() || !st.MasterLinkUp || st.SyncInProgress {
			continue
		}
		cs = append(cs, candidate{r.Addr, st.Offset})
	}
	if len(cs) == 0 {
		return "", false
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].offset > cs[j].offset })
	return cs[0].addr, true
}

// anyConnected reports whether view v has a replica of primary id that is connected and
// unsuspected, one that may yet become ready (a full sync running).
func anyConnected(v valkey.View, id string) bool {
	for _, r := range v.ReplicasOf(id) {
		if r.Healthy() {
			return true
		}
	}
	return false
}

// observed are the addresses of the members view v (self's) sees healthy, self first.
func observed(v valkey.View, self string) []string {
	out := []string{self}
	for _, n := range v.Nodes {
		if !n.Myself && n.Healthy() && n.Addr != self {
			out = append(out, n.Addr)
		}
	}
	return out
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ReadAuth reads the replication user's name and password from auth.conf, as the
// operator renders it: "masteruser <name>" and "masterauth <double-quoted password>".
func ReadAuth(r io.Reader) (user, password string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, value, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch strings.ToLower(key) {
		case "masteruser", "primaryuser":
			user, err = unquote(strings.TrimSpace(value))
		case "masterauth", "primaryauth":
			password, err = unquote(strings.TrimSpace(value))
		}
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	if user == "" || password == "" {
		return "", "", errors.New("no masteruser and masterauth")
	}
	return user, password, nil
}

// unquote reads one argument of the server's config syntax: bare, or double-quoted with
// backslash escapes (\\, \", \n, \r, \t, \xHH).
func unquote(s string) (string, error) {
	if !strings.HasPrefix(s, `"`) {
		return s, nil
	}
	if len(s) < 2 || !strings.HasSuffix(s, `"`) {
		return "", errors.New("unterminated quotes")
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i == len(s) {
			return "", errors.New("trailing backslash")
		}
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x':
			if i+2 >= len(s) {
				return "", errors.New("short \\x escape")
			}
			n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("bad \\x escape: %w", err)
			}
			b.WriteByte(byte(n))
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// ClientCertificate loads this member's certificate for servers that ask clients for one
// (tls-auth-clients optional accepts none, but a stricter server may not).
func ClientCertificate(cfg *tls.Config, certFile, keyFile string) error {
	if _, err := os.Stat(certFile); err != nil {
		return nil //nolint:nilerr // no certificate mounted: log in with the password alone
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	cfg.Certificates = []tls.Certificate{cert}
	return nil
}
