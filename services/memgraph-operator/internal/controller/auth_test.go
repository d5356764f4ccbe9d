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
			License: memgraphv1.LicenseSpec{SecretName: "memgraph-license"},
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
