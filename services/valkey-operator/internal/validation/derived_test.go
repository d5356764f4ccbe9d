package validation

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// longestRevisionHash stands for the longest hash the StatefulSet controller appends to a
// StatefulSet's name to name its ControllerRevision and label its pods
// (controller-revision-hash): rand.SafeEncodeString of a 32-bit FNV hash printed in
// decimal, so up to 10 characters, from SafeEncodeString's alphabet.
const longestRevisionHash = "bcdfghjklm"

// statefulSetChildren are the objects the StatefulSet controller would create for sts's
// pod at ordinal: the ControllerRevision, the pod with the hostname, subdomain and labels
// the controller gives it, and its claims. Without kube-controller-manager in the test
// control plane, the test creates them itself (dry run) to have the API server judge
// every name and label they carry.
func statefulSetChildren(sts *appsv1.StatefulSet, ordinal int32) []client.Object {
	revision := sts.Name + "-" + longestRevisionHash
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

// acceptedAsIs fails t unless the API server accepts every object as it is (dry run, so
// nothing is stored), which checks each name against its kind's rule (a Service's
// DNS-1035 label, a pod's hostname) and each label against the label rules.
func acceptedAsIs(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o, client.DryRunAll); err != nil {
			t.Errorf("%T %q (%d characters) refused: %v", o, o.GetName(), len(o.GetName()), err)
		}
	}
}

// isDNSName fails t unless name is a DNS name of at most 253 characters whose every label
// is a DNS-1123 label of at most 63 (a pod's FQDN).
func isDNSName(t *testing.T, what, name string) {
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
