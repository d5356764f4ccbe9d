package kube_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"github.com/opsuite/suite/services/node-agent/internal/kube"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/contract"
	"github.com/opsuite/suite/shared/nodeagent/nodeagenttest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiCalls counts what the agent's client asks the apiserver, by kind; TokenReviews of the
// tokens in forged are counted apart.
type apiCalls struct {
	tokenReviews, forgedReviews, accessReviews, jwks atomic.Int64
	forged                                           map[string]bool
}

func (c *apiCalls) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch p := r.URL.Path; {
		case strings.HasSuffix(p, "/tokenreviews"):
			c.tokenReviews.Add(1)
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var tr authenticationv1.TokenReview
			if json.Unmarshal(body, &tr) != nil {
				panic("the agent's TokenReview is not JSON: set ContentType")
			}
			if c.forged[tr.Spec.Token] {
				c.forgedReviews.Add(1)
			}
		case strings.HasSuffix(p, "/subjectaccessreviews"):
			c.accessReviews.Add(1)
		case p == "/openid/v1/jwks":
			c.jwks.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// reportOnly answers reports: behind the real interceptor it stands for the agent's service,
// whose work is not what this test measures.
type reportOnly struct {
	nodeagentv1.UnimplementedNodeAgentServer
}

func (reportOnly) GetNodeReport(context.Context, *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	return &nodeagentv1.GetNodeReportResponse{NodeName: "node-a"}, nil
}

// dialFrom dials TCP from a given loopback address, so the agent sees distinct peers.
func dialFrom(ip string) func(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
}

// forgeries are distinct tokens with node-a's audience and a live expiry, built on a real
// token's claims, that the apiserver's issuer did not sign: each would cost a TokenReview if
// its unverified claims were trusted.
func forgeries(real string, n int) []string {
	parts := strings.Split(real, ".")
	enc := base64.RawURLEncoding.EncodeToString
	var claims map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	_ = json.Unmarshal(raw, &claims)
	var header map[string]string
	raw, _ = base64.RawURLEncoding.DecodeString(parts[0])
	_ = json.Unmarshal(raw, &header)
	out := make([]string, 0, n)
	for i := range n {
		c := maps(claims)
		c["jti"] = fmt.Sprintf("forged-%d", i)
		h := maps(header)
		sig := parts[2]
		switch i % 4 {
		case 0: // the real key's kid, claims changed under its signature
		case 1: // a kid the issuer does not have
			h["kid"] = fmt.Sprintf("forged-%d", i)
		case 2: // no signature at all
			h["alg"], sig = "none", ""
		case 3: // random bytes for a signature
			sig = enc(fmt.Appendf(nil, "%064d", i))
		}
		hb, _ := json.Marshal(h)
		cb, _ := json.Marshal(c)
		out = append(out, enc(hb)+"."+enc(cb)+"."+sig)
	}
	return out
}

func maps[V any](m map[string]V) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestForgedFloodCostsNoReviews runs the agent's real policy (local signature check against
// the apiserver's issuer keys, TokenReview, SubjectAccessReview, per-peer limits) behind a
// TLS gRPC listener on TCP, with a client sized as the agent's: 2000 distinct forged tokens
// from 8 addresses make no TokenReview, while real callers, one of them on a flooding
// address, keep being answered. The figures (reviews, refusals, real calls' p99) are logged.
func TestForgedFloodCostsNoReviews(t *testing.T) {
	t.Run("signature check alone", func(t *testing.T) {
		// Limits so high that every forgery reaches the signature check.
		floodAgent(t, auth.PeerLimits{Rate: 1e6, Burst: 1 << 30}, false)
	})
	t.Run("with the per-peer limits", func(t *testing.T) {
		floodAgent(t, auth.PeerLimits{}, true)
	})
}

func floodAgent(t *testing.T, limits auth.PeerLimits, wantExhausted bool) {
	ctx := context.Background()
	cs := setup(t)
	// The forgeries are made first, so the transport can tell their reviews from real ones.
	forged := forgeries(token(t, cs, "reader", contract.Audience("node-a")), 2000)
	calls := &apiCalls{forged: map[string]bool{}}
	for _, f := range forged {
		calls.forged[f] = true
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 50, 100 // the agent's --kube-api-qps and --kube-api-burst defaults
	cfg.ContentType = "application/json"
	cfg.Wrap(calls.wrap)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	policy := kube.NewPolicyWith(client, "node-a", kube.PolicyOptions{
		// Reviews are reused briefly, so real callers need TokenReviews during the flood too.
		Cache: auth.CacheConfig{Allowed: 200 * time.Millisecond}, Peers: limits,
	}, nil)
	pki := nodeagenttest.MustPKI(t, "node-agent.flood.svc")
	gs := server.NewGRPCServer(reportOnly{}, policy, credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pki.Cert}, MinVersion: tls.VersionTLS12,
	}), server.NewHealth(), nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	addr := lis.Addr().String()

	// Real callers: the reader ServiceAccount through shared/nodeagent, each with its own
	// token, three from 127.0.0.1 and one from 127.0.0.2, an address that also floods.
	realFrom := []string{"127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2"}
	var pools []*nodeagent.Pool
	for _, ip := range realFrom {
		tokens, err := nodeagent.NewTokenRequester(env.Config, ns, "reader")
		if err != nil {
			t.Fatal(err)
		}
		p, err := nodeagent.NewPool(nodeagent.Config{
			Resolver: nodeagent.StaticResolver{"node-a": addr},
			CA:       nodeagent.StaticCA{Pool: pki.Pool, ServerName: pki.ServerName},
			Tokens:   tokens, DialContext: dialFrom(ip),
			Options: nodeagent.Options{Timeout: 10 * time.Second, Attempts: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		pools = append(pools, p)
		// Each caller's first call is reviewed before the flood: a caller that has proved
		// who it is is never held back by its address's limit.
		if _, err := p.Node("node-a").GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); err != nil {
			t.Fatalf("before the flood: %v", err)
		}
	}
	if n := calls.jwks.Load(); n != 1 {
		t.Errorf("the issuer keys were fetched %d times, want once", n)
	}
	reviewsBefore, jwksBefore := calls.tokenReviews.Load(), calls.jwks.Load()

	// The flood: 8 addresses, 250 distinct forgeries each, over about 3s (~670 calls/s).
	var (
		wg          sync.WaitGroup
		refusals    sync.Map // codes.Code -> *atomic.Int64
		floodDone   = make(chan struct{})
		floodActive sync.WaitGroup
	)
	count := func(c codes.Code) {
		v, _ := refusals.LoadOrStore(c, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	began := time.Now()
	for i := range 8 {
		ip := fmt.Sprintf("127.0.0.%d", 2+i)
		conn, err := grpc.NewClient("passthrough:///"+addr,
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pki.Pool, ServerName: pki.ServerName})),
			grpc.WithContextDialer(dialFrom(ip)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		c := nodeagentv1.NewNodeAgentClient(conn)
		floodActive.Add(1)
		go func() {
			defer floodActive.Done()
			tick := time.NewTicker(12 * time.Millisecond)
			defer tick.Stop()
			for _, tok := range forged[i*250 : (i+1)*250] {
				<-tick.C
				cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok), 5*time.Second)
				_, err := c.GetNodeReport(cctx, &nodeagentv1.GetNodeReportRequest{})
				cancel()
				count(status.Code(err))
			}
		}()
	}
	go func() { floodActive.Wait(); close(floodDone) }()

	var (
		mu        sync.Mutex
		latencies []time.Duration
		failures  []error
	)
	for _, p := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-floodDone:
					return
				default:
				}
				start := time.Now()
				_, err := p.Node("node-a").GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
				mu.Lock()
				latencies = append(latencies, time.Since(start))
				if err != nil {
					failures = append(failures, err)
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	flood := time.Since(began)

	var summary []string
	refusals.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%v=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(summary)
	slices.Sort(latencies)
	p99 := latencies[(len(latencies)*99)/100]
	reviews, jwks := calls.forgedReviews.Load(), calls.jwks.Load()-jwksBefore
	t.Logf("flood of %d forged tokens from 8 addresses in %s: %s; TokenReviews of forged tokens %d, of real ones %d, JWKS fetches %d; "+
		"%d real calls during it, p50 %s, p99 %s, max %s, failed %d",
		len(forged), flood.Round(time.Millisecond), strings.Join(summary, " "), reviews,
		calls.tokenReviews.Load()-reviewsBefore-reviews, jwks,
		len(latencies), latencies[len(latencies)/2].Round(time.Microsecond), p99.Round(time.Microsecond),
		latencies[len(latencies)-1].Round(time.Microsecond), len(failures))

	if reviews != 0 {
		t.Errorf("the flood made %d TokenReviews, want 0", reviews)
	}
	refusals.Range(func(k, _ any) bool {
		if c := k.(codes.Code); c != codes.Unauthenticated && c != codes.ResourceExhausted {
			t.Errorf("a forged token got %v", c)
		}
		return true
	})
	if _, ok := refusals.Load(codes.ResourceExhausted); ok != wantExhausted {
		t.Errorf("an address reached its limit of failed calls: %v, want %v", ok, wantExhausted)
	}
	// Unknown kids refresh the keys at most once per 10s (the default MinRefresh).
	if max := int64(flood/(10*time.Second)) + 1; jwks > max {
		t.Errorf("the flood made %d JWKS fetches in %s, want at most %d", jwks, flood, max)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d real calls failed during the flood, first: %v", len(failures), len(latencies), failures[0])
	}
	if len(latencies) < len(pools) {
		t.Errorf("only %d real calls during the flood", len(latencies))
	}

	// Validly signed tokens for another audience are refused locally too.
	before := calls.tokenReviews.Load()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pki.Pool, ServerName: pki.ServerName})),
		grpc.WithContextDialer(dialFrom("127.0.0.20")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tok := range []string{token(t, cs, "reader", contract.Audience("node-b")), token(t, cs, "reader")} {
		_, err := nodeagentv1.NewNodeAgentClient(conn).GetNodeReport(
			metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok), &nodeagentv1.GetNodeReportRequest{})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "audience is not") {
			t.Errorf("a signed token for another audience: %v", err)
		}
	}
	if n := calls.tokenReviews.Load() - before; n != 0 {
		t.Errorf("tokens for other audiences made %d TokenReviews", n)
	}
}
