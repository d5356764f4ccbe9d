package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Release names the node-agent chart's release an operator calls; the rest follows the
// chart's conventions.
type Release struct {
	// Namespace and Name are the release's.
	Namespace string
	Name      string
	// Fullname is the chart's fullname (its fullnameOverride); default as the chart derives
	// it from the release name. The CA ConfigMap is <Fullname>-ca.
	Fullname string
	// Port is the agent's gRPC port (the chart's grpc.port); default 9443.
	Port int
}

// DefaultPort is the node-agent chart's grpc.port.
const DefaultPort = 9443

func (r Release) fullname() string {
	if r.Fullname != "" {
		return r.Fullname
	}
	if strings.Contains(r.Name, "node-agent") {
		return r.Name
	}
	return r.Name + "-node-agent"
}

// Selector is the label selector of the release's agent pods.
func (r Release) Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "node-agent", "app.kubernetes.io/instance": r.Name})
}

// NewForManager makes the Pool an operator uses, run by its manager: the release's agent
// pods in a cache of their own (so the operator's other caches stay as they are, and it
// needs list and watch on pods in the agent's namespace only), the CA read from the
// ConfigMap <fullname>-ca through the manager's APIReader, and tokens of the manager's own
// ServiceAccount from TokenRequest. Call it before the manager starts; the pool closes when
// the manager stops.
func NewForManager(mgr manager.Manager, r Release, opts Options) (*Pool, error) {
	if r.Namespace == "" || r.Name == "" {
		return nil, errors.New("nodeagent: the node-agent release needs a namespace and a name")
	}
	if r.Port == 0 {
		r.Port = DefaultPort
	}
	pods, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: PodCacheByObject(r.Namespace, r.Selector())},
	})
	if err != nil {
		return nil, fmt.Errorf("nodeagent: the agent pods' cache: %w", err)
	}
	if err := IndexPodsByNode(context.Background(), pods); err != nil {
		return nil, fmt.Errorf("nodeagent: indexing agent pods by node: %w", err)
	}
	tokens, err := NewTokenRequester(mgr.GetConfig(), "", "")
	if err != nil {
		return nil, err
	}
	pool, err := NewPool(Config{
		Resolver: &PodResolver{Pods: pods, Namespace: r.Namespace, Selector: r.Selector(), Port: r.Port},
		CA:       ConfigMapCA{Reader: mgr.GetAPIReader(), Namespace: r.Namespace, Name: r.fullname() + "-ca"},
		Tokens:   tokens,
		Options:  opts,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(podCache{pods}); err != nil {
		return nil, err
	}
	if err := mgr.Add(closer{pool}); err != nil {
		return nil, err
	}
	return pool, nil
}

// podCache makes the manager start the cache with its own caches, before the controllers,
// and wait for it to sync, leader or not.
type podCache struct{ cache.Cache }

func (p podCache) GetCache() cache.Cache { return p.Cache }

// closer closes the pool when the manager stops, leader or not.
type closer struct{ pool *Pool }

func (c closer) Start(ctx context.Context) error {
	<-ctx.Done()
	return c.pool.Close()
}

func (closer) NeedLeaderElection() bool { return false }
