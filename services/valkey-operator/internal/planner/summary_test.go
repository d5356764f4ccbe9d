package planner

import (
	"reflect"
	"testing"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

func TestSummarize(t *testing.T) {
	r := []valkey.SlotRange{{Start: 0, End: 5461}}
	steps := []Step{
		{Op: Meet, On: "a", Addr: "c"}, {Op: Meet, On: "a", Addr: "b"}, {Op: Meet, On: "b", Addr: "a"},
		{Op: AddSlots, On: "a", NodeID: "ida", Ranges: r},
		{Op: Replicate, On: "d", NodeID: "ida"},
		{Op: SetSlotImporting, On: "b", Slot: 1, NodeID: "ida"},
		{Op: MigrateKeys, On: "a", Addr: "b", Slot: 1}, {Op: SetSlotNode, On: "b", Slot: 1, NodeID: "idb"},
		{Op: MigrateKeys, On: "a", Addr: "b", Slot: 2},
		{Op: MigrateKeys, On: "x", Addr: "b", Slot: 9, Drain: true},
		{Op: Forget, On: "a", NodeID: "idx"}, {Op: Forget, On: "b", NodeID: "idx"},
		{Op: Takeover, On: "e", NodeID: "idf"},
		{Op: Reset, On: "g"},
	}
	want := Summary{
		Met:       []string{"a", "b", "c"},
		Primaries: []AssignedPrimary{{Addr: "a", NodeID: "ida", Ranges: r}},
		Replicas:  []AttachedReplica{{Addr: "d", PrimaryID: "ida"}},
		Moves:     []SlotTransfer{{From: "a", To: "b", Slots: 2}, {From: "x", To: "b", Slots: 1, Drain: true}},
		Forgotten: []string{"idx"},
		TakenOver: []TakenOver{{Addr: "e", PrimaryID: "idf"}},
		Reset:     []string{"g"},
	}
	got := Summarize(steps)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Summarize =\n%+v\nwant\n%+v", got, want)
	}
	if got.Empty() || !Summarize(nil).Empty() || !Summarize([]Step{{Op: SetSlotStable, On: "a"}}).Empty() {
		t.Fatal("Empty")
	}
}
