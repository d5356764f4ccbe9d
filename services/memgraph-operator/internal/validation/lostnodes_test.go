package validation

import (
	"context"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestLostNodesRules: spec.lostNodes takes Automatic or Manual and a grace period from 0s
// to 168h; anything else is refused saying what to set. Unset, replace defaults to
// Automatic once the object is given, as LostNodesPolicy reads it.
func TestLostNodesRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	const grace = "lostNodes.gracePeriod must be a duration between 0s and 168h such as 5m"
	lost := func(replace memgraphv1.LostNodeReplacement, d time.Duration) func(*memgraphv1.MemgraphCluster) {
		return func(c *memgraphv1.MemgraphCluster) {
			c.Spec.LostNodes = &memgraphv1.LostNodesSpec{Replace: replace, GracePeriod: &metav1.Duration{Duration: d}}
		}
	}
	cases := []struct {
		name   string
		mutate func(*memgraphv1.MemgraphCluster)
		want   string
	}{
		{name: "manual, 10m", mutate: lost(memgraphv1.LostNodeReplaceManual, 10*time.Minute)},
		{name: "automatic, 0s", mutate: lost(memgraphv1.LostNodeReplaceAutomatic, 0)},
		{name: "a week", mutate: lost("", 168*time.Hour)},
		{name: "longer than a week", mutate: lost("", 169*time.Hour), want: grace},
		{name: "negative", mutate: lost("", -time.Second), want: grace},
		{name: "unknown policy", mutate: lost("Never", time.Minute), want: "Unsupported value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := minimal(ns)
			tc.mutate(c)
			verdict(t, env.Client.Create(context.Background(), c), tc.want)
		})
	}

	c := minimal(ns)
	c.Spec.LostNodes = &memgraphv1.LostNodesSpec{}
	if err := env.Client.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), c); err != nil {
		t.Fatal(err)
	}
	if automatic, g := c.Spec.LostNodesPolicy(); c.Spec.LostNodes.Replace != memgraphv1.LostNodeReplaceAutomatic || !automatic || g != memgraphv1.DefaultLostNodeGracePeriod {
		t.Errorf("lostNodes {} stored as %+v (automatic %v, grace %s), want replace Automatic and the default grace", c.Spec.LostNodes, automatic, g)
	}
}
