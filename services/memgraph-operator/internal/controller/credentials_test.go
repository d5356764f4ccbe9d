package controller_test

import (
	"context"
	"fmt"
	"strings"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCredentialChanges runs the controller against the real API server with a
// simulator data instance as the MAIN (its users persisted in its data directory,
// created from MEMGRAPH_USER/MEMGRAPH_PASSWORD on first start): the first pass records
// the working credentials in the operator's Secret; a new password, then a new user
// name, in the user's Secret are applied to Memgraph (SET PASSWORD; CREATE USER, GRANT,
// DROP USER) and recorded; with both the Secret's and the recorded credentials wrong the
// condition says CredentialsRejected and what to do, and the fix is picked up.
func TestCredentialChanges(t *testing.T) {
	sim := memgraphtest.NewCluster(t)
	sim.ExtraEnv = []string{"MEMGRAPH_USER=admin", "MEMGRAPH_PASSWORD=s3cret"}
	mainProc := sim.StartData("d_0")
	h := start(t, "mg-creds", func(cfg *controller.Config) {
		cfg.Credentials = controller.BoltRegistrar{Options: memgraph.Options{Timeout: 3 * time.Second}}
	})
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		r, err := healthy(want)
		r.MainBolt = mainProc.Bolt
		return r, err
	})
	ctx := context.Background()
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin", Namespace: h.ns},
		Data: map[string][]byte{"USER": []byte("admin"), "PASSWORD": []byte("s3cret")}}
	if err := h.c.Create(ctx, userSecret); err != nil {
		t.Fatal(err)
	}
	c := &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "rot", Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{
			Coordinators: 3, DataInstances: 1,
			Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
			Auth:    &memgraphv1.AuthSpec{SecretName: "admin"},
		},
	}
	if err := h.c.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	h.podsRun("rot-coordinator")
	h.podsRun("rot-data")
	h.waitCondition("rot", controller.ConditionCredentialsSynced, metav1.ConditionTrue, controller.ReasonCredentialsCurrent)
	h.waitRecorded("rot", "admin", "s3cret")
	rec := h.secret(controller.CredentialsSecretName("rot"))
	if ref := metav1.GetControllerOf(rec); ref == nil || ref.Kind != "MemgraphCluster" || ref.Name != "rot" {
		t.Errorf("the operator's Secret is not controlled by the cluster: %+v", ref)
	}

	// Steady: no write to the record.
	rv := rec.ResourceVersion
	calls := h.reg.calls()
	testenv.Eventually(t, 10*time.Second, "three passes", func() (bool, string) { return h.reg.calls() >= calls+3, "" })
	if got := h.secret(controller.CredentialsSecretName("rot")).ResourceVersion; got != rv {
		t.Errorf("a steady cluster rewrote the operator's Secret (%s -> %s)", rv, got)
	}

	// Password rotation.
	h.setUserSecret(userSecret, "admin", "n3w-pass")
	h.waitRecorded("rot", "admin", "n3w-pass")
	h.waitCondition("rot", controller.ConditionCredentialsSynced, metav1.ConditionTrue, controller.ReasonCredentialsRotated)
	assertLogin(t, mainProc.Bolt, "admin", "n3w-pass", true)
	assertLogin(t, mainProc.Bolt, "admin", "s3cret", false)
	h.waitEvent("rot", controller.ReasonCredentialsRotated)

	// User rename.
	h.setUserSecret(userSecret, "ops", "0ps-pass")
	h.waitRecorded("rot", "ops", "0ps-pass")
	assertLogin(t, mainProc.Bolt, "ops", "0ps-pass", true)
	assertLogin(t, mainProc.Bolt, "admin", "n3w-pass", false)

	// Both wrong: Memgraph's password changed by hand, the Secret set to a third one.
	s, err := memgraph.NewDialer(memgraph.Options{Username: "ops", Password: "0ps-pass"}).Dial(ctx, mainProc.Bolt)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(ctx, "SET PASSWORD FOR ops TO 'by-hand'"); err != nil {
		t.Fatal(err)
	}
	_ = s.Close(ctx)
	h.setUserSecret(userSecret, "ops", "typo")
	got := h.waitCondition("rot", controller.ConditionCredentialsSynced, metav1.ConditionFalse, controller.ReasonCredentialsRejected)
	msg := meta.FindStatusCondition(got.Status.Conditions, controller.ConditionCredentialsSynced).Message
	if !strings.Contains(msg, "put the credentials Memgraph holds into the Secret") || strings.Contains(msg, "typo") || strings.Contains(msg, "by-hand") {
		t.Errorf("CredentialsRejected message %q", msg)
	}
	h.waitEvent("rot", controller.ReasonCredentialsRejected)
	// No error loop: passes keep their pace and the record stays what last worked.
	if r := h.recorded("rot"); r != [2]string{"ops", "0ps-pass"} {
		t.Errorf("the record changed to %v while nothing logged in", r)
	}
	if got.Status.State == memgraphv1.StateDegraded {
		t.Errorf("state %s: rejected credentials are no data-plane outage", got.Status.State)
	}

	// The fix: the Secret gets what Memgraph holds.
	h.setUserSecret(userSecret, "ops", "by-hand")
	h.waitRecorded("rot", "ops", "by-hand")
	h.waitCondition("rot", controller.ConditionCredentialsSynced, metav1.ConditionTrue, controller.ReasonCredentialsCurrent)
}

