package planner

import (
	"sort"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// Summary is what a run of completed steps did, grouped the way the cluster's events
// report it (ClusterMeetBatch, PrimaryCreated, ReplicaCreated, SlotsRebalancing,
// SlotsDraining, StaleNodeForgotten, ReplicasTakenOver).
type Summary struct {
	// Met are the addresses introduced by CLUSTER MEET, sorted, each once.
	Met []string
	// Primaries got slots by ADDSLOTSRANGE, in step order.
	Primaries []AssignedPrimary
	// Replicas were attached by CLUSTER REPLICATE, in step order.
	Replicas []AttachedReplica
	// Moves are slot moves whose keys were migrated, one entry per source and target
	// pair, in order of first appearance.
	Moves []SlotTransfer
	// Forgotten are the node ids CLUSTER FORGET removed from at least one member, sorted.
	Forgotten []string
	// TakenOver are replicas promoted by CLUSTER FAILOVER TAKEOVER, in step order.
	TakenOver []TakenOver
	// Reset are the members reset to empty primaries, in step order.
	Reset []string
	// EpochBumped are the members that ran CLUSTER BUMPEPOCH for a takeover the other
	// members did not accept, with the failed primary whose slots it was about.
	EpochBumped []TakenOver
}

// AssignedPrimary is a member given slots.
type AssignedPrimary struct {
	Addr, NodeID string
	Ranges       []valkey.SlotRange
}

// AttachedReplica is a member made a replica of PrimaryID.
type AttachedReplica struct {
	Addr, PrimaryID string
}

// SlotTransfer counts slots moved from one member's address to another's.
type SlotTransfer struct {
	From, To string
	Slots    int
	// Drain: the source is leaving the cluster (SlotsDraining rather than SlotsRebalancing).
	Drain bool
}

// TakenOver is a replica that took over from its failed primary.
type TakenOver struct {
	Addr, PrimaryID string
}

// Empty reports a summary of no steps worth an event.
func (s Summary) Empty() bool {
	return len(s.Met)+len(s.Primaries)+len(s.Replicas)+len(s.Moves)+len(s.Forgotten)+len(s.TakenOver)+len(s.Reset) == 0
}

// Summarize groups completed steps (Run's steps[:n]) for events. A slot counts as moved
// once its MigrateKeys step completed.
func Summarize(steps []Step) Summary {
	var out Summary
	met, forgot := map[string]bool{}, map[string]bool{}
	moveAt := map[[2]string]int{}
	for _, s := range steps {
		switch s.Op {
		case Meet:
			met[s.Addr] = true
		case AddSlots:
			out.Primaries = append(out.Primaries, AssignedPrimary{Addr: s.On, NodeID: s.NodeID, Ranges: s.Ranges})
		case Replicate:
			out.Replicas = append(out.Replicas, AttachedReplica{Addr: s.On, PrimaryID: s.NodeID})
		case MigrateKeys:
			k := [2]string{s.On, s.Addr}
			i, ok := moveAt[k]
			if !ok {
				i = len(out.Moves)
				moveAt[k] = i
				out.Moves = append(out.Moves, SlotTransfer{From: s.On, To: s.Addr, Drain: s.Drain})
			}
			out.Moves[i].Slots++
		case Forget:
			forgot[s.NodeID] = true
		case Takeover:
			out.TakenOver = append(out.TakenOver, TakenOver{Addr: s.On, PrimaryID: s.NodeID})
		case Reset:
			out.Reset = append(out.Reset, s.On)
		case BumpEpoch:
			out.EpochBumped = append(out.EpochBumped, TakenOver{Addr: s.On, PrimaryID: s.NodeID})
		}
	}
	out.Met, out.Forgotten = sortedKeys(met), sortedKeys(forgot)
	return out
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
