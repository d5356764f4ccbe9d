package clusterctrl_test

import (
	"context"
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
		p := conditions.Get(got.Status.Conditions, valkeyv1.ConditionProgressing)
		return p != nil && strings.Contains(p.Message, "u-1-0"), got.Status.Message
	})
	wantEvents(t, f, "u", map[string]int{valkeyv1.EventWaitingForShards: 1})
	f.mu.Lock()
	delete(f.unreachable, "u-1-0")
	f.mu.Unlock()
	waitReady(t, f, "u", 90*time.Second)
}
