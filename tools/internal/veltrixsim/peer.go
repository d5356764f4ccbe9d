package veltrixsim

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// peerPool keeps a few idle text-protocol connections per member address.
type peerPool struct {
	mu     sync.Mutex
	idle   map[string][]*peerConn
	dialer net.Dialer
}

type peerConn struct {
	c net.Conn
	r *bufio.Reader
}

const (
	peerDialTimeout = time.Second
	peerIOTimeout   = 5 * time.Second
	peerMaxIdle     = 4
)

// newPeerPool dials members from the host of listen when it names one address: as from a
// pod's own network namespace, a member's connections to the others come from the address
// it serves on (on the local cluster, where pods share the host's, a partition between two
// pod addresses then cuts both ways).
func newPeerPool(listen string) *peerPool {
	p := &peerPool{idle: map[string][]*peerConn{}, dialer: net.Dialer{Timeout: peerDialTimeout}}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			p.dialer.LocalAddr = &net.TCPAddr{IP: ip}
		}
	}
	return p
}

// Do sends one command line to addr and returns its one-line answer. A broken idle
// connection is retried once on a fresh one.
func (p *peerPool) Do(addr, line string) (string, error) {
	for attempt := 0; ; attempt++ {
		pc, reused, err := p.get(addr)
		if err != nil {
			return "", err
		}
		ans, err := pc.roundTrip(line)
		if err == nil {
			p.put(addr, pc)
			return ans, nil
		}
		pc.c.Close()
		if !reused || attempt > 0 {
			return "", err
		}
	}
}

func (p *peerPool) get(addr string) (*peerConn, bool, error) {
	p.mu.Lock()
	if l := p.idle[addr]; len(l) > 0 {
		pc := l[len(l)-1]
		p.idle[addr] = l[:len(l)-1]
		p.mu.Unlock()
		return pc, true, nil
	}
	p.mu.Unlock()
	c, err := p.dialer.Dial("tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &peerConn{c: c, r: bufio.NewReader(c)}, false, nil
}

func (p *peerPool) put(addr string, pc *peerConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle[addr]) >= peerMaxIdle {
		pc.c.Close()
		return
	}
	p.idle[addr] = append(p.idle[addr], pc)
}

// Close drops every idle connection.
func (p *peerPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.idle {
		for _, pc := range l {
			pc.c.Close()
		}
	}
	p.idle = map[string][]*peerConn{}
}

func (pc *peerConn) roundTrip(line string) (string, error) {
	if strings.ContainsAny(line, "\r\n") {
		return "", errors.New("command contains a line break")
	}
	_ = pc.c.SetDeadline(time.Now().Add(peerIOTimeout))
	if _, err := pc.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	ans, err := pc.r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the answer to %s: %w", strings.SplitN(line, " ", 2)[0], err)
	}
	return strings.TrimRight(ans, "\r\n"), nil
}
