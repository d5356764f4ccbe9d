// Package planner turns the declared Memgraph HA topology and what the Raft leader shows
// (SHOW INSTANCES, and SHOW REPLICATION LAG when a MAIN must move) into the ordered admin
// commands of one registration pass. It is pure: no I/O, no clock, deterministic.
//
// Rule 0 comes before all others: while a member the operator cannot reach is up in the
// leader's view (Observed.Unreachable, Unanswered), nothing is planned. The member may be
// serving, and only the operator's own view is incomplete (a partition between the
// operator and the data plane): the coordinators decide failovers, and a retirement,
// handover or re-registration decided on a partial view could act against what they see.
// The plan waits until the member answers or the coordinators mark it down. A member the
// leader shows down is theirs already; one it does not list is registered through the
// leader, which checks it itself.
//
// Rules (the commands come out as: 4, 5's removals, then 1 and 2 with 3 before them
// unless 3's candidates are 2's new registrations; or, when the leader yields, 4, 5's
// removals, 3 if it needs no new registration, and YIELD LEADERSHIP, the additions
// waiting for the next leader. So a refused addition, say of a pod that is down, never
// holds back a retirement, a promotion or a yield):
//  1. ADD COORDINATOR for every declared, non-retiring coordinator the leader does not
//     list with its bolt_server (a fresh coordinator lists itself with none): the
//     leader's own entry first.
//  2. REGISTER INSTANCE for every declared, non-retiring data instance not listed, in its
//     declared mode; as ASYNC when a listed replica's mode forbids that one (SYNC and
//     STRICT_SYNC never mix), and falling back to ASYNC when Memgraph refuses the mode
//     because of the MAIN's (rule 7 corrects both later).
//  3. With no MAIN listed: SET INSTANCE TO MAIN over candidates tried in order. A MAIN the
//     operator demoted (a pass killed between DEMOTE and SET MAIN) is restored: the one
//     copy nothing can be ahead of, while no survivor can be proven current without a MAIN
//     to measure lag against. It is the registered draining instance, else the highest
//     retiring ordinal still registered (rule 4 unregisters the retiring replicas before
//     it demotes; a later scale-down only adds lower ordinals). If it is down, the plan
//     waits for it. Otherwise the up survivors in declared order; only with none, the
//     ones registered in this pass (bootstrap), promoted after their registration. A
//     candidate is always listed by the leader when SET INSTANCE TO MAIN is sent.
//  4. Retirement of data instances: UNREGISTER INSTANCE of each retiring non-MAIN (only
//     while a MAIN exists); then, when the MAIN itself is retiring and up, DEMOTE it and
//     SET a survivor TO MAIN, whose candidates are the up survivors that SHOW REPLICATION
//     LAG proves caught up (declared order) with the demoted MAIN last, as the fallback
//     that restores service; then UNREGISTER it. With no caught-up survivor nothing is
//     demoted; a retiring MAIN that is down is left to the coordinators' failover.
//  5. REMOVE COORDINATOR of each retiring coordinator still a member, never the leader;
//     when the leader retires (or drains), YIELD LEADERSHIP ends the plan: its successor
//     is elected, so the next pass re-observes under it.
//  6. SET COORDINATOR SETTING for each declared setting whose value SHOW COORDINATOR
//     SETTINGS shows otherwise (before a yield; a setting not listed is left alone).
//  7. With an up MAIN and no retirement, promotion or registration in the plan, the first
//     replica whose mode in the MAIN's SHOW REPLICAS is not the declared one is
//     unregistered and registered again (last), through ASYNC where SYNC and STRICT_SYNC
//     would meet. The MAIN's own registered mode shows nowhere; when Memgraph refuses a
//     registration because of it, the executor plans again with MainBlocksMode and the
//     MAIN is handed over as in rule 4 (caught-up replicas, those whose mode opposes no
//     declared one first) so that it can be re-registered as a replica.
//
// Draining (Desired.DrainData, DrainCoordinators) is retirement without the removal, for
// rolling restarts: a draining MAIN is handed over by rule 4 and stays registered, is no
// candidate of a handover, and counts as retiring for rule 3's restore; a draining leader
// yields.
//
//  8. UPDATE CONFIG FOR INSTANCE|COORDINATOR of each declared, non-retiring member listed
//     with a bolt_server other than its Advertised one (the address clients outside reach
//     with spec.externalAccessConfig, else the pod's DNS name; unset, nothing is compared),
//     before a yield: it changes what routing tables say, nothing else (advertise.go).
//
// Never planned: SET INSTANCE TO MAIN while a MAIN is listed, UNREGISTER of the MAIN or of
// anything not retiring, REMOVE COORDINATOR of the leader, anything after YIELD
// LEADERSHIP. Members that are neither declared nor retiring (registered by hand) are
// left alone, and registered management, replication and coordinator addresses are not
// compared with the declared ones (Memgraph changes only bolt_server in place).
//
// Limits. Memgraph 3.12 shows a MAIN that stopped answering as role "unknown", so until
// the coordinators fail over, rule 3 may try a promotion the leader refuses ("already a
// main instance"): safe, the leader keeps one MAIN. A cluster without a MAIN whose
// demoted MAIN is not a registered retiring or draining instance (demoted or unregistered
// by hand, or the scale reverted in the milliseconds between a killed pass's DEMOTE and
// SET MAIN) gets its lowest up survivor, unproven, since nothing measures lag without a
// MAIN.
//
// Files: planner.go takes the inputs and plans; command.go is the commands a plan holds
// and the queries they send; execute.go runs a plan.
package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// Coordinator is a declared coordinator (its id comes from its pod's ordinal).
type Coordinator struct {
	ID                int
	Name              string // memgraph.CoordinatorName(ID)
	BoltServer        string // where the operator dials it
	CoordinatorServer string
	ManagementServer  string
	// Advertised is the bolt_server to register (routing tables list it): an address
	// clients outside reach (spec.externalAccessConfig); "" is BoltServer.
	Advertised string
}

