package manager_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/opsuite/suite/shared/manager"
	"github.com/opsuite/suite/shared/testenv"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// metricsCallers creates two ServiceAccounts in a new namespace: reader, bound to a
// ClusterRole that may get the nonResourceURL /metrics (as the charts' metrics-reader
// ClusterRole), and stranger, bound to nothing. It returns a token of each.
func metricsCallers(t *testing.T) (reader, stranger string) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "metrics-")
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	token := func(name string) string {
		if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	return token("reader"), token("stranger")
}

// scrape GETs url with the given Authorization header ("" sends none) and returns the
// status code and the body.
func scrape(t *testing.T, c *http.Client, url, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestMetricsServeOnlyAuthorizedCallers runs an operator binary's manager with its default
// secure metrics and scrapes it as a Prometheus would, with the test API server judging
// every token.
func TestMetricsServeOnlyAuthorizedCallers(t *testing.T) {
	reader, stranger := metricsCallers(t)
	addr := testenv.FreeAddr(t)
	runOperator(t, manager.Operator{Name: "metrics-operator"}, "--leader-elect=false", "--metrics-bind-address", addr,
		"--health-probe-bind-address", testenv.FreeAddr(t))
	// The certificate is self-signed at start (TestMetricsServeTheMountedCertificate covers
	// a verifiable one); what is under test here is who may read.
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // self-signed test certificate
	}}
	url := "https://" + addr + "/metrics"
	servedCert(t, addr, nil) // the endpoint is up

	for _, tc := range []struct {
		caller, authorization string
		want                  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"basic credentials, not a bearer token", "Basic dXNlcjpwYXNz", http.StatusUnauthorized},
		{"an empty bearer token", "Bearer ", http.StatusUnauthorized},
		{"a token the API server rejects", "Bearer not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without the metrics-reader ClusterRole", "Bearer " + stranger, http.StatusForbidden},
		{"a ServiceAccount bound to the metrics-reader ClusterRole", "Bearer " + reader, http.StatusOK},
		{"the same, scheme in lower case", "bearer " + reader, http.StatusOK},
	} {
		code, body := scrape(t, c, url, tc.authorization)
		if code != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.caller, code, body, tc.want)
			continue
		}
		if code == http.StatusOK && !strings.Contains(body, "rest_client_requests_total") {
			t.Errorf("%s: 200 without controller-runtime's metrics: %.300s", tc.caller, body)
		}
		if code != http.StatusOK && strings.Contains(body, "rest_client_requests_total") {
			t.Errorf("%s: %d with the metrics in the body", tc.caller, code)
		}
	}
}

// countingTokens and countingAccess count the reviews the real API server is asked for.
type countingTokens struct {
	next interface {
		Create(context.Context, *authenticationv1.TokenReview, metav1.CreateOptions) (*authenticationv1.TokenReview, error)
	}
	n atomic.Int64
}

func (c *countingTokens) Create(ctx context.Context, r *authenticationv1.TokenReview, o metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	c.n.Add(1)
	return c.next.Create(ctx, r, o)
}

type countingAccess struct {
	next interface {
		Create(context.Context, *authorizationv1.SubjectAccessReview, metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
	}
	n atomic.Int64
}

func (c *countingAccess) Create(ctx context.Context, r *authorizationv1.SubjectAccessReview, o metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	c.n.Add(1)
	return c.next.Create(ctx, r, o)
}

// TestMetricsAuthCachesDecisions checks the cache lifetimes against the real API server's
// reviews: a token's review for a minute, an allow for five, a deny for thirty seconds, a
// bounded number of entries; an unreachable API server is a 500 and is not cached.
func TestMetricsAuthCachesDecisions(t *testing.T) {
	reader, stranger := metricsCallers(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	tokens := &countingTokens{next: cs.AuthenticationV1().TokenReviews()}
	access := &countingAccess{next: cs.AuthorizationV1().SubjectAccessReviews()}
	clock := clocktesting.NewFakeClock(time.Now())
	var sawAuthorization atomic.Bool
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuthorization.Store(r.Header.Get("Authorization") != "")
		_, _ = io.WriteString(w, "ok\n")
	})
	// serve starts the filter, with caches of size entries, in front of metrics.
	serve := func(size int) string {
		handler, err := manager.MetricsFilterWith(tokens, access, clock, size)(logr.Discard(), metrics)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(handler)
		t.Cleanup(srv.Close)
		return srv.URL + "/metrics"
	}
	// step scrapes url as token and checks the answer and how many reviews of each kind it
	// cost.
	step := func(url, what, token string, want int, wantTokenReviews, wantAccessReviews int64) {
		t.Helper()
		t0, a0 := tokens.n.Load(), access.n.Load()
		if code, body := scrape(t, http.DefaultClient, url, "Bearer "+token); code != want {
			t.Errorf("%s: %d %q, want %d", what, code, body, want)
		}
		if dt, da := tokens.n.Load()-t0, access.n.Load()-a0; dt != wantTokenReviews || da != wantAccessReviews {
			t.Errorf("%s: %d TokenReviews and %d SubjectAccessReviews, want %d and %d", what, dt, da, wantTokenReviews, wantAccessReviews)
		}
	}

	url := serve(16)
	step(url, "reader, first", reader, http.StatusOK, 1, 1)
	if sawAuthorization.Load() {
		t.Error("the metrics handler saw the caller's Authorization header")
	}
	step(url, "reader, again", reader, http.StatusOK, 0, 0)
	step(url, "stranger, first", stranger, http.StatusForbidden, 1, 1)
	step(url, "stranger, again", stranger, http.StatusForbidden, 0, 0)
	step(url, "a rejected token, first", "not-a-token", http.StatusUnauthorized, 1, 0)
	step(url, "a rejected token, again", "not-a-token", http.StatusUnauthorized, 0, 0)

	clock.Step(manager.DenyTTL + time.Second)
	step(url, "stranger, deny expired", stranger, http.StatusForbidden, 0, 1)
	step(url, "reader, allow still cached", reader, http.StatusOK, 0, 0)

	clock.Step(manager.TokenTTL)
	step(url, "reader, token review expired", reader, http.StatusOK, 1, 0)
	step(url, "a rejected token, expired", "not-a-token", http.StatusUnauthorized, 1, 0)
	clock.Step(manager.AllowTTL)
	step(url, "reader, both expired", reader, http.StatusOK, 1, 1)

	// Two entries per cache: a third token evicts the least recently used one.
	url = serve(2)
	step(url, "bounded: reader", reader, http.StatusOK, 1, 1)
	step(url, "bounded: stranger", stranger, http.StatusForbidden, 1, 1)
	step(url, "bounded: a rejected token evicts reader's review", "not-a-token", http.StatusUnauthorized, 1, 0)
	step(url, "bounded: reader, review evicted, allow kept", reader, http.StatusOK, 1, 0)
	step(url, "bounded: stranger, review evicted, deny kept", stranger, http.StatusForbidden, 1, 0)

	// An API server that cannot be reached: 500, and the next scrape asks again.
	dead := &rest.Config{Host: "https://" + testenv.FreeAddr(t), Timeout: 5 * time.Second}
	deadCS := kubernetes.NewForConfigOrDie(dead)
	handler, err := manager.MetricsFilterWith(deadCS.AuthenticationV1().TokenReviews(), deadCS.AuthorizationV1().SubjectAccessReviews(), clock, 2)(logr.Discard(), metrics)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+reader)
	handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("API server unreachable: %d %q, want 500", rec.Code, rec.Body)
	}
}
