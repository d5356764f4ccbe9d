package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// model is a small coordinator cluster with its data pods, applying admin commands with
// Memgraph's refusals, and recording every breach of the safety rules it can see.
type model struct {
	rng *rand.Rand

	members map[int]bool // Raft membership: id -> added with its config (false: a fresh coordinator's own placeholder)
	leader  int

	pods     map[string]*pod // data pods that exist (live StatefulSet)
	reg      map[string]bool // registered data instances
	regOrder []string
	main     string // the MAIN in Raft state

	lastDemoted string // the instance the last DEMOTE left as the freshest copy

	raftFailRate float64         // chance a mutation fails with "Writing to Raft log failed"
	showUnknown  bool            // v3.12: a down data instance shows role "unknown"
	refuseMain   map[string]bool // instances whose promotion fails

	violations []string
	queries    int
	refusals   int
}

type pod struct {
	up        bool
	role      string // "main", "replica" or "" (never registered)
	committed int64
	lagging   bool // misses writes while set
}

func newModel(seed uint64) *model {
	return &model{
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		members: map[int]bool{1: false},
		leader:  1,
		pods:    map[string]*pod{},
		reg:     map[string]bool{},
	}
}

func (m *model) violate(format string, args ...any) {
	m.violations = append(m.violations, fmt.Sprintf(format, args...))
}

func refuse(msg string) error {
	return &memgraph.Error{Kind: memgraph.KindRefused, Code: "Memgraph.ClientError.MemgraphError.MemgraphError", Message: msg}
}

// showInstances is the leader's SHOW INSTANCES.
func (m *model) showInstances(want Desired) []memgraph.Instance {
	var out []memgraph.Instance
	ids := make([]int, 0, len(m.members))
	for id := range m.members {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		row := memgraph.Instance{Name: memgraph.CoordinatorName(id), Health: "up", Role: memgraph.RoleFollower,
			CoordinatorServer: fmt.Sprintf("c-%d.svc:12000", id-1)}
		if m.members[id] {
			row.BoltServer = fmt.Sprintf("c-%d.svc:7687", id-1)
		}
		if id == m.leader {
			row.Role = memgraph.RoleLeader
		}
		out = append(out, row)
	}
	for _, n := range m.regOrder {
		p := m.pods[n]
		row := memgraph.Instance{Name: n, BoltServer: n + ":7687", Health: "down", Role: memgraph.RoleReplica}
		if n == m.main {
			row.Role = memgraph.RoleMain
		}
		if p != nil && p.up {
			row.Health = "up"
		} else if m.showUnknown {
			row.Role = memgraph.RoleUnknown
		}
		out = append(out, row)
	}
	return out
}

// lag is SHOW REPLICATION LAG, served through the MAIN (none without an up MAIN).
func (m *model) lag() []memgraph.Lag {
	mp := m.pods[m.main]
	if m.main == "" || mp == nil || !mp.up {
		return nil
	}
	var out []memgraph.Lag
	for _, n := range m.regOrder {
		if n == m.main || m.pods[n] == nil {
			continue
		}
		c := m.pods[n].committed
		out = append(out, memgraph.Lag{Instance: n, Databases: map[string]memgraph.DatabaseLag{
			"memgraph": {Committed: c, Behind: mp.committed - c}}})
	}
	return out
}

