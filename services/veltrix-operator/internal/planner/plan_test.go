package planner

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
)

func podName(i int32) string { return fmt.Sprintf("vx-%d", i) }

func memberAddr(i int32) string { return podName(i) + ".vx-headless:9000" }

// members builds a member list: one entry per "ordinal:state" ("3:leaving"), or a bare id
// for a member named after no ordinal.
func members(specs ...string) []veltrix.Member {
	out := []veltrix.Member{}
	for _, s := range specs {
		id, state, ok := strings.Cut(s, ":")
		if !ok {
			state = string(veltrix.MemberActive)
		}
		if _, err := fmt.Sscan(id, new(int)); err == nil {
			id = "vx-" + id
		}
		out = append(out, veltrix.Member{ID: id, Addr: id + ":9000", State: veltrix.MemberState(state)})
	}
	return out
}

func active(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "no StatefulSet yet: create it at the wanted size",
			in:   Input{SpecSize: 3, ReplicationFactor: 2},
			want: Decision{Replicas: 3, Reason: ReasonScaling, Waiting: "scaling up to 3 members"},
		},
		{
			name: "grow at once, not one at a time",
			in:   Input{SpecSize: 5, ReplicationFactor: 2, StatefulSetReplicas: 3, ReadyPods: 3, Members: members(active(3)...)},
			want: Decision{Replicas: 5, Reason: ReasonScaling, Waiting: "scaling up to 5 members"},
		},
		{
			name: "grow without knowing the members: growing needs none",
			in:   Input{SpecSize: 5, ReplicationFactor: 2, StatefulSetReplicas: 3},
			want: Decision{Replicas: 5, Reason: ReasonScaling, Waiting: "scaling up to 5 members"},
		},
		{
			name: "grown StatefulSet whose new pods have not joined",
			in:   Input{SpecSize: 5, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 3, Members: members("0", "1", "2", "3:joining")},
			want: Decision{Replicas: 5, Reason: ReasonScaling, Waiting: "waiting for 2 of 5 members to join"},
		},
		{
			name: "converged",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 3, ReadyPods: 3, Members: members(active(3)...)},
			want: Decision{Replicas: 3},
		},
		{
			name: "a member named after no ordinal is left alone",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 3, ReadyPods: 3, Members: members("0", "1", "2", "added-by-hand")},
			want: Decision{Replicas: 3},
		},
		{
			name: "members unknown at the wanted size: hold",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 3, ReadyPods: 0},
			want: Decision{Replicas: 3, Reason: ReasonMembersUnknown, Waiting: "membership unknown: no ready pod answered GET /admin/cluster/members"},
		},
		{
			name: "members unknown while shrinking: hold, remove nothing, lower nothing",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 5},
			want: Decision{Replicas: 5, Reason: ReasonMembersUnknown, Waiting: "membership unknown: no ready pod answered GET /admin/cluster/members"},
		},
		{
			name: "shrink: remove the highest ordinal's member first, StatefulSet unchanged",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 5, Members: members(active(5)...)},
			want: Decision{Replicas: 5, Remove: "vx-4", Reason: ReasonRemoving, Waiting: "removing member vx-4 to shrink to 3 members"},
		},
		{
			name: "shrink: while it is leaving, hold and say who",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 5, Members: members("0", "1", "2", "3", "4:leaving")},
			want: Decision{Replicas: 5, Leaving: "vx-4", Removal: Removal{Member: "vx-4"}, Reason: ReasonRemoving, Waiting: "member vx-4 is leaving; waiting until its data has moved"},
		},
		{
			name: "shrink: once it is gone, lower by one",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 5, Members: members(active(4)...)},
			want: Decision{Replicas: 4, Reason: ReasonRemoving, Waiting: "member vx-4 left; lowering the StatefulSet to 4 replicas"},
		},
		{
			name: "shrink: lowered by one, the next member goes",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members(active(4)...)},
			want: Decision{Replicas: 4, Remove: "vx-3", Reason: ReasonRemoving, Waiting: "removing member vx-3 to shrink to 3 members"},
		},
		{
			name: "shrink: one pod at a time even when several pods never joined",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 3, Members: members(active(3)...)},
			want: Decision{Replicas: 4, Reason: ReasonRemoving, Waiting: "member vx-4 left; lowering the StatefulSet to 4 replicas"},
		},
		{
			name: "shrink: a pod not Ready holds the removal",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 4, Members: members(active(5)...)},
			want: Decision{Replicas: 5, Reason: ReasonRemoving, Waiting: "waiting for all 5 pods to be ready before removing member vx-4"},
		},
		{
			name: "shrink: a joining member holds the removal",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 5, Members: members("0", "1", "2", "3", "4:joining")},
			want: Decision{Replicas: 5, Reason: ReasonRemoving, Waiting: "waiting for 1 joining members before removing member vx-4"},
		},
		{
			name: "shrink: another member leaving holds the removal",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 5, Members: members("0", "1:leaving", "2", "3", "4")},
			want: Decision{Replicas: 5, Leaving: "vx-1", Removal: Removal{Member: "vx-1"}, Reason: ReasonRemoving, Waiting: "member vx-1 is leaving; waiting until its data has moved"},
		},
		{
			name: "never below replicationFactor: spec.size below it keeps replicationFactor members",
			in:   Input{SpecSize: 2, ReplicationFactor: 3, StatefulSetReplicas: 3, ReadyPods: 3, Members: members(active(3)...)},
			want: Decision{Replicas: 3, Reason: ReasonBelowReplicationFactor, Waiting: "spec.size 2 is below replicationFactor 3; keeping 3 members"},
		},
		{
			name: "never below replicationFactor: shrinking stops there",
			in:   Input{SpecSize: 1, ReplicationFactor: 3, StatefulSetReplicas: 4, ReadyPods: 4, Members: members(active(4)...)},
			want: Decision{Replicas: 4, Remove: "vx-3", Reason: ReasonRemoving, Waiting: "removing member vx-3 to shrink to 3 members"},
		},
		{
			name: "never below replicationFactor: a StatefulSet below it grows",
			in:   Input{SpecSize: 1, ReplicationFactor: 3, StatefulSetReplicas: 2, ReadyPods: 2, Members: members(active(2)...)},
			want: Decision{Replicas: 3, Reason: ReasonScaling, Waiting: "scaling up to 3 members"},
		},
		{
			name: "replicationFactor 0 counts as 1",
			in:   Input{SpecSize: 1, StatefulSetReplicas: 2, ReadyPods: 2, Members: members(active(2)...)},
			want: Decision{Replicas: 2, Remove: "vx-1", Reason: ReasonRemoving, Waiting: "removing member vx-1 to shrink to 1 members"},
		},
		{
			name: "a member whose pod is gone is removed",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 3, ReadyPods: 3, Members: members("0", "1", "2", "3")},
			want: Decision{Replicas: 3, Remove: "vx-3", Reason: ReasonRemoving, Waiting: "removing member vx-3 whose pod no longer exists"},
		},
		{
			name: "members whose pods are gone go highest first, before the StatefulSet's own",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "1", "2", "3", "5", "4")},
			want: Decision{Replicas: 4, Remove: "vx-5", Reason: ReasonRemoving, Waiting: "removing member vx-5 whose pod no longer exists"},
		},
		{
			name: "leaving within StuckAfter: still Removing",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "1", "2", "3:leaving"),
				Removal: Removal{Member: "vx-3", Since: t0}, Now: t0.Add(DefaultStuckAfter)},
			want: Decision{Replicas: 4, Leaving: "vx-3", Removal: Removal{Member: "vx-3", Since: t0}, Reason: ReasonRemoving, Waiting: "member vx-3 is leaving; waiting until its data has moved"},
		},
		{
			name: "leaving longer than StuckAfter: RemovalStuck, StatefulSet not shrunk",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "1", "2", "3:leaving"),
				Removal: Removal{Member: "vx-3", Since: t0}, Now: t0.Add(DefaultStuckAfter + time.Second)},
			want: Decision{Replicas: 4, Leaving: "vx-3", Removal: Removal{Member: "vx-3", Since: t0}, Reason: ReasonRemovalStuck, Waiting: "member vx-3 has been leaving for more than 15m0s; its data has not finished moving"},
		},
		{
			name: "StuckAfter set by the caller",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "1", "2", "3:leaving"),
				Removal: Removal{Member: "vx-3", Since: t0}, Now: t0.Add(2 * time.Minute), StuckAfter: time.Minute},
			want: Decision{Replicas: 4, Leaving: "vx-3", Removal: Removal{Member: "vx-3", Since: t0}, Reason: ReasonRemovalStuck, Waiting: "member vx-3 has been leaving for more than 1m0s; its data has not finished moving"},
		},
		{
			name: "no removal record: one starts now, not stuck",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "1", "2", "3:leaving"),
				Now: t0.Add(24 * time.Hour)},
			want: Decision{Replicas: 4, Leaving: "vx-3", Removal: Removal{Member: "vx-3", Since: t0.Add(24 * time.Hour)}, Reason: ReasonRemoving,
				Waiting: "member vx-3 is leaving; waiting until its data has moved"},
		},
		{
			name: "the record names another member: a new record starts now, not stuck",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "1", "2", "3:leaving"),
				Removal: Removal{Member: "vx-4", Since: t0}, Now: t0.Add(time.Hour)},
			want: Decision{Replicas: 4, Leaving: "vx-3", Removal: Removal{Member: "vx-3", Since: t0.Add(time.Hour)}, Reason: ReasonRemoving,
				Waiting: "member vx-3 is leaving; waiting until its data has moved"},
		},
		{
			// The record is all a restarted operator knows: it comes back from the status.
			name: "a recorded removal past StuckAfter is stuck on the first pass that sees it",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "1", "2", "3:leaving"),
				Removal: Removal{Member: "vx-3", Since: t0}, Now: t0.Add(16 * time.Minute)},
			want: Decision{Replicas: 4, Leaving: "vx-3", Removal: Removal{Member: "vx-3", Since: t0}, Reason: ReasonRemovalStuck,
				Waiting: "member vx-3 has been leaving for more than 15m0s; its data has not finished moving"},
		},
		{
			name: "members unknown: the record is kept",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 0,
				Removal: Removal{Member: "vx-3", Since: t0}, Now: t0.Add(time.Hour)},
			want: Decision{Replicas: 4, Removal: Removal{Member: "vx-3", Since: t0}, Reason: ReasonMembersUnknown,
				Waiting: "membership unknown: no ready pod answered GET /admin/cluster/members"},
		},
		{
			name: "the member left: the record is cleared",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members(active(3)...),
				Removal: Removal{Member: "vx-3", Since: t0}, Now: t0.Add(time.Minute)},
			want: Decision{Replicas: 3, Reason: ReasonRemoving, Waiting: "member vx-3 left; lowering the StatefulSet to 3 replicas"},
		},
		{
			name: "growing while a member leaves: grow, and keep reporting who leaves",
			in:   Input{SpecSize: 5, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "1", "2", "3:leaving")},
			want: Decision{Replicas: 5, Leaving: "vx-3", Removal: Removal{Member: "vx-3"}, Reason: ReasonScaling, Waiting: "scaling up to 5 members"},
		},
		{
			name: "a Ready pod the cluster keeps without its member: added back",
			in: Input{SpecSize: 5, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 5, Members: members("0", "1", "2", "4"),
				MemberAddr: memberAddr},
			want: Decision{Replicas: 5, Add: veltrix.Member{ID: "vx-3", Addr: "vx-3.vx-headless:9000"}, Reason: ReasonScaling,
				Waiting: "adding member vx-3 back: its pod runs but it is no member"},
		},
		{
			name: "added back before the StatefulSet shrinks",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "2", "3"),
				MemberAddr: memberAddr},
			want: Decision{Replicas: 4, Add: veltrix.Member{ID: "vx-1", Addr: "vx-1.vx-headless:9000"}, Reason: ReasonScaling,
				Waiting: "adding member vx-1 back: its pod runs but it is no member"},
		},
		{
			name: "not added back while a pod is not Ready (it may be starting and join by itself)",
			in: Input{SpecSize: 5, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 4, Members: members("0", "1", "2", "4"),
				MemberAddr: memberAddr},
			want: Decision{Replicas: 5, Reason: ReasonScaling, Waiting: "waiting for 1 of 5 members to join"},
		},
		{
			name: "not added back while another member joins",
			in: Input{SpecSize: 5, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 5, Members: members("0", "1", "2", "4:joining"),
				MemberAddr: memberAddr},
			want: Decision{Replicas: 5, Reason: ReasonScaling, Waiting: "waiting for 2 of 5 members to join"},
		},
		{
			name: "without MemberAddr, never added back",
			in:   Input{SpecSize: 5, ReplicationFactor: 2, StatefulSetReplicas: 5, ReadyPods: 5, Members: members("0", "1", "2", "4")},
			want: Decision{Replicas: 5, Reason: ReasonScaling, Waiting: "waiting for 1 of 5 members to join"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.PodName = podName
			got := Plan(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plan:\n got %+v\nwant %+v", got, tc.want)
			}
			if got.Converged() != (tc.want.Reason == "") {
				t.Errorf("Converged() = %v with reason %q", got.Converged(), got.Reason)
			}
		})
	}
}

