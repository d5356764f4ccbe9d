package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/api/vald/valdchart"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// legacyValdRelease is a ValdRelease as the operator before per-cluster names wrote it for
// cluster of release vor: controlled and labelled by it, no name keys in its values.
func (h *harness) legacyValdRelease(vor *valdv1.ValdOperatorRelease, cluster string) *valdv1.ValdRelease {
	h.t.Helper()
	vr := &valdv1.ValdRelease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: h.ns, Name: resources.Name(h.ns, cluster),
			Labels: map[string]string{valdv1.LabelOperatorRelease: vor.Name, valdv1.LabelCluster: cluster},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: valdv1.GroupVersion.String(), Kind: "ValdOperatorRelease",
				Name: vor.Name, UID: vor.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: &apiextensionsv1.JSON{Raw: []byte(`{"agent": {"ngt": {"dimension": 4}}, "gateway": {"lb": {"enabled": true}}, "discoverer": {"kind": "Deployment"}, "manager": {"index": {"enabled": false, "creator": {"enabled": true}, "saver": {"enabled": true}}}}`)},
	}
	h.create(vr)
	return vr
}

// rendered returns the names of the objects of a kind the chart renders for vr.
func rendered(t *testing.T, vr *valdv1.ValdRelease, kind string) string {
	t.Helper()
	var values map[string]any
	if err := json.Unmarshal(vr.Spec.Raw, &values); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range valdchart.Objects(vr.Name, vr.Namespace, values) {
		if o.Kind == kind {
			out = append(out, o.Name)
		}
	}
	return strings.Join(out, ",")
}

// TestLegacyNamesKept: a ValdRelease written by the operator before per-cluster names
// keeps the chart's default names when the release is reconciled (renamed, Helm would
// delete its agents' StatefulSet and the new one would start on empty volumes), while its
// values follow the release; a cluster added later gets per-cluster names. A legacy
// ValdRelease of another release in the namespace, whose default names would clash, holds
// that release Pending with a message naming both.
func TestLegacyNamesKept(t *testing.T) {
	h := start(t, nil)
	ctx := context.Background()

	// The release as the previous operator left it: its cluster's id not yet set keeps
	// this operator from building while the old ValdRelease is put in place.
	h.create(h.release("vor", "a="))
	vor := h.get("vor")
	old := h.legacyValdRelease(vor, "a")
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[0].ID = "1" })
	h.waitCompleted("vor")

	got := &valdv1.ValdRelease{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), got); err != nil {
		t.Fatal(err)
	}
	if got.UID != old.UID {
		t.Fatalf("ValdRelease %s was replaced", old.Name)
	}
	if !strings.Contains(string(got.Spec.Raw), `"dimension":8`) {
		t.Errorf("legacy ValdRelease not updated to the release's values: %s", got.Spec.Raw)
	}
	if !resources.LegacyNamed(got) {
		t.Errorf("legacy ValdRelease got per-cluster name keys: %s", got.Spec.Raw)
	}
	if s := rendered(t, got, "StatefulSet"); s != "vald-agent" {
		t.Errorf("legacy ValdRelease renders StatefulSet %q, want vald-agent (the name it was installed with)", s)
	}

	// A cluster added now is named after itself; the legacy one keeps its names.
	h.update("vor", func(v *valdv1.ValdOperatorRelease) {
		v.Spec.Infrastructure[0].Clusters = append(v.Spec.Infrastructure[0].Clusters, valdv1.Cluster{Name: "b", ID: "2"})
	})
	h.waitCompleted("vor")
	byName := map[string]valdv1.ValdRelease{}
	for _, vr := range h.valdReleases() {
		byName[vr.Name] = vr
	}
	a, b := byName[h.ns+"-a"], byName[h.ns+"-b"]
	if s := rendered(t, &a, "StatefulSet"); s != "vald-agent" {
		t.Errorf("after adding a cluster, the legacy ValdRelease renders StatefulSet %q, want vald-agent", s)
	}
	if b.Spec == nil || resources.LegacyNamed(&b) {
		t.Fatalf("new ValdRelease %s without per-cluster names: %v", b.Name, b.Spec)
	}
	if s := rendered(t, &b, "StatefulSet"); s != "vald-agent-b" {
		t.Errorf("new ValdRelease renders StatefulSet %q, want vald-agent-b", s)
	}

	// Another release of the namespace with a legacy ValdRelease too: both would render
	// vald-agent, so it waits, naming the object and the other ValdRelease.
	h.create(h.release("other", "c="))
	other := h.get("other")
	h.legacyValdRelease(other, "c")
	h.update("other", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[0].ID = "3" })
	pending := h.waitStatus("other", "WaitingCreateVrs 1/3 Pending | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Pending")
	msg := condition(pending, valdv1.ConditionWaitingCreateVrs).Message
	if want := `ValdRelease "` + h.ns + `-c" keeps the chart's default names it was installed with`; !strings.Contains(msg, want) {
		t.Errorf("message %q, want it to contain %q", msg, want)
	}
	if want := "which ValdRelease " + h.ns + "/" + h.ns + "-a renders too"; !strings.Contains(msg, want) {
		t.Errorf("message %q, want it to contain %q", msg, want)
	}
}

// waitCompleted waits until the release has completed its current generation, whatever
// else its conditions say (a first build records a Switchover).
func (h *harness) waitCompleted(name string) {
	h.t.Helper()
	h.waitFor(name+" completed", func() bool {
		v := h.get(name)
		return v.Status.ObservedGeneration == v.Generation && strings.HasPrefix(conds(v), statusCompleted[:strings.Index(statusCompleted, "|")])
	})
}
