// Package valdchart records what the Vald Helm chart (vdaas/vald charts/vald, ChartVersion)
// declares about the values a ValdRelease carries: the type of each key the operator writes
// (from the chart's values.schema.json and the @schema comments of its values.yaml), and
// which objects the chart names after which keys. These are facts read from the chart, not
// a copy of it: the operator's tests hold the builder's output against them and the Vald
// Helm Operator's stand-in (tools/cmd/vald-helm-sim) refuses what the chart would refuse.
package valdchart

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// ChartVersion is the Vald chart release these facts were read from.
const ChartVersion = "v1.8.0"

// Type is a JSON schema type as the chart declares it.
type Type string

// The JSON schema types the chart uses.
const (
	String  Type = "string"
	Integer Type = "integer"
	Number  Type = "number"
	Boolean Type = "boolean"
	Object  Type = "object"
	Array   Type = "array"
	Null    Type = "null"
)

// Key is one values key as the chart declares it.
type Key struct {
	Type Type
	// Open marks an object or array the chart passes on as it is (a node selector,
	// tolerations, resource quantities): its entries are Kubernetes', not chart keys.
	Open bool
}

var (
	str    = Key{Type: String}
	integ  = Key{Type: Integer}
	boolK  = Key{Type: Boolean}
	obj    = Key{Type: Object}
	openO  = Key{Type: Object, Open: true}
	openA  = Key{Type: Array, Open: true}
	fields = func(prefix string, keys map[string]Key) map[string]Key {
		out := make(map[string]Key, len(keys))
		for k, v := range keys {
			out[prefix+"."+k] = v
		}
		return out
	}
)

// placement is what every workload of the chart declares for its pods' placement: a node
// selector, tolerations and an affinity, whose schema spells out its three parts and
// their lists of terms (the terms themselves are Kubernetes', objects the chart passes on).
var placement = merge(
	map[string]Key{"nodeSelector": openO, "tolerations": openA, "affinity": obj, "affinity.nodeAffinity": obj},
	fields("affinity.nodeAffinity", map[string]Key{
		"preferredDuringSchedulingIgnoredDuringExecution":                  openA,
		"requiredDuringSchedulingIgnoredDuringExecution":                   obj,
		"requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms": openA,
	}),
	podAffinity("affinity.podAffinity"),
	podAffinity("affinity.podAntiAffinity"),
)

// podAffinity is the chart's podAffinity or podAntiAffinity: two lists of terms.
func podAffinity(path string) map[string]Key {
	return merge(map[string]Key{path: obj}, fields(path, map[string]Key{
		"preferredDuringSchedulingIgnoredDuringExecution": openA,
		"requiredDuringSchedulingIgnoredDuringExecution":  openA,
	}))
}

// pods is what the long-running workloads declare besides: a list of Kubernetes topology
// spread constraints, the chart's PriorityClass (podPriority: whether the pods run in the
// class <namespace>-<name>-priority the chart creates, and its value) and the grace period
// (minimum 0). The index CronJobs have none of them.
var pods = map[string]Key{
	"topologySpreadConstraints":     openA,
	"podPriority":                   obj,
	"podPriority.enabled":           boolK,
	"podPriority.value":             integ,
	"terminationGracePeriodSeconds": integ,
}

