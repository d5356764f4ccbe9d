package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNoAgent means no ready agent pod runs on the node (yet): requeue, do not retry at once.
var ErrNoAgent = errors.New("no ready node-agent pod on the node")

// Resolver finds the address (host:port) of a node's agent, or ErrNoAgent.
type Resolver interface {
	Address(ctx context.Context, node string) (string, error)
}

// StaticResolver maps node names to addresses, for tests and diagnostics.
type StaticResolver map[string]string

// Address implements Resolver.
func (s StaticResolver) Address(_ context.Context, node string) (string, error) {
	if a, ok := s[node]; ok {
		return a, nil
	}
	return "", fmt.Errorf("nodeagent: node %s: %w", node, ErrNoAgent)
}

// PodNodeNameField is the field the agent's pods are looked up by: the index
// IndexPodsByNode adds to a cache, and the apiserver's own field selector.
const PodNodeNameField = "spec.nodeName"

// PodResolver finds the ready agent pod on a node among the DaemonSet's pods.
type PodResolver struct {
	// Pods reads the agent's pods: the manager's cache (with IndexPodsByNode, and pods limited
	// by PodCacheByObject) or, uncached, the manager's APIReader.
	Pods client.Reader
	// Namespace and Selector are the DaemonSet's namespace and pod labels.
	Namespace string
	Selector  labels.Selector
	// Port is the agent's gRPC port.
	Port int
}

// Address implements Resolver.
func (r *PodResolver) Address(ctx context.Context, node string) (string, error) {
	var pods corev1.PodList
	err := r.Pods.List(ctx, &pods, client.InNamespace(r.Namespace),
		client.MatchingLabelsSelector{Selector: r.Selector}, client.MatchingFields{PodNodeNameField: node})
	if err != nil {
		return "", fmt.Errorf("nodeagent: listing agent pods on node %s: %w", node, err)
	}
	// During a rolling update two pods may share a node; prefer the newest ready one.
	items := pods.Items
	sort.Slice(items, func(i, j int) bool {
		return items[j].CreationTimestamp.Before(&items[i].CreationTimestamp)
	})
	for _, p := range items {
		ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		if ready && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(r.Port)), nil
		}
	}
	return "", fmt.Errorf("nodeagent: node %s: %w", node, ErrNoAgent)
}

// IndexPodsByNode lets a cache answer PodResolver's lookup by node (call it on the manager's
// field indexer before the manager starts).
func IndexPodsByNode(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Pod{}, PodNodeNameField, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	})
}

// PodCacheByObject limits a cache's pods to the agent's (cache.Options.ByObject[&corev1.Pod{}]),
// so the caller needs list and watch on pods in the agent's namespace only. A caller that
// caches pods of its own needs a separate cache for these.
func PodCacheByObject(namespace string, selector labels.Selector) cache.ByObject {
	return cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}, Label: selector}
}
