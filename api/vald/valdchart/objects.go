package valdchart

import (
	"math"
	"sort"
	"strings"
)

// Resource is one object the chart renders, as Helm tells releases' objects apart: kind,
// namespace (empty for a cluster-scoped kind) and name.
type Resource struct {
	Kind      string
	Namespace string
	Name      string
}

func (o Resource) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Key is a compact form of the object's identity, for indexes.
func (o Resource) Key() string { return o.Kind + "/" + o.Namespace + "/" + o.Name }

type keyedResource struct {
	key string
	Resource
}

// component is what the chart renders for one Vald component, and the defaults of the keys
// that name and enable those objects (values.yaml of ChartVersion).
type component struct {
	path        string // values path of the component
	name        string // default of <path>.name
	enabled     bool   // default of <path>.enabled
	workload    string // default of <path>.kind; CronJob for the index jobs (no kind key)
	pods        bool   // a Service, a PodDisruptionBudget and a PriorityClass (podPriority)
	priority    int64  // default of <path>.podPriority.value, where pods
	hpa         bool   // default of <path>.hpa.enabled; false where the chart has none
	hasHPA      bool
	account     string // default of <path>.serviceAccountName (a ServiceAccount when set)
	clusterRole string // default name of <path>.clusterRole and clusterRoleBinding; "" none
	// gate, when set, is a boolean key that must be true for the ServiceAccount and the
	// cluster role objects (the agent's export of index information).
	gate string
}

// components are the parts of the chart this package models: every one the operator
// writes or names. The filter and mirror gateways, the index corrector, deletion and
// read-replica jobs, the index operator and network policies are not modelled. They are in
// the order of the chart's template directories (agent/, discoverer/, gateway/lb/,
// manager/index/), which is the order Helm applies objects of one kind in.
var components = []component{
	{path: "agent", name: "vald-agent", enabled: true, workload: "StatefulSet", pods: true, priority: 1000000000, hasHPA: true,
		account: "agent-ngt", clusterRole: "agent", gate: "agent.ngt.enable_export_index_info_to_k8s"},
	{path: "discoverer", name: "vald-discoverer", enabled: true, workload: "Deployment", pods: true, priority: 1000000, hasHPA: true,
		account: "vald", clusterRole: "discoverer"},
	{path: "gateway.lb", name: "vald-lb-gateway", enabled: true, workload: "Deployment", pods: true, priority: 1000000, hasHPA: true, hpa: true},
	{path: "manager.index", name: "vald-manager-index", enabled: true, workload: "Deployment", pods: true, priority: 1000000},
	{path: "manager.index.creator", name: "vald-index-creation", workload: "CronJob"},
	{path: "manager.index.saver", name: "vald-index-save", workload: "CronJob"},
}

// Objects lists the objects the chart renders for release (the Helm release name, which
// the Vald Helm Operator takes from the ValdRelease's name) in namespace with values, as far
// as the modelled components go, sorted. Keys the values leave out take the chart's
// defaults.
func Objects(release, namespace string, values map[string]any) []Resource {
	var out []Resource
	add := func(kind, ns, name string) { out = append(out, Resource{Kind: kind, Namespace: ns, Name: name}) }
	for _, c := range components {
		if !boolAt(values, c.path+".enabled", c.enabled) {
			continue
		}
		name := stringAt(values, c.path+".name", c.name)
		kind := c.workload
		if kind != "CronJob" {
			kind = stringAt(values, c.path+".kind", c.workload)
		}
		add(kind, namespace, name)
		add("ConfigMap", namespace, name+"-config")
		if c.pods {
			add("Service", namespace, name)
			add("PodDisruptionBudget", namespace, name)
			if boolAt(values, c.path+".podPriority.enabled", true) {
				add("PriorityClass", "", priorityClassName(namespace, name))
			}
		}
		if c.hasHPA && boolAt(values, c.path+".hpa.enabled", c.hpa) {
			add("HorizontalPodAutoscaler", namespace, name)
		}
		if c.gate != "" && !boolAt(values, c.gate, false) {
			continue
		}
		if account := stringAt(values, c.path+".serviceAccountName", c.account); account != "" {
			add("ServiceAccount", namespace, account)
		}
		if c.clusterRole != "" {
			if boolAt(values, c.path+".clusterRole.enabled", true) {
				add("ClusterRole", "", stringAt(values, c.path+".clusterRole.name", c.clusterRole))
			}
			if boolAt(values, c.path+".clusterRoleBinding.enabled", true) {
				add("ClusterRoleBinding", "", stringAt(values, c.path+".clusterRoleBinding.name", c.clusterRole))
			}
		}
	}
	if boolAt(values, "gateway.lb.enabled", true) && boolAt(values, "gateway.lb.ingress.enabled", false) {
		add("Ingress", namespace, release+"-ingress")
	}
	// By Key, each made once: made in the comparison, the keys were 7% of what the
	// vald-operator allocates while 1,000 releases converge.
	keyed := make([]keyedResource, len(out))
	for i, o := range out {
		keyed[i] = keyedResource{key: o.Key(), Resource: o}
	}
	sort.Slice(keyed, func(i, j int) bool { return keyed[i].key < keyed[j].key })
	for i := range keyed {
		out[i] = keyed[i].Resource
	}
	return out
}

