package planner

import (
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/shared/lostnodes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var lostNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// rows builds a leader's SHOW INSTANCES from "name=role" or "name=role/down";
// coordinator_<id> rows are coordinators (with a bolt_server).
func rows(entries ...string) []memgraph.Instance {
	var out []memgraph.Instance
	for _, e := range entries {
		name, state, _ := strings.Cut(e, "=")
		role, health, _ := strings.Cut(state, "/")
		if health == "" {
			health = memgraph.HealthUp
		}
		r := memgraph.Instance{Name: name, BoltServer: name + ":7687", ManagementServer: name + ":10000", Health: health, Role: role}
		if strings.HasPrefix(name, "coordinator_") {
			r.CoordinatorServer = name + ":12000"
		}
		out = append(out, r)
	}
	return out
}

// lostMembers are 3 coordinators (pods c-1..c-3 on nodes n1..n3) and 2 data instances
// (pods d-0, d-1 on n4, n5), with node overrides as "pod=node".
func lostMembers(overrides ...string) []PinnedMember {
	ms := []PinnedMember{
		{Pod: "c-1", Instance: "coordinator_1", ID: 1, Node: "n1"},
		{Pod: "c-2", Instance: "coordinator_2", ID: 2, Node: "n2"},
		{Pod: "c-3", Instance: "coordinator_3", ID: 3, Node: "n3"},
		{Pod: "d-0", Instance: "d_0", Node: "n4"},
		{Pod: "d-1", Instance: "d_1", Node: "n5"},
	}
	for _, o := range overrides {
		pod, node, _ := strings.Cut(o, "=")
		for i := range ms {
			if ms[i].Pod == pod {
				ms[i].Node = node
			}
		}
	}
	return ms
}

// nodesWith are nodes n1..n5 Ready, but those named gone (deleted) or "name~ago"
// (NotReady for ago).
func nodesWith(changes ...string) lostnodes.Nodes {
	ns := lostnodes.Nodes{}
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"} {
		ns[n] = lostnodes.State{Health: lostnodes.Ready}
	}
	for _, c := range changes {
		name, ago, notReady := strings.Cut(c, "~")
		if !notReady {
			delete(ns, name)
			continue
		}
		d, err := time.ParseDuration(ago)
		if err != nil {
			panic(err)
		}
		ns[name] = lostnodes.State{Health: lostnodes.NotReady, NotReadySince: lostNow.Add(-d)}
	}
	return ns
}

func entry(member, node, reason, replacement string) memgraphv1.LostNode {
	return memgraphv1.LostNode{Member: member, Node: node, Reason: reason, Since: metav1.NewTime(lostNow.Add(-time.Minute)), Replacement: replacement}
}

// healthy is a converged 3+2 view: coordinator_1 leads, d_0 is MAIN.
var healthy = []string{"coordinator_1=leader", "coordinator_2=follower", "coordinator_3=follower", "d_0=main", "d_1=replica"}

func with(base []string, changes ...string) []string {
	out := append([]string(nil), base...)
	for _, c := range changes {
		name, _, _ := strings.Cut(c, "=")
		for i := range out {
			if strings.HasPrefix(out[i], name+"=") {
				out[i] = c
			}
		}
	}
	return out
}

