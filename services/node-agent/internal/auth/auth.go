// Package auth authenticates and authorizes every call to the agent: a bearer ServiceAccount
// token minted for this node's agent (audience contract.Audience(node)) checked by the
// apiserver, then one access review per method on the node, so Kubernetes RBAC decides who may
// read a report and who may format a disk, and on which nodes.
package auth

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/opsuite/suite/shared/nodeagent/contract"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Virtual resource the methods are authorized against (named after the node).
const (
	Group    = contract.Group
	Resource = contract.Resource
)

// Identity is who a token belongs to.
type Identity struct {
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Attributes describe what a call wants to do to the agent's node.
type Attributes struct {
	Verb        string
	Subresource string
}

// ErrUnauthenticated means the token is invalid, expired or for another audience (another
// node's agent). Authenticators wrap it with the reason, which never quotes the token.
var ErrUnauthenticated = errors.New("the bearer token is not valid for this agent")

// Authenticator checks a bearer token (with TokenReview in production).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Identity, error)
}

// Authorizer decides whether an identity may do something (with SubjectAccessReview).
type Authorizer interface {
	Authorize(ctx context.Context, id Identity, a Attributes) (allowed bool, reason string, err error)
}

// methodAttributes is the authorization of every method; a method missing here is denied.
var methodAttributes = map[string]Attributes{
	"/nodeagent.v1.NodeAgent/GetNodeReport": {Verb: "get"},
	"/nodeagent.v1.NodeAgent/PrepareDisks":  {Verb: "update", Subresource: contract.SubresourceDisks},
	"/nodeagent.v1.NodeAgent/ReleaseDisks":  {Verb: "update", Subresource: contract.SubresourceDisks},
	"/nodeagent.v1.NodeAgent/EnsureSysctl":  {Verb: "update", Subresource: contract.SubresourceSysctls},
}

// MethodAttributes returns a method's authorization, for tests and documentation.
func MethodAttributes(fullMethod string) (Attributes, bool) {
	a, ok := methodAttributes[fullMethod]
	return a, ok
}

// Policy applies authentication and authorization to calls.
type Policy struct {
	Authn Authenticator
	Authz Authorizer
	// Peers, when set, limits the failed calls of each remote IP (see PeerLimits).
	Peers *PeerLimiter
	Log   *slog.Logger
}

// knower is an Authenticator that can tell a recently authenticated token at no cost.
type knower interface{ Known(token string) bool }

// check decides one call. Health is open (probes carry no token); reflection needs a valid
// token but no permission, so anyone who may call the agent can discover it with grpcurl.
func (p Policy) check(ctx context.Context, fullMethod string) (Identity, error) {
	if strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") {
		return Identity{}, nil
	}
	id, err := p.checkToken(ctx, fullMethod)
	if p.Peers != nil {
		if c := status.Code(err); c == codes.Unauthenticated || c == codes.PermissionDenied {
			p.Peers.Failed(ctx)
		}
	}
	return id, err
}

func (p Policy) checkToken(ctx context.Context, fullMethod string) (Identity, error) {
	token, err := bearer(ctx)
	if p.Peers != nil && p.Peers.Exhausted(ctx) {
		// A caller whose token was authenticated recently costs nothing and goes on, even
		// from an address that also sends garbage (a node's IP shared by pods).
		if k, ok := p.Authn.(knower); err != nil || !ok || !k.Known(token) {
			return Identity{}, status.Error(codes.ResourceExhausted, "too many failed calls from this address: retry later")
		}
	}
	if err != nil {
		return Identity{}, err
	}
	id, err := p.Authn.Authenticate(ctx, token)
	if errors.Is(err, ErrUnauthenticated) {
		return Identity{}, status.Error(codes.Unauthenticated, err.Error())
	}
	if err != nil {
		return Identity{}, status.Errorf(codes.Unavailable, "reviewing the token: %v", err)
	}
	if strings.HasPrefix(fullMethod, "/grpc.reflection.") {
		return id, nil
	}
	attrs, ok := methodAttributes[fullMethod]
	if !ok {
		return id, status.Errorf(codes.PermissionDenied, "method %s is not allowed", fullMethod)
	}
	allowed, _, err := p.Authz.Authorize(ctx, id, attrs)
	if err != nil {
		return id, status.Errorf(codes.Unavailable, "reviewing access: %v", err)
	}
	if !allowed {
		res := Resource
		if attrs.Subresource != "" {
			res += "/" + attrs.Subresource
		}
		return id, status.Errorf(codes.PermissionDenied, "%s may not %s %s.%s", id.User, attrs.Verb, res, Group)
	}
	return id, nil
}

func bearer(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) != 1 {
		return "", status.Error(codes.Unauthenticated, "a bearer token is required in the authorization metadata")
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", status.Error(codes.Unauthenticated, "a bearer token is required in the authorization metadata")
	}
	return token, nil
}

// Unary authenticates, authorizes and logs unary calls. Logs carry the method, the caller and
// the outcome, never the token or the request.
func (p Policy) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		id, err := p.check(ctx, info.FullMethod)
		var resp any
		if err == nil {
			resp, err = handler(ctx, req)
		}
		p.logCall(info.FullMethod, id, start, err)
		return resp, err
	}
}

// Stream does the same for streaming calls (reflection, health watch).
func (p Policy) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		id, err := p.check(ss.Context(), info.FullMethod)
		if err == nil {
			err = handler(srv, ss)
		}
		p.logCall(info.FullMethod, id, start, err)
		return err
	}
}

func (p Policy) logCall(method string, id Identity, start time.Time, err error) {
	if p.Log == nil || strings.HasPrefix(method, "/grpc.health.v1.Health/") {
		return
	}
	code := status.Code(err)
	// Refusals of callers without a valid token, or over their address's limit, stay at
	// debug: a flood of them must cost no more in logs than in reviews.
	level := slog.LevelDebug
	if code != codes.OK && code != codes.Unauthenticated && code != codes.ResourceExhausted {
		level = slog.LevelInfo
	}
	attrs := []any{"method", method, "user", id.User, "code", code.String(), "duration", time.Since(start)}
	if code != codes.OK {
		// Why, as the caller read it: a refusal in the agent's log alone says nothing of
		// which rule refused.
		attrs = append(attrs, "message", status.Convert(err).Message())
	}
	p.Log.Log(context.Background(), level, "Handled call", attrs...)
}
