package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
	"github.com/neo4j/neo4j-go-driver/v5/neo4j/config"
)

// mgxWriter is a client outside Kubernetes writing through the coordinators' routing
// with the neo4j Go driver (the driver Memgraph documents for neo4j://): one node
// (:E2EExternal {i}) per auto-commit query, numbered, as fast as it is acknowledged. A
// failed write is not retried under its number (it may or may not have committed): the
// next number is written, and only acknowledged numbers are counted and read back.
type mgxWriter struct {
	t      *testing.T
	drv    neo4j.DriverWithContext
	stopCh chan struct{}
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	ack      []int64
	attempts int
	failures int
	firstErr string
	server   string // the address the last acknowledged write went to
	lastAck  time.Time
	mark     string                   // the disruption under way
	gaps     map[string]time.Duration // the longest time without an acknowledgement, per mark
	order    []string
}

func startMgxWriter(ctx context.Context, t *testing.T, uri string) *mgxWriter {
	t.Helper()
	drv, err := neo4j.NewDriverWithContext(uri, neo4j.NoAuth(), func(c *config.Config) {
		c.SocketConnectTimeout = 2 * time.Second
		c.ConnectionAcquisitionTimeout = 5 * time.Second
	})
	if err != nil {
		t.Fatalf("neo4j driver for %s: %v", uri, err)
	}
	w := &mgxWriter{t: t, drv: drv, stopCh: make(chan struct{}), done: make(chan struct{}),
		lastAck: time.Now(), mark: "start", gaps: map[string]time.Duration{}, order: []string{"start"}}
	go w.loop(ctx)
	return w
}

func (w *mgxWriter) loop(ctx context.Context) {
	defer close(w.done)
	for i := int64(0); ; i++ {
		select {
		case <-w.stopCh:
			return
		case <-ctx.Done():
			return
		default:
		}
		server, err := w.write(ctx, i)
		now := time.Now()
		w.mu.Lock()
		w.attempts++
		if err == nil {
			w.ack = append(w.ack, i)
			w.server = server
			if gap := now.Sub(w.lastAck); gap > w.gaps[w.mark] {
				w.gaps[w.mark] = gap
			}
			w.lastAck = now
		} else {
			w.failures++
			if w.firstErr == "" {
				w.firstErr = err.Error()
			}
		}
		w.mu.Unlock()
		pause := 20 * time.Millisecond
		if err != nil {
			pause = 200 * time.Millisecond
		}
		select {
		case <-time.After(pause):
		case <-w.stopCh:
			return
		}
	}
}

// write sends one numbered write and returns the server that acknowledged it.
func (w *mgxWriter) write(ctx context.Context, i int64) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s := w.drv.NewSession(ctx, neo4j.SessionConfig{AccessMode: neo4j.AccessModeWrite})
	defer func() { _ = s.Close(context.WithoutCancel(ctx)) }()
	res, err := s.Run(ctx, "CREATE (:E2EExternal {i: $i})", map[string]any{"i": i})
	if err != nil {
		return "", err
	}
	sum, err := res.Consume(ctx)
	if err != nil {
		return "", err
	}
	return sum.Server().Address(), nil
}

// mark names the disruption that starts now (for the gaps logged at the end).
func (w *mgxWriter) markNow(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mark = name
	w.order = append(w.order, name)
}

func (w *mgxWriter) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ack)
}

func (w *mgxWriter) lastServer() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.server
}

func (w *mgxWriter) firstError() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstErr == "" {
		return "none"
	}
	return w.firstErr
}

// waitAcked waits until n writes have been acknowledged in all.
func (w *mgxWriter) waitAcked(ctx context.Context, step string, n int) {
	w.t.Helper()
	if err := poll(ctx, w.t, fmt.Sprintf("%s: %d writes acknowledged", step, n), 3*time.Minute, func(context.Context) (bool, error) {
		return w.acked() >= n, nil
	}); err != nil {
		w.t.Fatalf("%s: %v (acknowledged %d; first error: %s)", step, err, w.acked(), w.firstError())
	}
}

func (w *mgxWriter) stop() {
	w.once.Do(func() {
		close(w.stopCh)
		<-w.done
		_ = w.drv.Close(context.Background())
	})
}

// figures are the acknowledged numbers, the attempts and failures, and per disruption the
// longest time without an acknowledgement.
func (w *mgxWriter) figures() (acked []int64, attempts, failures int, gaps []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.order {
		gaps = append(gaps, fmt.Sprintf("%s: longest time without an acknowledged write %s", m, w.gaps[m].Round(10*time.Millisecond)))
	}
	return append([]int64(nil), w.ack...), w.attempts, w.failures, gaps
}