// PriorityClass is a PriorityClass the chart renders, and the value it gives the class.
// Kubernetes refuses to change the value of a class that exists.
type PriorityClass struct {
	Name  string
	Value int64
}

// PriorityClasses lists the PriorityClasses the chart renders in namespace with values, in
// the order Helm applies them: one for each enabled component whose podPriority is enabled
// (the chart's default), <namespace>-<component name>-priority, valued podPriority.value or
// the chart's default (1000000000 for the agent, 1000000 for the others).
func PriorityClasses(namespace string, values map[string]any) []PriorityClass {
	var out []PriorityClass
	for _, c := range components {
		if !c.pods || !boolAt(values, c.path+".enabled", c.enabled) || !boolAt(values, c.path+".podPriority.enabled", true) {
			continue
		}
		out = append(out, PriorityClass{
			Name:  priorityClassName(namespace, stringAt(values, c.path+".name", c.name)),
			Value: intAt(values, c.path+".podPriority.value", c.priority),
		})
	}
	return out
}

// priorityClassName is the chart's name of a component's PriorityClass: cluster-scoped, so
// it carries the release's namespace.
func priorityClassName(namespace, component string) string {
	return namespace + "-" + component + "-priority"
}

// Clash is an object two renders share.
type Clash struct {
	Object Resource
	// A and B are the renders' labels, as the caller named them.
	A, B string
}

// Clashes returns, in order, the objects that more than one of the renders holds (the first
// pair for each object): what Helm would refuse to install for the second release.
func Clashes(renders map[string][]Resource) []Clash {
	labels := make([]string, 0, len(renders))
	for l := range renders {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	first := map[Resource]string{}
	var out []Clash
	for _, l := range labels {
		for _, o := range renders[l] {
			if other, ok := first[o]; ok {
				if other != l {
					out = append(out, Clash{Object: o, A: other, B: l})
				}
				continue
			}
			first[o] = l
		}
	}
	return out
}

func lookup(values map[string]any, path string) (any, bool) {
	var cur any = values
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// stringAt is the string at path, or def when absent (Helm's merge keeps the chart's
// default under a key the values leave out). A value of another type reads as def: the
// schema check refuses it first.
func stringAt(values map[string]any, path, def string) string {
	if v, ok := lookup(values, path); ok {
		if s, ok := v.(string); ok {
			return s
		}
	}
	return def
}

// intAt is the integer at path, or def when absent or null (Helm drops a null key, so the
// chart's default applies). A value that is no integer reads as def: the schema check
// refuses it first.
func intAt(values map[string]any, path string, def int64) int64 {
	v, ok := lookup(values, path)
	if !ok {
		return def
	}
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case int32:
		return int64(n)
	}
	if f, ok := asFloat(v); ok && f == math.Trunc(f) {
		return int64(f)
	}
	return def
}

func boolAt(values map[string]any, path string, def bool) bool {
	if v, ok := lookup(values, path); ok {
		if b, ok := v.(bool); ok {
			return b
		}
	}
	return def
}