func TestPlanLost(t *testing.T) {
	cases := []struct {
		name    string
		in      LostInput
		starts  []string // "pod:command" ("pod:-" without a removal)
		release []string
		reason  string // MemberLost reason, "" for no condition
		status  metav1.ConditionStatus
		msg     string // a part of the message
		lost    []string
		clear   bool
		recheck time.Duration
	}{
		{name: "nothing lost, never reported", in: LostInput{Nodes: nodesWith(), Leader: "coordinator_1", Instances: rows(healthy...)}},
		{name: "nothing lost, reported before", in: LostInput{Nodes: nodesWith(), Reported: true},
			reason: memgraphv1.ReasonNoMemberLost, status: metav1.ConditionFalse},
		{name: "within the grace period", in: LostInput{Nodes: nodesWith("n5~1m"), Leader: "coordinator_1", Instances: rows(with(healthy, "d_1=replica/down")...)},
			reason: memgraphv1.ReasonNodeNotReady, status: metav1.ConditionTrue, msg: "node n5 of member d-1 is NotReady", recheck: 4 * time.Minute},
		{name: "annotation within the grace period", in: LostInput{Nodes: nodesWith("n5~1m"), ReplaceRequested: "d-1", Leader: "coordinator_1",
			Instances: rows(with(healthy, "d_1=replica/down")...)},
			starts: []string{"d-1:UnregisterInstance d_1"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue,
			lost: []string{"d-1@n5 NotReady"}, clear: true},
		{name: "replica on a deleted node", in: LostInput{Nodes: nodesWith("n5"), Leader: "coordinator_1", Instances: rows(with(healthy, "d_1=unknown/down")...)},
			starts: []string{"d-1:UnregisterInstance d_1"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"d-1@n5 Deleted"}},
		{name: "replica NotReady past the grace period", in: LostInput{Nodes: nodesWith("n5~6m"), Leader: "coordinator_1", Instances: rows(with(healthy, "d_1=unknown/down")...)},
			starts: []string{"d-1:UnregisterInstance d_1"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"d-1@n5 NotReady"}},
		{name: "the MAIN lost, its replica up: the coordinators fail over first", in: LostInput{Nodes: nodesWith("n4"), Leader: "coordinator_1",
			Instances: rows(with(healthy, "d_0=main/down")...)},
			reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, msg: "replaced once the coordinators have failed its MAIN role over", lost: []string{"d-0@n4 Deleted"}},
		{name: "the MAIN lost shown unknown, no MAIN yet: waits", in: LostInput{Nodes: nodesWith("n4"), Leader: "coordinator_1",
			Instances: rows(with(healthy, "d_0=unknown/down")...)},
			reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, msg: "given the MAIN role to an instance that is up", lost: []string{"d-0@n4 Deleted"}},
		{name: "a replica lost while the operator cannot reach a member the leader shows up: held",
			in: LostInput{Nodes: nodesWith("n5"), Leader: "coordinator_1", Instances: rows(with(healthy, "d_1=unknown/down")...),
				Unanswered: []string{"coordinator_2 (no answer within 5s)"}},
			reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue,
			msg: "is replaced once the operator reaches coordinator_2 (no answer within 5s) again, which the leader shows up", lost: []string{"d-1@n5 Deleted"}},
		{name: "a coordinator lost while the operator cannot reach a member the leader shows up: held",
			in: LostInput{Nodes: nodesWith("n3"), Leader: "coordinator_1", Instances: rows(with(healthy, "coordinator_3=follower/down")...),
				Unanswered: []string{"d_0 (no answer within 5s)"}},
			reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, msg: "is replaced once the operator reaches d_0", lost: []string{"c-3@n3 Deleted"}},
		{name: "the MAIN lost after the failover", in: LostInput{Nodes: nodesWith("n4"), Leader: "coordinator_1",
			Instances: rows(with(healthy, "d_0=unknown/down", "d_1=main")...)},
			starts: []string{"d-0:UnregisterInstance d_0"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"d-0@n4 Deleted"}},
		{name: "the MAIN lost with no replica up", in: LostInput{Nodes: nodesWith("n4"), Leader: "coordinator_1",
			Instances: rows(with(healthy, "d_0=main/down", "d_1=replica/down")...)},
			reason: memgraphv1.ReasonReplacementRefused, status: metav1.ConditionTrue, msg: "no replica is up to take over", lost: []string{"d-0@n4 Deleted"}},
		{name: "a replica lost while no MAIN serves", in: LostInput{Nodes: nodesWith("n5"), Leader: "coordinator_1",
			Instances: rows(with(healthy, "d_0=unknown/down", "d_1=unknown/down")...)},
			reason: memgraphv1.ReasonReplacementRefused, status: metav1.ConditionTrue, msg: "no data instance is up as MAIN", lost: []string{"d-1@n5 Deleted"}},
		{name: "both data instances lost with one node", in: LostInput{Members: lostMembers("d-1=n4"), Nodes: nodesWith("n4"), Leader: "coordinator_1",
			Instances: rows(with(healthy, "d_0=main/down", "d_1=replica/down")...)},
			reason: memgraphv1.ReasonReplacementRefused, status: metav1.ConditionTrue, lost: []string{"d-0@n4 Deleted", "d-1@n4 Deleted"}},
		{name: "a deleted node's process still answers: waits", in: LostInput{Nodes: nodesWith("n5"), Leader: "coordinator_1", Instances: rows(healthy...)},
			reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, msg: "stops answering", lost: []string{"d-1@n5 Deleted"}},
		{name: "a NotReady node's process still answers: refused", in: LostInput{Nodes: nodesWith("n5~10m"), Leader: "coordinator_1", Instances: rows(healthy...)},
			reason: memgraphv1.ReasonReplacementRefused, status: metav1.ConditionTrue, msg: "still answers", lost: []string{"d-1@n5 NotReady"}},
		{name: "never registered", in: LostInput{Nodes: nodesWith("n5"), Leader: "coordinator_1",
			Instances: rows("coordinator_1=leader", "coordinator_2=follower", "coordinator_3=follower", "d_0=main")},
			starts: []string{"d-1:-"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"d-1@n5 Deleted"}},
		{name: "no leader answers", in: LostInput{Nodes: nodesWith("n5")},
			reason: memgraphv1.ReasonReplacementRefused, status: metav1.ConditionTrue, msg: "no coordinator leader answers", lost: []string{"d-1@n5 Deleted"}},
		{name: "a follower coordinator lost", in: LostInput{Nodes: nodesWith("n3"), Leader: "coordinator_1", Instances: rows(with(healthy, "coordinator_3=follower/down")...)},
			starts: []string{"c-3:RemoveCoordinator coordinator_3"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"c-3@n3 Deleted"}},
		{name: "the leader's node deleted, before the election", in: LostInput{Nodes: nodesWith("n1"), Leader: "coordinator_1", Instances: rows(healthy...)},
			reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, msg: "stops answering", lost: []string{"c-1@n1 Deleted"}},
		{name: "the old leader lost, after the election", in: LostInput{Nodes: nodesWith("n1"), Leader: "coordinator_2",
			Instances: rows(with(healthy, "coordinator_1=follower/down", "coordinator_2=leader")...)},
			starts: []string{"c-1:RemoveCoordinator coordinator_1"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"c-1@n1 Deleted"}},
		{name: "a coordinator lost while another is down: no quorum without it", in: LostInput{Nodes: nodesWith("n3"), Leader: "coordinator_1",
			Instances: rows(with(healthy, "coordinator_2=follower/down", "coordinator_3=follower/down")...)},
			reason: memgraphv1.ReasonReplacementRefused, status: metav1.ConditionTrue, msg: "fewer than the 2 a quorum needs", lost: []string{"c-3@n3 Deleted"}},
		{name: "two of five coordinators lost: one removed per pass", in: LostInput{
			Members: append(lostMembers("c-3=n6"), PinnedMember{Pod: "c-4", Instance: "coordinator_4", ID: 4, Node: "n6"}, PinnedMember{Pod: "c-5", Instance: "coordinator_5", ID: 5, Node: "n7"}),
			Nodes:   nodesWith("n6"), Leader: "coordinator_1",
			Instances: rows(append(with(healthy, "coordinator_3=follower/down"), "coordinator_4=follower/down", "coordinator_5=follower")...)},
			starts: []string{"c-3:RemoveCoordinator coordinator_3"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue,
			msg: "one at a time", lost: []string{"c-3@n6 Deleted", "c-4@n6 Deleted"}},
		{name: "a coordinator no longer in the membership", in: LostInput{Nodes: nodesWith("n3"), Leader: "coordinator_1",
			Instances: rows("coordinator_1=leader", "coordinator_2=follower", "d_0=main", "d_1=replica")},
			starts: []string{"c-3:-"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"c-3@n3 Deleted"}},
		{name: "a coordinator and a replica on one deleted node", in: LostInput{Members: lostMembers("d-1=n3"), Nodes: nodesWith("n3"), Leader: "coordinator_1",
			Instances: rows(with(healthy, "coordinator_3=follower/down", "d_1=replica/down")...)},
			starts: []string{"c-3:RemoveCoordinator coordinator_3", "d-1:UnregisterInstance d_1"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue,
			lost: []string{"c-3@n3 Deleted", "d-1@n3 Deleted"}},
		{name: "Manual", in: LostInput{Nodes: nodesWith("n5"), Leader: "coordinator_1", Instances: rows(with(healthy, "d_1=replica/down")...)},
			reason: memgraphv1.ReasonReplacementManual, status: metav1.ConditionTrue, msg: "memgraph.com/replace-member=d-1", lost: []string{"d-1@n5 Deleted"}},
		{name: "Manual, approved", in: LostInput{Nodes: nodesWith("n5"), ReplaceRequested: "d-1", Leader: "coordinator_1", Instances: rows(with(healthy, "d_1=replica/down")...)},
			starts: []string{"d-1:UnregisterInstance d_1"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"d-1@n5 Deleted"}, clear: true},
		{name: "Manual, approved while the failover is pending: kept", in: LostInput{Nodes: nodesWith("n4"), ReplaceRequested: "d-0", Leader: "coordinator_1",
			Instances: rows(with(healthy, "d_0=main/down")...)},
			reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"d-0@n4 Deleted"}},
		{name: "an annotation naming no lost member is dropped", in: LostInput{Nodes: nodesWith(), ReplaceRequested: "d-1", Leader: "coordinator_1", Instances: rows(healthy...)},
			clear: true},
		{name: "under way: released", in: LostInput{Nodes: nodesWith("n5"), Lost: []memgraphv1.LostNode{entry("d-1", "n5", "Deleted", "Replacing")}},
			release: []string{"d-1@n5"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"d-1@n5 Deleted Replacing"}},
		{name: "under way: on another node, not registered yet", in: LostInput{Members: lostMembers("d-1=n6"), Nodes: nodesWith("n5"), Leader: "coordinator_1",
			Instances: rows("coordinator_1=leader", "coordinator_2=follower", "coordinator_3=follower", "d_0=main"), Lost: []memgraphv1.LostNode{entry("d-1", "n5", "Deleted", "Replacing")}},
			release: []string{"d-1@n5"}, reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"d-1@n5 Deleted Replacing"}},
		{name: "replaced: serves again elsewhere", in: LostInput{Members: lostMembers("d-1=n6"), Nodes: nodesWith("n5"), Leader: "coordinator_1",
			Instances: rows(healthy...), Lost: []memgraphv1.LostNode{entry("d-1", "n5", "Deleted", "Replacing")}},
			reason: memgraphv1.ReasonReplaced, status: metav1.ConditionFalse, msg: "serves again", lost: []string{"d-1@n5 Deleted Replaced"}},
		{name: "replaced coordinator: added again", in: LostInput{Members: lostMembers("c-3=n6"), Nodes: nodesWith("n3"), Leader: "coordinator_1",
			Instances: rows(healthy...), Lost: []memgraphv1.LostNode{entry("c-3", "n3", "Deleted", "Replacing")}},
			reason: memgraphv1.ReasonReplaced, status: metav1.ConditionFalse, lost: []string{"c-3@n3 Deleted Replaced"}},
		{name: "replaced, the node back: forgotten", in: LostInput{Members: lostMembers("d-1=n6"), Nodes: nodesWith(), Reported: true,
			Lost: []memgraphv1.LostNode{entry("d-1", "n5", "Deleted", "Replaced")}},
			reason: memgraphv1.ReasonNoMemberLost, status: metav1.ConditionFalse},
		{name: "back before it was touched: forgotten", in: LostInput{Nodes: nodesWith(), Reported: true, Leader: "coordinator_1", Instances: rows(healthy...),
			Lost: []memgraphv1.LostNode{entry("d-1", "n5", "NotReady", "")}},
			reason: memgraphv1.ReasonNoMemberLost, status: metav1.ConditionFalse},
		{name: "under way, the node back: not released", in: LostInput{Nodes: nodesWith(), Leader: "coordinator_1", Instances: rows(with(healthy, "d_1=replica/down")...),
			Lost: []memgraphv1.LostNode{entry("d-1", "n5", "Deleted", "Replacing")}},
			reason: memgraphv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"d-1@n5 Deleted Replacing"}},
		{name: "scaled away: forgotten", in: LostInput{Members: lostMembers()[:4], Nodes: nodesWith("n5"), Reported: true,
			Lost: []memgraphv1.LostNode{entry("d-1", "n5", "Deleted", "Replacing")}},
			reason: memgraphv1.ReasonNoMemberLost, status: metav1.ConditionFalse},
		{name: "refusal outranks the rest", in: LostInput{Members: lostMembers(), Nodes: nodesWith("n4", "n3~1m"), Leader: "coordinator_1",
			Instances: rows(with(healthy, "d_0=main/down", "d_1=replica/down")...)},
			reason: memgraphv1.ReasonReplacementRefused, status: metav1.ConditionTrue, msg: "is not replaced: it is the MAIN and no replica is up to take over: its data may have no other copy; bring the node back; node n3 of member c-3 is NotReady",
			lost: []string{"d-0@n4 Deleted"}, recheck: 4 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Now, in.GracePeriod = lostNow, 5*time.Minute
			in.Automatic = !strings.HasPrefix(c.name, "Manual")
			if in.Members == nil {
				in.Members = lostMembers()
			}
			d := PlanLost(in)
			var starts []string
			for _, s := range d.Start {
				cmd := "-"
				if s.Remove != nil {
					cmd = s.Remove.String()
				}
				starts = append(starts, s.Entry.Member+":"+cmd)
			}
			if strings.Join(starts, " ") != strings.Join(c.starts, " ") {
				t.Errorf("starts %q, want %q", starts, c.starts)
			}
			var release []string
			for _, r := range d.Release {
				release = append(release, r.Member+"@"+r.Node)
			}
			if strings.Join(release, " ") != strings.Join(c.release, " ") {
				t.Errorf("release %q, want %q", release, c.release)
			}
			var lost []string
			for _, r := range d.Lost {
				lost = append(lost, strings.TrimSpace(r.Member+"@"+r.Node+" "+r.Reason+" "+r.Replacement))
			}
			if strings.Join(lost, ", ") != strings.Join(c.lost, ", ") {
				t.Errorf("status.lostNodes %q, want %q", lost, c.lost)
			}
			cond, ok := d.Condition()
			switch {
			case c.reason == "" && ok:
				t.Errorf("MemberLost %s %s: %s, want none", cond.Status, cond.Reason, cond.Message)
			case c.reason != "" && (!ok || cond.Reason != c.reason || cond.Status != c.status || !strings.Contains(cond.Message, c.msg)):
				t.Errorf("MemberLost %v %s %s: %q, want %s %s containing %q", ok, cond.Status, cond.Reason, cond.Message, c.status, c.reason, c.msg)
			}
			if d.ClearReplace != c.clear {
				t.Errorf("ClearReplace %v, want %v", d.ClearReplace, c.clear)
			}
			if d.Recheck != c.recheck {
				t.Errorf("Recheck %s, want %s", d.Recheck, c.recheck)
			}
		})
	}
}

