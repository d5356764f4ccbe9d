package planner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// lostCluster is CLUSTER NODES of a 2x1 cluster as every member sees it: primaries a
// (0-8191) and b (8192-16383), replicas ra of a and rb of b. lines overrides a node's
// line (flags, primary, slots) by id.
func lostCluster(t *testing.T, answering []string, lines map[string]string) valkey.Snapshot {
	t.Helper()
	base := map[string]string{
		"a":  "master - 0 0 1 connected 0-8191",
		"b":  "master - 0 0 2 connected 8192-16383",
		"ra": "slave a 0 0 1 connected",
		"rb": "slave b 0 0 2 connected",
	}
	for id, l := range lines {
		base[id] = l
	}
	var snap valkey.Snapshot
	for _, me := range answering {
		var text []string
		for i, id := range []string{"a", "b", "ra", "rb"} {
			f := strings.SplitN(base[id], " ", 2)
			flags := f[0]
			if id == me {
				flags = "myself," + flags
			}
			text = append(text, fmt.Sprintf("%s 127.0.0.%d:6379@16379 %s %s", id, i+1, flags, f[1]))
		}
		v, err := valkey.ParseNodes("addr-"+me, strings.Join(text, "\n")+"\n")
		if err != nil {
			t.Fatal(err)
		}
		snap.Views = append(snap.Views, v)
	}
	return snap
}

