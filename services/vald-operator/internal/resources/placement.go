package resources

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	corev1 "k8s.io/api/core/v1"
)

// placeTarget is a component whose pods a release's Placement places: its values, the
// release field it comes from (for messages) and the node pool it runs on, if any.
type placeTarget struct {
	values map[string]any
	// field is the release's field path, such as spec.vectorEngine.vald.agent.
	field string
	// pool describes the node pool the operator placed the component on ("" for none),
	// such as `the agent pool of infrastructure entry "green"`.
	pool string
	// jobs marks the index CronJobs: the chart places their pods by affinity, nodeSelector
	// and tolerations only.
	jobs bool
}

// place writes a release's Placement into a component's values, over the node pool's
// placement placeOn wrote (the nodeSelector and toleration of the pool's labels). Nothing
// of the pool's is dropped: the nodeSelector's labels are added to the pool's, and a key
// the pool sets may not take another value (no node could carry both); the tolerations are
// added to the pool's; the affinity is written as it is, and since a pod must match both
// its nodeSelector and its required node affinity, a required node affinity whose every
// term contradicts the nodeSelector (the pool's labels or the release's) is refused: its
// pods would never be scheduled. Unset fields write nothing, so the chart's defaults hold.
func place(t placeTarget, p valdv1.Placement) error {
	selector, _ := t.values["nodeSelector"].(map[string]any)
	poolKeys := map[string]bool{}
	for k := range selector {
		poolKeys[k] = true
	}
	if len(p.NodeSelector) > 0 {
		merged := map[string]any{}
		for k, v := range selector {
			merged[k] = v
		}
		for _, k := range sortedKeys(p.NodeSelector) {
			v := string(p.NodeSelector[k])
			if have, ok := merged[k]; ok && have != v {
				return &Error{Message: fmt.Sprintf("%s.nodeSelector sets %s=%s, but %s places the pods on nodes labelled %s=%s: no node carries both. Remove the key (the node pool already selects the nodes) or change the entry's node pools.",
					t.field, k, v, t.pool, k, have)}
			}
			merged[k] = v
		}
		selector = merged
		t.values["nodeSelector"] = merged
	}
	if len(p.Tolerations) > 0 {
		tolerations, _ := t.values["tolerations"].([]any)
		for _, tol := range p.Tolerations {
			m := toMap(tol)
			if !slices.ContainsFunc(tolerations, func(have any) bool { return reflect.DeepEqual(have, m) }) {
				tolerations = append(tolerations, m)
			}
		}
		t.values["tolerations"] = tolerations
	}
	if p.Affinity != nil {
		if err := affinityMatches(p.Affinity, selector, poolKeys, t); err != nil {
			return err
		}
		if a := toMap(p.Affinity); len(a) > 0 {
			t.values["affinity"] = a
		}
	}
	if t.jobs {
		return nil
	}
	if pp := p.PodPriority; pp != nil {
		priority := map[string]any{}
		if pp.Enabled != nil {
			priority["enabled"] = *pp.Enabled
		}
		if pp.Value != nil {
			priority["value"] = *pp.Value
		}
		t.values["podPriority"] = priority
	}
	if g := p.TerminationGracePeriodSeconds; g != nil {
		t.values["terminationGracePeriodSeconds"] = *g
	}
	return nil
}

// affinityMatches refuses a required node affinity none of whose terms a node carrying the
// selector's labels can match (terms are ORed, a term's expressions ANDed). Only the
// selector's keys are judged: other labels may be on any node.
func affinityMatches(a *corev1.Affinity, selector map[string]any, poolKeys map[string]bool, t placeTarget) error {
	if a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return nil // the chart writes no required node affinity then
	}
	var why []string
	for i, term := range terms {
		c := contradiction(term, selector)
		if c == nil {
			return nil
		}
		source := "the nodeSelector requires"
		if poolKeys[c.Key] {
			source = t.pool + " requires"
		}
		have, _ := selector[c.Key].(string)
		why = append(why, fmt.Sprintf("term %d wants %s %s %v, while %s %s=%s", i+1, c.Key, c.Operator, c.Values, source, c.Key, have))
	}
	return &Error{Message: fmt.Sprintf("%s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution matches no node the pods may run on, so they would never be scheduled: %s. Change the terms, the nodeSelector or the entry's node pools.",
		t.field, strings.Join(why, "; "))}
}

// contradiction is the first expression of term that no node carrying the selector's labels
// satisfies, or nil.
func contradiction(term corev1.NodeSelectorTerm, selector map[string]any) *corev1.NodeSelectorRequirement {
	for i := range term.MatchExpressions {
		e := &term.MatchExpressions[i]
		v, ok := selector[e.Key].(string)
		if !ok {
			continue
		}
		if !satisfies(v, e) {
			return e
		}
	}
	return nil
}

// satisfies says whether a node whose label e.Key has value v meets e.
func satisfies(v string, e *corev1.NodeSelectorRequirement) bool {
	switch e.Operator {
	case corev1.NodeSelectorOpIn:
		return slices.Contains(e.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !slices.Contains(e.Values, v)
	case corev1.NodeSelectorOpExists:
		return true
	case corev1.NodeSelectorOpDoesNotExist:
		return false
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		have, err := strconv.ParseInt(v, 10, 64)
		if err != nil || len(e.Values) != 1 {
			return false
		}
		want, err := strconv.ParseInt(e.Values[0], 10, 64)
		if err != nil {
			return false
		}
		if e.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return true // an operator the API server refuses when the workload is created
}

// toMap is a Kubernetes object as chart values: its JSON form, decoded.
func toMap(v any) map[string]any {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