// exec applies one attempt of a command as the leader would.
func (m *model) exec(c Command, a Attempt) error {
	m.queries++
	if c.Kind != YieldLeadership && m.raftFailRate > 0 && m.rng.Float64() < m.raftFailRate {
		return refuse("Writing to Raft log failed. Please retry the operation.")
	}
	switch c.Kind {
	case AddCoordinator:
		id := c.Coordinator.ID
		if added, ok := m.members[id]; ok && added {
			return refuse("Couldn't add coordinator since instance with such id already exists!")
		}
		m.members[id] = true
	case RemoveCoordinator:
		id := c.Coordinator.ID
		if id == m.leader {
			m.violate("REMOVE COORDINATOR %d aimed at the leader", id)
			return refuse(fmt.Sprintf("Request for removing coordinator %d failed because the current leader cannot be removed!", id))
		}
		if _, ok := m.members[id]; !ok {
			return refuse("No coordinator with such id!")
		}
		delete(m.members, id)
	case RegisterInstance:
		n := c.Instance.Name
		if m.reg[n] {
			return refuse("Couldn't register replica instance since instance with such name already exists!")
		}
		p := m.pods[n]
		if p == nil || !p.up {
			return refuse("Couldn't register replica instance because setting instance to replica failed! Check logs on replica to find out more info!")
		}
		m.reg[n] = true
		m.regOrder = append(m.regOrder, n)
		p.role = memgraph.RoleReplica
	case UnregisterInstance:
		n := a.Target
		if !m.reg[n] {
			return refuse("No instance with such name!")
		}
		if n == m.main {
			if p := m.pods[n]; p != nil && p.up {
				m.violate("UNREGISTER INSTANCE %s aimed at the alive MAIN", n)
				return refuse("Alive main instance can't be unregistered! Shut it down to trigger failover and then unregister it!")
			}
			m.violate("UNREGISTER INSTANCE %s: the MAIN (down) left the cluster", n)
			m.main = ""
		}
		delete(m.reg, n)
		m.regOrder = slices.DeleteFunc(m.regOrder, func(s string) bool { return s == n })
	case SetMain:
		n := a.Target
		if m.main != "" {
			return refuse("Couldn't set instance to main since there is already a main instance in cluster!")
		}
		if !m.reg[n] {
			return refuse("No instance with such name!")
		}
		p := m.pods[n]
		if p == nil || !p.up || m.refuseMain[n] {
			return refuse("Couldn't set instance to main!")
		}
		m.checkFreshest(n)
		m.main = n
		for _, r := range m.regOrder {
			if q := m.pods[r]; q != nil && q.up {
				q.role = memgraph.RoleReplica
			}
		}
		p.role = memgraph.RoleMain
	case DemoteInstance:
		n := a.Target
		if !m.reg[n] {
			return refuse("No instance with such name!")
		}
		if m.main != n {
			return refuse(fmt.Sprintf("Instance %s is already a replica!", n))
		}
		m.main = ""
		m.lastDemoted = n
		if p := m.pods[n]; p != nil {
			p.role = memgraph.RoleReplica
		}
	case YieldLeadership:
		others := m.memberIDs(func(id int) bool { return id != m.leader })
		if len(others) > 0 {
			m.leader = others[m.rng.IntN(len(others))]
		}
	}
	m.checkInvariants()
	return nil
}

// checkFreshest: a promotion must not lose a commit another registered copy still has.
func (m *model) checkFreshest(n string) {
	c := m.pods[n].committed
	for _, r := range m.regOrder {
		if p := m.pods[r]; p != nil && p.up && p.committed > c {
			m.violate("SET INSTANCE %s TO MAIN (%d commits) while %s has %d", n, c, r, p.committed)
		}
	}
	if d := m.lastDemoted; d != "" && m.reg[d] && m.pods[d] != nil && m.pods[d].committed > c {
		m.violate("SET INSTANCE %s TO MAIN (%d commits) while the demoted MAIN %s has %d", n, c, d, m.pods[d].committed)
	}
}

func (m *model) checkInvariants() {
	var mains []string
	for n, p := range m.pods {
		if p.up && p.role == memgraph.RoleMain {
			mains = append(mains, n)
		}
	}
	if len(mains) > 1 {
		sort.Strings(mains)
		m.violate("two MAINs: %v", mains)
	}
	if m.main != "" && !m.reg[m.main] {
		m.violate("MAIN %s is not registered", m.main)
	}
	if _, ok := m.members[m.leader]; !ok {
		m.violate("leader %d is not a member", m.leader)
	}
}

func (m *model) memberIDs(keep func(int) bool) []int {
	var out []int
	for id := range m.members {
		if keep(id) {
			out = append(out, id)
		}
	}
	sort.Ints(out)
	return out
}

// write commits n transactions through the MAIN (SYNC: every up replica that is not
// lagging gets them too).
func (m *model) write(n int64) {
	mp := m.pods[m.main]
	if m.main == "" || mp == nil || !mp.up {
		return
	}
	mp.committed += n
	m.replicate()
}

// replicate is the MAIN bringing every reachable, non-lagging replica up to date (SYNC
// replication, and recovery of a replica registered late).
func (m *model) replicate() {
	mp := m.pods[m.main]
	if m.main == "" || mp == nil || !mp.up {
		return
	}
	for _, r := range m.regOrder {
		if p := m.pods[r]; r != m.main && p != nil && p.up && !p.lagging {
			p.committed = mp.committed
		}
	}
}

// failover is the coordinators' own: a down MAIN is replaced by the freshest up replica.
func (m *model) failover() {
	mp := m.pods[m.main]
	if m.main == "" || (mp != nil && mp.up) {
		return
	}
	best := ""
	for _, r := range m.regOrder {
		p := m.pods[r]
		if r == m.main || p == nil || !p.up {
			continue
		}
		if best == "" || p.committed > m.pods[best].committed {
			best = r
		}
	}
	if best == "" {
		return
	}
	if mp != nil {
		mp.role = memgraph.RoleReplica // demoted when it returns
	}
	// Commits the old MAIN had beyond the new one are the failover's loss, not the
	// operator's: they leave the timeline (Memgraph resolves the diverged copy).
	for _, p := range m.pods {
		p.committed = min(p.committed, m.pods[best].committed)
	}
	m.main = best
	m.pods[best].role = memgraph.RoleMain
	m.checkInvariants()
}
