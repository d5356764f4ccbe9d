package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitReason waits until the cluster's Ready condition has reason, and returns the cluster.
func waitReason(t *testing.T, f *fleet, name, reason string) *valkeyv1.ValkeyCluster {
	t.Helper()
	var vc valkeyv1.ValkeyCluster
	testenv.Eventually(t, 60*time.Second, name+" Ready reason "+reason, func() (bool, string) {
		f.sync(context.Background())
		if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &vc); err != nil {
			return false, err.Error()
		}
		r := conditions.Get(vc.Status.Conditions, valkeyv1.ConditionReady)
		if r == nil {
			return false, "no Ready condition"
		}
		return r.Reason == reason, r.Reason + ": " + r.Message
	})
	return &vc
}

// settled checks that nothing about the cluster is written for a while: a failure waits
// for a change, it does not loop.
func settled(t *testing.T, f *fleet, name string) {
	t.Helper()
	before := eventReasons(t, f.c, f.ns, name)
	var a, b valkeyv1.ValkeyCluster
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &b); err != nil {
		t.Fatal(err)
	}
	if a.ResourceVersion != b.ResourceVersion {
		t.Errorf("status rewritten while waiting: %s -> %s (%s)", a.ResourceVersion, b.ResourceVersion, b.Status.Message)
	}
	if after := eventReasons(t, f.c, f.ns, name); describe(after) != describe(before) {
		t.Errorf("events repeated while waiting: %s -> %s", describe(before), describe(after))
	}
}

// TestMissingPasswordSecret: a user whose password Secret does not exist stops the pass
// with UsersACLError naming the user and the Secret; creating it lets the cluster form.
func TestMissingPasswordSecret(t *testing.T) {
	t.Parallel()
	c := env.Client
	ns := testenv.NewNamespace(t, c, "vkc-pw")
	f := newFleet(t, c, ns)
	startController(t, f)
	vc := &valkeyv1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "users", Namespace: ns},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3, Users: []valkeyv1.UserACLSpec{{
			Name: "app", Keys: valkeyv1.KeysACLSpec{ReadWrite: []string{"app:*"}},
		}}},
	}
	if err := c.Create(context.Background(), vc); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, f, "users", valkeyv1.ReasonUsersACLError)
	r := conditions.Get(got.Status.Conditions, valkeyv1.ConditionReady)
	if !strings.Contains(r.Message, "app") || !strings.Contains(r.Message, "users-users") {
		t.Errorf("message %q does not name the user and the Secret", r.Message)
	}
	if got.Status.State != valkeyv1.StateFailed {
		t.Errorf("state %s, want Failed", got.Status.State)
	}
	var nodes valkeyv1.ValkeyNodeList
	if err := c.List(context.Background(), &nodes, client.InNamespace(ns)); err != nil || len(nodes.Items) != 0 {
		t.Errorf("%d ValkeyNodes created before the users could be rendered (%v)", len(nodes.Items), err)
	}
	settled(t, f, "users")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "users-users", Namespace: ns}, StringData: map[string]string{"app": "s3cret"}}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f, "users", 90*time.Second)
	var acl corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: resources.ACLSecretName("users")}, &acl); err != nil {
		t.Fatal(err)
	}
	if users := string(acl.Data[resources.ACLKeyUsers]); !strings.Contains(users, "user app ") || strings.Contains(users, "s3cret") {
		t.Errorf("users.acl lacks user app or holds its password in clear:\n%s", users)
	}
}

// TestForeignInternalSecret: a Secret of the internal Secret's name that the cluster does
// not own is never taken over: SystemUsersACLError and one Warning event.
func TestForeignInternalSecret(t *testing.T) {
	t.Parallel()
	c := env.Client
	ns := testenv.NewNamespace(t, c, "vkc-foreign")
	f := newFleet(t, c, ns)
	startController(t, f)
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: resources.InternalSecretName("x"), Namespace: ns}, StringData: map[string]string{"mine": "yes"}}
	if err := c.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}
	if err := c.Create(context.Background(), vc); err != nil {
		t.Fatal(err)
	}
	waitReason(t, f, "x", valkeyv1.ReasonSystemUsersACLError)
	wantEvents(t, f, "x", map[string]int{valkeyv1.EventInternalSecretsCreationFailed: 1})
	settled(t, f, "x")
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(foreign), &s); err != nil || string(s.Data["mine"]) != "yes" || len(s.Data) != 1 {
		t.Errorf("the foreign Secret was changed: %v %v", s.Data, err)
	}
}

// TestUnreachableMember: a member whose pod is ready but does not answer keeps the
// cluster waiting with a message naming it, without a hot loop.
func TestUnreachableMember(t *testing.T) {
	t.Parallel()
	c := env.Client
	ns := testenv.NewNamespace(t, c, "vkc-unreach")
	f := newFleet(t, c, ns)
	f.unreachable["u-1-0"] = testenv.FreeAddr(t)
	startController(t, f)
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "u", Namespace: ns}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}
	if err := c.Create(context.Background(), vc); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, f, "u", valkeyv1.ReasonMissingShards)
	testenv.Eventually(t, 30*time.Second, "message naming u-1-0", func() (bool, string) {
		f.sync(context.Background())
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(vc), got); err != nil {
			return false, err.Error()
		}
		// While other members are still starting, Progressing waits for them all, u-1-0
		// among them; once they answer, the status says the operator cannot reach it
		// (MembersUnreachable). Either way the message names it.
		p := conditions.Get(got.Status.Conditions, valkeyv1.ConditionProgressing)
		return (p != nil && strings.Contains(p.Message, "u-1-0")) || strings.Contains(got.Status.Message, "u-1-0"), got.Status.Message
	})
	wantEvents(t, f, "u", map[string]int{valkeyv1.EventWaitingForShards: 1})
	f.mu.Lock()
	delete(f.unreachable, "u-1-0")
	f.mu.Unlock()
	waitReady(t, f, "u", 90*time.Second)
}

