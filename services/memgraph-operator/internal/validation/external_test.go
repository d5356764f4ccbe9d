package validation

import (
	"context"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
)

// TestExternalAccessRules: externalAccessConfig needs both roles (a routing table names
// both) and a serviceType of LoadBalancer or NodePort; it may be added to and removed from
// a live cluster.
func TestExternalAccessRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	ctx := context.Background()
	lb := &memgraphv1.ExternalAccess{ServiceType: memgraphv1.ExternalLoadBalancer}
	np := &memgraphv1.ExternalAccess{ServiceType: memgraphv1.ExternalNodePort}
	for name, tc := range map[string]struct {
		x    *memgraphv1.ExternalAccessConfig
		want string
	}{
		"both LoadBalancer":    {x: &memgraphv1.ExternalAccessConfig{Coordinator: lb, DataInstance: lb}},
		"mixed":                {x: &memgraphv1.ExternalAccessConfig{Coordinator: lb, DataInstance: np}},
		"coordinators only":    {x: &memgraphv1.ExternalAccessConfig{Coordinator: lb}, want: "externalAccessConfig needs both coordinator and dataInstance"},
		"data instances only":  {x: &memgraphv1.ExternalAccessConfig{DataInstance: np}, want: "externalAccessConfig needs both coordinator and dataInstance"},
		"the chart's ingress":  {x: &memgraphv1.ExternalAccessConfig{Coordinator: lb, DataInstance: &memgraphv1.ExternalAccess{ServiceType: "IngressNginx"}}, want: "Unsupported value"},
		"common load balancer": {x: &memgraphv1.ExternalAccessConfig{Coordinator: &memgraphv1.ExternalAccess{ServiceType: "CommonLoadBalancer"}, DataInstance: lb}, want: "Unsupported value"},
	} {
		t.Run("create/"+name, func(t *testing.T) {
			c := minimal(ns)
			c.Spec.ExternalAccessConfig = tc.x
			verdict(t, env.Client.Create(ctx, c), tc.want)
		})
	}
	t.Run("add, then remove", func(t *testing.T) {
		c := minimal(ns)
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Spec.ExternalAccessConfig = &memgraphv1.ExternalAccessConfig{Coordinator: np, DataInstance: np}
		verdict(t, env.Client.Update(ctx, c), "")
		c.Spec.ExternalAccessConfig = nil
		verdict(t, env.Client.Update(ctx, c), "")
	})
}
