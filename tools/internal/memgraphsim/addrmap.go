package memgraphsim

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// AddressMap maps a peer's address as it is registered ("host:port", e.g. a pod's DNS
// name and Memgraph's fixed port) to the address its process really listens on. It lets
// a test register members under the names an operator builds while every process runs on
// 127.0.0.1 with ports of its own (env MEMGRAPH_SIM_ADDRESS_MAP). Test-only: nothing like
// it exists in Memgraph, whose peers are found through DNS.
type AddressMap map[string]string

// Resolve is where addr is dialled: its mapping, or addr itself when it has none.
func (m AddressMap) Resolve(addr string) string {
	if to, ok := m[addr]; ok {
		return to
	}
	return addr
}

// ParseAddressMap reads "host:port=host:port,..." (spaces around entries ignored, ""
// is no mapping). Both sides must be host:port, so a typo fails the process at start
// rather than as an unreachable peer much later.
func ParseAddressMap(s string) (AddressMap, error) {
	m := AddressMap{}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		from, to, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("address map entry %q: want host:port=host:port", entry)
		}
		for _, a := range []string{from, to} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("address map entry %q: %w", entry, err)
			}
		}
		if prev, dup := m[from]; dup && prev != to {
			return nil, fmt.Errorf("address map maps %s twice (%s and %s)", from, prev, to)
		}
		m[from] = to
	}
	return m, nil
}

// dial opens a TCP connection to a peer by its registered address, through the map.
func (o Options) dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, LocalAddr: o.sourceAddr()}
	return d.DialContext(ctx, "tcp", o.AddressMap.Resolve(addr))
}

// sourceAddr is the address a peer connection comes from: the host every listener binds
// when it names one address, as from a pod's own network namespace, so that on the local
// cluster (pods share the host's) a partition between two pod addresses cuts both ways.
// Nil (the kernel's choice) for 0.0.0.0, ::, or a name.
func (o Options) sourceAddr() net.Addr {
	ip := net.ParseIP(o.BoltAddress)
	if ip == nil || ip.IsUnspecified() {
		return nil
	}
	return &net.TCPAddr{IP: ip}
}

// call is the package's call to a peer by its registered address, through the map.
func (o Options) call(ctx context.Context, addr string, req request, timeout time.Duration) (response, error) {
	return call(ctx, o.AddressMap.Resolve(addr), o.sourceAddr(), req, timeout)
}
