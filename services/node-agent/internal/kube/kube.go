// Package kube is the only package of the agent that talks to the apiserver: token reviews,
// access reviews and the Node's labels.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"github.com/opsuite/suite/shared/nodeagent/contract"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// TokenReviewer authenticates tokens with a TokenReview for the agent's own audience (its
// node's), and refuses a token the apiserver did not confirm for that audience. It asks the
// apiserver every time: NewPolicy puts auth's cache in front of it.
type TokenReviewer struct {
	Reviews  authenticationv1client.TokenReviewInterface
	Audience string
}

// Authenticate implements auth.Authenticator.
func (t *TokenReviewer) Authenticate(ctx context.Context, token string) (auth.Identity, error) {
	tr, err := t.Reviews.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{t.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return auth.Identity{}, fmt.Errorf("creating TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return auth.Identity{}, fmt.Errorf("%w: the apiserver did not authenticate it", auth.ErrUnauthenticated)
	}
	if !slices.Contains(tr.Status.Audiences, t.Audience) {
		return auth.Identity{}, fmt.Errorf("%w: its audience is not %s", auth.ErrUnauthenticated, t.Audience)
	}
	u := tr.Status.User
	id := auth.Identity{User: u.Username, UID: u.UID, Groups: u.Groups, Extra: map[string][]string{}}
	for k, v := range u.Extra {
		id.Extra[k] = v
	}
	return id, nil
}

// AccessReviewer authorizes with SubjectAccessReview on the agent's virtual resource, named
// after the node so RBAC resourceNames can restrict a caller to some nodes.
type AccessReviewer struct {
	Reviews  authorizationv1client.SubjectAccessReviewInterface
	NodeName string
}

// Authorize implements auth.Authorizer.
func (a *AccessReviewer) Authorize(ctx context.Context, id auth.Identity, at auth.Attributes) (bool, string, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range id.Extra {
		extra[k] = v
	}
	sar, err := a.Reviews.Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: id.User, UID: id.UID, Groups: id.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: auth.Group, Resource: auth.Resource, Subresource: at.Subresource,
				Name: a.NodeName, Verb: at.Verb,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("creating SubjectAccessReview: %w", err)
	}
	return sar.Status.Allowed, sar.Status.Reason, nil
}

// IssuerKeys reads the apiserver's service-account issuer (its OIDC discovery document) and
// signing keys through the agent's own client; the agent's ServiceAccount needs the
// system:service-account-issuer-discovery ClusterRole, which the chart binds. The keys are
// read from /openid/v1/jwks on the apiserver itself, whatever jwks_uri the document
// advertises to the outside.
type IssuerKeys struct {
	Client rest.Interface
}

// IssuerKeys implements auth.KeySource.
func (k IssuerKeys) IssuerKeys(ctx context.Context) (string, []byte, error) {
	raw, err := k.Client.Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("getting /.well-known/openid-configuration: %w", err)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", nil, fmt.Errorf("reading /.well-known/openid-configuration: %w", err)
	}
	jwks, err := k.Client.Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("getting /openid/v1/jwks: %w", err)
	}
	return doc.Issuer, jwks, nil
}

// PolicyOptions tune NewPolicyWith.
type PolicyOptions struct {
	// Cache is how long reviews are reused.
	Cache auth.CacheConfig
	// Peers limit the failed calls of each remote IP.
	Peers auth.PeerLimits
	// KeyRefresh is the least time between two fetches of the issuer's keys (default 10s).
	KeyRefresh time.Duration
}

// NewPolicy is NewPolicyWith with the default limits.
func NewPolicy(client kubernetes.Interface, nodeName string, cfg auth.CacheConfig, log *slog.Logger) auth.Policy {
	return NewPolicyWith(client, nodeName, PolicyOptions{Cache: cfg}, log)
}

// NewPolicyWith is the agent's policy for nodeName: tokens verified locally against the
// apiserver's issuer keys for contract.Audience(nodeName), then reviewed (TokenReview: the
// token is not revoked), access reviewed on that node, both cached; failed calls limited per
// remote IP.
func NewPolicyWith(client kubernetes.Interface, nodeName string, o PolicyOptions, log *slog.Logger) auth.Policy {
	audience := contract.Audience(nodeName)
	v := &auth.Verifier{Audience: audience, Keys: IssuerKeys{Client: client.Discovery().RESTClient()}, MinRefresh: o.KeyRefresh}
	return auth.Policy{
		Authn: auth.NewVerifiedAuthenticator(&TokenReviewer{Reviews: client.AuthenticationV1().TokenReviews(), Audience: audience}, v, o.Cache),
		Authz: auth.NewCachedAuthorizer(&AccessReviewer{Reviews: client.AuthorizationV1().SubjectAccessReviews(), NodeName: nodeName}, o.Cache),
		Peers: auth.NewPeerLimiter(o.Peers),
		Log:   log,
	}
}

// NodeLabels reads the labels of the agent's Node, cached for a short while because every
// report needs them and they rarely change.
type NodeLabels struct {
	Client   kubernetes.Interface
	NodeName string
	TTL      time.Duration

	mu      sync.Mutex
	labels  map[string]string
	fetched time.Time
}

// NodeLabels implements server.NodeLabels.
func (n *NodeLabels) NodeLabels(ctx context.Context) (map[string]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.labels != nil && time.Since(n.fetched) < n.TTL {
		return n.labels, nil
	}
	node, err := n.Client.CoreV1().Nodes().Get(ctx, n.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting node %s: %w", n.NodeName, err)
	}
	n.labels, n.fetched = node.Labels, time.Now()
	return n.labels, nil
}
