package controller

import (
	"context"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSharedObjectClash: an overlay that names an object alike in two releases of one
// namespace, or gives a component back to the chart's default names next to a ValdRelease
// that uses them, is held Pending with a message naming the object and the other
// ValdRelease, before its ValdRelease is written; a change of the overlay releases it.
func TestSharedObjectClash(t *testing.T) {
	h := start(t, nil)
	ctx := context.Background()
	const pending = "WaitingCreateVrs 1/3 Pending | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Pending"
	sharedGateway := []byte(`{"gateway": {"lb": {"name": "shared-gateway"}}}`)

	first := h.release("first", "a=1")
	first.Spec.VectorEngine.Vald.Overlay = &apiextensionsv1.JSON{Raw: sharedGateway}
	h.create(first)
	h.waitStatus("first", statusCompleted)

	second := h.release("second", "b=2")
	second.Spec.VectorEngine.Vald.Overlay = &apiextensionsv1.JSON{Raw: sharedGateway}
	h.create(second)
	vor := h.waitStatus("second", pending)
	msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message
	want := `ValdRelease "` + h.ns + `-b" would make the Vald chart render ConfigMap ` + h.ns + `/shared-gateway-config, which ValdRelease ` + h.ns + `/` + h.ns + `-a renders too`
	if !strings.Contains(msg, want) {
		t.Errorf("message %q, want it to contain %q", msg, want)
	}
	if got := names(h.valdReleases()); got != h.ns+"-a" {
		t.Errorf("ValdReleases %s: the clashing one was written", got)
	}
	h.update("second", func(v *valdv1.ValdOperatorRelease) {
		v.Spec.VectorEngine.Vald.Overlay = &apiextensionsv1.JSON{Raw: []byte(`{"gateway": {"lb": {"name": "second-gateway"}}}`)}
	})
	h.waitStatus("second", statusCompleted)

	// A ValdRelease made by hand with the chart's defaults, and a release whose overlay
	// removes the discoverer's generated keys (so its names fall back to the defaults).
	byHand := &valdv1.ValdRelease{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "by-hand"},
		Spec:       &apiextensionsv1.JSON{Raw: []byte(`{"agent": {"ngt": {"dimension": 8}}}`)},
	}
	if err := env.Client.Create(ctx, byHand); err != nil {
		t.Fatal(err)
	}
	// The check reads the operator's cache; a ValdRelease the cache has not yet seen
	// cannot be found (the Vald Helm Operator's refusal is the backstop for that window).
	h.waitFor("the operator's cache to list by-hand", func() bool {
		list := &valdv1.ValdReleaseList{}
		if err := h.r.Client.List(ctx, list, client.InNamespace(h.ns)); err != nil {
			return false
		}
		return strings.Contains(names(list.Items), "by-hand")
	})
	third := h.release("third", "c=3")
	third.Spec.VectorEngine.Vald.Overlay = &apiextensionsv1.JSON{Raw: []byte(`{"discoverer": null}`)}
	h.create(third)
	vor = h.waitStatus("third", pending)
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; !strings.Contains(msg, "which ValdRelease "+h.ns+"/by-hand renders too") {
		t.Errorf("message %q, want it to name by-hand", msg)
	}
	if err := env.Client.Delete(ctx, byHand); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("third", statusCompleted)
}
