package auth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsuite/suite/services/node-agent/internal/auth"
)

// countingAuthn answers from a table and counts the reviews it is asked for. The real
// TokenReview is counted the same way against a kube-apiserver in package kube.
type countingAuthn struct {
	users map[string]string
	fail  bool
	calls int
}

func (c *countingAuthn) Authenticate(_ context.Context, token string) (auth.Identity, error) {
	c.calls++
	if c.fail {
		return auth.Identity{}, errors.New("apiserver unreachable")
	}
	u, ok := c.users[token]
	if !ok {
		return auth.Identity{}, fmt.Errorf("%w: unknown", auth.ErrUnauthenticated)
	}
	return auth.Identity{User: u}, nil
}

// jwt is an unsigned token with the given claims; only the apiserver checks signatures.
func jwt(t *testing.T, aud any, exp time.Time) string {
	t.Helper()
	claims := map[string]any{"aud": aud, "sub": "system:serviceaccount:ns:sa"}
	if !exp.IsZero() {
		claims["exp"] = exp.Unix()
	}
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(b) + ".c2ln"
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestCachedAuthenticator(t *testing.T) {
	ctx := context.Background()
	const aud = "nodeagent.opsuite.io/node-a"
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	good := jwt(t, []string{"other", aud}, clk.t.Add(time.Hour))
	short := jwt(t, aud, clk.t.Add(18*time.Second)) // expires 3s after it is first used below
	forged := jwt(t, aud, clk.t.Add(time.Hour))
	next := &countingAuthn{users: map[string]string{good: "alice", short: "bob"}}
	c := auth.NewCachedAuthenticator(next, aud, auth.CacheConfig{Allowed: 10 * time.Second, Denied: 5 * time.Second, Size: 2})
	c.Now = clk.now

	authn := func(token string) (auth.Identity, error) { return c.Authenticate(ctx, token) }
	wantCalls := func(n int) {
		t.Helper()
		if next.calls != n {
			t.Fatalf("%d reviews, want %d", next.calls, n)
		}
	}

	// Refused before any review: what cannot be a token for this node's agent.
	for name, tok := range map[string]string{
		"not a JWT":       "opaque-secret",
		"bad payload":     "a.!!!.c",
		"another node":    jwt(t, "nodeagent.opsuite.io/node-b", clk.t.Add(time.Hour)),
		"apiserver's":     jwt(t, []string{"https://kubernetes.default.svc"}, clk.t.Add(time.Hour)),
		"already expired": jwt(t, aud, clk.t.Add(-time.Second)),
	} {
		if _, err := authn(tok); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%s: %v, want ErrUnauthenticated", name, err)
		}
	}
	wantCalls(0)

	// A valid token is reviewed once, then reused until the positive TTL ends.
	for range 100 {
		if id, err := authn(good); err != nil || id.User != "alice" {
			t.Fatalf("%v, %v", id, err)
		}
	}
	wantCalls(1)
	clk.t = clk.t.Add(10 * time.Second)
	if _, err := authn(good); err != nil {
		t.Fatal(err)
	}
	wantCalls(2)

	// A flood of one forged token costs one review per negative TTL.
	for range 1000 {
		if _, err := authn(forged); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("forged: %v", err)
		}
	}
	wantCalls(3)
	clk.t = clk.t.Add(5 * time.Second)
	_, _ = authn(forged)
	wantCalls(4)

	// The cache never outlives the token: after its expiry it is refused without a review.
	if _, err := authn(short); err != nil {
		t.Fatal(err)
	}
	wantCalls(5)
	clk.t = clk.t.Add(3 * time.Second)
	if _, err := authn(short); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("expired token: %v", err)
	}
	wantCalls(5)

	// Size 2: good, forged and short were cached; good (least recently used) is gone.
	_, _ = authn(forged)
	wantCalls(5)
	_, _ = authn(good)
	wantCalls(6)

	// An unreachable apiserver is no answer: not remembered.
	next.fail = true
	other := jwt(t, aud, clk.t.Add(time.Hour))
	for range 3 {
		if _, err := authn(other); err == nil || errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("transient failure: %v", err)
		}
	}
	wantCalls(9)
}

type countingAuthz struct {
	allow map[string]bool
	fail  bool
	calls int
}

func (c *countingAuthz) Authorize(_ context.Context, id auth.Identity, a auth.Attributes) (bool, string, error) {
	c.calls++
	if c.fail {
		return false, "", errors.New("apiserver unreachable")
	}
	return c.allow[id.User+" "+a.Verb], "rbac", nil
}

func TestCachedAuthorizer(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	next := &countingAuthz{allow: map[string]bool{"alice get": true}}
	c := auth.NewCachedAuthorizer(next, auth.CacheConfig{Allowed: 10 * time.Second, Denied: 2 * time.Second})
	c.Now = clk.now
	alice := auth.Identity{User: "alice", Groups: []string{"b", "a"}, Extra: map[string][]string{"k": {"v"}}}
	get := auth.Attributes{Verb: "get"}
	update := auth.Attributes{Verb: "update", Subresource: "disks"}

	ask := func(id auth.Identity, a auth.Attributes, want bool, wantCalls int) {
		t.Helper()
		allowed, _, err := c.Authorize(ctx, id, a)
		if err != nil || allowed != want || next.calls != wantCalls {
			t.Fatalf("%s %s: allowed %v, %v after %d reviews; want %v after %d", id.User, a.Verb, allowed, err, next.calls, want, wantCalls)
		}
	}
	ask(alice, get, true, 1)
	ask(auth.Identity{User: "alice", Groups: []string{"a", "b"}, Extra: map[string][]string{"k": {"v"}}}, get, true, 1) // same subject, groups reordered
	ask(alice, update, false, 2)
	ask(alice, update, false, 2)
	ask(auth.Identity{User: "alice", Groups: []string{"a"}}, get, true, 3) // other groups: another question
	clk.t = clk.t.Add(2 * time.Second)
	ask(alice, update, false, 4) // denials expire first
	ask(alice, get, true, 4)
	clk.t = clk.t.Add(8 * time.Second)
	ask(alice, get, true, 5)

	next.fail = true
	bob := auth.Identity{User: "bob"}
	for i := range 2 {
		if _, _, err := c.Authorize(ctx, bob, get); err == nil {
			t.Fatal("a failed review was taken as an answer")
		}
		if next.calls != 6+i {
			t.Fatalf("failed reviews cached: %d calls", next.calls)
		}
	}
}

// slowAuthn refuses every token after release is closed, counting reviews.
type slowAuthn struct {
	release chan struct{}
	calls   atomic.Int32
}

func (s *slowAuthn) Authenticate(context.Context, string) (auth.Identity, error) {
	s.calls.Add(1)
	<-s.release
	return auth.Identity{}, fmt.Errorf("%w: forged", auth.ErrUnauthenticated)
}

func TestConcurrentCallsShareOneReview(t *testing.T) {
	const aud = "nodeagent.opsuite.io/node-a"
	next := &slowAuthn{release: make(chan struct{})}
	c := auth.NewCachedAuthenticator(next, aud, auth.CacheConfig{})
	forged := jwt(t, aud, time.Now().Add(time.Hour))
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			_, err := c.Authenticate(context.Background(), forged)
			errs <- err
		})
	}
	// Let the callers pile up behind the first review, then answer it.
	time.Sleep(100 * time.Millisecond)
	close(next.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("got %v", err)
		}
	}
	if n := next.calls.Load(); n != 1 {
		t.Fatalf("50 concurrent calls with one token cost %d reviews, want 1", n)
	}
}