// TestPlanLostPasses replays the loss of the MAIN's node pass by pass, as the controller
// runs it: the coordinators fail over, the old MAIN is unregistered and released once,
// its new pod lands on another node and is registered again, then the node comes back.
// Each pass is planned on the status the previous one stored; no pass promotes anything
// and no pass unregisters an instance the view shows as MAIN.
func TestPlanLostPasses(t *testing.T) {
	type pass struct {
		nodes     lostnodes.Nodes
		members   []PinnedMember
		view      []string
		starts    int
		released  bool
		reason    string
		condition metav1.ConditionStatus
	}
	passes := []pass{
		{nodes: nodesWith(), members: lostMembers(), view: healthy},
		// The node is deleted: the pod goes with it, MAIN not failed over yet.
		{nodes: nodesWith("n4"), members: lostMembers(), view: with(healthy, "d_0=main/down"), reason: memgraphv1.ReasonReplacing, condition: metav1.ConditionTrue},
		{nodes: nodesWith("n4"), members: lostMembers(), view: with(healthy, "d_0=unknown/down"), reason: memgraphv1.ReasonReplacing, condition: metav1.ConditionTrue},
		// The coordinators promoted d_1.
		{nodes: nodesWith("n4"), members: lostMembers(), view: with(healthy, "d_0=unknown/down", "d_1=main"), starts: 1, released: true,
			reason: memgraphv1.ReasonReplacing, condition: metav1.ConditionTrue},
		// Unregistered; the claims are going, the new pod waits for them.
		{nodes: nodesWith("n4"), members: lostMembers("d-0="), view: []string{"coordinator_1=leader", "coordinator_2=follower", "coordinator_3=follower", "d_1=main"},
			released: true, reason: memgraphv1.ReasonReplacing, condition: metav1.ConditionTrue},
		// The new pod runs on n6, not registered yet.
		{nodes: nodesWith("n4"), members: lostMembers("d-0=n6"), view: []string{"coordinator_1=leader", "coordinator_2=follower", "coordinator_3=follower", "d_1=main"},
			released: true, reason: memgraphv1.ReasonReplacing, condition: metav1.ConditionTrue},
		// Registered again as a replica.
		{nodes: nodesWith("n4"), members: lostMembers("d-0=n6"), view: with(healthy, "d_0=replica", "d_1=main"), reason: memgraphv1.ReasonReplaced, condition: metav1.ConditionFalse},
		{nodes: nodesWith("n4"), members: lostMembers("d-0=n6"), view: with(healthy, "d_0=replica", "d_1=main"), reason: memgraphv1.ReasonReplaced, condition: metav1.ConditionFalse},
		// The node is back.
		{nodes: nodesWith(), members: lostMembers("d-0=n6"), view: with(healthy, "d_0=replica", "d_1=main"), reason: memgraphv1.ReasonNoMemberLost, condition: metav1.ConditionFalse},
	}
	var stored []memgraphv1.LostNode
	reported := false
	started := 0
	for i, p := range passes {
		instances := rows(p.view...)
		in := LostInput{Now: lostNow.Add(time.Duration(i) * 3 * time.Second), Automatic: true, GracePeriod: 5 * time.Minute,
			Members: p.members, Nodes: p.nodes, Lost: stored, Reported: reported, Leader: "coordinator_1", Instances: instances}
		d := PlanLost(in)
		main, _ := memgraph.MainOf(instances)
		for _, s := range d.Start {
			if s.Remove != nil && s.Remove.Instance.Name == main.Name {
				t.Fatalf("pass %d unregisters %s, the MAIN in the view", i, main.Name)
			}
			d.MarkReplacing(s)
		}
		started += len(d.Start)
		if len(d.Start) != p.starts || (len(d.Release) > 0 || len(d.Start) > 0) != p.released {
			t.Errorf("pass %d: %d started, %d released; want %d started, released %v", i, len(d.Start), len(d.Release), p.starts, p.released)
		}
		cond, ok := d.Condition()
		if p.reason == "" {
			if ok {
				t.Errorf("pass %d: MemberLost %s %s, want none", i, cond.Status, cond.Reason)
			}
		} else if !ok || cond.Reason != p.reason || cond.Status != p.condition {
			t.Errorf("pass %d: MemberLost %s %s (%s), want %s %s", i, cond.Status, cond.Reason, cond.Message, p.condition, p.reason)
		}
		stored, reported = d.Lost, reported || ok
	}
	if started != 1 {
		t.Errorf("%d replacements started, want 1", started)
	}
	if len(stored) != 0 {
		t.Errorf("status.lostNodes at the end: %+v, want none", stored)
	}
}

