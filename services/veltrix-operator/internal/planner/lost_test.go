package planner

import (
	"strings"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var lostNow = time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)

// threeMembers: vx-0..2 on node-a..c, all serving.
func threeMembers() []PlacedMember {
	return []PlacedMember{
		{Pod: "vx-0", Node: "node-a", Disks: []string{"ua"}, Serving: true},
		{Pod: "vx-1", Node: "node-b", Disks: []string{"ub"}, Serving: true},
		{Pod: "vx-2", Node: "node-c", Disks: []string{"uc"}, Serving: true},
	}
}

func nodes(states map[string]NodeState, names ...string) map[string]NodeState {
	out := map[string]NodeState{}
	for _, n := range names {
		out[n] = NodeState{Health: NodeReady}
	}
	for n, s := range states {
		out[n] = s
	}
	return out
}

func lostInput(mut func(*LostInput)) LostInput {
	in := LostInput{Now: lostNow, Automatic: true, GracePeriod: 10 * time.Minute, ReplicationFactor: 2,
		Members: threeMembers(), Nodes: nodes(nil, "node-a", "node-b", "node-c", "node-d")}
	mut(&in)
	return in
}

func TestPlanLost(t *testing.T) {
	replacing := veltrixv1.LostNode{Node: "node-c", Reason: veltrixv1.LostNodeDeleted, Since: metav1.NewTime(lostNow.Add(-time.Minute)),
		Member: "vx-2", Disks: []string{"uc"}, Replacement: veltrixv1.ReplacementReplacing}
	replaced := replacing
	replaced.Replacement = veltrixv1.ReplacementReplaced
	for _, tc := range []struct {
		name       string
		in         LostInput
		start      string // member whose replacement starts
		replace    string // member whose replacement goes on
		reason     string // MemberLost reason
		status     metav1.ConditionStatus
		msg        string // part of the MemberLost message
		lost       []string
		disks      string // DisksReturned reason
		clearRepl  bool
		clearOffer bool
		reoffered  string
	}{
		{name: "all nodes ready", in: lostInput(func(*LostInput) {}),
			reason: veltrixv1.ReasonNoMemberLost, status: metav1.ConditionFalse, disks: veltrixv1.ReasonNoDisksReturned},
		{name: "deleted node, automatic: starts at once", in: lostInput(func(in *LostInput) {
			delete(in.Nodes, "node-c")
			in.Members[2].Serving = false
		}), start: "vx-2", reason: veltrixv1.ReasonReplacing, status: metav1.ConditionTrue, msg: "replacing member vx-2 of lost node node-c (Deleted)", lost: []string{"node-c"}},
		{name: "NotReady within the grace period: waits", in: lostInput(func(in *LostInput) {
			in.Nodes["node-c"] = NodeState{Health: NodeNotReady, NotReadySince: lostNow.Add(-9 * time.Minute)}
			in.Members[2].Serving = false
		}), reason: veltrixv1.ReasonNodeNotReady, status: metav1.ConditionTrue, msg: "node node-c of member vx-2 is NotReady; it counts as lost after spec.lostNodes.gracePeriod (10m0s)"},
		{name: "NotReady past the grace period: lost", in: lostInput(func(in *LostInput) {
			in.Nodes["node-c"] = NodeState{Health: NodeNotReady, NotReadySince: lostNow.Add(-10 * time.Minute)}
			in.Members[2].Serving = false
		}), start: "vx-2", reason: veltrixv1.ReasonReplacing, status: metav1.ConditionTrue, msg: "(NotReady)", lost: []string{"node-c"}},
		{name: "manual: waits for the annotation", in: lostInput(func(in *LostInput) {
			in.Automatic = false
			delete(in.Nodes, "node-c")
			in.Members[2].Serving = false
		}), reason: veltrixv1.ReasonReplacementManual, status: metav1.ConditionTrue, msg: "veltrix.io/replace-member=vx-2", lost: []string{"node-c"}},
		{name: "manual with the annotation: starts and clears it", in: lostInput(func(in *LostInput) {
			in.Automatic = false
			in.ReplaceRequested = "vx-2"
			delete(in.Nodes, "node-c")
			in.Members[2].Serving = false
		}), start: "vx-2", reason: veltrixv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"node-c"}, clearRepl: true},
		{name: "the annotation cuts the grace period short", in: lostInput(func(in *LostInput) {
			in.Automatic = false
			in.ReplaceRequested = "vx-2"
			in.Nodes["node-c"] = NodeState{Health: NodeNotReady, NotReadySince: lostNow.Add(-time.Minute)}
			in.Members[2].Serving = false
		}), start: "vx-2", reason: veltrixv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"node-c"}, clearRepl: true},
		{name: "an annotation naming a member that is not lost is dropped", in: lostInput(func(in *LostInput) {
			in.ReplaceRequested = "vx-1"
		}), reason: veltrixv1.ReasonNoMemberLost, status: metav1.ConditionFalse, clearRepl: true},
		{name: "replication factor 1: refused", in: lostInput(func(in *LostInput) {
			in.ReplicationFactor = 1
			delete(in.Nodes, "node-c")
			in.Members[2].Serving = false
		}), reason: veltrixv1.ReasonReplacementRefused, status: metav1.ConditionTrue, msg: "replicationFactor 1", lost: []string{"node-c"}},
		{name: "as many lost as the replication factor: refused", in: lostInput(func(in *LostInput) {
			delete(in.Nodes, "node-b")
			delete(in.Nodes, "node-c")
			in.Members[1].Serving, in.Members[2].Serving = false, false
		}), reason: veltrixv1.ReasonReplacementRefused, status: metav1.ConditionTrue, msg: "2 members are lost, as many as replicationFactor 2", lost: []string{"node-b", "node-c"}},
		{name: "another member not serving: refused", in: lostInput(func(in *LostInput) {
			delete(in.Nodes, "node-c")
			in.Members[0].Serving, in.Members[2].Serving = false, false
		}), reason: veltrixv1.ReasonReplacementRefused, status: metav1.ConditionTrue, msg: "while vx-0 does not serve", lost: []string{"node-c"}},
		{name: "under way: goes on while the new pod is pending", in: lostInput(func(in *LostInput) {
			delete(in.Nodes, "node-c")
			in.Lost = []veltrixv1.LostNode{replacing}
			in.Members[2] = PlacedMember{Pod: "vx-2"}
		}), replace: "vx-2", reason: veltrixv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"node-c"}},
		{name: "under way: goes on while another member restarts", in: lostInput(func(in *LostInput) {
			delete(in.Nodes, "node-c")
			in.Lost = []veltrixv1.LostNode{replacing}
			in.Members[0].Serving = false
			in.Members[2] = PlacedMember{Pod: "vx-2", Node: "node-d", Disks: []string{"ud"}}
		}), replace: "vx-2", reason: veltrixv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"node-c"}},
		{name: "replaced once serving on another node", in: lostInput(func(in *LostInput) {
			delete(in.Nodes, "node-c")
			in.Lost = []veltrixv1.LostNode{replacing}
			in.Members[2] = PlacedMember{Pod: "vx-2", Node: "node-d", Disks: []string{"ud"}, Serving: true}
		}), reason: veltrixv1.ReasonReplaced, status: metav1.ConditionFalse, msg: "member vx-2 of node node-c", lost: []string{"node-c"}, disks: veltrixv1.ReasonNoDisksReturned},
		{name: "a replaced node back with its disks: reported, still excluded", in: lostInput(func(in *LostInput) {
			in.Lost = []veltrixv1.LostNode{replaced}
			in.Members[2] = PlacedMember{Pod: "vx-2", Node: "node-d", Disks: []string{"ud"}, Serving: true}
			in.Reported = map[string][]string{"node-c": {"uc"}}
		}), reason: veltrixv1.ReasonReplaced, status: metav1.ConditionFalse, lost: []string{"node-c"}, disks: veltrixv1.ReasonDisksReturned},
		{name: "re-offered: the node leaves the list", in: lostInput(func(in *LostInput) {
			in.Lost = []veltrixv1.LostNode{replaced}
			in.Members[2] = PlacedMember{Pod: "vx-2", Node: "node-d", Disks: []string{"ud"}, Serving: true}
			in.Reported = map[string][]string{"node-c": {"uc"}}
			in.ReofferRequested = "node-c"
		}), reason: veltrixv1.ReasonNoMemberLost, status: metav1.ConditionFalse, disks: veltrixv1.ReasonNoDisksReturned, clearOffer: true, reoffered: "node-c"},
		{name: "not re-offered while its member is replaced", in: lostInput(func(in *LostInput) {
			delete(in.Nodes, "node-c")
			in.Lost = []veltrixv1.LostNode{replacing}
			in.Members[2] = PlacedMember{Pod: "vx-2"}
			in.ReofferRequested = "node-c"
		}), replace: "vx-2", reason: veltrixv1.ReasonReplacing, status: metav1.ConditionTrue, lost: []string{"node-c"}},
		{name: "back before anything was done: forgotten", in: lostInput(func(in *LostInput) {
			in.Automatic = false
			in.Lost = []veltrixv1.LostNode{{Node: "node-c", Reason: veltrixv1.LostNodeNotReady, Member: "vx-2"}}
		}), reason: veltrixv1.ReasonNoMemberLost, status: metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := PlanLost(tc.in)
			again := PlanLost(tc.in)
			if d.MemberLost != again.MemberLost {
				t.Errorf("not deterministic: %v vs %v", d.MemberLost, again.MemberLost)
			}
			if got := name(d.Start); got != tc.start {
				t.Errorf("Start %q, want %q", got, tc.start)
			}
			if got := name(d.Replace); got != tc.replace {
				t.Errorf("Replace %q, want %q", got, tc.replace)
			}
			if d.MemberLost.Reason != tc.reason || d.MemberLost.Status != tc.status {
				t.Errorf("MemberLost %s %s (%s), want %s %s", d.MemberLost.Status, d.MemberLost.Reason, d.MemberLost.Message, tc.status, tc.reason)
			}
			if !strings.Contains(d.MemberLost.Message, tc.msg) {
				t.Errorf("MemberLost message %q lacks %q", d.MemberLost.Message, tc.msg)
			}
			if strings.Join(d.Excluded, ",") != strings.Join(tc.lost, ",") || len(d.Lost) != len(tc.lost) {
				t.Errorf("excluded %v, lost %v, want %v", d.Excluded, d.Lost, tc.lost)
			}
			if tc.disks != "" && d.DisksReturned.Reason != tc.disks {
				t.Errorf("DisksReturned %s (%s), want %s", d.DisksReturned.Reason, d.DisksReturned.Message, tc.disks)
			}
			if d.Reoffered != tc.reoffered {
				t.Errorf("Reoffered %q, want %q", d.Reoffered, tc.reoffered)
			}
			if d.ClearReplace != tc.clearRepl || d.ClearReoffer != tc.clearOffer {
				t.Errorf("clear replace %v reoffer %v, want %v %v", d.ClearReplace, d.ClearReoffer, tc.clearRepl, tc.clearOffer)
			}
		})
	}
}

