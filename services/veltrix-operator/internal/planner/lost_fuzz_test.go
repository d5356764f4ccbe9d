package planner

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/shared/fuzzinput"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var fuzzReplacements = []string{"", veltrixv1.ReplacementReplacing, veltrixv1.ReplacementReplaced}

// FuzzPlanLost decides from arbitrary observations: up to six members on up to six nodes
// (or none bound), each node ready, NotReady for some time or deleted, a stored list of lost
// nodes in any replacement state, annotations naming anything. PlanLost must not panic,
// must be deterministic and must keep checkLostDecision: above all, never start a
// replacement that the rules refuse.
func FuzzPlanLost(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{2, 1, 2, 3, 1, 1, 2, 1, 3, 0, 0, 1, 2, 0, 0})
	f.Add([]byte{2, 0, 1, 3, 1, 1, 2, 1, 3, 2, 1, 1, 2, 1, 1, 1, 2, 4, 3})
	f.Add([]byte{1, 1, 0, 2, 1, 1, 2, 0, 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := decodeLostInput(fuzzinput.New(raw))
		d := PlanLost(in)
		if again := PlanLost(in); !reflect.DeepEqual(d, again) {
			t.Fatalf("two decisions from one input: %+v, %+v", d, again)
		}
		checkLostDecision(t, in, d)
	})
}

func decodeLostInput(s *fuzzinput.Bytes) LostInput {
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	in := LostInput{Now: now, ReplicationFactor: int32(s.Next() % 5), Automatic: s.Next()%2 == 1,
		GracePeriod: time.Duration(s.Next()%4) * time.Minute, Nodes: map[string]NodeState{}}
	node := func(b int) string {
		if b%7 == 6 {
			return ""
		}
		return fmt.Sprintf("n%d", b%7)
	}
	for i := range s.Next() % 7 {
		in.Members = append(in.Members, PlacedMember{Pod: fmt.Sprintf("vx-%d", i), Node: node(s.Next()),
			Disks: []string{fmt.Sprintf("u%d", i)}, Serving: s.Next()%2 == 1})
	}
	for i := range 6 {
		switch s.Next() % 3 {
		case 0:
			in.Nodes[fmt.Sprintf("n%d", i)] = NodeState{Health: NodeReady}
		case 1:
			in.Nodes[fmt.Sprintf("n%d", i)] = NodeState{Health: NodeNotReady, NotReadySince: now.Add(-time.Duration(s.Next()%5) * time.Minute)}
		}
	}
	seen := map[string]bool{}
	for range s.Next() % 4 {
		n := node(s.Next())
		member := fmt.Sprintf("vx-%d", s.Next()%7)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		r := veltrixv1.LostNode{Node: n, Reason: veltrixv1.LostNodeDeleted, Since: metav1.NewTime(now.Add(-time.Hour)), Member: member,
			Replacement: fuzzReplacements[s.Next()%3]}
		if s.Next()%2 == 1 {
			r.ReturnedDisks = []string{"old"}
		}
		in.Lost = append(in.Lost, r)
	}
	if x := s.Next() % 8; x < 7 {
		in.ReplaceRequested = fmt.Sprintf("vx-%d", x)
	}
	if x := s.Next() % 8; x < 7 {
		in.ReofferRequested = node(x)
	}
	if s.Next()%2 == 1 {
		in.Reported = map[string][]string{}
		for i := range 6 {
			if s.Next()%2 == 1 {
				in.Reported[fmt.Sprintf("n%d", i)] = []string{"u", "a"}
			}
		}
	}
	return in
}

