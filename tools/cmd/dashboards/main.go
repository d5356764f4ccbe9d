// Command dashboards writes the charts' Grafana dashboards (charts/<chart>/files/dashboards/
// <name>.json) from the panel lists below: one dashboard per product and one for the node
// agent, on the series the operators and the agent export (README "Metrics of the
// objects", "Monitoring"). The charts ship them as a ConfigMap labelled grafana_dashboard
// (opsuite-lib.dashboards); `make generate` runs this and `make check-generated` fails on
// drift. tools/e2e's TestMonitoring evaluates every query against a real Prometheus.
//
//	go run ./cmd/dashboards -charts ../charts
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dashboards:", err)
		os.Exit(1)
	}
}

func run() error {
	charts := flag.String("charts", "charts", "the charts directory")
	flag.Parse()
	for _, d := range dashboards() {
		b, err := render(d)
		if err != nil {
			return fmt.Errorf("%s: %w", d.uid, err)
		}
		dir := filepath.Join(*charts, d.chart, "files", "dashboards")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, d.uid+".json"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// dashboard is one Grafana dashboard of a chart.
type dashboard struct {
	chart, uid, title, description string
	// vars are query variables after the data source: label_values of a series.
	vars   []variable
	panels []panel
}

type variable struct {
	name, label, query string
}

// panel is one graph; width 0 is half the dashboard (12 of 24 columns).
type panel struct {
	title, kind, unit, description string
	width                          int
	targets                        []target
}

type target struct {
	expr, legend string
	// instant asks for one value (tables), not a range.
	instant bool
}

func timeseries(title, unit, description string, targets ...target) panel {
	return panel{title: title, kind: "timeseries", unit: unit, description: description, targets: targets}
}

func stat(title, description string, targets ...target) panel {
	return panel{title: title, kind: "stat", width: 6, description: description, targets: targets}
}

func table(title, description string, targets ...target) panel {
	for i := range targets {
		targets[i].instant = true
	}
	return panel{title: title, kind: "table", width: 24, description: description, targets: targets}
}

func q(expr, legend string) target { return target{expr: expr, legend: legend} }

// operatorPanels are every operator's own: its targets, passes, queue and leader, on the
// job of its metrics Service (the chart's ServiceMonitor names the job after it).
func operatorPanels(prefix string) []panel {
	job := `{job=~"$job"}`
	return []panel{
		stat("Operator targets up", "Scraped operator pods answering (up == 1).", q(`sum(up`+job+`)`, "up")),
		stat("Leading pods", "Pods holding the leader-election lease: exactly 1 while the operator works.", q(`sum(leader_election_master_status`+job+`)`, "leaders")),
		timeseries("Reconcile passes by outcome", "ops", "done, requeued (waiting on something), failed (waits for a spec change), error (retried with back-off).",
			q(`sum by (outcome) (rate(`+prefix+`_reconcile_total`+job+`[$__rate_interval]))`, "{{outcome}}")),
		timeseries("Reconcile pass time", "s", "Quantiles of one pass's duration.",
			q(`histogram_quantile(0.5, sum by (le) (rate(`+prefix+`_reconcile_duration_seconds_bucket`+job+`[$__rate_interval])))`, "p50"),
			q(`histogram_quantile(0.99, sum by (le) (rate(`+prefix+`_reconcile_duration_seconds_bucket`+job+`[$__rate_interval])))`, "p99")),
		timeseries("Work queue depth", "short", "Objects waiting for a pass, per controller.",
			q(`sum by (name) (workqueue_depth`+job+`)`, "{{name}}")),
		timeseries("Reconcile errors", "ops", "Passes that returned an error, per controller (controller-runtime).",
			q(`sum by (controller) (rate(controller_runtime_reconcile_errors_total`+job+`[$__rate_interval]))`, "{{controller}}")),
	}
}

// Query variables every product dashboard has: the operator's job, then the objects'
// namespace and name from the state series.
func productVars(prefix, stateSeries, nameLabel string) []variable {
	return []variable{
		{"job", "Operator job", `label_values(` + prefix + `_reconcile_total, job)`},
		{"namespace", "Namespace", `label_values(` + stateSeries + `, namespace)`},
		{"name", nameLabel, `label_values(` + stateSeries + `{namespace=~"$namespace"}, name)`},
	}
}

const objectSel = `namespace=~"$namespace", name=~"$name"`

// memberSel picks a Memgraph cluster's members by the labels its ServiceMonitor adds
// (the exporter's series carry no name label of their own).
const memberSel = `namespace=~"$namespace", memgraph_com_cluster=~"$name"`

func stateTable(series, kind string) panel {
	return table(kind+" state", "Each object's current status.state (the series at 1).",
		q(series+`{`+objectSel+`} == 1`, ""))
}

func statesStat(series, kind string) panel {
	p := stat(kind+"s by state", "How many objects are in each status.state.",
		q(`sum by (state) (`+series+`{`+objectSel+`})`, "{{state}}"))
	p.width = 12
	return p
}

func dashboards() []dashboard {
	return []dashboard{
		{
			chart: "valkey-operator", uid: "opsuite-valkey", title: "Valkey (opsuite)",
			description: "ValkeyClusters and ValkeyBackups as the valkey-operator sees them, each member's exporter (spec.exporter.enabled), and the operator itself.",
			vars:        productVars("valkey_operator", "valkey_operator_cluster_state", "Cluster"),
			panels: append([]panel{
				statesStat("valkey_operator_cluster_state", "Cluster"),
				stat("Backups failed", "ValkeyBackups in phase Failed (delete them once looked at).", q(`sum(valkey_operator_backup_state{namespace=~"$namespace", state="Failed"})`, "failed")),
				stat("Backups running", "ValkeyBackups streaming their shards now.", q(`sum(valkey_operator_backup_state{namespace=~"$namespace", state="Running"})`, "running")),
				stateTable("valkey_operator_cluster_state", "Cluster"),
				timeseries("Shards ready of shards", "short", "Shards whose primary is healthy with every replica in sync, against shards serving slots.",
					q(`valkey_operator_cluster_shards_ready{`+objectSel+`}`, "{{namespace}}/{{name}} ready"),
					q(`valkey_operator_cluster_shards{`+objectSel+`}`, "{{namespace}}/{{name}} shards")),
				timeseries("Failovers", "short", "Replicas the operator promoted (lost primaries taken over, failovers before a primary's pod is replaced).",
					q(`sum by (namespace, name) (increase(valkey_operator_failovers_total{`+objectSel+`}[$__rate_interval]))`, "{{namespace}}/{{name}}")),
				timeseries("Slot moves", "short", "Slots whose keys the operator migrated (rebalancing, scaling in).",
					q(`sum by (namespace, name) (increase(valkey_operator_slot_moves_total{`+objectSel+`}[$__rate_interval]))`, "{{namespace}}/{{name}}")),
				timeseries("Backups by phase", "short", "ValkeyBackups per phase.",
					q(`sum by (state) (valkey_operator_backup_state{namespace=~"$namespace"})`, "{{state}}")),
				timeseries("Members up (exporter)", "short", "redis_up of each member's exporter: 0 while the member does not answer.",
					q(`redis_up{namespace=~"$namespace", valkey_io_cluster=~"$name"}`, "{{pod}}")),
				timeseries("Commands per second (exporter)", "ops", "Commands the members processed.",
					q(`sum by (valkey_io_cluster) (rate(redis_commands_processed_total{namespace=~"$namespace", valkey_io_cluster=~"$name"}[$__rate_interval]))`, "{{valkey_io_cluster}}")),
				timeseries("Memory used (exporter)", "bytes", "used_memory of each member.",
					q(`redis_memory_used_bytes{namespace=~"$namespace", valkey_io_cluster=~"$name"}`, "{{pod}}")),
				timeseries("Connected clients (exporter)", "short", "Client connections of each member.",
					q(`redis_connected_clients{namespace=~"$namespace", valkey_io_cluster=~"$name"}`, "{{pod}}")),
			}, operatorPanels("valkey_operator")...),
		},
		{
			chart: "memgraph-operator", uid: "opsuite-memgraph", title: "Memgraph (opsuite)",
			description: "MemgraphClusters as the memgraph-operator sees them, each member's metrics through its metrics-exporter sidecar (spec.metricsExporter), and the operator itself.",
			vars:        productVars("memgraph_operator", "memgraph_operator_cluster_state", "Cluster"),
			panels: append([]panel{
				statesStat("memgraph_operator_cluster_state", "Cluster"),
				stat("Backups failed", "MemgraphBackups in phase Failed (delete them once looked at).", q(`sum(memgraph_operator_backup_state{namespace=~"$namespace", state="Failed"})`, "failed")),
				stat("Backups running", "MemgraphBackups taking their snapshot now.", q(`sum(memgraph_operator_backup_state{namespace=~"$namespace", state="Running"})`, "running")),
				stateTable("memgraph_operator_cluster_state", "Cluster"),
				timeseries("MAIN changes", "short", "Times the MAIN moved to another data instance: the coordinators' failovers and the switchovers before a MAIN is retired.",
					q(`sum by (namespace, name) (increase(memgraph_operator_main_changes_total{`+objectSel+`}[$__rate_interval]))`, "{{namespace}}/{{name}}")),
				timeseries("Registration commands", "short", "ADD COORDINATOR, REGISTER INSTANCE, SET INSTANCE TO MAIN, UNREGISTER, REMOVE COORDINATOR the operator ran: 0 at steady state.",
					q(`sum by (namespace, name) (increase(memgraph_operator_registrations_total{`+objectSel+`}[$__rate_interval]))`, "{{namespace}}/{{name}}")),
				timeseries("Backups by phase", "short", "MemgraphBackups per phase.",
					q(`sum by (state) (memgraph_operator_backup_state{namespace=~"$namespace"})`, "{{state}}")),
				timeseries("Nodes per data instance (Memgraph)", "short", "vertex_count of each data instance: the replicas follow the MAIN.",
					q(`vertex_count{`+memberSel+`}`, "{{pod}}")),
				timeseries("Relationships per data instance (Memgraph)", "short", "edge_count of each data instance.",
					q(`edge_count{`+memberSel+`}`, "{{pod}}")),
				timeseries("Committed transactions (Memgraph)", "ops", "CommitedTransactions (Memgraph's spelling) per second, per member.",
					q(`rate(CommitedTransactions{`+memberSel+`}[$__rate_interval])`, "{{pod}}")),
				timeseries("Memory used (Memgraph)", "bytes", "memory_usage of each coordinator and data instance, as the OS reports it.",
					q(`memory_usage{`+memberSel+`}`, "{{pod}}")),
				timeseries("Failovers (coordinators)", "short", "SuccessfulFailovers counted by the coordinators, and elections won (BecomeLeaderSuccess).",
					q(`sum by (memgraph_com_cluster) (increase(SuccessfulFailovers_total{`+memberSel+`}[$__rate_interval]))`, "{{memgraph_com_cluster}} failovers"),
					q(`sum by (memgraph_com_cluster) (increase(BecomeLeaderSuccess_total{`+memberSel+`}[$__rate_interval]))`, "{{memgraph_com_cluster}} elections won")),
			}, operatorPanels("memgraph_operator")...),
		},
		{
			chart: "veltrix-operator", uid: "opsuite-veltrix", title: "VeltrixDB (opsuite)",
			description: "VeltrixClusters as the veltrix-operator sees them, the members' own metrics port, and the operator itself.",
			vars:        productVars("veltrix_operator", "veltrix_operator_cluster_state", "Cluster"),
			panels: append([]panel{
				statesStat("veltrix_operator_cluster_state", "Cluster"),
				stateTable("veltrix_operator_cluster_state", "Cluster"),
				timeseries("Ready members of size", "short", "Members Ready and search-ready, against the StatefulSet's replicas.",
					q(`veltrix_operator_cluster_ready_members{`+objectSel+`}`, "{{namespace}}/{{name}} ready"),
					q(`veltrix_operator_cluster_size{`+objectSel+`}`, "{{namespace}}/{{name}} size")),
				timeseries("Member removals", "short", "Members whose removal the server accepted as the operator scaled in.",
					q(`sum by (namespace, name) (increase(veltrix_operator_member_removals_total{`+objectSel+`}[$__rate_interval]))`, "{{namespace}}/{{name}}")),
				timeseries("Members by state (server)", "short", "What each member's /metrics says of the membership.",
					q(`max by (namespace, state) (veltrixdb_cluster_members{namespace=~"$namespace"})`, "{{namespace}} {{state}}")),
				timeseries("Keys per member (server)", "short", "Live keys on each member, replicas included.",
					q(`veltrixdb_keys{namespace=~"$namespace"}`, "{{pod}}")),
				timeseries("Commands per second (server)", "ops", "Text-protocol commands by verb.",
					q(`sum by (verb) (rate(veltrixdb_commands_total{namespace=~"$namespace"}[$__rate_interval]))`, "{{verb}}")),
				timeseries("Key copies left in the data move (server)", "short", "0 once a membership change has moved its keys.",
					q(`max by (namespace) (veltrixdb_moves_pending{namespace=~"$namespace"})`, "{{namespace}}")),
			}, operatorPanels("veltrix_operator")...),
		},
		{
			chart: "vald-operator", uid: "opsuite-vald", title: "Vald (opsuite)",
			description: "ValdOperatorReleases as the vald-operator sees them (lifecycle phases, ValdRelease writes), and the operator itself.",
			vars:        productVars("vald_operator", "vald_operator_release_state", "Release"),
			panels: append([]panel{
				statesStat("vald_operator_release_state", "Release"),
				stateTable("vald_operator_release_state", "Release"),
				timeseries("Phase time to success", "s", "p90 of the time a lifecycle phase took from being reached until it succeeded.",
					q(`histogram_quantile(0.9, sum by (le, phase) (rate(vald_operator_phase_duration_seconds_bucket{job=~"$job"}[$__rate_interval])))`, "{{phase}}")),
				timeseries("Phase transitions", "short", "Lifecycle condition transitions by phase and new reason.",
					q(`sum by (phase, reason) (increase(vald_operator_phase_transitions_total{job=~"$job"}[$__rate_interval]))`, "{{phase}} {{reason}}")),
				timeseries("ValdRelease writes", "short", "Applies, upgrades and prunes of ValdReleases: 0 while every release is converged.",
					q(`sum by (kind) (increase(vald_operator_valdrelease_writes_total{job=~"$job"}[$__rate_interval]))`, "{{kind}}")),
			}, operatorPanels("vald_operator")...),
		},
		{
			chart: "node-agent", uid: "opsuite-node-agent", title: "Node agent (opsuite)",
			description: "Every node's agent: its gRPC calls, the disks it prepared and released.",
			vars: []variable{
				{"job", "Agent job", `label_values(node_agent_prepared_disks, job)`},
				{"node", "Node", `label_values(node_agent_prepared_disks{job=~"$job"}, node)`},
			},
			panels: []panel{
				stat("Agents up", "Agents answering their scrape.", q(`sum(up{job=~"$job"})`, "up")),
				stat("Prepared disks ready", "Disks prepared and in place.", q(`sum(node_agent_prepared_disks{job=~"$job", node=~"$node", phase="ready"})`, "ready")),
				stat("Prepared disks missing", "Disks the agent prepared that are no longer in place.", q(`sum(node_agent_prepared_disks{job=~"$job", node=~"$node", phase="missing"})`, "missing")),
				stat("Prepared bytes", "Bytes of the ready prepared disks.", q(`sum(node_agent_prepared_bytes{job=~"$job", node=~"$node"})`, "bytes")),
				timeseries("Prepared disks by node and phase", "short", "ready, preparing (interrupted or under way), missing.",
					q(`sum by (node, phase) (node_agent_prepared_disks{job=~"$job", node=~"$node"})`, "{{node}} {{phase}}")),
				timeseries("Prepared bytes by node", "bytes", "xfs (the filesystem) and raw (the raw VLog partition) of the ready disks.",
					q(`sum by (node, partition) (node_agent_prepared_bytes{job=~"$job", node=~"$node"})`, "{{node}} {{partition}}")),
				timeseries("Calls by method and code", "ops", "gRPC calls answered, refused ones included (Unauthenticated, PermissionDenied, ResourceExhausted).",
					q(`sum by (method, code) (rate(node_agent_grpc_requests_total{job=~"$job", node=~"$node"}[$__rate_interval]))`, "{{method}} {{code}}")),
				timeseries("Call time p90", "s", "p90 of the time to answer, by method.",
					q(`histogram_quantile(0.9, sum by (le, method) (rate(node_agent_grpc_request_duration_seconds_bucket{job=~"$job", node=~"$node"}[$__rate_interval])))`, "{{method}}")),
				timeseries("Disk operations", "short", "Disks prepared and released, by outcome.",
					q(`sum by (operation, outcome) (increase(node_agent_disk_operations_total{job=~"$job", node=~"$node"}[$__rate_interval]))`, "{{operation}} {{outcome}}")),
				timeseries("Disk preparation time p90", "s", "Partitioning, mkfs.xfs and mounting of one disk.",
					q(`histogram_quantile(0.9, sum by (le) (rate(node_agent_disk_prepare_duration_seconds_bucket{job=~"$job", node=~"$node"}[$__rate_interval])))`, "p90")),
			},
		},
	}
}

// render writes d as Grafana's dashboard JSON model (schemaVersion 39), every panel on the
// data source the variable datasource picks (type prometheus, as kube-prometheus-stack's
// Grafana provisions it).
func render(d dashboard) ([]byte, error) {
	ds := map[string]any{"type": "prometheus", "uid": "${datasource}"}
	vars := []any{map[string]any{
		"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
		"current": map[string]any{}, "hide": 0, "refresh": 1, "regex": "",
	}}
	for _, v := range d.vars {
		vars = append(vars, map[string]any{
			"name": v.name, "label": v.label, "type": "query", "datasource": ds,
			"query":      map[string]any{"query": v.query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
			"definition": v.query, "refresh": 2, "includeAll": true, "multi": true, "allValue": ".*",
			"current": map[string]any{"text": "All", "value": "$__all"}, "sort": 1, "hide": 0,
		})
	}
	var panels []any
	x, y, rowH := 0, 0, 0
	for i, p := range d.panels {
		w := p.width
		if w == 0 {
			w = 12
		}
		h := 8
		if p.kind == "stat" {
			h = 4
		}
		if x+w > 24 {
			x, y = 0, y+rowH
			rowH = 0
		}
		var targets []any
		for j, t := range p.targets {
			if strings.Contains(t.expr, "\n") {
				return nil, fmt.Errorf("panel %q: one line per query", p.title)
			}
			tg := map[string]any{"refId": string(rune('A' + j)), "datasource": ds, "expr": t.expr, "legendFormat": t.legend, "range": !t.instant, "instant": t.instant}
			if t.instant {
				tg["format"] = "table"
			}
			targets = append(targets, tg)
		}
		fc := map[string]any{"defaults": map[string]any{}, "overrides": []any{}}
		if p.unit != "" {
			fc["defaults"] = map[string]any{"unit": p.unit}
		}
		panels = append(panels, map[string]any{
			"id": i + 1, "type": p.kind, "title": p.title, "description": p.description, "datasource": ds,
			"gridPos": map[string]int{"h": h, "w": w, "x": x, "y": y}, "targets": targets, "fieldConfig": fc,
		})
		x += w
		rowH = max(rowH, h)
	}
	model := map[string]any{
		"uid": d.uid, "title": d.title, "description": d.description, "tags": []string{"opsuite"},
		"schemaVersion": 39, "version": 1, "editable": true, "graphTooltip": 1, "refresh": "30s",
		"time":        map[string]string{"from": "now-6h", "to": "now"},
		"annotations": map[string]any{"list": []any{}},
		"templating":  map[string]any{"list": vars},
		"panels":      panels,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(model); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
