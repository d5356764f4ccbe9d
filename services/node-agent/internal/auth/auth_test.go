package auth_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
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
	if !strings.Contains(logs.String(), "code=PermissionDenied") {
		t.Fatalf("a denied call is not logged at info:\n%s", logs.String())
	}
}
