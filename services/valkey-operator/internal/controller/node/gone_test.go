package node

import (
	"context"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestGoneNodeForgotten: what the controller remembers of a node (its apply state) is
// dropped by the kit's pass itself when it finds the node gone (OnGone), and a node
// re-created under the same name starts afresh the same way.
func TestGoneNodeForgotten(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "vkn-gone-")
	skip := true
	// A manager that never starts: the test runs the passes, reading from the API server.
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := setup(mgr, Config{
		Addr: func(*valkeyv1.ValkeyNode) string { return "127.0.0.1:1" },
		Options: func(context.Context, *valkeyv1.ValkeyNode) (valkey.Options, error) {
			return valkey.Options{DialTimeout: time.Second}, nil
		},
		wrapClient: func(client.Client) client.Client { return env.Client },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ns: ns}
	pass := func(name string) {
		t.Helper()
		if _, err := r.pass.Reconcile(ctx, reconcile.Request{NamespacedName: h.key(name)}); err != nil {
			t.Fatalf("pass over %s: %v", name, err)
		}
	}

	// Two nodes the controller applied something to (its state of each).
	for _, name := range []string{"n-0-0", "n-0-1"} {
		h.create(h.node(name, nil))
		pass(name)
		r.stateOf(h.getNode(name)).config.hash = "applied"
	}
	if n := r.remembered(); n != 2 {
		t.Fatalf("state of %d nodes, want 2", n)
	}

	// Deleted: the next pass finds it gone and its state goes.
	gone := h.getNode("n-0-0")
	if err := env.Client.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "n-0-0 gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, h.key("n-0-0"), &valkeyv1.ValkeyNode{}))
	})
	pass("n-0-0")
	if n := r.remembered(); n != 1 {
		t.Errorf("state of %d nodes after one was deleted, want 1", n)
	}

	// Re-created between two passes: the new node has none of the old one's state.
	old := h.getNode("n-0-1")
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	h.create(h.node("n-0-1", nil))
	pass("n-0-1")
	if s := r.stateOf(h.getNode("n-0-1")); s.config.hash != "" {
		t.Errorf("a node re-created under its name inherited the old one's state (config hash %q)", s.config.hash)
	}
}