// TestSelfSignedTLS: the operator generates a CA (its key in a Secret no pod mounts) and a
// member certificate; a certificate near its end is renewed under the same CA and the
// members roll onto it.
func TestSelfSignedTLS(t *testing.T) {
	t.Parallel()
	c := env.Client
	ns := testenv.NewNamespace(t, c, "vkc-tls")
	f := newFleet(t, c, ns)
	startController(t, f)
	ctx := context.Background()
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
		// No replicas: the renewal's roll replaces primaries alone, as the user allows.
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3, TLS: &valkeyv1.TLSConfig{SelfSigned: true},
			Rollout: &valkeyv1.RolloutSpec{AllowPrimaryWithoutReplica: true}}}
	if err := c.Create(ctx, vc); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f, "s", 90*time.Second)
	var leaf, ca corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.SelfSignedTLSSecretName("s")}, &leaf); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.SelfSignedCASecretName("s")}, &ca); err != nil {
		t.Fatal(err)
	}
	if _, ok := leaf.Data[resources.TLSKeyCAKey]; ok {
		t.Error("the mounted TLS Secret holds the CA's key")
	}
	if string(leaf.Data[resources.TLSKeyCA]) != string(ca.Data[resources.TLSKeyCA]) || len(ca.Data[resources.TLSKeyCAKey]) == 0 {
		t.Error("the TLS Secret's CA is not the CA Secret's, or the CA Secret has no key")
	}
	var n valkeyv1.ValkeyNode
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s-0-0"}, &n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.TLS == nil || n.Spec.TLS.Certificate.SecretName != leaf.Name {
		t.Errorf("node TLS %+v", n.Spec.TLS)
	}
	hash := n.Spec.ConfigHash

	// A certificate 10 days from its end is renewed, under the same CA.
	old, oldKey, err := resources.IssueCert(ca.Data[resources.TLSKeyCA], ca.Data[resources.TLSKeyCAKey], "s", ns, nil, nil, time.Now().Add(-resources.CertValidity+10*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	leaf.Data[resources.TLSKeyCert], leaf.Data[resources.TLSKeyKey] = old, oldKey
	if err := c.Update(ctx, &leaf); err != nil {
		t.Fatal(err)
	}
	restarts := f.restarts
	testenv.Eventually(t, 120*time.Second, "renewed certificate rolled out", func() (bool, string) {
		f.sync(ctx)
		var cur corev1.Secret
		if err := c.Get(ctx, client.ObjectKeyFromObject(&leaf), &cur); err != nil {
			return false, err.Error()
		}
		if resources.NeedsRenewal(cur.Data[resources.TLSKeyCert], time.Now()) {
			return false, "certificate not renewed"
		}
		if string(cur.Data[resources.TLSKeyCA]) != string(ca.Data[resources.TLSKeyCA]) {
			t.Fatal("renewal replaced the CA")
		}
		var nodes valkeyv1.ValkeyNodeList
		if err := c.List(ctx, &nodes, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, n := range nodes.Items {
			if n.Spec.ConfigHash == hash {
				return false, n.Name + " still on the old certificate"
			}
		}
		return f.restarts-restarts == 3, fmt.Sprintf("%d of 3 members restarted", f.restarts-restarts)
	})
	waitReady(t, f, "s", 90*time.Second)
}

// TestConfigurationWarnings: risky values are accepted and applied, with
// ConfigurationWarning saying what to change, and the cluster still Ready.
func TestConfigurationWarnings(t *testing.T) {
	t.Parallel()
	grace := int64(5)
	f, vc := startCluster(t, "vkc-warn", "w", valkeyv1.ValkeyClusterSpec{Shards: 1, TerminationGracePeriodSeconds: &grace})
	got := waitReady(t, f, "w", 60*time.Second)
	w := conditions.Get(got.Status.Conditions, valkeyv1.ConditionConfigurationWarning)
	if w == nil || w.Status != metav1.ConditionTrue || w.Reason != valkeyv1.ReasonGracePeriodTooShort || !strings.Contains(w.Message, "terminationGracePeriodSeconds") {
		t.Errorf("ConfigurationWarning = %+v, want GracePeriodTooShort naming the field", w)
	}
	if got.Status.State != valkeyv1.StateReady {
		t.Errorf("state %s: a warning does not degrade the cluster", got.Status.State)
	}
	var n valkeyv1.ValkeyNode
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "w-0-0"}, &n); err != nil || n.Spec.TerminationGracePeriodSeconds == nil || *n.Spec.TerminationGracePeriodSeconds != grace {
		t.Errorf("the risky grace period was not applied: %v %v", n.Spec.TerminationGracePeriodSeconds, err)
	}

	// With a safe grace period, the single shard is what the warning is about.
	var cur valkeyv1.ValkeyCluster
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.TerminationGracePeriodSeconds = nil
	// The change rolls the single primary, which has no replica: allowed here.
	cur.Spec.Rollout = &valkeyv1.RolloutSpec{AllowPrimaryWithoutReplica: true}
	if err := f.c.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	got = waitReady(t, f, "w", 60*time.Second)
	w = conditions.Get(got.Status.Conditions, valkeyv1.ConditionConfigurationWarning)
	if w == nil || w.Reason != valkeyv1.ReasonTooFewShards || !strings.Contains(w.Message, "at least 3 shards") || !strings.Contains(w.Message, "spec.replicas is 0 and spec.persistence is unset") {
		t.Errorf("ConfigurationWarning = %+v, want TooFewShards, also naming the missing redundancy", w)
	}
}