func TestPlanLost(t *testing.T) {
	now := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	ready := map[string]NodeState{"n1": {Health: NodeReady}, "n2": {Health: NodeReady}}
	notReady := func(ago time.Duration) map[string]NodeState {
		return map[string]NodeState{"n1": {Health: NodeReady}, "n2": {Health: NodeNotReady, NotReadySince: now.Add(-ago)}}
	}
	others := []string{"a", "b", "ra"} // rb's node n2 is gone
	for _, tc := range []struct {
		name      string
		auto      bool
		nodes     map[string]NodeState
		member    PinnedMember
		answering []string
		lines     map[string]string
		want      LostState
		replace   bool
		msg       string
	}{
		{name: "node ready", auto: true, nodes: ready, member: PinnedMember{Name: "m", ID: "rb", Node: "n2"}, answering: others, want: LostNone},
		{name: "replica on a deleted node", auto: true, nodes: map[string]NodeState{"n1": {}}, member: PinnedMember{Name: "m", ID: "rb", Node: "n2"},
			answering: others, want: LostReplacing, replace: true, msg: "m's claim on lost node n2 (deleted) is deleted"},
		{name: "within the grace period", auto: true, nodes: notReady(time.Minute), member: PinnedMember{Name: "m", ID: "rb", Node: "n2"},
			answering: others, want: LostWaitingGrace, msg: "counts as lost after spec.lostNodes.gracePeriod (5m0s)"},
		{name: "past the grace period", auto: true, nodes: notReady(6 * time.Minute), member: PinnedMember{Name: "m", ID: "rb", Node: "n2"},
			answering: others, want: LostReplacing, replace: true, msg: "(NotReady for 6m0s)"},
		{name: "manual", nodes: notReady(6 * time.Minute), member: PinnedMember{Name: "m", ID: "rb", Node: "n2"},
			answering: others, want: LostManual, msg: "delete its claim"},
		{name: "its server answers", auto: true, nodes: notReady(6 * time.Minute), member: PinnedMember{Name: "m", ID: "rb", Node: "n2", Answers: true},
			answering: []string{"a", "b", "ra", "rb"}, want: LostRefused, msg: "its server still answers"},
		{name: "deleted node, its server still answers", auto: true, nodes: map[string]NodeState{}, member: PinnedMember{Name: "m", ID: "rb", Node: "n2", Answers: true},
			answering: []string{"a", "b", "ra", "rb"}, want: LostReplacing, msg: "its server still answers"},
		{name: "primary with slots, its replica answers", auto: true, nodes: map[string]NodeState{}, member: PinnedMember{Name: "m", ID: "b", Node: "n2"},
			answering: []string{"a", "ra", "rb"}, lines: map[string]string{"b": "master,fail - 0 0 2 disconnected 8192-16383"},
			want: LostReplacing, msg: "waiting for its replica addr-rb to take them over"},
		{name: "primary failed over", auto: true, nodes: map[string]NodeState{}, member: PinnedMember{Name: "m", ID: "b", Node: "n2"},
			answering: []string{"a", "ra", "rb"}, lines: map[string]string{"b": "master,fail - 0 0 2 disconnected", "rb": "master - 0 0 3 connected 8192-16383"},
			want: LostReplacing, replace: true},
		{name: "a view still gives it slots", auto: true, nodes: map[string]NodeState{}, member: PinnedMember{Name: "m", ID: "b", Node: "n2"},
			answering: []string{"a", "ra"}, lines: map[string]string{"b": "master,fail - 0 0 2 disconnected 8192-16383", "rb": "slave,fail b 0 0 2 disconnected"},
			want: LostRefused, msg: "no replica of it answers: its data has no other copy"},
		{name: "replica whose primary is gone too", auto: true, nodes: map[string]NodeState{}, member: PinnedMember{Name: "m", ID: "rb", Node: "n2"},
			answering: []string{"a", "ra"}, lines: map[string]string{"b": "master,fail - 0 0 2 disconnected 8192-16383"},
			want: LostRefused, msg: "it is a replica of b, which does not answer"},
		{name: "nobody answers", auto: true, nodes: map[string]NodeState{}, member: PinnedMember{Name: "m", ID: "rb", Node: "n2"},
			want: LostRefused, msg: "no member answers"},
		{name: "never joined", auto: true, nodes: map[string]NodeState{}, member: PinnedMember{Name: "m", Node: "n2"},
			answering: others, want: LostReplacing, replace: true},
		{name: "claim being deleted", auto: true, nodes: map[string]NodeState{}, member: PinnedMember{Name: "m", ID: "rb", Node: "n2", ClaimDeleting: true},
			answering: others, want: LostReplacing, msg: "is being deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var snap valkey.Snapshot
			if len(tc.answering) > 0 {
				snap = lostCluster(t, tc.answering, tc.lines)
			}
			d := PlanLost(LostInput{Now: now, Automatic: tc.auto, GracePeriod: 5 * time.Minute, Members: []PinnedMember{tc.member}, Nodes: tc.nodes, Snapshot: snap})
			if d.State != tc.want {
				t.Errorf("state %d, want %d (%s)", d.State, tc.want, d.Message)
			}
			if got := len(d.Replace) == 1; got != tc.replace {
				t.Errorf("replace %v, want %v (%s)", d.Replace, tc.replace, d.Message)
			}
			if !strings.Contains(d.Message, tc.msg) {
				t.Errorf("message %q, want it to hold %q", d.Message, tc.msg)
			}
			if tc.want == LostWaitingGrace && d.Recheck != 4*time.Minute {
				t.Errorf("recheck %s, want 4m0s", d.Recheck)
			}
		})
	}
}

// TestPlanLostWorstFirst: with several members lost the condition names the worst
// outcome, and its message lists every member, the worst first.
func TestPlanLostWorstFirst(t *testing.T) {
	snap := lostCluster(t, []string{"a", "ra"}, map[string]string{"b": "master,fail - 0 0 2 disconnected 8192-16383", "rb": "slave,fail b 0 0 2 disconnected"})
	d := PlanLost(LostInput{Automatic: true, GracePeriod: time.Minute, Snapshot: snap, Members: []PinnedMember{
		{Name: "m-b", ID: "b", Node: "n2"}, {Name: "m-rb", ID: "rb", Node: "n2"}, {Name: "m-new", Node: "n2"},
	}})
	if d.State != LostRefused || len(d.Replace) != 1 || d.Replace[0].Name != "m-new" {
		t.Fatalf("state %d, replace %v; want refused with m-new replaced (%s)", d.State, d.Replace, d.Message)
	}
	if !strings.HasPrefix(d.Message, "m-b is on lost node n2 (deleted) and is not replaced") || !strings.HasSuffix(d.Message, "rejoins as a replica") {
		t.Errorf("message %q: want m-b's refusal first, m-new's replacement last", d.Message)
	}
}