// AdvertisedBolt is the bolt_server c is registered with.
func (c Coordinator) AdvertisedBolt() string { return cmp.Or(c.Advertised, c.BoltServer) }

// DataInstance is a declared data instance.
type DataInstance struct {
	Name       string // the pod name with '-' turned into '_'
	BoltServer string // where the operator dials it
	// Advertised is the bolt_server to register, the MAIN's being the writer of every
	// routing table; "" is BoltServer.
	Advertised        string
	ManagementServer  string
	ReplicationServer string
	// Mode is the replication mode to register it with: memgraph.ModeSync (or ""),
	// ModeAsync or ModeStrictSync.
	Mode string
}

// AdvertisedBolt is the bolt_server d is registered with.
func (d DataInstance) AdvertisedBolt() string { return cmp.Or(d.Advertised, d.BoltServer) }

// Setting is one coordinator setting, named and spelled as SET COORDINATOR SETTING takes
// it.
type Setting struct{ Name, Value string }

// Desired is the declared topology: every live pod of both StatefulSets (retiring ones
// included, so they can be found and handed off) and which of them are retiring.
type Desired struct {
	Coordinators         []Coordinator
	Data                 []DataInstance
	RetiringCoordinators []int
	RetiringData         []string

	// DrainData are data instances about to be restarted (a rolling update): the MAIN
	// is handed over from them as from a retiring one (same proof, same fallback), but
	// they stay registered. Name only the instance about to restart, and keep naming it
	// until an Outcome shows the MAIN elsewhere: a pass stopped between DEMOTE and SET
	// MAIN leaves no MAIN, and only the drain says which copy to restore.
	DrainData []string
	// DrainCoordinators are coordinators about to be restarted: the leader among them
	// yields (YIELD LEADERSHIP, last).
	DrainCoordinators []int
	// ReadLag asks executor.Reconcile to read SHOW REPLICATION LAG on every pass
	// (Outcome.Lag), e.g. to wait for a restarted replica to catch up; Plan ignores it.
	ReadLag bool
	// Settings are the coordinator settings to keep (rule 6).
	Settings []Setting
}

// Observed is what the leader showed at the start of the pass.
type Observed struct {
	// Leader is the name of the coordinator the commands will run on: the Raft leader.
	Leader    string
	Instances []memgraph.Instance
	// Lag is SHOW REPLICATION LAG, needed only when NeedsLag says so; without it a
	// retiring MAIN is not moved.
	Lag []memgraph.Lag
	// Settings is SHOW COORDINATOR SETTINGS; nil when it was not read (rule 6 waits).
	Settings map[string]string
	// Replicas is the MAIN's SHOW REPLICAS, the only place a registered mode shows; nil
	// when it was not read (rule 7 waits).
	Replicas []memgraph.Replica
	// Unreachable are the members (by SHOW INSTANCES name) the operator itself could not
	// reach this pass, each with a short cause (memgraph.Cause). The leader's health
	// checks may see them otherwise: see Unanswered.
	Unreachable map[string]string
	// MainBlocksMode: Memgraph refused a registration for mixing SYNC and STRICT_SYNC
	// with no listed replica in the way (Report.ModeBlocked), so the MAIN's own
	// registered mode is; rule 7 hands the MAIN over so that it can be re-registered.
	MainBlocksMode bool
}

