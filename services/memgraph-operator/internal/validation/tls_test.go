package validation

import (
	"context"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
)

// TestTLSRules: spec.tls.bolt needs a Secret name; the block cannot be added to or removed
// from a live cluster (a TLS Memgraph refuses plain Bolt, so a roll would strand the
// operator), while pointing it at another Secret is allowed.
func TestTLSRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	ctx := context.Background()
	bolt := func(name string) *memgraphv1.TLSSpec {
		return &memgraphv1.TLSSpec{Bolt: memgraphv1.BoltTLSSpec{SecretName: name}}
	}
	for name, tc := range map[string]struct {
		tls  *memgraphv1.TLSSpec
		want string
	}{
		"a Secret":          {tls: bolt("bolt-tls")},
		"no Secret name":    {tls: bolt(""), want: "tls.bolt.secretName must name a Secret"},
		"not a Secret name": {tls: bolt("Bolt_TLS"), want: "tls.bolt.secretName must name a Secret"},
	} {
		t.Run("create/"+name, func(t *testing.T) {
			c := minimal(ns)
			c.Spec.TLS = tc.tls
			verdict(t, env.Client.Create(ctx, c), tc.want)
		})
	}
	const immutable = "spec.tls cannot be added or removed on a live cluster"
	t.Run("add", func(t *testing.T) {
		c := minimal(ns)
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Spec.TLS = bolt("bolt-tls")
		verdict(t, env.Client.Update(ctx, c), immutable)
	})
	t.Run("switch Secret, then remove", func(t *testing.T) {
		c := minimal(ns)
		c.Spec.TLS = bolt("bolt-tls")
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Spec.TLS = bolt("bolt-tls-2")
		verdict(t, env.Client.Update(ctx, c), "")
		c.Spec.TLS = nil
		verdict(t, env.Client.Update(ctx, c), immutable)
	})
}
