package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (r *registrar) lastCreds() (controller.Credentials, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.creds) == 0 {
		return controller.Credentials{}, false
	}
	return r.creds[len(r.creds)-1], true
}

// TestAuthSecret: a spec.auth Secret that is missing, then lacks a key, is a Converged
// condition (and its event) naming what to create, with no registration attempted; once
// complete the registrar gets its credentials, and a changed password reaches the next
// pass without changing any pod template.
func TestAuthSecret(t *testing.T) {
	h := start(t, "mg-auth")
	ctx := context.Background()
	c := &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "secure", Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{
			Coordinators: 3, DataInstances: 1,
			Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
			Auth:    &memgraphv1.AuthSpec{SecretName: "admin"},
		},
	}
	if err := h.c.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	// Pods "run" so that only the Secret stands between the cluster and registration.
	h.waitCondition("secure", memgraphv1.ConditionConverged, metav1.ConditionFalse, controller.ReasonAuthSecretUnavailable)
	h.podsRun("secure-coordinator")
	h.podsRun("secure-data")
	got := h.waitCondition("secure", memgraphv1.ConditionConverged, metav1.ConditionFalse, controller.ReasonAuthSecretUnavailable)
	want := `Secret "admin" named by spec.auth does not exist: create it with keys "USER" and "PASSWORD"`
	if m := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionConverged).Message; m != want {
		t.Errorf("Converged message %q, want %q", m, want)
	}
	testenv.Eventually(t, 30*time.Second, "an AuthSecretUnavailable event", func() (bool, string) {
		evs := h.events("secure")
		for _, e := range evs {
			if e.Reason == controller.ReasonAuthSecretUnavailable {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs))
	})
	if n := h.reg.calls(); n != 0 {
		t.Fatalf("registration ran %d times without credentials", n)
	}

	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin", Namespace: h.ns}, Data: map[string][]byte{"USER": []byte("admin")}}
	if err := h.c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	want = `Secret "admin" named by spec.auth has no non-empty key "PASSWORD": add it or set spec.auth.passwordKey`
	testenv.Eventually(t, 30*time.Second, "the missing key named", func() (bool, string) {
		cond := meta.FindStatusCondition(h.cluster("secure").Status.Conditions, memgraphv1.ConditionConverged)
		return cond != nil && cond.Message == want, fmt.Sprintf("%+v", cond)
	})
	if n := h.reg.calls(); n != 0 {
		t.Fatalf("registration ran %d times without a password", n)
	}

	s.Data["PASSWORD"] = []byte("one")
	if err := h.c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("secure", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	if cr, _ := h.reg.lastCreds(); cr != (controller.Credentials{Username: "admin", Password: "one"}) {
		t.Errorf("registrar got %+v, want admin/one", cr)
	}
	gens := map[string]int64{}
	for _, n := range []string{"secure-coordinator", "secure-data"} {
		gens[n] = h.sts(n).Generation
	}

	s.Data["PASSWORD"] = []byte("two")
	if err := h.c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the new password used", func() (bool, string) {
		cr, _ := h.reg.lastCreds()
		return cr == controller.Credentials{Username: "admin", Password: "two"}, fmt.Sprintf("%+v", cr)
	})
	for n, g := range gens {
		if got := h.sts(n).Generation; got != g {
			t.Errorf("StatefulSet %s changed (generation %d -> %d) on a password change", n, g, got)
		}
	}
}

// TestSecretChangeStartsAPass: with a resync far away, a change of a Secret the cluster
// names (spec.auth, the license) starts a pass at once, and a change of any other Secret
// starts none: the operator watches Secrets by metadata, it does not poll them.
func TestSecretChangeStartsAPass(t *testing.T) {
	h := start(t, "mg-secretwatch", func(cfg *controller.Config) { cfg.Resync = 10 * time.Minute })
	ctx := context.Background()
	secret := func(name string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
			Data: map[string][]byte{"USER": []byte("admin"), "PASSWORD": []byte("one")}}
		if err := h.c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	auth, license, other := secret("admin"), secret("memgraph-license"), secret("unrelated")
	c := &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{
			Coordinators: 3, DataInstances: 1,
			Secrets: memgraphv1.SecretsSpec{Name: license.Name},
			Auth:    &memgraphv1.AuthSpec{SecretName: auth.Name},
		},
	}
	if err := h.c.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	h.podsRun("watched-coordinator")
	h.podsRun("watched-data")
	h.waitCondition("watched", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	// quiet waits until no pass ran for 2 s, and returns the count of passes.
	quiet := func(what string) int {
		t.Helper()
		n := h.reg.calls()
		for deadline := time.Now().Add(30 * time.Second); ; {
			time.Sleep(2 * time.Second)
			m := h.reg.calls()
			if m == n {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: passes keep running (%d -> %d in 2 s) with the resync 10 minutes away", what, n, m)
			}
			n = m
		}
	}
	update := func(s *corev1.Secret, password string) {
		t.Helper()
		s.Data["PASSWORD"] = []byte(password)
		if err := h.c.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	n := quiet("converged")
	update(other, "two")
	if m := quiet("another Secret changed"); m != n {
		t.Errorf("a change of a Secret the cluster does not name ran %d passes", m-n)
	}
	update(auth, "two")
	testenv.Eventually(t, 10*time.Second, "a pass with the new password", func() (bool, string) {
		cr, _ := h.reg.lastCreds()
		return cr == controller.Credentials{Username: "admin", Password: "two"}, fmt.Sprintf("%+v after %d passes", cr, h.reg.calls()-n)
	})
	n = quiet("the auth Secret's pass")
	update(license, "two")
	testenv.Eventually(t, 10*time.Second, "a pass after the license Secret changed", func() (bool, string) {
		return h.reg.calls() > n, ""
	})
}
