// Package resources builds the ValdReleases a ValdOperatorRelease asks for. It is pure: a
// release and the operator's configuration in, desired objects out, no client.
package resources

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
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
	}
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
