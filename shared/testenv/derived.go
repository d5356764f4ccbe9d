package testenv

// Helpers for tests that check every name an operator derives from a custom resource's
// name against the API server's own rules (the CRDs' name-length limits).

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LongestRevisionHash stands for the longest hash the StatefulSet controller appends to a
// StatefulSet's name to name its ControllerRevision and label its pods
// (controller-revision-hash): rand.SafeEncodeString of a 32-bit FNV hash printed in
// decimal, so up to 10 characters, from SafeEncodeString's alphabet.
const LongestRevisionHash = "bcdfghjklm"

// StatefulSetChildren are the objects the StatefulSet controller would create for sts's
// pod at ordinal: the ControllerRevision, the pod with the hostname, subdomain and labels
// the controller gives it, and its claims. Without kube-controller-manager in the test
// control plane, the test creates them itself (dry run) to have the API server judge
// every name and label they carry.
func StatefulSetChildren(sts *appsv1.StatefulSet, ordinal int32) []client.Object {
	revision := sts.Name + "-" + LongestRevisionHash
	podName := sts.Name + "-" + strconv.Itoa(int(ordinal))
	labels := maps.Clone(sts.Spec.Template.Labels)
	labels[appsv1.ControllerRevisionHashLabelKey] = revision
	labels[appsv1.StatefulSetPodNameLabel] = podName
	labels[appsv1.PodIndexLabel] = strconv.Itoa(int(ordinal))

	cr := &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte("{}")}, Revision: 1}
	cr.Name, cr.Namespace = revision, sts.Namespace
	cr.Labels = maps.Clone(sts.Spec.Template.Labels)
	cr.Labels[appsv1.ControllerRevisionHashLabelKey] = revision

	pod := &corev1.Pod{Spec: *sts.Spec.Template.Spec.DeepCopy()}
	pod.Name, pod.Namespace, pod.Labels = podName, sts.Namespace, labels
	pod.Annotations = maps.Clone(sts.Spec.Template.Annotations)
	pod.Spec.Hostname, pod.Spec.Subdomain = podName, sts.Spec.ServiceName
	out := []client.Object{cr, pod}
	for _, tmpl := range sts.Spec.VolumeClaimTemplates {
		claim := tmpl.DeepCopy()
		claim.Name, claim.Namespace = tmpl.Name+"-"+podName, sts.Namespace
		claim.Labels = maps.Clone(tmpl.Labels)
		if claim.Labels == nil {
			claim.Labels = map[string]string{}
		}
		maps.Copy(claim.Labels, sts.Spec.Selector.MatchLabels)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: tmpl.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
		}})
		out = append(out, claim)
	}
	return out
}

// AcceptedAsIs fails t unless the API server accepts every object as it is (dry run, so
// nothing is stored), which checks each name against its kind's rule (a Service's
// DNS-1035 label, a pod's hostname) and each label against the label rules.
func AcceptedAsIs(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o, client.DryRunAll); err != nil {
			t.Errorf("%T %q (%d characters) refused: %v", o, o.GetName(), len(o.GetName()), err)
		}
	}
}

// IsDNSName fails t unless name is a DNS name of at most 253 characters whose every label
// is a DNS-1123 label of at most 63 (a pod's FQDN).
func IsDNSName(t testing.TB, what, name string) {
	t.Helper()
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Errorf("%s %q (%d characters): %v", what, name, len(name), errs)
	}
	for _, label := range strings.Split(name, ".") {
		if errs := validation.IsDNS1123Label(label); len(errs) > 0 {
			t.Errorf("%s %q: label %q: %v", what, name, label, errs)
		}
	}
}

// AdmittedBeforeNameRules stores obj, whose name the CRD crd refuses, as a CRD without
// the metadata.name rules would have (an object created before they existed): it takes
// the rules out of the installed CRD, creates obj, and puts them back, waiting each time
// until the API server applies the CRD. probe is another object of the same kind and
// name length, used to see the rules come back.
func AdmittedBeforeNameRules(t testing.TB, c client.Client, crd string, obj, probe client.Object) {
	t.Helper()
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	setNameRules := func(keep bool, saved [][]any) [][]any {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := c.Get(ctx, client.ObjectKey{Name: crd}, u); err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		var old [][]any
		for i, v := range versions {
			s := v.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
			rules, _ := s["x-kubernetes-validations"].([]any)
			old = append(old, rules)
			if keep {
				s["x-kubernetes-validations"] = saved[i]
				continue
			}
			var others []any
			for _, r := range rules {
				if !strings.Contains(r.(map[string]any)["rule"].(string), "metadata.name") {
					others = append(others, r)
				}
			}
			s["x-kubernetes-validations"] = others
		}
		if err := unstructured.SetNestedSlice(u.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
		if err := c.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
		return old
	}
	saved := setNameRules(false, nil)
	restored := false
	defer func() {
		if !restored {
			setNameRules(true, saved)
		}
	}()
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := Poll(wait, 200*time.Millisecond, func(context.Context) (bool, error) {
		err := c.Create(ctx, obj)
		return err == nil, err
	}); err != nil {
		t.Fatalf("creating %q without the name rules: %v", obj.GetName(), err)
	}
	setNameRules(true, saved)
	restored = true
	if err := Poll(wait, 200*time.Millisecond, func(context.Context) (bool, error) {
		err := c.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "metadata.name must"), nil
	}); err != nil {
		t.Fatalf("the name rules did not come back: %v", err)
	}
}

// StillUpdatable fails t unless obj, stored before the name rules, can still be changed
// and carry and lose a finalizer (the operator's, on deletion).
func StillUpdatable(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	obj.SetLabels(map[string]string{"touched": "yes"})
	obj.SetFinalizers([]string{"example.com/test"})
	if err := c.Update(ctx, obj); err != nil {
		t.Fatalf("updating %q stored before the name rules: %v", obj.GetName(), err)
	}
	obj.SetFinalizers(nil)
	if err := c.Update(ctx, obj); err != nil {
		t.Fatalf("removing the finalizer of %q: %v", obj.GetName(), err)
	}
}