// TestPlanLostRefuse: a start whose removal the leader refused is dropped and reported.
func TestPlanLostRefuse(t *testing.T) {
	d := PlanLost(LostInput{Now: lostNow, Automatic: true, GracePeriod: time.Minute, Members: lostMembers(), Nodes: nodesWith("n5"),
		Leader: "coordinator_1", Instances: rows(with(healthy, "d_1=replica/down")...)})
	if len(d.Start) != 1 {
		t.Fatalf("starts %+v", d.Start)
	}
	d.Refuse(d.Start[0], "the leader refused UNREGISTER INSTANCE d_1")
	cond, _ := d.Condition()
	if len(d.Start) != 0 || cond.Reason != memgraphv1.ReasonReplacementRefused || cond.Message != "the leader refused UNREGISTER INSTANCE d_1" {
		t.Errorf("after Refuse: starts %d, MemberLost %s %q", len(d.Start), cond.Reason, cond.Message)
	}
	if d.Lost[0].Replacement != "" {
		t.Errorf("entry %+v marked", d.Lost[0])
	}
}

func TestNeedsView(t *testing.T) {
	base := LostInput{Now: lostNow, GracePeriod: 5 * time.Minute, Members: lostMembers()}
	cases := []struct {
		name string
		in   func(LostInput) LostInput
		want bool
	}{
		{"all ready", func(in LostInput) LostInput { in.Nodes = nodesWith(); return in }, false},
		{"within grace", func(in LostInput) LostInput { in.Nodes = nodesWith("n5~1m"); return in }, false},
		{"within grace, annotated", func(in LostInput) LostInput { in.Nodes = nodesWith("n5~1m"); in.ReplaceRequested = "d-1"; return in }, true},
		{"deleted", func(in LostInput) LostInput { in.Nodes = nodesWith("n5"); return in }, true},
		{"replaced, node still gone", func(in LostInput) LostInput {
			in.Members, in.Nodes = lostMembers("d-1=n6"), nodesWith("n5")
			in.Lost = []memgraphv1.LostNode{entry("d-1", "n5", "Deleted", "Replaced")}
			return in
		}, false},
		{"under way", func(in LostInput) LostInput {
			in.Members, in.Nodes = lostMembers("d-1="), nodesWith("n5")
			in.Lost = []memgraphv1.LostNode{entry("d-1", "n5", "Deleted", "Replacing")}
			return in
		}, true},
	}
	for _, c := range cases {
		if got := NeedsView(c.in(base)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
