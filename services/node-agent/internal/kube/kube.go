// Package kube is the only package of the agent that talks to the apiserver: token reviews,
// access reviews and the Node's labels.
package kube

import (
	"context"
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

// NewPolicy is the agent's policy for nodeName: tokens reviewed for contract.Audience(nodeName),
// access reviewed on that node, both cached as cfg says.
func NewPolicy(client kubernetes.Interface, nodeName string, cfg auth.CacheConfig, log *slog.Logger) auth.Policy {
	audience := contract.Audience(nodeName)
	return auth.Policy{
		Authn: auth.NewCachedAuthenticator(&TokenReviewer{Reviews: client.AuthenticationV1().TokenReviews(), Audience: audience}, audience, cfg),
		Authz: auth.NewCachedAuthorizer(&AccessReviewer{Reviews: client.AuthorizationV1().SubjectAccessReviews(), NodeName: nodeName}, cfg),
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