// checkLostDecision holds for every decision.
func checkLostDecision(t *testing.T, in LostInput, d LostDecision) {
	t.Helper()
	var nodes []string
	open := 0
	for _, r := range d.Lost {
		nodes = append(nodes, r.Node)
		if r.Replacement != veltrixv1.ReplacementReplaced {
			open++
		}
		if _, exists := in.Nodes[r.Node]; r.Replacement != "" || !exists {
			continue
		}
		if in.Nodes[r.Node].Health == NodeReady {
			t.Fatalf("node %s is Ready but listed lost with nothing done: %+v", r.Node, d.Lost)
		}
	}
	if !sort.StringsAreSorted(nodes) || len(slices.Compact(slices.Clone(nodes))) != len(nodes) {
		t.Fatalf("lost nodes not sorted or not unique: %v", nodes)
	}
	if !reflect.DeepEqual(nodes, d.Excluded) {
		t.Fatalf("excluded %v, listed %v", d.Excluded, nodes)
	}
	if d.Start != nil && d.Replace != nil {
		t.Fatalf("a replacement starts (%s) while another goes on (%s)", d.Start.Member, d.Replace.Member)
	}
	if d.Blocking() != (d.MemberLost.Status == metav1.ConditionTrue) {
		t.Fatalf("Blocking %v with MemberLost %s", d.Blocking(), d.MemberLost.Status)
	}
	switch d.MemberLost.Reason {
	case veltrixv1.ReasonNoMemberLost, veltrixv1.ReasonReplaced:
		if d.MemberLost.Status != metav1.ConditionFalse {
			t.Fatalf("MemberLost %s %s", d.MemberLost.Status, d.MemberLost.Reason)
		}
	case veltrixv1.ReasonNodeNotReady, veltrixv1.ReasonReplacementManual, veltrixv1.ReasonReplacementRefused, veltrixv1.ReasonReplacing:
		if d.MemberLost.Status != metav1.ConditionTrue {
			t.Fatalf("MemberLost %s %s", d.MemberLost.Status, d.MemberLost.Reason)
		}
	default:
		t.Fatalf("MemberLost reason %q", d.MemberLost.Reason)
	}
	if r := d.Replace; r != nil {
		i := slices.IndexFunc(d.Lost, func(l veltrixv1.LostNode) bool { return l.Node == r.Node })
		if i < 0 || d.Lost[i].Replacement != veltrixv1.ReplacementReplacing || d.MemberLost.Reason != veltrixv1.ReasonReplacing {
			t.Fatalf("Replace %+v not Replacing in %+v (%s)", *r, d.Lost, d.MemberLost.Reason)
		}
	}
	r := d.Start
	if r == nil {
		return
	}
	// Starting is the one step that loses the member's copy: every rule must allow it.
	switch {
	case in.ReplicationFactor <= 1:
		t.Fatalf("started %s with replicationFactor %d", r.Member, in.ReplicationFactor)
	case int32(open) >= in.ReplicationFactor:
		t.Fatalf("started %s with %d members lost, replicationFactor %d", r.Member, open, in.ReplicationFactor)
	case !in.Automatic && in.ReplaceRequested != r.Member:
		t.Fatalf("started %s with Manual and the annotation naming %q", r.Member, in.ReplaceRequested)
	case !d.ClearReplace && in.ReplaceRequested == r.Member:
		t.Fatalf("started %s without clearing the annotation that asked for it", r.Member)
	}
	for _, l := range d.Lost {
		if l.Replacement == veltrixv1.ReplacementReplacing {
			t.Fatalf("started %s while %s is Replacing", r.Member, l.Member)
		}
	}
	for _, m := range in.Members {
		lost := slices.ContainsFunc(d.Lost, func(l veltrixv1.LostNode) bool {
			return l.Member == m.Pod && l.Replacement != veltrixv1.ReplacementReplaced
		})
		if !m.Serving && !lost {
			t.Fatalf("started %s while %s does not serve", r.Member, m.Pod)
		}
	}
	i := slices.IndexFunc(d.Lost, func(l veltrixv1.LostNode) bool { return l.Node == r.Node })
	if i < 0 || d.Lost[i].Replacement != "" || d.MemberLost.Reason != veltrixv1.ReasonReplacing {
		t.Fatalf("Start %+v is not a listed, untouched lost node in %+v", *r, d.Lost)
	}
}
