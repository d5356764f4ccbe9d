package controller_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// caRegistrar answers as a healthy cluster and records the CA each pass handed it.
type caRegistrar struct {
	mu  sync.Mutex
	cas [][]byte
}

func (r *caRegistrar) Register(ctx context.Context, _ *memgraphv1.MemgraphCluster, _ controller.Credentials, want planner.Desired) (controller.Registration, error) {
	r.mu.Lock()
	r.cas = append(r.cas, controller.BoltCA(ctx))
	r.mu.Unlock()
	return healthy(want)
}

func (r *caRegistrar) calls() ([][]byte, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cas, len(r.cas)
}

func (r *caRegistrar) lastCA() []byte {
	cas, n := r.calls()
	if n == 0 {
		return nil
	}
	return cas[n-1]
}

// boltSecret is a kubernetes.io/tls Secret with a certificate for hosts signed by ca.
func boltSecret(t *testing.T, ns string, ca *testenv.CA, hosts ...string) *corev1.Secret {
	crt, key := ca.Issue(t, hosts...)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bolt-tls", Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM},
	}
}

// TestTLSSecret: spec.tls.bolt's Secret missing, then holding a certificate that does not
// name the pods, is Converged=False TLSSecretUnavailable (with its event) and no dial; a
// good Secret hands its ca.crt to the registrar, and a new CA written into the Secret is
// used by the next pass without restarting the operator or touching the pods.
func TestTLSSecret(t *testing.T) {
	reg := &caRegistrar{}
	h := start(t, "mg-tls", func(cfg *controller.Config) { cfg.Registrar = reg })
	ctx := context.Background()
	c := &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{
			Coordinators: 3, DataInstances: 1,
			Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
			TLS:     &memgraphv1.TLSSpec{Bolt: memgraphv1.BoltTLSSpec{SecretName: "bolt-tls"}},
		},
	}
	if err := h.c.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("tls", memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonTLSSecretUnavailable)
	h.podsRun("tls-coordinator")
	h.podsRun("tls-data")
	got := h.waitCondition("tls", memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonTLSSecretUnavailable)
	want := `Secret "bolt-tls" named by spec.tls.bolt does not exist: create it with keys "tls.crt", "tls.key" and "ca.crt" (a cert-manager Certificate from a CA issuer writes all three)`
	if m := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionConverged).Message; m != want {
		t.Errorf("Converged message %q, want %q", m, want)
	}
	testenv.Eventually(t, 30*time.Second, "a TLSSecretUnavailable event", func() (bool, string) {
		for _, e := range h.events("tls") {
			if e.Reason == memgraphv1.ReasonTLSSecretUnavailable {
				return true, ""
			}
		}
		return false, "none"
	})
	pod := h.sts("tls-data").Spec.Template.Spec
	if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != "bolt-tls" {
		t.Errorf("data pods' volumes %+v, want the bolt-tls Secret", pod.Volumes)
	}

	ca1 := testenv.NewCA(t, "ca-1")
	s := boltSecret(t, h.ns, ca1, "memgraph.example.com")
	if err := h.c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the unnamed pods reported", func() (bool, string) {
		cond := meta.FindStatusCondition(h.cluster("tls").Status.Conditions, memgraphv1.ConditionConverged)
		return cond != nil && cond.Reason == memgraphv1.ReasonTLSSecretUnavailable && strings.Contains(cond.Message, "*.tls-coordinators."+h.ns+".svc.cluster.local"), fmt.Sprintf("%+v", cond)
	})
	if _, n := reg.calls(); n != 0 {
		t.Fatalf("registration ran %d times without a usable certificate", n)
	}

	names := []string{"*.tls-coordinators." + h.ns + ".svc.cluster.local", "*.tls-data." + h.ns + ".svc.cluster.local"}
	s.Data = boltSecret(t, h.ns, ca1, names...).Data
	if err := h.c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("tls", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	if got := reg.lastCA(); !bytes.Equal(got, ca1.PEM) {
		t.Errorf("registrar got CA %q, want ca-1's", got)
	}
	gens := map[string]int64{}
	for _, n := range []string{"tls-coordinator", "tls-data"} {
		gens[n] = h.sts(n).Generation
	}

	ca2 := testenv.NewCA(t, "ca-2")
	s.Data = boltSecret(t, h.ns, ca2, names...).Data
	if err := h.c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the new CA used", func() (bool, string) {
		return bytes.Equal(reg.lastCA(), ca2.PEM), "still the old CA"
	})
	for n, g := range gens {
		if got := h.sts(n).Generation; got != g {
			t.Errorf("StatefulSet %s changed (generation %d -> %d) on a certificate renewal", n, g, got)
		}
	}
}

