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
	admissionv1 "k8s.io/api/admissionregistration/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRefusedPodDisruptionBudget: a write of the cluster's the API server refuses (here an
// admission policy turning down PodDisruptionBudgets in the namespace) is the cluster's
// Ready=False condition with the API server's message and one Warning event of the same
// reason; before, the condition came without the event. Once the policy goes, the budget
// is written.
func TestRefusedPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	c := env.Client
	ctx := context.Background()
	ns := testenv.NewNamespace(t, c, "vkc-refused")
	const why = "budgets in this namespace are the platform team's"
	match := &admissionv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{"policy"}, APIVersions: []string{"v1"}, Resources: []string{"poddisruptionbudgets"}},
		}}},
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: new(admissionv1.Fail), MatchConstraints: match,
			Validations: []admissionv1.Validation{{Expression: "false", Message: why}},
		}}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: ns, MatchResources: match,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	for _, o := range []client.Object{policy, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	// The policy takes effect a moment after it is created.
	probe := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: new(intstr.FromInt32(1))}}
	testenv.WaitFor(t, "the policy refusing budgets", func() bool {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
	})

	f := newFleet(t, c, ns)
	startController(t, f)
	if err := c.Create(ctx, &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, f, "x", valkeyv1.ReasonPodDisruptionBudgetError)
	if r := conditions.Get(got.Status.Conditions, valkeyv1.ConditionReady); !strings.Contains(r.Message, why) {
		t.Errorf("Ready message %q does not carry the API server's answer", r.Message)
	}
	wantEvents(t, f, "x", map[string]int{valkeyv1.ReasonPodDisruptionBudgetError: 1})
	settled(t, f, "x")

	if err := c.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the budget written once the policy is gone", func() bool {
		f.sync(ctx)
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PDBName("x")}, &policyv1.PodDisruptionBudget{}) == nil
	})
}

// TestRefusedMemberDegradesCluster: a member whose workload the API server refuses (its
// ValkeyNode's Ready reason WorkloadRefused, as the node controller writes it) makes the
// cluster Degraded with that reason and the node's message; the fleet stays out, so the
// test plays the node controller for that one node.
func TestRefusedMemberDegradesCluster(t *testing.T) {
	t.Parallel()
	c := env.Client
	ctx := context.Background()
	ns := testenv.NewNamespace(t, c, "vkc-refusedmember")
	f := newFleet(t, c, ns)
	startController(t, f)
	if err := c.Create(ctx, &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1}}); err != nil {
		t.Fatal(err)
	}
	const msg = `the API server refused the workload: StatefulSet.apps "x-1-1" is invalid: spec.template.spec.containers[2].image: Required value`
	testenv.Eventually(t, 30*time.Second, "x-1-1 reported refused", func() (bool, string) {
		var n valkeyv1.ValkeyNode
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x-1-1"}, &n); err != nil {
			return false, err.Error()
		}
		conditions.Set(&n.Status.Conditions, metav1.Condition{Type: valkeyv1.NodeConditionReady, Status: metav1.ConditionFalse,
			Reason: valkeyv1.NodeReasonWorkloadRefused, Message: msg}, n.Generation)
		err := c.Status().Update(ctx, &n)
		return err == nil, fmt.Sprint(err)
	})
	testenv.Eventually(t, 30*time.Second, "the cluster Degraded by the refused member", func() (bool, string) {
		var vc valkeyv1.ValkeyCluster
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, &vc); err != nil {
			return false, err.Error()
		}
		d := conditions.Get(vc.Status.Conditions, valkeyv1.ConditionDegraded)
		if d == nil {
			return false, fmt.Sprintf("state %s/%s, no Degraded", vc.Status.State, vc.Status.Reason)
		}
		return d.Status == metav1.ConditionTrue && d.Reason == valkeyv1.NodeReasonWorkloadRefused && d.Message == "ValkeyNode x-1-1: "+msg &&
				vc.Status.State == valkeyv1.StateDegraded,
			fmt.Sprintf("state %s, Degraded %s %s: %s", vc.Status.State, d.Status, d.Reason, d.Message)
	})
}
