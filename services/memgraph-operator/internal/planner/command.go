package planner

import (
	"strconv"
	"strings"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// Kind is the command a Command stands for.
type Kind int

const (
	AddCoordinator Kind = iota + 1
	RegisterInstance
	SetMain
	DemoteInstance
	UnregisterInstance
	RemoveCoordinator
	YieldLeadership
)

var kindNames = [...]string{"", "AddCoordinator", "RegisterInstance", "SetMain", "DemoteInstance",
	"UnregisterInstance", "RemoveCoordinator", "YieldLeadership"}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Command is one admin command of a plan.
type Command struct {
	Kind Kind
	// Coordinator is the member to add (AddCoordinator) or whose ID to remove.
	Coordinator Coordinator
	// Instance is the data instance to register (RegisterInstance), or whose Name to
	// demote or unregister.
	Instance DataInstance
	// Candidates are SetMain's targets, tried in order until one is accepted.
	Candidates []string
	// Fallback is the MAIN this plan demoted, tried after every candidate: it restores
	// service but means the handover failed, so the pass must stop there.
	Fallback string
}

// Attempt is one query a command may send.
type Attempt struct {
	Target   string // instance or coordinator name
	Cypher   string
	Fallback bool // the demoted MAIN restored as a last resort
}

// Attempts lists the queries of the command: one, except SetMain's candidates in order.
func (c Command) Attempts() []Attempt {
	switch c.Kind {
	case SetMain:
		out := make([]Attempt, 0, len(c.Candidates)+1)
		for _, n := range c.Candidates {
			out = append(out, Attempt{Target: n, Cypher: memgraph.SetInstanceToMain(n)})
		}
		if c.Fallback != "" {
			out = append(out, Attempt{Target: c.Fallback, Cypher: memgraph.SetInstanceToMain(c.Fallback), Fallback: true})
		}
		return out
	case AddCoordinator, RemoveCoordinator:
		return []Attempt{{Target: memgraph.CoordinatorName(c.Coordinator.ID), Cypher: c.Cypher()}}
	case YieldLeadership:
		return []Attempt{{Cypher: c.Cypher()}}
	}
	return []Attempt{{Target: c.Instance.Name, Cypher: c.Cypher()}}
}

// Cypher is the command's query text, values inlined and quoted (SetMain: its first
// attempt).
func (c Command) Cypher() string {
	switch c.Kind {
	case AddCoordinator:
		k := c.Coordinator
		return memgraph.AddCoordinator(k.ID, k.BoltServer, k.CoordinatorServer, k.ManagementServer)
	case RegisterInstance:
		d := c.Instance
		return memgraph.RegisterInstance(d.Name, d.BoltServer, d.ManagementServer, d.ReplicationServer)
	case SetMain:
		if a := c.Attempts(); len(a) > 0 {
			return a[0].Cypher
		}
		return ""
	case DemoteInstance:
		return memgraph.DemoteInstance(c.Instance.Name)
	case UnregisterInstance:
		return memgraph.UnregisterInstance(c.Instance.Name)
	case RemoveCoordinator:
		return memgraph.RemoveCoordinator(c.Coordinator.ID)
	case YieldLeadership:
		return memgraph.YieldLeadershipQuery
	}
	return ""
}

// String names the command and its target(s), without addresses.
func (c Command) String() string {
	switch c.Kind {
	case AddCoordinator, RemoveCoordinator:
		return c.Kind.String() + " " + memgraph.CoordinatorName(c.Coordinator.ID)
	case SetMain:
		s := c.Kind.String() + " " + joinNames(c.Candidates)
		if c.Fallback != "" {
			s += " (fallback " + c.Fallback + ")"
		}
		return s
	case YieldLeadership:
		return c.Kind.String()
	}
	return c.Kind.String() + " " + c.Instance.Name
}

func joinNames(ns []string) string { return strings.Join(ns, ",") }
