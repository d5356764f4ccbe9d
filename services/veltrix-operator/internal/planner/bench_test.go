package planner

import (
	"fmt"
	"testing"
)

// BenchmarkPlan plans a 5 -> 3 step and a converged 100-member cluster: Plan runs on every
// resync of every cluster, so it must stay far below a millisecond.
func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{5, 100} {
		b.Run(fmt.Sprintf("shrink/%d", n), func(b *testing.B) {
			in := Input{SpecSize: int32(n) - 2, ReplicationFactor: 3, StatefulSetReplicas: int32(n), ReadyPods: int32(n),
				Members: members(active(n)...), PodName: podName, MemberAddr: memberAddr}
			want := podName(int32(n) - 1)
			b.ReportAllocs()
			for b.Loop() {
				if d := Plan(in); d.Remove != want {
					b.Fatalf("Plan removes %q, want %q", d.Remove, want)
				}
			}
		})
		b.Run(fmt.Sprintf("converged/%d", n), func(b *testing.B) {
			in := Input{SpecSize: int32(n), ReplicationFactor: 3, StatefulSetReplicas: int32(n), ReadyPods: int32(n),
				Members: members(active(n)...), PodName: podName, MemberAddr: memberAddr}
			b.ReportAllocs()
			for b.Loop() {
				if d := Plan(in); !d.Converged() {
					b.Fatalf("Plan: %+v, want converged", d)
				}
			}
		})
	}
}
