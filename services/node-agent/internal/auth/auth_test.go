package auth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// tokenTable authenticates a fixed set of tokens; RBAC-like grants authorize. The real
// TokenReview and SubjectAccessReview implementations are tested against a kube-apiserver in
// package kube; this tests the policy around them.
type tokenTable map[string]string

func (tt tokenTable) Authenticate(_ context.Context, token string) (auth.Identity, error) {
	if token == "broken" {
		return auth.Identity{}, errors.New("apiserver unreachable")
	}
	u, ok := tt[token]
	if !ok {
		return auth.Identity{}, auth.ErrUnauthenticated
	}
	return auth.Identity{User: u}, nil
}

type grants map[string][]auth.Attributes

func (g grants) Authorize(_ context.Context, id auth.Identity, a auth.Attributes) (bool, string, error) {
	for _, x := range g[id.User] {
		if x == a {
			return true, "", nil
		}
	}
	return false, "no rule", nil
}

func TestPolicy(t *testing.T) {
	var logs bytes.Buffer
	p := auth.Policy{
		Authn: tokenTable{"reader-secret": "reader", "writer-secret": "writer", "nobody-secret": "nobody"},
		Authz: grants{
			"reader": {{Verb: "get"}},
			"writer": {{Verb: "get"}, {Verb: "update", Subresource: "disks"}},
		},
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	unary := p.Unary()
	call := func(method, authz string) error {
		ctx := context.Background()
		if authz != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", authz))
		}
		_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) { return "ok", nil })
		return err
	}
	const (
		report  = "/nodeagent.v1.NodeAgent/GetNodeReport"
		prepare = "/nodeagent.v1.NodeAgent/PrepareDisks"
		release = "/nodeagent.v1.NodeAgent/ReleaseDisks"
		sysctl  = "/nodeagent.v1.NodeAgent/EnsureSysctl"
	)
	cases := []struct {
		method, authz string
		want          codes.Code
	}{
		{report, "", codes.Unauthenticated},
		{report, "Bearer", codes.Unauthenticated},
		{report, "Basic reader-secret", codes.Unauthenticated},
		{report, "Bearer wrong", codes.Unauthenticated},
		{report, "Bearer broken", codes.Unavailable},
		{report, "Bearer nobody-secret", codes.PermissionDenied},
		{report, "Bearer reader-secret", codes.OK},
		{report, "bearer reader-secret", codes.OK},
		{prepare, "Bearer reader-secret", codes.PermissionDenied},
		{prepare, "Bearer writer-secret", codes.OK},
		{release, "Bearer writer-secret", codes.OK},
		{sysctl, "Bearer writer-secret", codes.PermissionDenied},
		{"/nodeagent.v1.NodeAgent/Unknown", "Bearer writer-secret", codes.PermissionDenied},
		{"/grpc.health.v1.Health/Check", "", codes.OK},
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "Bearer nobody-secret", codes.OK},
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "", codes.Unauthenticated},
	}
	for _, c := range cases {
		if got := status.Code(call(c.method, c.authz)); got != c.want {
			t.Errorf("%s with %q: got %v, want %v", c.method, c.authz, got, c.want)
		}
	}
	if err := call(prepare, "Bearer reader-secret"); !strings.Contains(status.Convert(err).Message(), "reader may not update nodes/disks.nodeagent.opsuite.io") {
		t.Errorf("denial message: %v", err)
	}
	for _, secret := range []string{"reader-secret", "writer-secret", "nobody-secret", "wrong"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("a token appears in the logs:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "user=writer") {
		t.Fatalf("calls are not logged with their caller:\n%s", logs.String())
	}

	// At info, a flood of calls without a valid token logs nothing; a denied caller does.
	logs.Reset()
	p.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	unary = p.Unary()
	for range 100 {
		if status.Code(call(report, "Bearer wrong")) != codes.Unauthenticated {
			t.Fatal("a wrong token was accepted")
		}
	}
	if logs.Len() != 0 {
		t.Fatalf("unauthenticated calls logged at info:\n%s", logs.String())
	}
	_ = call(prepare, "Bearer reader-secret")
	if !strings.Contains(logs.String(), "code=PermissionDenied") || !strings.Contains(logs.String(), "reader may not update nodes/disks.nodeagent.opsuite.io") {
		t.Fatalf("a denied call is not logged at info with its reason:\n%s", logs.String())
	}
	// A refusal of the handler's own is logged with what it told the caller.
	logs.Reset()
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer writer-secret"))
	_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: prepare}, func(context.Context, any) (any, error) {
		return nil, status.Error(codes.FailedPrecondition, "device /dev/loop9 has partitions")
	})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(logs.String(), "code=FailedPrecondition") || !strings.Contains(logs.String(), "device /dev/loop9 has partitions") {
		t.Fatalf("a refused call (%v) is not logged with its message:\n%s", err, logs.String())
	}
}