// Result is one pass's plan.
type Result struct {
	Commands []Command
	// Waiting says what the plan holds back and why, one stable sentence each; empty
	// when nothing is held back.
	Waiting []string
	// Unanswered are the members rule 0 holds the plan for (Unanswered), sorted; nil when
	// it does not.
	Unanswered []string
}

// Converged says there is nothing to do and nothing to wait for.
func (r Result) Converged() bool { return len(r.Commands) == 0 && len(r.Waiting) == 0 }

// Messages the plan waits with (instance names are stable for a retirement's duration).
const (
	WaitNoMainCandidate    = "no data instance is up to become MAIN"
	waitDemotedMainDown    = "the cluster has no MAIN and %s, possibly the demoted MAIN, is down"
	waitRetiringMainDown   = "MAIN %s is to move but is down; waiting for the coordinators' failover"
	waitNoCaughtUpSurvivor = "no surviving replica is up and proven caught up by SHOW REPLICATION LAG to take over MAIN from %s"
	waitMainlessUnregister = "retiring instances are kept registered until the cluster has a MAIN again"
	waitNoSuccessor        = "leader %s is to step down but no other coordinator that stays is up to take over"
	waitUnanswered         = "the operator cannot reach %s, which the leader shows up; nothing is changed until they answer or the coordinators mark them down"
)

