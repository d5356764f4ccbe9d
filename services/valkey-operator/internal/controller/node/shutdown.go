package node

import (
	"context"
	"strings"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// shutdownKey is the server's directive for what SIGTERM does; shutdownFailover is its
// flag (Valkey 9.0+) to hand a primary's slots to a replica before exiting.
const (
	shutdownKey      = "shutdown-on-sigterm"
	shutdownFailover = "failover"
)

// shutdownValue is what shutdown-on-sigterm should be, given its current value, so that a
// primary fails over on SIGTERM; change is false when it already does. The flags combine
// ("nosave failover"); "default" is no flag at all.
func shutdownValue(current string) (value string, change bool) {
	flags := strings.Fields(strings.ToLower(current))
	for _, f := range flags {
		if f == shutdownFailover {
			return current, false
		}
	}
	if len(flags) == 0 || len(flags) == 1 && flags[0] == "default" {
		return shutdownFailover, true
	}
	return strings.Join(append(flags, shutdownFailover), " "), true
}

// settleShutdown makes a server that can fail over on SIGTERM by itself do so, once per
// server incarnation (CONFIG SET does not survive a restart). Whether it can is the
// server's own answer, never the image tag: Redis 7.0 and Valkey before 9.0 refuse the
// flag (the preStop hand-over, handover.go, covers them, and every server besides). A
// value set in spec.config keeps its flags. A failure to ask is retried next pass.
func settleShutdown(ctx context.Context, conn valkey.NodeAdmin, st *nodeState, inc string) {
	if st.shutdown == inc {
		return
	}
	logger := log.FromContext(ctx)
	current, ok, err := conn.ConfigGet(ctx, shutdownKey)
	if err != nil {
		logger.Info("Reading shutdown-on-sigterm failed", "error", err.Error())
		return
	}
	if !ok {
		// Older than Redis 7.0: no such directive.
		st.shutdown = inc
		return
	}
	value, change := shutdownValue(current)
	if !change {
		st.shutdown = inc
		return
	}
	if err := conn.ConfigSet(ctx, [][2]string{{shutdownKey, value}}); err != nil {
		if strings.Contains(err.Error(), shutdownKey) {
			// The server refused the value: it cannot fail over on SIGTERM.
			logger.V(1).Info("The server cannot fail over on SIGTERM; the preStop hand-over covers it", "shutdown-on-sigterm", current)
			st.shutdown = inc
			return
		}
		logger.Info("Setting shutdown-on-sigterm failed", "error", err.Error())
		return
	}
	logger.Info("Set shutdown-on-sigterm: the server fails over on SIGTERM", "shutdown-on-sigterm", value)
	st.shutdown = inc
}