// Keys holds the declared type of every key the operator writes, by dotted path. A key the
// builder starts writing needs an entry here first: its test fails on a key without one.
var Keys = merge(
	map[string]Key{
		"defaults":                obj,
		"defaults.logging":        obj,
		"defaults.logging.level":  str,
		"defaults.logging.format": str,
		"defaults.image":          obj,
		"defaults.image.tag":      str,

		"agent":                               obj,
		"agent.name":                          str,
		"agent.minReplicas":                   integ,
		"agent.maxReplicas":                   integ,
		"agent.serviceAccountName":            str,
		"agent.clusterRole":                   obj,
		"agent.clusterRole.name":              str,
		"agent.clusterRoleBinding":            obj,
		"agent.clusterRoleBinding.name":       str,
		"agent.ngt":                           obj,
		"agent.ngt.dimension":                 integ,
		"agent.ngt.distance_type":             str,
		"agent.ngt.object_type":               str,
		"agent.ngt.creation_edge_size":        integ,
		"agent.ngt.search_edge_size":          integ,
		"agent.ngt.bulk_insert_chunk_size":    integ,
		"agent.persistentVolume":              obj,
		"agent.persistentVolume.enabled":      boolK,
		"agent.persistentVolume.accessMode":   str,
		"agent.persistentVolume.size":         str,
		"agent.persistentVolume.storageClass": str,
		"agent.resources":                     obj,
		"agent.resources.requests":            openO,
		"agent.resources.limits":              openO,

		"discoverer":                         obj,
		"discoverer.name":                    str,
		"discoverer.kind":                    str,
		"discoverer.serviceAccountName":      str,
		"discoverer.clusterRole":             obj,
		"discoverer.clusterRole.name":        str,
		"discoverer.clusterRoleBinding":      obj,
		"discoverer.clusterRoleBinding.name": str,
		// Both maxUnavailable keys are strings in the chart, "1" as well as "25%": the
		// chart writes them unquoted into the manifest, where "1" becomes a number.
		"discoverer.maxUnavailable":               str,
		"discoverer.rollingUpdate":                obj,
		"discoverer.rollingUpdate.maxUnavailable": str,

		"gateway":                                 obj,
		"gateway.lb":                              obj,
		"gateway.lb.name":                         str,
		"gateway.lb.enabled":                      boolK,
		"gateway.lb.serviceType":                  str,
		"gateway.lb.minReplicas":                  integ,
		"gateway.lb.maxReplicas":                  integ,
		"gateway.lb.gateway_config":               obj,
		"gateway.lb.gateway_config.index_replica": integ,
		"gateway.lb.ingress":                      obj,
		"gateway.lb.ingress.enabled":              boolK,
		"gateway.lb.ingress.host":                 str,
		"gateway.lb.ingress.annotations":          openO,

		"manager":               obj,
		"manager.index":         obj,
		"manager.index.name":    str,
		"manager.index.enabled": boolK,
		"manager.index.indexer": obj,
		"manager.index.indexer.auto_index_check_duration":     str,
		"manager.index.indexer.auto_save_index_wait_duration": str,
		"manager.index.indexer.concurrency":                   integ,
	},
	fields("agent", placement),
	fields("discoverer", placement),
	fields("gateway.lb", placement),
	fields("manager.index", placement),
	fields("agent", pods),
	fields("discoverer", pods),
	fields("gateway.lb", pods),
	fields("manager.index", pods),
	indexJob("manager.index.creator"),
	indexJob("manager.index.saver"),
)

// indexJob is what the chart declares of the index creation and save CronJobs: suspend
// is the CronJob's, and the jobs have a placement of their own (not manager.index's).
func indexJob(path string) map[string]Key {
	return merge(map[string]Key{path: obj}, fields(path, merge(map[string]Key{
		"name": str, "enabled": boolK, "schedule": str, "concurrency": integ, "suspend": boolK,
	}, placement)))
}

func merge(ms ...map[string]Key) map[string]Key {
	out := map[string]Key{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TypeOf is the JSON schema type of a decoded JSON value (or of the Go values a builder
// encodes as JSON): every numeric value is a number, integral or not.
func TypeOf(v any) Type {
	switch v.(type) {
	case nil:
		return Null
	case string:
		return String
	case bool:
		return Boolean
	case map[string]any:
		return Object
	case []any:
		return Array
	case float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return Number
	}
	return Type(fmt.Sprintf("%T", v))
}

// Matches says whether v is of type t, as a JSON schema validator decides it: an integer
// is a number without a fractional part.
func Matches(v any, t Type) bool {
	got := TypeOf(v)
	switch {
	case got == t:
		return true
	case got == Number && t == Integer:
		f, ok := asFloat(v)
		return ok && f == math.Trunc(f)
	}
	return false
}

func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// Visit is called by Walk for each key: its dotted path, its value, and its entry in Keys
// (known false when there is none).
type Visit func(path string, v any, key Key, known bool)

// Walk visits every key of values, depth first in sorted order, without entering the
// contents of an Open key or of a key without an entry.
func Walk(values map[string]any, visit Visit) {
	walk("", values, visit)
}

func walk(prefix string, m map[string]any, visit Visit) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		v := m[k]
		key, known := Keys[path]
		visit(path, v, key, known)
		if sub, ok := v.(map[string]any); ok && known && !key.Open && key.Type == Object {
			walk(path, sub, visit)
		}
	}
}

// Violation is a value whose type is not the one the chart declares.
type Violation struct {
	Path string
	Got  Type
	Want Type
}

// Error reads as the schema validation Helm reports for the chart's values.
func (v Violation) Error() string {
	return fmt.Sprintf("at '/%s': got %s, want %s", strings.ReplaceAll(v.Path, ".", "/"), v.Got, v.Want)
}

// Check returns the values of keys in Keys whose type the chart does not accept, in path
// order. Keys without an entry are not looked at.
func Check(values map[string]any) []Violation {
	var out []Violation
	Walk(values, func(path string, v any, key Key, known bool) {
		if known && !Matches(v, key.Type) {
			out = append(out, Violation{Path: path, Got: TypeOf(v), Want: key.Type})
		}
	})
	return out
}

// SchemaError is the error Helm returns for values the chart's schema refuses, one line per
// violation.
func SchemaError(vs []Violation) string {
	var b strings.Builder
	b.WriteString("values don't meet the specifications of the schema(s) in the following chart(s):\nvald:\n")
	for _, v := range vs {
		b.WriteString("- " + v.Error() + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
