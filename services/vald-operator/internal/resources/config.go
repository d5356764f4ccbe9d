// Package resources builds the ValdReleases a ValdOperatorRelease asks for. It is pure: a
// release and the operator's configuration in, desired objects out, no client.
package resources

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/api/vald/valdchart"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The spread every component gets when its release sets none: one domain per node,
// maxSkew 1. Agents must not share a node (neither has a memory limit, see agentRequests),
// so a pod waits rather than break the skew; for the other components it is a preference,
// so a gateway still starts on a pool short of nodes.
const (
	DefaultTopologyKey                = "kubernetes.io/hostname"
	AgentWhenUnsatisfiable            = "DoNotSchedule"
	DefaultComponentWhenUnsatisfiable = "ScheduleAnyway"
)

// Config is the operator-wide configuration the builder applies where a release leaves a
// field empty. Every field comes from a flag whose default is an environment variable.
type Config struct {
	// NodePoolLabelPrefix prefixes the node-pool label keys: <prefix>/namespace and
	// <prefix>/type; empty means the bare keys namespace and type.
	NodePoolLabelPrefix string
	// DefaultStorageClass is the agents' storage class when the release names none; empty
	// leaves the cluster's default storage class.
	DefaultStorageClass string
	// DefaultAccessMode is the agents' volume access mode when the release names none.
	DefaultAccessMode string
	// PVMemoryRatio sizes an agent's volume as this multiple of the agent node's memory:
	// NGT keeps its index in memory and saves it with a backup copy, so 2 fits both.
	PVMemoryRatio float64
	// PVMinSize is the smallest volume, and the size when the pool gives no memory.
	PVMinSize resource.Quantity
	// PVMaxSize caps the volume; zero means no cap.
	PVMaxSize resource.Quantity
	// AgentResourceFraction is the share of an agent node's CPU and memory an agent
	// requests, leaving the rest to the kubelet and daemons.
	AgentResourceFraction float64
	// GatewayServiceType is the gateway Service type when the release names none.
	GatewayServiceType string
	// IngressDomain, when set, gives an enabled ingress without a host the host
	// <cluster name>.<IngressDomain>.
	IngressDomain string
	// DiscovererKind is the discoverer workload kind when the release names none.
	DiscovererKind string
	// DiscovererMaxUnavailable is the rolling-update maxUnavailable of a DaemonSet
	// discoverer: the Vald chart's discoverer.rollingUpdate.maxUnavailable.
	DiscovererMaxUnavailable intstr.IntOrString
	// DiscovererPDBMaxUnavailable is the maxUnavailable of the discoverer's
	// PodDisruptionBudget (the Vald chart's discoverer.maxUnavailable), for either kind;
	// empty leaves the chart's default.
	DiscovererPDBMaxUnavailable string
	// GatewayAgentsPerReplica is how many agents one gateway replica serves: the
	// gateway's minReplicas is ceil(agents / this) (see GatewayReplicas).
	GatewayAgentsPerReplica int
	// GatewayMinReplicas and GatewayMaxReplicas bound the derived gateway replicas; the
	// maximum is at most valdv1.MaxGatewayReplicas, as a release's own values are.
	GatewayMinReplicas int
	GatewayMaxReplicas int
	// GatewayIngressAnnotations are the annotations of every enabled gateway ingress; a
	// release's ingress.annotations win key by key.
	GatewayIngressAnnotations map[string]string
	// DefaultValues is the cluster-wide ValdRelease template: Vald chart values every
	// ValdRelease carries under what the operator generates (which wins key by key) and
	// the release's overlay (which wins over both). It may not set the component names.
	DefaultValues map[string]any
}

// DefaultConfig is the configuration without flags or environment.
func DefaultConfig() Config {
	return Config{
		DefaultAccessMode:        "ReadWriteOnce",
		PVMemoryRatio:            2,
		PVMinSize:                resource.MustParse("1Gi"),
		AgentResourceFraction:    0.75,
		GatewayServiceType:       "ClusterIP",
		DiscovererKind:           "Deployment",
		DiscovererMaxUnavailable: intstr.FromInt32(1),
		GatewayAgentsPerReplica:  2,
		GatewayMinReplicas:       2,
		GatewayMaxReplicas:       100,
	}
}

// ParseDefaultValues reads the cluster-wide ValdRelease template: a YAML or JSON object of
// Vald chart values; empty is none.
func ParseDefaultValues(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	raw, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("default ValdRelease values are not YAML or JSON: %w", err)
	}
	var values map[string]any
	if err := json.Unmarshal(raw, &values); err != nil || values == nil {
		return nil, errors.New("default ValdRelease values must be an object of Vald chart values, such as {\"agent\": {\"image\": {\"tag\": \"v1.8.0\"}}}")
	}
	return values, nil
}

