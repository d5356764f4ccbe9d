package memgraphsim

import (
	"context"
	"net"
	"regexp"

	"github.com/opsuite/suite/tools/internal/bolt"
)

// reloadBoltTLS matches Memgraph's RELOAD BOLT_SERVER TLS (either role, any case).
var reloadBoltTLS = regexp.MustCompile(`(?i)^\s*RELOAD\s+BOLT_SERVER\s+TLS\s*;?\s*$`)

// ErrNoBoltTLS answers RELOAD BOLT_SERVER TLS on a process serving plain Bolt (the
// simulator's wording).
const ErrNoBoltTLS = "Bolt server is not configured with SSL: start with --bolt-cert-file and --bolt-key-file"

// tlsReloadConn answers RELOAD BOLT_SERVER TLS ahead of the role's own query handling:
// the certificate files are read again for connections opened from now on; a failed
// reload keeps the certificate in use and is a FAILURE.
type tlsReloadConn struct {
	bolt.Conn
	certs *bolt.CertFiles
}

func (c tlsReloadConn) Run(ctx context.Context, q bolt.Query) (*bolt.Result, error) {
	if !reloadBoltTLS.MatchString(q.Text) {
		return c.Conn.Run(ctx, q)
	}
	if c.certs == nil {
		return nil, failure(ErrNoBoltTLS)
	}
	if err := c.certs.Reload(); err != nil {
		return nil, failure("%s", err.Error())
	}
	return &bolt.Result{Type: "s"}, nil
}

func withTLSReload(newConn func(net.Addr) bolt.Conn, certs *bolt.CertFiles) func(net.Addr) bolt.Conn {
	return func(a net.Addr) bolt.Conn { return tlsReloadConn{Conn: newConn(a), certs: certs} }
}
