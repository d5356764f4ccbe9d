package memgraphsim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// Event is one line of the invariant log: a role change of a coordinator (leader,
// follower) or of a data instance (main, replica).
type Event struct {
	TS       time.Time `json:"ts"`
	Instance string    `json:"instance"`
	Role     string    `json:"role"`
	// Term is the Raft term of a coordinator's change.
	Term uint64 `json:"term,omitempty"`
	// Epoch is the MAIN generation a data instance's role belongs to.
	Epoch uint64 `json:"epoch,omitempty"`
	// Writable is false for a MAIN that refuses writes: one restored from disk that no
	// coordinator has confirmed yet (Memgraph's "writing disabled" MAIN).
	Writable bool `json:"writable,omitempty"`
	// ObservedBy names the coordinator that wrote a "down" line for a data instance it
	// stopped hearing from (a killed process writes nothing itself).
	ObservedBy string `json:"observed_by,omitempty"`
	// PID is the process that wrote the line, so a restarted process's lines are told apart.
	PID int `json:"pid"`
}

// Role values in the log.
const (
	RoleMain     = "main"
	RoleReplica  = "replica"
	RoleLeader   = "leader"
	RoleFollower = "follower"
	// RoleDown is written by a process on clean shutdown, and by the leader for a data
	// instance it declared down (health checks failed for the down timeout).
	RoleDown = "down"
)

// invariantLog appends events to a file shared by every process of a test (O_APPEND keeps
// lines whole across processes).
type invariantLog struct {
	mu     sync.Mutex
	f      *os.File
	silent bool
}

// silence drops every later line: the in-process tests' stand-in for SIGKILL, after which
// a process writes nothing.
func (l *invariantLog) silence() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.silent = true
}

func openInvariantLog(path string) (*invariantLog, error) {
	if path == "" {
		return &invariantLog{}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("invariant log: %w", err)
	}
	return &invariantLog{f: f}, nil
}

func (l *invariantLog) record(e Event) {
	if l == nil || l.f == nil {
		return
	}
	e.TS = time.Now().UTC()
	e.PID = os.Getpid()
	b, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.silent {
		_, _ = l.f.Write(append(b, '\n'))
	}
}

func (l *invariantLog) Close() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
	}
}

// ReadInvariantLog reads a log written by one or more simulator processes, ordered by time.
func ReadInvariantLog(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var events []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		events = append(events, e)
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].TS.Before(events[j].TS) })
	return events, sc.Err()
}

// Sample is the cluster's view at one instant of the log.
type Sample struct {
	TS time.Time
	// Mains are the data instances that were writable MAINs from TS on.
	Mains []string
	// Leaders are the coordinators that believed themselves leader from TS on.
	Leaders []string
}

// Timeline replays the events and returns the state after each one.
func Timeline(events []Event) []Sample {
	dataRole := map[string]Event{}
	coordRole := map[string]string{}
	var out []Sample
	for _, e := range events {
		switch e.Role {
		case RoleLeader, RoleFollower:
			coordRole[e.Instance] = e.Role
		case RoleMain, RoleReplica:
			dataRole[e.Instance] = e
		case RoleDown:
			delete(coordRole, e.Instance)
			delete(dataRole, e.Instance)
		}
		s := Sample{TS: e.TS}
		for name, ev := range dataRole {
			if ev.Role == RoleMain && ev.Writable {
				s.Mains = append(s.Mains, name)
			}
		}
		for name, role := range coordRole {
			if role == RoleLeader {
				s.Leaders = append(s.Leaders, name)
			}
		}
		sort.Strings(s.Mains)
		sort.Strings(s.Leaders)
		out = append(out, s)
	}
	return out
}

// MaxMains is the largest number of writable MAINs at any instant of the log.
func MaxMains(events []Event) int {
	most := 0
	for _, s := range Timeline(events) {
		most = max(most, len(s.Mains))
	}
	return most
}

// Window is a stretch of time.
type Window struct{ From, To time.Time }

// Duration is the window's length.
func (w Window) Duration() time.Duration { return w.To.Sub(w.From) }

// MainlessWindows are the stretches, after the first writable MAIN appeared, during which
// there was none; a window still open at the end of the log ends at until.
func MainlessWindows(events []Event, until time.Time) []Window {
	var out []Window
	var open *Window
	seen := false
	for _, s := range Timeline(events) {
		switch {
		case len(s.Mains) > 0:
			seen = true
			if open != nil {
				open.To = s.TS
				out = append(out, *open)
				open = nil
			}
		case seen && open == nil:
			open = &Window{From: s.TS}
		}
	}
	if open != nil {
		open.To = until
		out = append(out, *open)
	}
	return out
}