// Unanswered names, sorted, the members the operator could not reach (seen.Unreachable)
// that the leader shows up: they may be serving, unseen by the operator only. A member
// down in the leader's view is the coordinators' to handle (they fail a MAIN over), and the
// operator's own failure to reach it says nothing more; one the leader does not list (a
// new pod whose name does not resolve yet, say) is registered through the leader, which
// checks it itself.
func Unanswered(seen Observed) []string {
	up := map[string]bool{}
	for _, in := range seen.Instances {
		up[in.Name] = in.Up()
	}
	var out []string
	for name := range seen.Unreachable {
		if up[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// NeedsLag says whether Plan needs SHOW REPLICATION LAG for these instances: the MAIN is
// up and retiring or draining, so it must be handed to a survivor proven caught up.
func NeedsLag(want Desired, instances []memgraph.Instance) bool {
	m, ok := memgraph.MainOf(instances)
	return ok && m.Up() && (slices.Contains(want.RetiringData, m.Name) || slices.Contains(want.DrainData, m.Name))
}

// Plan computes one pass's commands.
func Plan(want Desired, seen Observed) Result {
	var r Result
	// 0. Members only the operator cannot see: nothing.
	if held := Unanswered(seen); len(held) > 0 {
		r.Unanswered = held
		r.Waiting = []string{fmt.Sprintf(waitUnanswered, strings.Join(held, ", "))}
		return r
	}
	retiringC := make(map[int]bool, len(want.RetiringCoordinators))
	for _, id := range want.RetiringCoordinators {
		retiringC[id] = true
	}
	retiringD := make(map[string]bool, len(want.RetiringData))
	for _, n := range want.RetiringData {
		retiringD[n] = true
	}
	drainD := make(map[string]bool, len(want.DrainData))
	for _, n := range want.DrainData {
		drainD[n] = true
	}
	coords := make(map[int]memgraph.Instance)
	data := make(map[string]memgraph.Instance)
	var dataOrder []string // observed order, for members the spec does not declare
	for _, in := range seen.Instances {
		if in.IsCoordinator() {
			if id, ok := memgraph.CoordinatorID(in.Name); ok {
				coords[id] = in
			}
			continue
		}
		data[in.Name] = in
		dataOrder = append(dataOrder, in.Name)
	}
	leaderID, _ := memgraph.CoordinatorID(seen.Leader)

	// 1. Coordinators, the leader's own entry first (it was born listing itself only).
	adds := make([]Coordinator, 0, len(want.Coordinators))
	for _, c := range want.Coordinators {
		if retiringC[c.ID] {
			continue
		}
		if row, ok := coords[c.ID]; ok && row.BoltServer != "" {
			continue
		}
		adds = append(adds, c)
	}
	slices.SortStableFunc(adds, func(a, b Coordinator) int {
		return boolRank(a.ID != leaderID) - boolRank(b.ID != leaderID)
	})
	var addCmds, registerCmds, mainCmds, retireCmds, removeCmds []Command
	for _, c := range adds {
		addCmds = append(addCmds, Command{Kind: AddCoordinator, Coordinator: c})
	}

	// 2. Data instances to register, in their mode unless a listed replica's mode (or one
	// this pass registers) forbids it, then ASYNC until rule 7 can change it.
	modes := map[string]string{} // registered mode by name, as far as known
	for _, r := range seen.Replicas {
		modes[r.Name] = r.Mode
	}
	var registered []string // names registered by this pass
	for _, d := range want.Data {
		if retiringD[d.Name] {
			continue
		}
		if _, ok := data[d.Name]; ok {
			continue
		}
		cmd := Command{Kind: RegisterInstance, Instance: d}
		cmd.Instance.Mode = modeOrSync(d.Mode)
		if conflictsWith(modes, d.Name, cmd.Instance.Mode) {
			cmd.Instance.Mode = memgraph.ModeAsync
		} else if cmd.Instance.Mode != memgraph.ModeAsync {
			cmd.FallbackMode = memgraph.ModeAsync
		}
		modes[d.Name] = cmd.Instance.Mode
		registerCmds = append(registerCmds, cmd)
		registered = append(registered, d.Name)
	}

	// Retiring data instances still registered, declared order first; draining ones.
	var retiringUp, retiringDown, drainingUp, drainingDown []string
	seenName := map[string]bool{}
	for _, n := range append(namesOf(want.Data), dataOrder...) {
		row, ok := data[n]
		if !ok || seenName[n] {
			continue
		}
		seenName[n] = true
		switch {
		case retiringD[n] && row.Up():
			retiringUp = append(retiringUp, n)
		case retiringD[n]:
			retiringDown = append(retiringDown, n)
		}
		switch {
		case drainD[n] && row.Up():
			drainingUp = append(drainingUp, n)
		case drainD[n]:
			drainingDown = append(drainingDown, n)
		}
	}
	// Up survivors (neither retiring nor draining), declared order.
	var survivorsUp []string
	for _, d := range want.Data {
		if row, ok := data[d.Name]; ok && !retiringD[d.Name] && !drainD[d.Name] && row.Up() {
			survivorsUp = append(survivorsUp, d.Name)
		}
	}

	main, hasMain := memgraph.MainOf(seen.Instances)
	switch {
	case !hasMain:
		// 3. No MAIN.
		var candidates []string
		// A registered draining instance decides alone: the drain names the MAIN being
		// moved. Else the highest retiring ordinal still registered: rule 4 unregisters
		// the retiring replicas before it demotes, so at the DEMOTE the MAIN was the only
		// one left, and a later scale-down only adds lower ordinals.
		departingUp, departingDown := drainingUp, drainingDown
		if len(departingUp)+len(departingDown) == 0 {
			if last := lastRegistered(want.Data, data, retiringD); last != "" {
				if data[last].Up() {
					departingUp = []string{last}
				} else {
					departingDown = []string{last}
				}
			}
		}
		switch {
		case len(departingDown) > 0:
			// It may be the demoted MAIN: wait for it rather than guess.
			r.Waiting = append(r.Waiting, fmt.Sprintf(waitDemotedMainDown, departingDown[0]))
		case len(departingUp) > 0:
			// Restore, not hand over: no survivor is proven current without a MAIN to
			// measure lag against; the next pass hands over with proof.
			candidates = departingUp
		default:
			candidates = append(append(candidates, survivorsUp...), registered...)
			if len(candidates) == 0 {
				r.Waiting = append(r.Waiting, WaitNoMainCandidate)
			}
		}
		if len(candidates) > 0 {
			mainCmds = append(mainCmds, Command{Kind: SetMain, Candidates: candidates})
		}
		if len(retiringUp)+len(retiringDown) > 0 {
			r.Waiting = append(r.Waiting, waitMainlessUnregister)
		}
	default:
		// 4. Retirement: replicas first, so that a MAIN-less cluster (an operator killed
		// between DEMOTE and SET MAIN) keeps only the demoted MAIN among the retiring.
		for _, n := range append(retiringUp, retiringDown...) {
			if n != main.Name {
				retireCmds = append(retireCmds, Command{Kind: UnregisterInstance, Instance: DataInstance{Name: n}})
			}
		}
		switch {
		case retiringD[main.Name] || drainD[main.Name]:
			retireCmds, r.Waiting = handOver(retireCmds, r.Waiting, main, want, data, seen)
		case seen.MainBlocksMode:
			// 7. The MAIN's registered mode forbids a replica's: move the MAIN to a
			// replica whose mode does not, so that rule 7 can re-register it.
			retireCmds, r.Waiting = handOver(retireCmds, r.Waiting, main, want, data, seen)
		}
	}

	// 5. Coordinators to retire; the leader is asked to step down, last.
	ids := slices.Clone(want.RetiringCoordinators)
	slices.Sort(ids)
	yield := false
	for _, id := range slices.Compact(ids) {
		if _, ok := coords[id]; !ok {
			continue
		}
		if id == leaderID {
			yield = true
			continue
		}
		removeCmds = append(removeCmds, Command{Kind: RemoveCoordinator, Coordinator: Coordinator{ID: id, Name: memgraph.CoordinatorName(id)}})
	}

	// Order: what makes progress on retirement first, so that an addition the cluster
	// refuses (a pod that is down) cannot hold it back; a MAIN among registered survivors
	// before registrations for the same reason, after them only when the candidates are
	// the instances this pass registers (bootstrap); YIELD LEADERSHIP last.
	r.Commands = append(r.Commands, retireCmds...)
	r.Commands = append(r.Commands, removeCmds...)
	mainFirst := len(mainCmds) > 0 && !slices.Contains(registered, mainCmds[0].Candidates[0])
	if mainFirst {
		// Only instances the leader lists: this pass's registrations come later, or
		// never when the leader yields, and the leader refuses a promotion of what it
		// does not list. The next pass, with them registered, may try them.
		mainCmds[0].Candidates = slices.DeleteFunc(mainCmds[0].Candidates, func(n string) bool { return slices.Contains(registered, n) })
		r.Commands = append(r.Commands, mainCmds...)
	}
	yield = yield || (slices.Contains(want.DrainCoordinators, leaderID) && leaderID > 0)
	if yield && !hasSuccessor(coords, leaderID, retiringC) {
		// Nobody could take over: add members first, yield on a later pass.
		yield = false
		r.Waiting = append(r.Waiting, fmt.Sprintf(waitNoSuccessor, memgraph.CoordinatorName(leaderID)))
	}
	// 6. Coordinator settings that differ from SHOW COORDINATOR SETTINGS. One the
	// coordinators do not list (an older Memgraph) is left alone: setting it would be
	// refused on every pass.
	if seen.Settings != nil {
		for _, st := range want.Settings {
			if v, ok := seen.Settings[st.Name]; ok && v != st.Value {
				r.Commands = append(r.Commands, Command{Kind: SetCoordinatorSetting, Setting: st})
			}
		}
	}
	// 8. Registered members whose bolt_server is not the one to advertise.
	r.Commands = append(r.Commands, boltUpdates(want, coords, data, retiringC, retiringD)...)
	if yield {
		// Additions wait for the next leader: one refused here would keep the yield,
		// which must come last, from ever being sent.
		r.Commands = append(r.Commands, Command{Kind: YieldLeadership})
		return r
	}
	r.Commands = append(r.Commands, addCmds...)
	r.Commands = append(r.Commands, registerCmds...)
	if !mainFirst {
		r.Commands = append(r.Commands, mainCmds...)
	}
	// 7. One replica whose registered mode is not the declared one, when nothing else
	// moves the membership this pass.
	if hasMain && main.Up() && len(retireCmds)+len(registerCmds)+len(mainCmds) == 0 {
		r.Commands = append(r.Commands, modeChange(want, data, main.Name, retiringD, drainD, seen.Replicas)...)
	}
	return r
}

// modeChange re-registers the first declared replica whose registered mode (SHOW
// REPLICAS) differs from its declared one: UNREGISTER, then REGISTER in the new mode, or
// in its old one again if Memgraph refuses the new for mixing SYNC and STRICT_SYNC.
// Memgraph has no other way to change a mode. Toward SYNC or STRICT_SYNC it goes through
// ASYNC while another replica holds the opposite mode, and while no other replica holds
// the new one (the MAIN, whose mode nothing shows, may hold the opposite); an ASYNC
// replica then tries the new mode with ASYNC to fall back on, and that refusal is what
// tells the executor to move the MAIN (Observed.MainBlocksMode).
func modeChange(want Desired, data map[string]memgraph.Instance, main string,
	retiring, draining map[string]bool, replicas []memgraph.Replica) []Command {
	if replicas == nil {
		return nil
	}
	modes := make(map[string]string, len(replicas))
	for _, r := range replicas {
		modes[r.Name] = r.Mode
	}
	for _, d := range want.Data {
		now, listed := modes[d.Name]
		wantMode := modeOrSync(d.Mode)
		if _, ok := data[d.Name]; !ok || !listed || d.Name == main || retiring[d.Name] || draining[d.Name] || now == wantMode {
			continue
		}
		held := false // another replica already holds wantMode: the MAIN cannot oppose it
		for n, m := range modes {
			held = held || (n != d.Name && m == wantMode)
		}
		target, fallback := wantMode, now
		switch {
		case conflictsWith(modes, d.Name, wantMode):
			if now == memgraph.ModeAsync {
				continue // waits for the replicas in the way
			}
			target = memgraph.ModeAsync
		case wantMode == memgraph.ModeAsync || held:
		case now != memgraph.ModeAsync:
			target = memgraph.ModeAsync
		}
		reg := d
		reg.Mode = target
		return []Command{
			{Kind: UnregisterInstance, Instance: DataInstance{Name: d.Name}},
			{Kind: RegisterInstance, Instance: reg, FallbackMode: fallback},
		}
	}
	return nil
}

// conflictsWith says whether a registered instance other than name holds a mode Memgraph
// refuses next to mode.
func conflictsWith(modes map[string]string, name, mode string) bool {
	for n, m := range modes {
		if n != name && memgraph.ModeConflicts(m, mode) {
			return true
		}
	}
	return false
}

// handOver moves MAIN off a retiring or draining instance: DEMOTE, SET a caught-up
// survivor TO MAIN (the demoted MAIN last), UNREGISTER the demoted one if it retires.
func handOver(cmds []Command, waiting []string, main memgraph.Instance, want Desired,
	data map[string]memgraph.Instance, seen Observed) ([]Command, []string) {
	if !main.Up() {
		return cmds, append(waiting, fmt.Sprintf(waitRetiringMainDown, main.Name))
	}
	caughtUp := make(map[string]bool, len(seen.Lag))
	for _, l := range seen.Lag {
		caughtUp[l.Instance] = l.CaughtUp()
	}
	departing := make(map[string]bool, len(want.RetiringData)+len(want.DrainData))
	for _, n := range append(slices.Clone(want.RetiringData), want.DrainData...) {
		departing[n] = true
	}
	var candidates []string
	for _, d := range want.Data {
		row, ok := data[d.Name]
		if !ok || departing[d.Name] || !row.Up() || row.Role != memgraph.RoleReplica || !caughtUp[d.Name] {
			continue
		}
		candidates = append(candidates, d.Name)
	}
	if len(candidates) == 0 {
		return cmds, append(waiting, fmt.Sprintf(waitNoCaughtUpSurvivor, main.Name))
	}
	// A candidate whose registered mode opposes a declared one would be in the way of
	// rule 7 once MAIN: the others first.
	modes := make(map[string]string, len(seen.Replicas))
	for _, r := range seen.Replicas {
		modes[r.Name] = r.Mode
	}
	opposes := func(n string) bool {
		for _, d := range want.Data {
			if memgraph.ModeConflicts(modes[n], modeOrSync(d.Mode)) {
				return true
			}
		}
		return false
	}
	slices.SortStableFunc(candidates, func(a, b string) int { return boolRank(opposes(a)) - boolRank(opposes(b)) })
	cmds = append(cmds,
		Command{Kind: DemoteInstance, Instance: DataInstance{Name: main.Name}},
		Command{Kind: SetMain, Candidates: candidates, Fallback: main.Name})
	if slices.Contains(want.RetiringData, main.Name) {
		cmds = append(cmds, Command{Kind: UnregisterInstance, Instance: DataInstance{Name: main.Name}})
	}
	return cmds, waiting
}

// hasSuccessor says whether a member other than the leader, not retiring and up, could
// win the election a yield starts.
func hasSuccessor(coords map[int]memgraph.Instance, leaderID int, retiring map[int]bool) bool {
	for id, row := range coords {
		if id != leaderID && !retiring[id] && row.Up() {
			return true
		}
	}
	return false
}

// lastRegistered is the highest declared instance in set that the leader lists.
func lastRegistered(ds []DataInstance, data map[string]memgraph.Instance, set map[string]bool) string {
	for i := len(ds) - 1; i >= 0; i-- {
		if _, ok := data[ds[i].Name]; ok && set[ds[i].Name] {
			return ds[i].Name
		}
	}
	return ""
}

func namesOf(ds []DataInstance) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return out
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
