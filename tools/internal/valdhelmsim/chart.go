package valdhelmsim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/opsuite/suite/api/vald/valdchart"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// What the Vald chart, played here, refuses: values of the wrong type for the keys whose
// types are recorded in api/vald/valdchart (the chart's values.schema.json), and objects
// another release owns (Helm's ownership check), before anything is installed; and, as
// the upgrade applies the render, a new value for a PriorityClass the release has (the API
// server's validation). The objects a release renders are the ones valdchart.Objects
// models, its PriorityClasses' values valdchart.PriorityClasses.

// Taken is an object the render shares with another release that has it installed.
type Taken struct {
	Object valdchart.Resource
	Owner  types.NamespacedName
}

// valuesOf is the ValdRelease's spec as chart values.
func valuesOf(spec any) map[string]any {
	values, _ := spec.(map[string]any)
	return values
}

// schemaRefusal is Helm's error for values the chart's schema refuses; "" when they pass.
func schemaRefusal(spec any) string {
	if vs := valdchart.Check(valuesOf(spec)); len(vs) > 0 {
		return valdchart.SchemaError(vs)
	}
	return ""
}

// refusal is Helm's error for o's values and render, "" when they pass its checks: the
// values against the chart's schema first, then the objects another release owns (retry:
// the owner may go without o changing), in the words of an install (nothing deployed) or
// of the dry-run upgrade to o's current values (Helm checks only the objects the deployed
// release does not have; o.Taken never holds this release's own).
func refusal(o Observed, deployed bool) (msg string, retry bool) {
	if msg := schemaRefusal(o.Spec); msg != "" {
		return msg, false
	}
	if len(o.Taken) == 0 {
		return "", false
	}
	if deployed {
		return "Unable to continue with update: " + ownershipConflict(o, o.Taken[0]), true
	}
	return "rendered manifests contain a resource that already exists. Unable to continue with install: " + ownershipConflict(o, o.Taken[0]), true
}

// ownershipConflict is Helm's error for an object of o's render that release t.Owner has
// installed (existingResourceConflict, helm.sh/helm/v3 pkg/action).
func ownershipConflict(o Observed, t Taken) string {
	why := fmt.Sprintf(`key "meta.helm.sh/release-name" must equal %q: current value is %q`, o.Name, t.Owner.Name)
	if t.Owner.Name == o.Name {
		why = fmt.Sprintf(`key "meta.helm.sh/release-namespace" must equal %q: current value is %q`, o.Namespace, t.Owner.Namespace)
	}
	return fmt.Sprintf("%s %q in namespace %q exists and cannot be imported into the current release: invalid ownership metadata; annotation validation error: %s",
		t.Object.Kind, t.Object.Name, t.Object.Namespace, why)
}

// priorityClassKind is what the API server names PriorityClasses by in its errors.
var priorityClassKind = schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"}

// priorityRefusal is the error the real operator reports for an upgrade that renders a
// PriorityClass the deployed release has, under the same name, with another value; ""
// when there is none. Kubernetes refuses to change a class's value
// (ValidatePriorityClassUpdate, k8s.io/kubernetes pkg/apis/scheduling/validation); Helm's
// upgrade patches every object and joins the failed patches' errors with " && "
// (Client.Update, helm.sh/helm/v3 pkg/kube); operator-sdk's helm-operator prefixes the
// upgrade's error (manager.UpgradeRelease) and writes it as the condition's message.
func priorityRefusal(deployed map[string]int64, render []valdchart.PriorityClass) string {
	var failed []string
	for _, pc := range render {
		if value, ok := deployed[pc.Name]; ok && value != pc.Value {
			invalid := apierrors.NewInvalid(priorityClassKind, pc.Name, field.ErrorList{
				field.Forbidden(field.NewPath("value"), "may not be changed in an update."),
			})
			failed = append(failed, fmt.Sprintf("cannot patch %q with kind %s: %v", pc.Name, priorityClassKind.Kind, invalid))
		}
	}
	if len(failed) == 0 {
		return ""
	}
	return "failed to upgrade release: " + strings.Join(failed, " && ")
}

// owners records which release has which objects installed, as Helm's ownership
// annotations do on the objects themselves. A release's entry is seeded from its deployed
// manifest the first time it is seen (a restarted simulator), replaced when a try installs
// a render, and dropped when the release is uninstalled or gone. Claims are taken under the
// lock together with the decision, so two releases never both install one object.
type owners struct {
	mu      sync.Mutex
	byObj   map[valdchart.Resource]types.NamespacedName
	byOwner map[types.NamespacedName][]valdchart.Resource
}

// seed records what a release's deployed manifest lists, unless the release is known.
func (o *owners) seed(release types.NamespacedName, deployed []valdchart.Resource) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, known := o.byOwner[release]; known {
		return
	}
	o.setLocked(release, deployed)
}

// drop forgets a release's objects (uninstalled, or gone).
func (o *owners) drop(release types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.setLocked(release, nil)
	delete(o.byOwner, release)
}

// decide runs plan under the lock with the objects of render other releases own, and
// claims render for release when the plan installs it.
func (o *owners) decide(release types.NamespacedName, render []valdchart.Resource, plan func(taken []Taken) (Plan, bool, error)) (Plan, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var taken []Taken
	for _, obj := range render {
		if owner, ok := o.byObj[obj]; ok && owner != release {
			taken = append(taken, Taken{Object: obj, Owner: owner})
		}
	}
	p, installs, err := plan(taken)
	if err == nil && installs {
		o.setLocked(release, render)
	}
	return p, err
}

func (o *owners) setLocked(release types.NamespacedName, objs []valdchart.Resource) {
	if o.byObj == nil {
		o.byObj = map[valdchart.Resource]types.NamespacedName{}
		o.byOwner = map[types.NamespacedName][]valdchart.Resource{}
	}
	for _, obj := range o.byOwner[release] {
		if o.byObj[obj] == release {
			delete(o.byObj, obj)
		}
	}
	o.byOwner[release] = objs
	for _, obj := range objs {
		if _, held := o.byObj[obj]; !held {
			o.byObj[obj] = release
		}
	}
}

// encodeObjects and decodeObjects keep a render's objects in the manifest's ConfigMap,
// one "Kind/namespace/name" a line.
func encodeObjects(objs []valdchart.Resource) string {
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key()
	}
	sort.Strings(keys)
	return strings.Join(keys, "\n")
}

func decodeObjects(s string) []valdchart.Resource {
	var out []valdchart.Resource
	for _, line := range strings.Split(s, "\n") {
		parts := strings.SplitN(line, "/", 3)
		if len(parts) == 3 {
			out = append(out, valdchart.Resource{Kind: parts[0], Namespace: parts[1], Name: parts[2]})
		}
	}
	return out
}

// encodePriorities and decodePriorities keep the values of a render's PriorityClasses in
// the manifest's ConfigMap, one "name=value" a line in the order Helm applies them.
func encodePriorities(pcs []valdchart.PriorityClass) string {
	lines := make([]string, len(pcs))
	for i, pc := range pcs {
		lines[i] = pc.Name + "=" + strconv.FormatInt(pc.Value, 10)
	}
	return strings.Join(lines, "\n")
}

func decodePriorities(s string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		name, value, ok := strings.Cut(line, "=")
		if v, err := strconv.ParseInt(value, 10, 64); ok && err == nil {
			out[name] = v
		}
	}
	return out
}
