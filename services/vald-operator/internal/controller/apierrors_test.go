package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// impersonated reads through the manager's client (its cache) and writes as user, whose
// permissions the test's RBAC decides: the operator's writes meet the real authorizer.
type impersonated struct {
	client.Client
	writer client.Client
}

func impersonating(t *testing.T, user string) func(client.Client) client.Client {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	w, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return func(c client.Client) client.Client { return impersonated{Client: c, writer: w} }
}

func (c impersonated) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.writer.Create(ctx, obj, opts...)
}

func (c impersonated) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.writer.Update(ctx, obj, opts...)
}

func (c impersonated) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.writer.Patch(ctx, obj, patch, opts...)
}

func (c impersonated) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.writer.Apply(ctx, obj, opts...)
}

func (c impersonated) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.writer.Delete(ctx, obj, opts...)
}

func (c impersonated) Status() client.SubResourceWriter { return c.writer.Status() }

func (c impersonated) SubResource(sub string) client.SubResourceClient {
	return c.writer.SubResource(sub)
}

// operatorRole gives user, in ns, what the operator writes there: its releases' status and,
// when valdReleaseWrites, create/patch of ValdReleases (delete always).
func (h *harness) operatorRole(user string, valdReleaseWrites bool) {
	h.t.Helper()
	verbs := []string{"get", "list", "watch", "delete"}
	if valdReleaseWrites {
		verbs = append(verbs, "create", "patch", "update")
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: h.ns}}
	_, err := controllerutil.CreateOrUpdate(context.Background(), env.Client, role, func() error {
		role.Rules = []rbacv1.PolicyRule{
			{APIGroups: []string{valdv1.GroupVersion.Group}, Resources: []string{"valdoperatorreleases", "valdoperatorreleases/status"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
			{APIGroups: []string{valdv1.GroupVersion.Group}, Resources: []string{"valdreleases"}, Verbs: verbs},
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: h.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "operator"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := env.Client.Create(context.Background(), binding); err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
}

// waitRendered waits until the release's rendered status is want and observedGeneration is
// observed, and returns it.
func (h *harness) waitRendered(name, want string, observed int64) *valdv1.ValdOperatorRelease {
	h.t.Helper()
	var last *valdv1.ValdOperatorRelease
	h.waitFor(fmt.Sprintf("status %q at observed generation %d", want, observed), func() bool {
		last = h.get(name)
		return conds(last) == want && last.Status.ObservedGeneration == observed
	})
	return last
}

// TestForbiddenWritesNeverComplete takes create/patch on ValdReleases away from the
// operator's user, adds a cluster, and gives the permission back.
func TestForbiddenWritesNeverComplete(t *testing.T) {
	user := "vald-operator-" + strings.ToLower(t.Name())
	h := start(t, func(o *Options) { o.wrapClient = impersonating(t, user) })
	h.operatorRole(user, true)
	h.create(h.release("vor", "a=1"))
	h.waitStatus("vor", statusCompleted)

	h.operatorRole(user, false)
	h.update("vor", func(v *valdv1.ValdOperatorRelease) {
		v.Spec.Infrastructure[0].Clusters = append(v.Spec.Infrastructure[0].Clusters, valdv1.Cluster{Name: "b", ID: "2"})
	})
	vor := h.waitRendered("vor", "WaitingCreateVrs 1/3 Reconciling | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Progressing Completed=Unknown/Blocked", 1)
	// The first ValdRelease to write is the existing one, at the new generation.
	want := `The API server refused to write ValdRelease "` + h.ns + `-a" (Forbidden): the operator's ClusterRole needs create and patch on valdreleases.vald.vdaas.org, or an admission policy refused it; retrying.`
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	if vor.Generation != 2 || vor.Status.State != "Reconciling" {
		t.Errorf("generation %d, state %s", vor.Generation, vor.Status.State)
	}
	if got := names(h.valdReleases()); got != h.ns+"-a" {
		t.Errorf("ValdReleases without permission: %s", got)
	}

	// The permission back: the retry (no watch event comes) converges at generation 2.
	h.operatorRole(user, true)
	h.waitStatus("vor", statusCompleted)
	if got := names(h.valdReleases()); got != h.ns+"-a,"+h.ns+"-b" {
		t.Errorf("ValdReleases after the permission came back: %s", got)
	}
}

// TestValdReleaseBeingDeletedIsNotReady holds a ValdRelease with a finalizer while it is
// deleted: the release is not Completed until it is gone and created again.
func TestValdReleaseBeingDeletedIsNotReady(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=1"))
	h.waitStatus("vor", statusCompleted)

	vr := h.valdReleases()[0]
	vr.Finalizers = append(vr.Finalizers, "test.opsuite.io/hold")
	if err := env.Client.Update(context.Background(), &vr); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(context.Background(), &vr); err != nil {
		t.Fatal(err)
	}
	vor := h.waitStatus("vor", "WaitingCreateVrs 1/3 Reconciling | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Progressing Completed=Unknown/Blocked")
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; msg != `ValdRelease "`+vr.Name+`" is being deleted; it is created again once it is gone.` {
		t.Errorf("message %q", msg)
	}

	held := h.valdReleases()[0]
	held.Finalizers = nil
	if err := env.Client.Update(context.Background(), &held); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("vor", statusCompleted)
	if got := h.valdReleases(); len(got) != 1 || got[0].UID == vr.UID {
		t.Errorf("ValdReleases after the deletion: %s (old UID %s)", names(got), vr.UID)
	}
}
