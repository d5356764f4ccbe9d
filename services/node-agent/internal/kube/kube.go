// Package kube is the only package of the agent that talks to the apiserver: token reviews,
// access reviews and the Node's labels.
package kube

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/opsuite/suite/services/node-agent/internal/auth"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TokenReviewer authenticates tokens with TokenReview for the agent's audience. Successful
// reviews are cached briefly (keyed by the token's hash, never the token) because a controller
// calls several methods in a row.
type TokenReviewer struct {
	Client kubernetes.Interface
	TTL    time.Duration

	mu    sync.Mutex
	cache map[[32]byte]cached
}

type cached struct {
	id      auth.Identity
	expires time.Time
}

// Authenticate implements auth.Authenticator.
func (t *TokenReviewer) Authenticate(ctx context.Context, token string) (auth.Identity, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	t.mu.Lock()
	if c, ok := t.cache[key]; ok && now.Before(c.expires) {
		t.mu.Unlock()
		return c.id, nil
	}
	t.mu.Unlock()

	tr, err := t.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{auth.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return auth.Identity{}, fmt.Errorf("creating TokenReview: %w", err)
	}
	if !tr.Status.Authenticated || !slices.Contains(tr.Status.Audiences, auth.Audience) {
		return auth.Identity{}, auth.ErrUnauthenticated
	}
	u := tr.Status.User
	id := auth.Identity{User: u.Username, UID: u.UID, Groups: u.Groups, Extra: map[string][]string{}}
	for k, v := range u.Extra {
		id.Extra[k] = v
	}
	if t.TTL > 0 {
		t.mu.Lock()
		if t.cache == nil || len(t.cache) > 1024 {
			t.cache = map[[32]byte]cached{} // crude bound: tokens are few, a reset is cheap
		}
		t.cache[key] = cached{id: id, expires: now.Add(t.TTL)}
		t.mu.Unlock()
	}
	return id, nil
}

// AccessReviewer authorizes with SubjectAccessReview on the agent's virtual resource, named
// after the node so RBAC can restrict a caller to some nodes.
type AccessReviewer struct {
	Client   kubernetes.Interface
	NodeName string
}

// Authorize implements auth.Authorizer.
func (a *AccessReviewer) Authorize(ctx context.Context, id auth.Identity, at auth.Attributes) (bool, string, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range id.Extra {
		extra[k] = v
	}
	sar, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
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