// ParseAnnotations reads annotations given as a YAML or JSON object of strings; empty is
// none.
func ParseAnnotations(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out map[string]string
	if err := yaml.UnmarshalStrict([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("gateway ingress annotations must be an object of strings, such as {\"nginx.ingress.kubernetes.io/backend-protocol\": \"GRPC\"}: %w", err)
	}
	return out, nil
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if c.NodePoolLabelPrefix != "" {
		if msgs := validation.IsDNS1123Subdomain(c.NodePoolLabelPrefix); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("node-pool label prefix %q must be a DNS subdomain (without a slash): %v", c.NodePoolLabelPrefix, msgs))
		}
	}
	if c.DefaultStorageClass != "" {
		if msgs := validation.IsDNS1123Subdomain(c.DefaultStorageClass); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("default storage class %q is not a valid name: %v", c.DefaultStorageClass, msgs))
		}
	}
	if !oneOf(c.DefaultAccessMode, "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod") {
		errs = append(errs, fmt.Errorf("default access mode %q must be ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod", c.DefaultAccessMode))
	}
	if c.PVMemoryRatio <= 0 || c.PVMemoryRatio > 100 {
		errs = append(errs, fmt.Errorf("PV memory ratio %v must be above 0 and at most 100", c.PVMemoryRatio))
	}
	if c.PVMinSize.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("PV minimum size %s must be positive", c.PVMinSize.String()))
	}
	if !c.PVMaxSize.IsZero() && c.PVMaxSize.Cmp(c.PVMinSize) < 0 {
		errs = append(errs, fmt.Errorf("PV maximum size %s must be zero (no cap) or at least the minimum %s", c.PVMaxSize.String(), c.PVMinSize.String()))
	}
	if c.AgentResourceFraction <= 0 || c.AgentResourceFraction > 1 {
		errs = append(errs, fmt.Errorf("agent resource fraction %v must be above 0 and at most 1", c.AgentResourceFraction))
	}
	if !oneOf(c.GatewayServiceType, "ClusterIP", "NodePort", "LoadBalancer") {
		errs = append(errs, fmt.Errorf("gateway service type %q must be ClusterIP, NodePort or LoadBalancer", c.GatewayServiceType))
	}
	if c.IngressDomain != "" {
		if msgs := validation.IsDNS1123Subdomain(c.IngressDomain); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("ingress domain %q is not a DNS name: %v", c.IngressDomain, msgs))
		}
	}
	if !oneOf(c.DiscovererKind, "DaemonSet", "Deployment") {
		errs = append(errs, fmt.Errorf("discoverer kind %q must be DaemonSet or Deployment", c.DiscovererKind))
	}
	if _, err := intstr.GetScaledValueFromIntOrPercent(&c.DiscovererMaxUnavailable, 100, true); err != nil || c.DiscovererMaxUnavailable.String() == "0" || c.DiscovererMaxUnavailable.String() == "0%" {
		errs = append(errs, fmt.Errorf("discoverer maxUnavailable %q must be a positive number or percentage", c.DiscovererMaxUnavailable.String()))
	}
	if c.DiscovererPDBMaxUnavailable != "" {
		pdb := intstr.Parse(c.DiscovererPDBMaxUnavailable)
		if v, err := intstr.GetScaledValueFromIntOrPercent(&pdb, 100, true); err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("discoverer PodDisruptionBudget maxUnavailable %q must be a number or percentage, at least 0", c.DiscovererPDBMaxUnavailable))
		}
	}
	if c.GatewayAgentsPerReplica < 1 || c.GatewayAgentsPerReplica > valdv1.MaxConcurrency {
		errs = append(errs, fmt.Errorf("gateway agents per replica %d must be at least 1 and at most %d, the most agents a pool has", c.GatewayAgentsPerReplica, valdv1.MaxConcurrency))
	}
	if c.GatewayMinReplicas < 1 || c.GatewayMaxReplicas < c.GatewayMinReplicas || c.GatewayMaxReplicas > valdv1.MaxGatewayReplicas {
		errs = append(errs, fmt.Errorf("gateway replicas bounds %d..%d: the minimum must be at least 1, the maximum at least the minimum and at most %d", c.GatewayMinReplicas, c.GatewayMaxReplicas, valdv1.MaxGatewayReplicas))
	}
	for k := range c.GatewayIngressAnnotations {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("gateway ingress annotation key %q: %v", k, msgs))
		}
	}
	errs = append(errs, validateDefaultValues(c.DefaultValues))
	return errors.Join(errs...)
}

// validateDefaultValues refuses a template the Vald chart would refuse (a key of the wrong
// type) or that names components: the names are the operator's, per cluster (a template
// name would give every ValdRelease the same objects, and rename a legacy one).
func validateDefaultValues(values map[string]any) error {
	var errs []error
	for _, v := range valdchart.Check(values) {
		errs = append(errs, fmt.Errorf("default ValdRelease values: %s", v.Error()))
	}
	for _, path := range nameKeys {
		if has(values, path) {
			errs = append(errs, fmt.Errorf("default ValdRelease values set %s: component names are the operator's, per cluster; remove it", strings.Join(path, ".")))
		}
	}
	return errors.Join(errs...)
}

// NodeLabelKey is the node label key of a node-pool label (namespace or type).
func (c Config) NodeLabelKey(name string) string {
	if c.NodePoolLabelPrefix == "" {
		return name
	}
	return c.NodePoolLabelPrefix + "/" + name
}

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}
