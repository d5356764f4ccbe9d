// Package metricsexporter is the metrics-exporter sidecar of coordinators and data
// instances: it reads the JSON document Memgraph Enterprise serves on its metrics port
// and serves it as Prometheus text, under the names memgraph/prometheus-exporter gives the
// same numbers, so dashboards written for that exporter work on these series.
package metricsexporter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// The shape is Memgraph's (docs "Monitoring", Example response): an object of sections
// ("General", "Index", "Operator", "Query", "QueryType", "Session", "Snapshot", "Stream",
// "Transaction", "Trigger", "TTL", "HighAvailability", ...), each a flat object of
// numbers. memgraph/prometheus-exporter names each series after its key, with no prefix:
// a gauge, except HighAvailability's event counts (every key that is not a latency
// percentile, *_us_<n>p), which it makes counters, so they read <key>_total. Its HA mode
// labels every series instance_name; here that is the pod.

// haSection holds the counters.
const haSection = "HighAvailability"

var (
	validName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	percentile = regexp.MustCompile(`_[0-9]+p$`)
)

// Convert writes doc, Memgraph's metrics document, as Prometheus text (format 0.0.4).
// Sections and keys come out sorted; a key that is no valid series name, a value that is
// no number and a name already written by an earlier section are left out. instance, when
// not empty, is every series' instance_name label. Only a document that is not a JSON
// object of objects is an error.
func Convert(doc []byte, instance string, w io.Writer) error {
	var sections map[string]map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&sections); err != nil {
		return fmt.Errorf("not Memgraph's metrics document (an object of sections): %w", err)
	}
	labels := ""
	if instance != "" {
		labels = `{instance_name="` + escapeLabel(instance) + `"}`
	}
	names := make([]string, 0, len(sections))
	for s := range sections {
		names = append(names, s)
	}
	slices.Sort(names)
	seen := map[string]bool{}
	var b strings.Builder
	for _, s := range names {
		keys := make([]string, 0, len(sections[s]))
		for k := range sections[s] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, ok := number(sections[s][k])
			if !ok || !validName.MatchString(k) {
				continue
			}
			name, typ := k, "gauge"
			if s == haSection && !percentile.MatchString(k) {
				name, typ = k+"_total", "counter"
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			fmt.Fprintf(&b, "# HELP %s Memgraph's %s.%s.\n# TYPE %s %s\n%s%s %s\n", name, s, k, name, typ, name, labels, v)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// number is a JSON number's text; anything else is not one.
func number(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return "", false // a string, bool, null, object or array
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", false
	}
	if _, err := n.Float64(); err != nil {
		return "", false
	}
	// A JSON number is a float Prometheus's text parser reads as written.
	return n.String(), true
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