func assertLogin(t *testing.T, addr, user, password string, want bool) {
	t.Helper()
	s, err := memgraph.NewDialer(memgraph.Options{Username: user, Password: password, Timeout: 3 * time.Second}).Dial(context.Background(), addr)
	if err == nil {
		_ = s.Close(context.Background())
	}
	if (err == nil) != want {
		t.Errorf("login %s/%s: %v, want success=%v", user, password, err, want)
	}
}

func (h *harness) secret(name string) *corev1.Secret {
	h.t.Helper()
	s := &corev1.Secret{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) recorded(cluster string) [2]string {
	s := &corev1.Secret{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: controller.CredentialsSecretName(cluster)}, s); err != nil {
		return [2]string{}
	}
	return [2]string{string(s.Data["username"]), string(s.Data["password"])}
}

func (h *harness) waitRecorded(cluster, user, password string) {
	h.t.Helper()
	testenv.Eventually(h.t, 30*time.Second, "credentials recorded as "+user, func() (bool, string) {
		r := h.recorded(cluster)
		return r == [2]string{user, password}, r[0]
	})
}

func (h *harness) setUserSecret(s *corev1.Secret, user, password string) {
	h.t.Helper()
	s.Data = map[string][]byte{"USER": []byte(user), "PASSWORD": []byte(password)}
	if err := h.c.Update(context.Background(), s); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) waitEvent(cluster, reason string) {
	h.t.Helper()
	testenv.Eventually(h.t, 30*time.Second, "a "+reason+" event", func() (bool, string) {
		evs := h.events(cluster)
		for _, e := range evs {
			if e.Reason == reason {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs))
	})
}

// TestBoltRegistrarCredentials: the production seam end to end against simulator
// processes (3 coordinators, 1 data instance with MEMGRAPH_USER): Register reports the
// MAIN's bolt_server, and SyncCredentials through it rotates the password there.
func TestBoltRegistrarCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sim := memgraphtest.NewCluster(t)
	sim.ExtraEnv = []string{"MEMGRAPH_USER=admin", "MEMGRAPH_PASSWORD=s3cret"}
	for id := 1; id <= 3; id++ {
		sim.StartCoordinator(id)
	}
	d0 := sim.StartData("d_0")
	b := controller.BoltRegistrar{Options: memgraph.Options{Timeout: 3 * time.Second}}
	orig := controller.Credentials{Username: "admin", Password: "s3cret"}
	var reg controller.Registration
	testenv.Eventually(t, 45*time.Second, "registration converged", func() (bool, string) {
		var err error
		reg, err = b.Register(ctx, nil, orig, sim.Desired(nil, nil))
		return err == nil && reg.Converged, fmt.Sprintf("%s %s %v", reg.Reason, reg.Message, err)
	})
	if reg.Main != "d_0" || reg.MainBolt != d0.Bolt {
		t.Fatalf("MAIN %q at %q, want d_0 at %s", reg.Main, reg.MainBolt, d0.Bolt)
	}
	next := controller.Credentials{Username: "admin", Password: "n3w"}
	if out := b.SyncCredentials(ctx, reg.MainBolt, next, orig); out.Working != next || len(out.Executed) != 1 {
		t.Fatalf("rotation through BoltRegistrar: %+v", out)
	}
	assertLogin(t, d0.Bolt, "admin", "n3w", true)
}
