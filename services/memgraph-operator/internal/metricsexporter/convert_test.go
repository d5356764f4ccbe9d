package metricsexporter

import (
	"strings"
	"testing"
)

// sample is a metrics document of the shape Memgraph's monitoring documentation shows
// (its "Example response" and the HighAvailability section of a coordinator), with numbers
// of our own and the oddities a converter must survive.
const sample = `{
  "General": {"average_degree": 0.5, "disk_usage": 1417846, "edge_count": 2, "memory_usage": 36937728,
              "peak_memory_usage": 100265984, "vertex_count": 8},
  "Index": {"ActiveLabelIndices": 1, "ActiveLabelPropertyIndices": 0},
  "Transaction": {"ActiveTransactions": 0, "CommitedTransactions": 42, "RollbackedTransactions": 3},
  "Query": {"QueryExecutionLatency_us_50p": 125, "QueryExecutionLatency_us_99p": 1.5e3},
  "HighAvailability": {"SuccessfulFailovers": 2, "BecomeLeaderSuccess": 1, "DataFailover_us_99p": 5300},
  "Weird": {"not a name": 1, "text": "7", "flag": true, "nothing": null, "nested": {"a": 1}, "vertex_count": 99}
}`

// TestConvert turns the sample into Prometheus text: every number of a section under its
// key's name, HighAvailability's event counts as <key>_total counters and its latency
// percentiles as gauges, the pod as instance_name; keys that are no series name, values
// that are no number and a name an earlier section wrote are left out.
func TestConvert(t *testing.T) {
	var b strings.Builder
	if err := Convert([]byte(sample), `data-"0"`, &b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	const l = `{instance_name="data-\"0\""}`
	for _, want := range []string{
		"# TYPE vertex_count gauge\nvertex_count" + l + " 8\n",
		"edge_count" + l + " 2\n",
		"average_degree" + l + " 0.5\n",
		"memory_usage" + l + " 36937728\n",
		"# HELP CommitedTransactions Memgraph's Transaction.CommitedTransactions.\n# TYPE CommitedTransactions gauge\nCommitedTransactions" + l + " 42\n",
		"ActiveLabelIndices" + l + " 1\n",
		"QueryExecutionLatency_us_99p" + l + " 1.5e3\n",
		"# TYPE SuccessfulFailovers_total counter\nSuccessfulFailovers_total" + l + " 2\n",
		"BecomeLeaderSuccess_total" + l + " 1\n",
		"# TYPE DataFailover_us_99p gauge\nDataFailover_us_99p" + l + " 5300\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, absent := range []string{"not a name", "text", "flag", "nothing", "nested", "vertex_count" + l + " 99", "SuccessfulFailovers" + l} {
		if strings.Contains(got, absent) {
			t.Errorf("%q should be left out:\n%s", absent, got)
		}
	}
	// Sorted by section, then key: General before HighAvailability before Transaction.
	if g, h, tr := strings.Index(got, "vertex_count"), strings.Index(got, "SuccessfulFailovers"), strings.Index(got, "CommitedTransactions"); g > h || h > tr {
		t.Errorf("sections out of order:\n%s", got)
	}

	b.Reset()
	if err := Convert([]byte(`{"General": {"vertex_count": 1}}`), "", &b); err != nil || !strings.Contains(b.String(), "\nvertex_count 1\n") {
		t.Errorf("no instance: %v\n%s", err, b.String())
	}
	for _, bad := range []string{`# HELP vertex_count`, `[1, 2]`, `{"General": 3}`} {
		if err := Convert([]byte(bad), "", &b); err == nil {
			t.Errorf("%q converted without error; Prometheus text or another shape must be refused", bad)
		}
	}
}
