package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/opsuite/suite/services/vald-operator/internal/controller"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// operatorFlags registers the operator's own flags on fs. Each flag's default comes from an
// environment variable (named in its help) when that is set, else from the built-in
// default; a malformed variable is reported by the returned validate function.
func operatorFlags(fs *flag.FlagSet, o *controller.Options, getenv func(string) string) (validate func() error) {
	env := envDefaults{getenv: getenv}
	b := &o.Build
	fs.DurationVar(&o.RequeueAfter, "requeue-after", env.duration("REQUEUE_AFTER", o.RequeueAfter),
		"How long a Pending or Progressing release waits before it is checked again ($REQUEUE_AFTER).")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", env.int("MAX_CONCURRENT_RECONCILES", o.MaxConcurrentReconciles),
		"Releases reconciled at once ($MAX_CONCURRENT_RECONCILES).")
	fs.BoolVar(&o.RequireNodePoolMatch, "require-nodepool-match", env.bool("REQUIRE_NODEPOOL_MATCH", o.RequireNodePoolMatch),
		"Generate ValdReleases only for infrastructure entries whose node pools have Nodes labelled <prefix>/namespace=<namespace> and <prefix>/type=general|agent ($REQUIRE_NODEPOOL_MATCH).")
	fs.StringVar(&b.NodePoolLabelPrefix, "nodepool-label-prefix", env.string("NODEPOOL_LABEL_PREFIX", b.NodePoolLabelPrefix),
		"Prefix of the node-pool label keys; empty means the bare keys namespace and type ($NODEPOOL_LABEL_PREFIX).")
	fs.StringVar(&b.DefaultStorageClass, "default-storage-class", env.string("DEFAULT_STORAGE_CLASS", b.DefaultStorageClass),
		"Storage class of agent volumes when a release names none; empty uses the cluster default ($DEFAULT_STORAGE_CLASS).")
	fs.StringVar(&b.DefaultAccessMode, "default-access-mode", env.string("DEFAULT_ACCESS_MODE", b.DefaultAccessMode),
		"Access mode of agent volumes when a release names none ($DEFAULT_ACCESS_MODE).")
	fs.Float64Var(&b.PVMemoryRatio, "pv-memory-ratio", env.float("PV_MEMORY_RATIO", b.PVMemoryRatio),
		"Agent volume size as a multiple of the agent node's memory, rounded up to GiB ($PV_MEMORY_RATIO).")
	b.PVMinSize = env.quantity("PV_MIN_SIZE", b.PVMinSize)
	b.PVMaxSize = env.quantity("PV_MAX_SIZE", b.PVMaxSize)
	fs.Var(quantityValue{&b.PVMinSize}, "pv-min-size", "Smallest agent volume, and the size when the pool gives no memory ($PV_MIN_SIZE).")
	fs.Var(quantityValue{&b.PVMaxSize}, "pv-max-size", "Largest agent volume; 0 means no cap ($PV_MAX_SIZE).")
	fs.Float64Var(&b.AgentResourceFraction, "agent-resource-fraction", env.float("AGENT_RESOURCE_FRACTION", b.AgentResourceFraction),
		"Share of an agent node's CPU and memory an agent requests ($AGENT_RESOURCE_FRACTION).")
	fs.StringVar(&b.GatewayServiceType, "gateway-service-type", env.string("GATEWAY_SERVICE_TYPE", b.GatewayServiceType),
		"Gateway Service type when a release names none: ClusterIP, NodePort or LoadBalancer ($GATEWAY_SERVICE_TYPE).")
	fs.StringVar(&b.IngressDomain, "ingress-domain", env.string("INGRESS_DOMAIN", b.IngressDomain),
		"Domain of an enabled ingress without a host: <cluster name>.<domain> ($INGRESS_DOMAIN).")
	fs.StringVar(&b.DiscovererKind, "discoverer-kind", env.string("DISCOVERER_KIND", b.DiscovererKind),
		"Discoverer workload when a release names none: DaemonSet or Deployment ($DISCOVERER_KIND).")
	b.DiscovererMaxUnavailable = env.intOrString("DISCOVERER_MAX_UNAVAILABLE", b.DiscovererMaxUnavailable)
	fs.Var(intOrStringValue{&b.DiscovererMaxUnavailable}, "discoverer-max-unavailable",
		"Rolling-update maxUnavailable of a DaemonSet discoverer, a number or a percentage ($DISCOVERER_MAX_UNAVAILABLE).")
	return func() error { return errors.Join(append(env.errs, o.Validate())...) }
}

// envDefaults reads flag defaults from the environment and remembers malformed values.
type envDefaults struct {
	getenv func(string) string
	errs   []error
}

func (e *envDefaults) lookup(name string) (string, bool) {
	v := e.getenv(name)
	return v, v != ""
}

func (e *envDefaults) fail(name, v, want string) {
	e.errs = append(e.errs, fmt.Errorf("$%s=%q is not %s", name, v, want))
}

func (e *envDefaults) string(name, def string) string {
	if v, ok := e.lookup(name); ok {
		return v
	}
	return def
}

func (e *envDefaults) bool(name string, def bool) bool {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, v, "true or false")
		return def
	}
	return b
}

func (e *envDefaults) int(name string, def int) int {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.fail(name, v, "an integer")
		return def
	}
	return n
}

func (e *envDefaults) float(name string, def float64) float64 {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		e.fail(name, v, "a number")
		return def
	}
	return f
}

func (e *envDefaults) duration(name string, def time.Duration) time.Duration {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.fail(name, v, "a duration such as 30s")
		return def
	}
	return d
}

func (e *envDefaults) quantity(name string, def resource.Quantity) resource.Quantity {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		e.fail(name, v, "a quantity such as 10Gi")
		return def
	}
	return q
}

func (e *envDefaults) intOrString(name string, def intstr.IntOrString) intstr.IntOrString {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	return intstr.Parse(v)
}

type quantityValue struct{ q *resource.Quantity }

func (v quantityValue) String() string {
	if v.q == nil {
		return ""
	}
	return v.q.String()
}

func (v quantityValue) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a quantity such as 10Gi", s)
	}
	*v.q = q
	return nil
}

type intOrStringValue struct{ v *intstr.IntOrString }

func (v intOrStringValue) String() string {
	if v.v == nil {
		return ""
	}
	return v.v.String()
}

func (v intOrStringValue) Set(s string) error {
	*v.v = intstr.Parse(s)
	return nil
}
