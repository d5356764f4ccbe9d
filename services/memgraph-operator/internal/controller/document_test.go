package controller_test

import (
	"context"
	"os"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestDocumentMinimalManifestReconciles: the product document's minimal manifest, applied
// byte for byte, reconciles to Ready: its spec.secrets reaches both roles' pods as the
// license, its retentionPolicy both claim policies, each role's members prefer distinct
// hosts, and only the data instances carry Bolt credentials (none here: no spec.auth).
func TestDocumentMinimalManifestReconciles(t *testing.T) {
	h := start(t, "mg-document")
	data, err := os.ReadFile("../../examples/minimal-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(h.ns)
	if err := h.c.Create(context.Background(), u, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("the document's minimal manifest is refused: %v", err)
	}
	name := u.GetName()
	h.waitCondition(name, memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady)
	h.podsRun(resources.StatefulSetName(name, resources.RoleCoordinator))
	h.podsRun(resources.StatefulSetName(name, resources.RoleData))
	c := h.waitCondition(name, memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	if c.Status.State != memgraphv1.StateReady || c.Status.Coordinators != 3 || c.Status.DataInstances != 2 {
		t.Errorf("status %+v", c.Status)
	}

	for _, r := range []resources.Role{resources.RoleCoordinator, resources.RoleData} {
		sts := h.sts(resources.StatefulSetName(name, r))
		if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil ||
			p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
			t.Errorf("%s claim retention %+v, want Retain/Retain", r, p)
		}
		pod := sts.Spec.Template.Spec
		env := map[string]corev1.EnvVar{}
		for _, e := range pod.Containers[0].Env {
			env[e.Name] = e
		}
		for name, key := range map[string]string{resources.EnvLicense: "MEMGRAPH_ENTERPRISE_LICENSE", resources.EnvOrganization: "MEMGRAPH_ORGANIZATION_NAME"} {
			if ref := env[name].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "memgraph-secrets" || ref.SecretKeyRef.Key != key {
				t.Errorf("%s %s = %+v, want Secret memgraph-secrets key %s", r, name, env[name], key)
			}
		}
		if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Errorf("%s affinity %+v, want the preferred host spread", r, a)
		}
	}
}