// TestBoltRegistrarTLS drives the operator's BoltRegistrar against simulator processes
// serving Bolt over TLS only: with the CA in the pass's context it bootstraps 3+1; with
// another CA it runs nothing and reports TLSVerificationFailed, not a generic
// CoordinatorUnreachable. Once converged, a certificate renewed in the mounted files
// (same CA) is reloaded on every member that still serves the old one, once.
func TestBoltRegistrarTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ca := testenv.NewCA(t, "memgraph-ca")
	cl := memgraphtest.NewCluster(t)
	dir := t.TempDir()
	cl.ExtraArgs = memgraphtest.BoltTLSArgs(ca.WriteFiles(t, dir, "127.0.0.1"))
	for id := 1; id <= 3; id++ {
		cl.StartCoordinator(id)
	}
	cl.StartData("d_0")
	want := cl.Desired(nil, nil)
	b := controller.BoltRegistrar{Options: memgraph.Options{Timeout: 3 * time.Second}}

	wrong := controller.WithBoltCA(ctx, testenv.NewCA(t, "other-ca").PEM)
	r, err := b.Register(wrong, nil, controller.Credentials{}, want)
	if r.Converged || len(r.Executed) > 0 || r.Reason != memgraphv1.ReasonTLSVerificationFailed {
		t.Errorf("another CA: converged %v, ran %q, reason %s %q (err %v); want nothing run, TLSVerificationFailed", r.Converged, r.Executed, r.Reason, r.Message, err)
	}

	right := controller.WithBoltCA(ctx, ca.PEM)
	for pass := 1; ; pass++ {
		r, err = b.Register(right, nil, controller.Credentials{}, want)
		if err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		if r.Converged {
			t.Logf("bootstrap over TLS in %d passes", pass)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not converged: %+v", r)
		case <-time.After(300 * time.Millisecond):
		}
	}
	if r.Coordinators != 3 || r.DataInstances != 1 || r.Main != "d_0" {
		t.Errorf("registration %+v, want 3 coordinators, 1 data instance, MAIN d_0", r)
	}

	leaf := func() []byte {
		b, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		return blk.Bytes
	}
	current := controller.WithBoltTLS(ctx, controller.BoltTLS{CA: ca.PEM, Cert: leaf()})
	if r, err := b.Register(current, nil, controller.Credentials{}, want); err != nil || len(r.Executed) != 0 {
		t.Fatalf("steady pass ran %q (err %v), want nothing", r.Executed, err)
	}
	ca.WriteFiles(t, dir, "127.0.0.1") // the kubelet rewrites the Secret volume
	renewed := controller.WithBoltTLS(ctx, controller.BoltTLS{CA: ca.PEM, Cert: leaf()})
	// The reload is upkeep on a converged cluster only: a pass that finds no leader (a
	// coordinator stepping down under load) runs nothing, and the operator's next pass does.
	for pass := 1; ; pass++ {
		r, err = b.Register(renewed, nil, controller.Credentials{}, want)
		if err != nil || len(r.Executed) > 0 {
			break
		}
		t.Logf("pass %d after renewal ran nothing: converged %v, reason %s", pass, r.Converged, r.Reason)
		select {
		case <-ctx.Done():
			t.Fatalf("no reload after renewal: %+v", r)
		case <-time.After(300 * time.Millisecond):
		}
	}
	if err != nil || len(r.Executed) != 4 || !strings.HasPrefix(r.Executed[0], "RELOAD BOLT_SERVER TLS on ") {
		t.Fatalf("pass after renewal ran %q (err %v), want RELOAD BOLT_SERVER TLS on the 4 members", r.Executed, err)
	}
	if r, err := b.Register(renewed, nil, controller.Credentials{}, want); err != nil || len(r.Executed) != 0 {
		t.Errorf("pass after the reload ran %q (err %v), want nothing", r.Executed, err)
	}
}