// TestPeerLimits: an address whose calls keep failing is refused with ResourceExhausted,
// before any review, once its burst is spent; callers elsewhere, and callers from that
// address whose token was authenticated recently, are not.
func TestPeerLimits(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	authn := &remembering{countingAuthn: countingAuthn{users: map[string]string{"reader-secret": "reader", "nobody-secret": "nobody"}}}
	peers := auth.NewPeerLimiter(auth.PeerLimits{Rate: 1, Burst: 5})
	peers.Now = clk.now
	p := auth.Policy{Authn: authn, Authz: grants{"reader": {{Verb: "get"}}}, Peers: peers}
	unary := p.Unary()
	call := func(ip, token string) codes.Code {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+token))
		_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/nodeagent.v1.NodeAgent/GetNodeReport"}, func(context.Context, any) (any, error) { return "ok", nil })
		return status.Code(err)
	}
	if c := call("10.0.0.1", "reader-secret"); c != codes.OK {
		t.Fatalf("reader: %v", c)
	}
	for i := range 5 {
		if c := call("10.0.0.1", fmt.Sprintf("forged-%d", i)); c != codes.Unauthenticated {
			t.Fatalf("forged %d: %v", i, c)
		}
	}
	reviews := authn.calls
	for i := range 100 {
		if c := call("10.0.0.1", fmt.Sprintf("more-%d", i)); c != codes.ResourceExhausted {
			t.Fatalf("past the burst: %v", c)
		}
	}
	if authn.calls != reviews {
		t.Fatalf("refused calls cost %d reviews", authn.calls-reviews)
	}
	// A denied identity drains the bucket too; here it is already empty.
	if c := call("10.0.0.1", "nobody-secret"); c != codes.ResourceExhausted {
		t.Fatalf("nobody past the burst: %v", c)
	}
	if c := call("10.0.0.1", "reader-secret"); c != codes.OK {
		t.Fatalf("the reader's known token from the flooding address: %v", c)
	}
	if c := call("10.0.0.2", "forged-x"); c != codes.Unauthenticated {
		t.Fatalf("another address: %v", c)
	}
	clk.t = clk.t.Add(2 * time.Second)
	for range 2 {
		if c := call("10.0.0.1", "forged-y"); c != codes.Unauthenticated {
			t.Fatalf("after 2s at 1/s: %v", c)
		}
	}
	if c := call("10.0.0.1", "forged-z"); c != codes.ResourceExhausted {
		t.Fatalf("the refill is spent: %v", c)
	}
	for i := range 5 {
		if c := call("10.0.0.3", "nobody-secret"); c != codes.PermissionDenied {
			t.Fatalf("nobody %d: %v", i, c)
		}
	}
	// Its known token goes on being denied (a cached decision costs nothing); anything else
	// from that address is refused.
	if c := call("10.0.0.3", "forged"); c != codes.ResourceExhausted {
		t.Fatalf("denied calls do not drain the bucket: %v", c)
	}
}

// remembering knows the tokens it authenticated, as CachedAuthenticator does for a while.
type remembering struct {
	countingAuthn
	known map[string]bool
}

func (r *remembering) Authenticate(ctx context.Context, token string) (auth.Identity, error) {
	id, err := r.countingAuthn.Authenticate(ctx, token)
	if err == nil {
		if r.known == nil {
			r.known = map[string]bool{}
		}
		r.known[token] = true
	}
	return id, err
}

func (r *remembering) Known(token string) bool { return r.known[token] }
