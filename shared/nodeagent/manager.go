package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Agents says where the node agents are and how to trust them, as an operator's chart tells
// it (AgentsFromEnv) or as the node-agent release implies (Release.Agents).
type Agents struct {
	// Namespace, Selector and Port find the agent pods and their gRPC port.
	Namespace string
	Selector  labels.Selector
	Port      int
	// CAConfigMap is the node-agent chart's ConfigMap <fullname>-ca in Namespace, read through
	// the manager's APIReader; CADir, when set, is the same ConfigMap mounted, and wins.
	CAConfigMap string
	CADir       string
	// TokenFile is the operator's own ServiceAccount token (apiserver audience) to request
	// per-node tokens with; empty: the manager's credentials.
	TokenFile string
}

// Environment variables AgentsFromEnv reads (the operator charts set them).
const (
	EnvNamespace   = "NODE_AGENT_NAMESPACE"
	EnvSelector    = "NODE_AGENT_SELECTOR"
	EnvPort        = "NODE_AGENT_PORT"
	EnvCAConfigMap = "NODE_AGENT_CA_CONFIGMAP"
	EnvCADir       = "NODE_AGENT_CA_DIR"
	EnvTokenFile   = "NODE_AGENT_TOKEN_FILE"
)

// AgentsFromEnv reads the NODE_AGENT_* variables; all problems are reported at once.
func AgentsFromEnv() (Agents, error) {
	var errs []error
	a := Agents{
		Namespace: os.Getenv(EnvNamespace), CAConfigMap: os.Getenv(EnvCAConfigMap),
		CADir: os.Getenv(EnvCADir), TokenFile: os.Getenv(EnvTokenFile), Port: DefaultPort,
	}
	if a.Namespace == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvNamespace))
	}
	sel, err := labels.Parse(os.Getenv(EnvSelector))
	if err != nil || sel.Empty() {
		errs = append(errs, fmt.Errorf("%s must be a non-empty label selector: %q", EnvSelector, os.Getenv(EnvSelector)))
	}
	a.Selector = sel
	if p := os.Getenv(EnvPort); p != "" {
		if a.Port, err = strconv.Atoi(p); err != nil || a.Port <= 0 || a.Port > 65535 {
			errs = append(errs, fmt.Errorf("%s must be a port number: %q", EnvPort, p))
		}
	}
	if a.CAConfigMap == "" && a.CADir == "" {
		errs = append(errs, fmt.Errorf("%s or %s is required", EnvCAConfigMap, EnvCADir))
	}
	if len(errs) > 0 {
		return Agents{}, fmt.Errorf("nodeagent: %w", errors.Join(errs...))
	}
	return a, nil
}

// Release names the node-agent chart's release an operator calls; Agents follows the
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

// Agents are the release's agents.
func (r Release) Agents() Agents {
	fullname := r.Fullname
	switch {
	case fullname != "":
	case strings.Contains(r.Name, "node-agent"):
		fullname = r.Name
	default:
		fullname = r.Name + "-node-agent"
	}
	port := r.Port
	if port == 0 {
		port = DefaultPort
	}
	return Agents{
		Namespace: r.Namespace, Port: port, CAConfigMap: fullname + "-ca",
		Selector: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "node-agent", "app.kubernetes.io/instance": r.Name}),
	}
}

// NewForManager makes the Pool an operator uses, run by its manager: the agent pods in a
// cache of their own (so the operator's other caches stay as they are, and it needs list and
// watch on pods in the agents' namespace only), the CA from the mounted or read ConfigMap,
// and tokens of the operator's own ServiceAccount from TokenRequest. Call it before the
// manager starts; the pool closes when the manager stops.
func NewForManager(mgr manager.Manager, a Agents, opts Options) (*Pool, error) {
	if a.Namespace == "" || a.Selector == nil || a.Selector.Empty() || a.Port == 0 {
		return nil, errors.New("nodeagent: the agents need a namespace, a pod selector and a port")
	}
	var ca CASource
	switch {
	case a.CADir != "":
		ca = DirCA(a.CADir)
	case a.CAConfigMap != "":
		ca = ConfigMapCA{Reader: mgr.GetAPIReader(), Namespace: a.Namespace, Name: a.CAConfigMap}
	default:
		return nil, errors.New("nodeagent: the agents' CA needs a ConfigMap or a directory")
	}
	cfg := mgr.GetConfig()
	if a.TokenFile != "" {
		cfg = rest.CopyConfig(cfg)
		cfg.BearerToken, cfg.BearerTokenFile = "", a.TokenFile
	}
	tokens, err := NewTokenRequester(cfg, "", "")
	if err != nil {
		return nil, err
	}
	pods, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: PodCacheByObject(a.Namespace, a.Selector)},
	})
	if err != nil {
		return nil, fmt.Errorf("nodeagent: the agent pods' cache: %w", err)
	}
	if err := IndexPodsByNode(context.Background(), pods); err != nil {
		return nil, fmt.Errorf("nodeagent: indexing agent pods by node: %w", err)
	}
	pool, err := NewPool(Config{
		Resolver: &PodResolver{Pods: pods, Namespace: a.Namespace, Selector: a.Selector, Port: a.Port},
		CA:       ca, Tokens: tokens, Options: opts,
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
