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
	SetCoordinatorSetting
	// UpdateBoltServer is UPDATE CONFIG FOR INSTANCE (Instance set) or FOR COORDINATOR.
	UpdateBoltServer
)

var kindNames = [...]string{"", "AddCoordinator", "RegisterInstance", "SetMain", "DemoteInstance",
	"UnregisterInstance", "RemoveCoordinator", "YieldLeadership", "SetCoordinatorSetting", "UpdateBoltServer"}

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
	// FallbackMode is RegisterInstance's second try when Memgraph refuses Instance.Mode
	// for mixing SYNC and STRICT_SYNC (the MAIN's own registered mode, which nothing
	// shows, is the one in the way); "" tries nothing else.
	FallbackMode string
	// Setting is SetCoordinatorSetting's name and value.
	Setting Setting
}

// Attempt is one query a command may send.
type Attempt struct {
	Target   string // instance or coordinator name
	Cypher   string
	Fallback bool // the demoted MAIN restored as a last resort
	// ModeFallback: RegisterInstance's FallbackMode, tried after a mode-mix refusal.
	ModeFallback bool
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
	case RegisterInstance:
		out := []Attempt{{Target: c.Instance.Name, Cypher: c.Cypher()}}
		if c.FallbackMode != "" && c.FallbackMode != modeOrSync(c.Instance.Mode) {
			d := c.Instance
			out = append(out, Attempt{Target: d.Name, ModeFallback: true,
				Cypher: memgraph.RegisterInstance(d.Name, c.FallbackMode, d.AdvertisedBolt(), d.ManagementServer, d.ReplicationServer)})
		}
		return out
	case AddCoordinator, RemoveCoordinator:
		return []Attempt{{Target: memgraph.CoordinatorName(c.Coordinator.ID), Cypher: c.Cypher()}}
	case SetCoordinatorSetting:
		return []Attempt{{Target: c.Setting.Name, Cypher: c.Cypher()}}
	case UpdateBoltServer:
		return []Attempt{{Target: c.target(), Cypher: c.Cypher()}}
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
		return memgraph.AddCoordinator(k.ID, k.AdvertisedBolt(), k.CoordinatorServer, k.ManagementServer)
	case RegisterInstance:
		d := c.Instance
		return memgraph.RegisterInstance(d.Name, d.Mode, d.AdvertisedBolt(), d.ManagementServer, d.ReplicationServer)
	case UpdateBoltServer:
		if c.Instance.Name != "" {
			return memgraph.UpdateInstanceBoltServer(c.Instance.Name, c.Instance.AdvertisedBolt())
		}
		return memgraph.UpdateCoordinatorBoltServer(c.Coordinator.ID, c.Coordinator.AdvertisedBolt())
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
	case SetCoordinatorSetting:
		return memgraph.SetCoordinatorSetting(c.Setting.Name, c.Setting.Value)
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
	case SetCoordinatorSetting:
		return c.Kind.String() + " " + c.Setting.Name + "=" + c.Setting.Value
	case UpdateBoltServer:
		return c.Kind.String() + " " + c.target()
	case RegisterInstance:
		s := c.Kind.String() + " " + c.Instance.Name
		if m := modeOrSync(c.Instance.Mode); m != memgraph.ModeSync {
			s += " AS " + m
		}
		if c.FallbackMode != "" {
			s += " (or " + c.FallbackMode + ")"
		}
		return s
	}
	return c.Kind.String() + " " + c.Instance.Name
}

// target names the member an UpdateBoltServer changes.
func (c Command) target() string {
	if c.Instance.Name != "" {
		return c.Instance.Name
	}
	return memgraph.CoordinatorName(c.Coordinator.ID)
}

// modeOrSync is mode with "" read as SYNC, Memgraph's default.
func modeOrSync(mode string) string {
	if mode == "" {
		return memgraph.ModeSync
	}
	return mode
}

func joinNames(ns []string) string { return strings.Join(ns, ",") }
