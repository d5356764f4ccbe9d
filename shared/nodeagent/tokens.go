package nodeagent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// TokenRequester mints, with the TokenRequest API, tokens of the caller's own ServiceAccount
// for one node's agent each, and reuses each until shortly before it expires. The caller
// needs create on serviceaccounts/token for its own ServiceAccount.
type TokenRequester struct {
	accounts corev1client.ServiceAccountInterface
	name     string
	lifetime time.Duration
	now      func() time.Time

	mu     sync.Mutex
	tokens map[string]mintedToken
}

type mintedToken struct {
	token     string
	refreshAt time.Time
	expires   time.Time
}

// DefaultTokenLifetime is what TokenRequester asks for: the apiserver's minimum, since a
// token for one node is worth little and a short life limits a leak.
const DefaultTokenLifetime = 10 * time.Minute

// NewTokenRequester mints tokens for ServiceAccount namespace/name through cfg. An empty
// namespace and name mean cfg's own ServiceAccount, read from the claims of its bearer token
// (in a pod, the projected token rest.InClusterConfig uses).
func NewTokenRequester(cfg *rest.Config, namespace, name string) (*TokenRequester, error) {
	if namespace == "" && name == "" {
		var err error
		if namespace, name, err = ServiceAccountOf(cfg); err != nil {
			return nil, err
		}
	}
	if namespace == "" || name == "" {
		return nil, errors.New("nodeagent: a ServiceAccount needs both a namespace and a name")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("nodeagent: %w", err)
	}
	return &TokenRequester{
		accounts: cs.CoreV1().ServiceAccounts(namespace), name: name,
		lifetime: DefaultTokenLifetime, now: time.Now, tokens: map[string]mintedToken{},
	}, nil
}

// Token implements TokenSource.
func (r *TokenRequester) Token(ctx context.Context, audience string) (string, error) {
	now := r.now()
	r.mu.Lock()
	t, ok := r.tokens[audience]
	r.mu.Unlock()
	if ok && now.Before(t.refreshAt) {
		return t.token, nil
	}
	secs := int64(r.lifetime / time.Second)
	tr, err := r.accounts.CreateToken(ctx, r.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		if ok && now.Before(t.expires) {
			return t.token, nil // still valid: the apiserver's hiccup need not fail the call
		}
		return "", fmt.Errorf("requesting a token of ServiceAccount %s for %s: %w", r.name, audience, err)
	}
	expires := tr.Status.ExpirationTimestamp.Time
	// Renew when a fifth of the life is left: the agent must never see an expired token.
	t = mintedToken{token: tr.Status.Token, expires: expires, refreshAt: expires.Add(-expires.Sub(now) / 5)}
	r.mu.Lock()
	defer r.mu.Unlock()
	for a, old := range r.tokens { // nodes come and go: forget what expired
		if !now.Before(old.expires) {
			delete(r.tokens, a)
		}
	}
	r.tokens[audience] = t
	return t.token, nil
}

// ServiceAccountOf reads namespace and name of the ServiceAccount whose token cfg carries
// (BearerToken, or BearerTokenFile as in a pod).
func ServiceAccountOf(cfg *rest.Config) (namespace, name string, err error) {
	tok := cfg.BearerToken
	if tok == "" && cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return "", "", fmt.Errorf("nodeagent: reading the ServiceAccount token: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", "", errors.New("nodeagent: the client's credentials are not a ServiceAccount token; name the ServiceAccount")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", "", fmt.Errorf("nodeagent: decoding the ServiceAccount token: %w", err)
	}
	var claims struct {
		Subject string `json:"sub"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", "", fmt.Errorf("nodeagent: decoding the ServiceAccount token: %w", err)
	}
	sa, ok := strings.CutPrefix(claims.Subject, "system:serviceaccount:")
	namespace, name, ok2 := strings.Cut(sa, ":")
	if !ok || !ok2 || namespace == "" || name == "" {
		return "", "", fmt.Errorf("nodeagent: token subject %q is not a ServiceAccount", claims.Subject)
	}
	return namespace, name, nil
}
