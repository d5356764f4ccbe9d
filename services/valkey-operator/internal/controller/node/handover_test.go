package node

import (
	"context"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
	ctrl "sigs.k8s.io/controller-runtime"
)

// runOperator runs the node controller, as an operator of image image would (the
// hand-over installed from it), in h's namespace until t ends.
func runOperator(t *testing.T, h *harness, image string) {
	cfg := Config{
		Addr: func(*valkeyv1.ValkeyNode) string { return "127.0.0.1:1" }, // no server: only the workload matters here
		Options: func(context.Context, *valkeyv1.ValkeyNode) (valkey.Options, error) {
			return valkey.Options{DialTimeout: time.Second}, nil
		},
		Build:        resources.NodeOptions{HandoverImage: image},
		RequeueAfter: time.Second, Resync: time.Second, RetryBase: 200 * time.Millisecond, RetryMax: 2 * time.Second,
	}
	env.StartManager(t, func(mgr ctrl.Manager) error { return Setup(mgr, cfg) }, testenv.InNamespaces(h.ns),
		func(o *ctrl.Options) { o.Cache.ByObject = CacheByObject() })
}

// TestHandoverImageSticky: an operator upgrade (a new image to install the preStop
// hand-over from) does not touch the members' pod templates, which would restart every
// member at once; a node takes the new hand-over when its pod is replaced anyway (image or
// restart hash changed), and a node made before the hand-over existed gets it then too.
func TestHandoverImageSticky(t *testing.T) {
	h := &harness{t: t, ns: testenv.NewNamespace(t, env.Client, "vkn-handover-"), servers: map[string]server{}, writes: &testenv.WriteCounter{}}
	h.create(h.configMap(""))
	hook := func(name string) (init, server string, gen int64) {
		s := h.statefulSet(name)
		return handoverImage(&s.Spec.Template), serverImage(&s.Spec.Template), s.Generation
	}
	waitHook := func(name, want string) {
		testenv.WaitFor(t, name+" installs the hand-over from "+want, func() bool {
			init, _, _ := hook(name)
			return init == want
		})
	}
	steady := func(name, want string, gen int64) {
		time.Sleep(3 * time.Second) // several passes (Resync 1 s)
		if init, _, g := hook(name); init != want || g != gen {
			t.Errorf("%s: hand-over image %q (generation %d -> %d), want %q untouched", name, init, gen, g, want)
		}
	}

	t.Run("an operator without the hand-over", func(t *testing.T) {
		h.t = t
		runOperator(t, h, "")
		h.create(h.node("c-1-0", nil))
		h.statefulSet("c-1-0")
		time.Sleep(2 * time.Second)
	})
	t.Run("the operator v1", func(t *testing.T) {
		h.t = t
		runOperator(t, h, "ghcr.io/opsuite/valkey-operator:v1")
		h.create(h.node("c-0-0", nil))
		waitHook("c-0-0", "ghcr.io/opsuite/valkey-operator:v1")
		_, _, gen := hook("c-1-0")
		steady("c-1-0", "", gen)
	})
	t.Run("upgraded to v2", func(t *testing.T) {
		h.t = t
		runOperator(t, h, "ghcr.io/opsuite/valkey-operator:v2")
		_, _, gen0 := hook("c-0-0")
		_, _, gen1 := hook("c-1-0")
		steady("c-0-0", "ghcr.io/opsuite/valkey-operator:v1", gen0)
		steady("c-1-0", "", gen1)

		// The cluster controller rolls c-0-0 to a new image: its pod is replaced, with
		// the current hand-over.
		n := h.getNode("c-0-0")
		update(h, n, func(n *valkeyv1.ValkeyNode) { n.Spec.Image = "valkey/valkey:9.0" })
		waitHook("c-0-0", "ghcr.io/opsuite/valkey-operator:v2")
		if _, img, _ := hook("c-0-0"); img != "valkey/valkey:9.0" {
			t.Errorf("c-0-0 runs %s", img)
		}
		// A restart-hash change replaces c-1-0's pod: it gets the hand-over.
		n = h.getNode("c-1-0")
		update(h, n, func(n *valkeyv1.ValkeyNode) { n.Spec.ConfigHash = "r2" })
		waitHook("c-1-0", "ghcr.io/opsuite/valkey-operator:v2")
	})
}