// TestPlanUnreachableVersusDown: a serving pod the operator cannot reach holds every
// membership change, even with the member list read from another member (only the
// operator's view is incomplete: the pod is Ready, the member may well serve); a member that
// is down (its pod not Ready) holds removals only, as before, and is never removed, added
// back or reported unreachable for it.
func TestPlanUnreachableVersusDown(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	cut := map[string]string{"vx-2": "no answer within 5s"}
	held := "the operator cannot reach 1 serving member(s): vx-2 (no answer within 5s); it changes no membership until they answer"
	cases := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "shrink due, the victim unreachable: no DELETE",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members(active(4)...), Unreachable: map[string]string{"vx-3": "no answer within 5s"}},
			want: Decision{Replicas: 4, Reason: ReasonMembersUnreachable, Unreachable: []string{"vx-3"},
				Waiting: "the operator cannot reach 1 serving member(s): vx-3 (no answer within 5s); it changes no membership until they answer"},
		},
		{
			name: "shrink due, another member unreachable: no DELETE either",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members(active(4)...), Unreachable: cut},
			want: Decision{Replicas: 4, Reason: ReasonMembersUnreachable, Unreachable: []string{"vx-2"}, Waiting: held},
		},
		{
			name: "shrink due, a member down (pod not Ready): the removal waits for it, as before",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 3, Members: members(active(4)...)},
			want: Decision{Replicas: 4, Reason: ReasonRemoving, Waiting: "waiting for all 4 pods to be ready before removing member vx-3"},
		},
		{
			name: "a member missing while a pod is unreachable: not added back",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 3, ReadyPods: 3, Members: members("0", "1"),
				MemberAddr: memberAddr, Unreachable: cut},
			want: Decision{Replicas: 3, Reason: ReasonMembersUnreachable, Unreachable: []string{"vx-2"}, Waiting: held},
		},
		{
			name: "a removal under way keeps its record while held",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 4, ReadyPods: 4, Members: members("0", "1", "2", "3:leaving"),
				Unreachable: cut, Removal: Removal{Member: "vx-3", Since: t0}, Now: t0.Add(time.Hour), StuckAfter: time.Minute},
			want: Decision{Replicas: 4, Reason: ReasonMembersUnreachable, Unreachable: []string{"vx-2"}, Waiting: held,
				Leaving: "vx-3", Removal: Removal{Member: "vx-3", Since: t0}},
		},
		{
			name: "every serving pod unreachable, members unknown: held, the record kept",
			in: Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 3, ReadyPods: 3,
				Unreachable: map[string]string{"vx-0": "no answer within 5s", "vx-1": "no answer within 5s", "vx-2": "connection refused"},
				Removal:     Removal{Member: "vx-3", Since: t0}},
			want: Decision{Replicas: 3, Reason: ReasonMembersUnreachable, Unreachable: []string{"vx-0", "vx-1", "vx-2"},
				Waiting: "the operator cannot reach 3 serving member(s): vx-0 (no answer within 5s), vx-1 (no answer within 5s), vx-2 (connection refused); it changes no membership until they answer",
				Removal: Removal{Member: "vx-3", Since: t0}},
		},
		{
			name: "growing needs no member: it goes on while one is unreachable",
			in:   Input{SpecSize: 5, ReplicationFactor: 2, StatefulSetReplicas: 3, ReadyPods: 3, Members: members(active(3)...), Unreachable: cut},
			want: Decision{Replicas: 5, Reason: ReasonScaling, Waiting: "scaling up to 5 members"},
		},
		{
			name: "converged but a member unreachable: not converged, nothing to do",
			in:   Input{SpecSize: 3, ReplicationFactor: 2, StatefulSetReplicas: 3, ReadyPods: 3, Members: members(active(3)...), Unreachable: cut},
			want: Decision{Replicas: 3, Reason: ReasonMembersUnreachable, Unreachable: []string{"vx-2"}, Waiting: held},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.PodName = podName
			got := Plan(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plan:\n got %+v\nwant %+v", got, tc.want)
			}
			if got.Remove != "" || got.Add.ID != "" || got.Replicas < tc.in.StatefulSetReplicas {
				t.Errorf("Plan changed the membership: %+v", got)
			}
		})
	}
}
