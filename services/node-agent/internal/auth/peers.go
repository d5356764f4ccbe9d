package auth

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/peer"
)

// PeerLimits bound what callers that fail authentication or authorization may cost: each
// remote IP has a token bucket that every failed call drains; when it is empty, the IP's
// calls are refused with ResourceExhausted before any check, unless their token was
// authenticated recently. Successful calls cost nothing, so an operator is never limited.
type PeerLimits struct {
	// Rate is how many failed calls per second an IP earns back. Default 2.
	Rate float64
	// Burst is how many failed calls an IP may make at once. Default 20.
	Burst int
	// Peers is the most IPs remembered; past it, the fullest buckets are forgotten first.
	// Default 4096.
	Peers int
}

func (l PeerLimits) withDefaults() PeerLimits {
	if l.Rate <= 0 {
		l.Rate = 2
	}
	if l.Burst <= 0 {
		l.Burst = 20
	}
	if l.Peers <= 0 {
		l.Peers = 4096
	}
	return l
}

// PeerLimiter keeps one bucket per remote IP.
type PeerLimiter struct {
	cfg PeerLimits
	// Now is the clock; tests move it.
	Now func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewPeerLimiter limits peers as cfg says (zero fields: defaults).
func NewPeerLimiter(cfg PeerLimits) *PeerLimiter {
	return &PeerLimiter{cfg: cfg.withDefaults(), Now: time.Now, buckets: map[string]*bucket{}}
}

// peerIP is the limited key of a call: the remote IP of a TCP peer. Other transports (an
// in-process listener in tests) are not limited: the agent only listens on TCP.
func peerIP(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", false
	}
	tcp, ok := p.Addr.(*net.TCPAddr)
	if !ok {
		return "", false
	}
	return tcp.IP.String(), true
}

// refill brings b up to now; the caller holds mu.
func (l *PeerLimiter) refill(b *bucket, now time.Time) {
	b.tokens = min(float64(l.cfg.Burst), b.tokens+now.Sub(b.at).Seconds()*l.cfg.Rate)
	b.at = now
}

// Exhausted says whether the call's peer has no failed calls left.
func (l *PeerLimiter) Exhausted(ctx context.Context) bool {
	ip, ok := peerIP(ctx)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[ip]
	if !ok {
		return false
	}
	l.refill(b, l.Now())
	return b.tokens < 1
}

// Failed charges a failed call to its peer.
func (l *PeerLimiter) Failed(ctx context.Context) {
	ip, ok := peerIP(ctx)
	if !ok {
		return
	}
	now := l.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[ip]
	if !ok {
		l.evict(now)
		b = &bucket{tokens: float64(l.cfg.Burst), at: now}
		l.buckets[ip] = b
	}
	l.refill(b, now)
	b.tokens = max(0, b.tokens-1)
}

// evict makes room for one more peer: full buckets say nothing and go first; past that, any
// bucket (map order), so the table stays bounded whatever the number of addresses.
func (l *PeerLimiter) evict(now time.Time) {
	if len(l.buckets) < l.cfg.Peers {
		return
	}
	for ip, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= float64(l.cfg.Burst) {
			delete(l.buckets, ip)
		}
	}
	for ip := range l.buckets {
		if len(l.buckets) < l.cfg.Peers {
			break
		}
		delete(l.buckets, ip)
	}
}
