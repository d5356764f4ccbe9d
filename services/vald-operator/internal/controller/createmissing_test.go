package controller

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
)

// TestNewReleaseCreatesItsValdReleases: a new release of two clusters gets both
// ValdReleases created (createMissing: the controller's field manager, an Update entry),
// controlled by it, with the values the builder renders; a later change applies to both,
// which then hold one Apply entry, as if they had been applied from the start.
func TestNewReleaseCreatesItsValdReleases(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=1", "b=2"))
	h.waitStatus("vor", statusCompleted)

	vor := h.get("vor")
	built, err := resources.DesiredValdReleases(resources.Input{Release: vor}, h.r.Options.Build)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for _, vr := range built {
		var values any
		if err := json.Unmarshal(vr.Spec.Raw, &values); err != nil {
			t.Fatal(err)
		}
		want[vr.Name] = values
	}
	check := func(manager string) {
		t.Helper()
		vrs := h.valdReleases()
		if got := names(vrs); got != h.ns+"-a,"+h.ns+"-b" {
			t.Fatalf("ValdReleases %s", got)
		}
		for _, vr := range vrs {
			var managers []string
			for _, mf := range vr.ManagedFields {
				managers = append(managers, mf.Manager+"/"+string(mf.Operation))
			}
			if !slices.Equal(managers, []string{manager}) {
				t.Errorf("%s: managers %v, want %s", vr.Name, managers, manager)
			}
			if owner := vr.OwnerReferences; len(owner) != 1 || owner[0].UID != vor.UID || owner[0].Controller == nil || !*owner[0].Controller {
				t.Errorf("%s: owner references %+v, want the release as controller", vr.Name, owner)
			}
			var got any
			if err := json.Unmarshal(vr.Spec.Raw, &got); err != nil {
				t.Fatal(err)
			}
			if manager == resources.FieldManager+"/Update" && !reflect.DeepEqual(got, want[vr.Name]) {
				t.Errorf("%s: values %s, want the builder's", vr.Name, vr.Spec.Raw)
			}
		}
	}
	check(resources.FieldManager + "/Update")

	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.NGT.Dimension = 16 })
	h.waitStatus("vor", statusCompleted)
	check(resources.FieldManager + "/Apply")
	for _, vr := range h.valdReleases() {
		if !strings.Contains(string(vr.Spec.Raw), `"dimension":16`) {
			t.Errorf("%s after the change: %s", vr.Name, vr.Spec.Raw)
		}
	}
}

// TestNewReleaseRefusedNamesTheFirst: a new release whose ValdReleases the API server
// refuses (no create permission) names the first of them in order, though both creates
// were sent at once, and converges once the permission is given.
func TestNewReleaseRefusedNamesTheFirst(t *testing.T) {
	user := "vald-operator-" + strings.ToLower(t.Name())
	h := start(t, func(o *Options) { o.wrapClient = impersonating(t, user) })
	h.operatorRole(user, false)
	h.create(h.release("vor", "a=1", "b=2"))
	want := `The API server refused to write ValdRelease "` + h.ns + `-a" (Forbidden): the operator's ClusterRole needs create and patch on valdreleases.vald.vdaas.org, or an admission policy refused it; retrying.`
	h.waitFor("the refused write in the condition", func() bool {
		return condition(h.get("vor"), valdv1.ConditionWaitingCreateVrs).Message == want
	})
	if got := h.valdReleases(); len(got) != 0 {
		t.Errorf("ValdReleases without permission: %s", names(got))
	}
	h.operatorRole(user, true)
	h.waitStatus("vor", statusCompleted)
	if got := names(h.valdReleases()); got != h.ns+"-a,"+h.ns+"-b" {
		t.Errorf("ValdReleases after the permission came back: %s", got)
	}
}