func name(r *veltrixv1.LostNode) string {
	if r == nil {
		return ""
	}
	return r.Member
}

// TestPlanLostPasses replays a replacement pass by pass, each pass fed the last one's
// status: the lost node is recorded once, with its disks, the member is started once, and
// the record ends Replaced and stays (its disks are recognised if the node comes back).
func TestPlanLostPasses(t *testing.T) {
	in := lostInput(func(in *LostInput) {
		delete(in.Nodes, "node-c")
		in.Members[2].Serving = false
	})
	starts := 0
	var reasons []string
	for pass := range 6 {
		in.Now = lostNow.Add(time.Duration(pass) * 5 * time.Second)
		d := PlanLost(in)
		if d.Start != nil {
			starts++
			// The controller marks it Replacing once the member was removed.
			for i := range d.Lost {
				if d.Lost[i].Node == d.Start.Node {
					d.Lost[i].Replacement = veltrixv1.ReplacementReplacing
				}
			}
		}
		if len(reasons) == 0 || reasons[len(reasons)-1] != d.MemberLost.Reason {
			reasons = append(reasons, d.MemberLost.Reason)
		}
		in.Lost = d.Lost
		switch pass {
		case 1: // the StatefulSet made the pod anew; its claim is bound on node-d
			in.Members[2] = PlacedMember{Pod: "vx-2", Node: "node-d", Disks: []string{"ud"}}
		case 3: // it joined and serves
			in.Members[2].Serving = true
		}
	}
	if starts != 1 {
		t.Errorf("started %d times, want once", starts)
	}
	if got := strings.Join(reasons, " -> "); got != "Replacing -> Replaced" {
		t.Errorf("MemberLost reasons %s", got)
	}
	if len(in.Lost) != 1 || in.Lost[0].Replacement != veltrixv1.ReplacementReplaced || strings.Join(in.Lost[0].Disks, ",") != "uc" ||
		!in.Lost[0].Since.Equal(&metav1.Time{Time: lostNow}) {
		t.Errorf("lost nodes %+v", in.Lost)
	}
}
