package veltrixsim

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
)

// MemberJSON is one entry of GET /admin/cluster/members.
type MemberJSON struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"`
	State string `json:"state"`
}

func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !n.opened() {
			http.Error(w, "the engine is opening its data", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /metrics", n.metrics)
	admin := func(pattern string, h http.HandlerFunc) {
		mux.HandleFunc(pattern, n.adminAuth(h))
	}
	admin("GET /admin/cluster", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, n.topology())
	})
	admin("GET /admin/cluster/members", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, membersJSON(n.snapshot()))
	})
	admin("POST /admin/cluster/members", n.postMember)
	admin("DELETE /admin/cluster/members/{id}", n.deleteMember)
	admin("POST /admin/checkpoint", func(w http.ResponseWriter, _ *http.Request) {
		st := n.store.Load()
		if err := st.Checkpoint(); err != nil {
			httpError(w, http.StatusInternalServerError, "checkpoint failed: "+err.Error())
			return
		}
		live, _ := st.Len()
		writeJSON(w, http.StatusOK, map[string]any{"checkpointed": true, "keys": live})
	})
	admin("GET /admin/sim/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, n.faults())
	})
	admin("POST /admin/sim/faults", func(w http.ResponseWriter, r *http.Request) {
		f := n.faults()
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			httpError(w, http.StatusBadRequest, "body: "+err.Error())
			return
		}
		if err := n.setFaults(f); err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, n.faults())
	})
	return mux
}

// adminAuth: a Bearer token when one is set, else loopback callers only; and nothing
// before the data is open.
func (n *Node) adminAuth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if n.cfg.AdminToken != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(n.cfg.AdminToken)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="veltrixdb-admin"`)
				httpError(w, http.StatusUnauthorized, "admin API needs Authorization: Bearer <admin token>")
				return
			}
		} else if host, _, err := net.SplitHostPort(r.RemoteAddr); err != nil || !net.ParseIP(host).IsLoopback() {
			httpError(w, http.StatusForbidden, "admin API without an admin token is served to loopback callers only; set --admin-token")
			return
		}
		if !n.opened() {
			httpError(w, http.StatusServiceUnavailable, "the engine is opening its data")
			return
		}
		h(w, r)
	}
}

func (n *Node) postMember(w http.ResponseWriter, r *http.Request) {
	var m MemberJSON
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		httpError(w, http.StatusBadRequest, "body: want {\"id\":...,\"addr\":\"host:port\"}: "+err.Error())
		return
	}
	if m.ID == "" || strings.ContainsAny(m.ID, " \t") {
		httpError(w, http.StatusBadRequest, "id is required and has no spaces")
		return
	}
	if _, _, err := net.SplitHostPort(m.Addr); err != nil || strings.ContainsAny(m.Addr, " \t") {
		httpError(w, http.StatusBadRequest, "addr must be host:port")
		return
	}
	v, err := n.memberOp(0, opJoin, m.ID, m.Addr)
	if err != nil {
		writeOpError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, membersJSON(v))
}

func (n *Node) deleteMember(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if code := n.faults().RefuseDelete; code != 0 {
		httpError(w, code, fmt.Sprintf("removal of member %s refused (simulated fault %d)", id, code))
		return
	}
	args := []string{id}
	force := r.URL.Query().Get("force") == "true"
	if force {
		args = append(args, "force")
	}
	v, err := n.memberOp(0, opRemove, args...)
	if err != nil {
		writeOpError(w, err)
		return
	}
	if m, ok := v.Member(id); ok {
		writeJSON(w, http.StatusAccepted, MemberJSON{ID: m.ID, Addr: m.Addr, State: m.State})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "state": "removed"})
}

func membersJSON(v View) []MemberJSON {
	out := make([]MemberJSON, 0, len(v.Members))
	for _, m := range v.Members {
		out = append(out, MemberJSON{ID: m.ID, Addr: m.Addr, State: m.State})
	}
	return out
}

func writeOpError(w http.ResponseWriter, err error) {
	var oe *OpError
	if errors.As(err, &oe) {
		httpError(w, oe.Code, oe.Msg)
		return
	}
	httpError(w, http.StatusInternalServerError, err.Error())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// metrics writes the Prometheus text format by hand (no client library in tools for a
// handful of gauges).
func (n *Node) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	f := n.InfoFields()
	v := n.snapshot()
	var b strings.Builder
	gauge := func(name, help, labels, value string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s%s %s\n", name, help, name, name, labels, value)
	}
	gauge("veltrixdb_keys", "Live keys stored on this node (replicas included).", "", f["keys"])
	gauge("veltrixdb_search_ready", "1 once the search index is built.", "", f["search_ready"])
	ready := "0"
	if n.opened() {
		ready = "1"
	}
	gauge("veltrixdb_data_open", "1 once the engine has opened its data.", "", ready)
	gauge("veltrixdb_cluster_epoch", "Membership epoch.", "", f["epoch"])
	gauge("veltrixdb_partition_count", "Partitions of the cluster.", "", f["partition_count"])
	gauge("veltrixdb_replication_factor", "Owners per partition.", "", f["replication_factor"])
	gauge("veltrixdb_moves_pending", "Key copies left in the current data move.", "", f["moves_pending"])
	states := map[string]int{StateActive: 0, StateJoining: 0, StateLeaving: 0}
	for _, m := range v.Members {
		states[m.State]++
	}
	b.WriteString("# HELP veltrixdb_cluster_members Members by state.\n# TYPE veltrixdb_cluster_members gauge\n")
	for _, s := range []string{StateActive, StateJoining, StateLeaving} {
		fmt.Fprintf(&b, "veltrixdb_cluster_members{state=%q} %d\n", s, states[s])
	}
	counts := v.PartitionCounts()
	b.WriteString("# HELP veltrixdb_partitions_owned Partitions each member owns (replicas included).\n# TYPE veltrixdb_partitions_owned gauge\n")
	for _, m := range v.Members {
		fmt.Fprintf(&b, "veltrixdb_partitions_owned{member=%q} %d\n", m.ID, counts[m.ID])
	}
	fmt.Fprintf(&b, "# HELP veltrixdb_keys_moved_total Keys this node copied to new owners.\n# TYPE veltrixdb_keys_moved_total counter\nveltrixdb_keys_moved_total %d\n", n.keysMoved.Load())
	b.WriteString("# HELP veltrixdb_commands_total Text-protocol commands served, by verb.\n# TYPE veltrixdb_commands_total counter\n")
	var verbs []string
	counters := map[string]int64{}
	n.commands.Range(func(k, c any) bool {
		verbs = append(verbs, k.(string))
		counters[k.(string)] = c.(interface{ Load() int64 }).Load()
		return true
	})
	sort.Strings(verbs)
	for _, verb := range verbs {
		fmt.Fprintf(&b, "veltrixdb_commands_total{verb=%q} %d\n", verb, counters[verb])
	}
	_, _ = io.WriteString(w, b.String())
}
