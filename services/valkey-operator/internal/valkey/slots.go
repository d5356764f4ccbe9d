package valkey

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	valkeygo "github.com/valkey-io/valkey-go"
)

// SlotState is the subcommand of CLUSTER SETSLOT.
type SlotState string

// Slot states.
const (
	SlotImporting SlotState = "IMPORTING"
	SlotMigrating SlotState = "MIGRATING"
	SlotNode      SlotState = "NODE"
	SlotStable    SlotState = "STABLE"
)

// SetSlot is one CLUSTER SETSLOT Slot State [NodeID].
type SetSlot struct {
	Slot   int
	State  SlotState
	NodeID string // empty for STABLE
}

func (c *conn) SetSlotImporting(ctx context.Context, slot int, fromID string) error {
	return c.setSlot(ctx, SetSlot{Slot: slot, State: SlotImporting, NodeID: fromID})
}

func (c *conn) SetSlotMigrating(ctx context.Context, slot int, toID string) error {
	return c.setSlot(ctx, SetSlot{Slot: slot, State: SlotMigrating, NodeID: toID})
}

func (c *conn) SetSlotNode(ctx context.Context, slot int, ownerID string) error {
	return c.setSlot(ctx, SetSlot{Slot: slot, State: SlotNode, NodeID: ownerID})
}

func (c *conn) SetSlotStable(ctx context.Context, slot int) error {
	return c.setSlot(ctx, SetSlot{Slot: slot, State: SlotStable})
}

func (c *conn) MigrateSlotKeys(ctx context.Context, slot int, addr string, batch int) (int, error) {
	keys, err := c.do(ctx, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), strconv.Itoa(batch)).AsStrSlice()
	if err != nil {
		return 0, fmt.Errorf("CLUSTER GETKEYSINSLOT %d on %s: %w", slot, c.addr, err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("migrate address %q: %w", addr, err)
	}
	if err := c.do(ctx, c.migrateArgs(host, port, keys)...).Error(); err != nil {
		return 0, fmt.Errorf("MIGRATE slot %d from %s to %s: %w", slot, c.addr, addr, err)
	}
	return len(keys), nil
}

func (c *conn) migrateArgs(host, port string, keys []string) []string {
	// REPLACE makes a retried batch idempotent after an interrupted earlier attempt.
	args := []string{"MIGRATE", host, port, "", "0", "10000", "REPLACE"}
	switch {
	case c.pass != "" && c.user != "":
		args = append(args, "AUTH2", c.user, c.pass)
	case c.pass != "":
		args = append(args, "AUTH", c.pass)
	}
	return append(append(args, "KEYS"), keys...)
}

func (c *conn) MigrateSlotsKeys(ctx context.Context, slots []int, addr string, batch int) (int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("migrate address %q: %w", addr, err)
	}
	moved, pending := 0, slots
	for len(pending) > 0 {
		gets := make(valkeygo.Commands, len(pending))
		for i, s := range pending {
			gets[i] = c.c.B().Arbitrary("CLUSTER", "GETKEYSINSLOT").Args(strconv.Itoa(s), strconv.Itoa(batch)).Build()
		}
		var migrates valkeygo.Commands
		var migSlots, counts []int
		var next []int
		for i, r := range c.c.DoMulti(ctx, gets...) {
			keys, err := r.AsStrSlice()
			if err != nil {
				return moved, fmt.Errorf("CLUSTER GETKEYSINSLOT %d on %s: %w", pending[i], c.addr, err)
			}
			if len(keys) == 0 {
				continue
			}
			args := c.migrateArgs(host, port, keys)
			migrates = append(migrates, c.c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
			migSlots, counts = append(migSlots, pending[i]), append(counts, len(keys))
			// A short batch emptied the slot: a key created since would have been
			// redirected to the target by ASK, the slot being MIGRATING here.
			if len(keys) == batch {
				next = append(next, pending[i])
			}
		}
		for i, r := range c.c.DoMulti(ctx, migrates...) {
			if err := r.Error(); err != nil {
				return moved, fmt.Errorf("MIGRATE slot %d from %s to %s: %w", migSlots[i], c.addr, addr, err)
			}
			moved += counts[i]
		}
		pending = next
	}
	return moved, nil
}

// SetSlotChunk is how many CLUSTER SETSLOT commands one round trip of SetSlots carries.
// Valkey 8.0+ replicates SETSLOT to a primary's replicas and answers only once they have
// acknowledged it (up to 2 s each), so a pipeline costs one replication round trip per
// command: 4096 of them took 25 s on a loaded 2-core machine, and a chunk of 64 took more
// than the client waits for a pipeline (adminPipelineTimeout) at a load of 35, which
// closed the lane's connection mid-drain. Sixteen wait at most 32 s, within it. Redis 7.0
// answers at once; for it the chunks only add round trips.
const SetSlotChunk = 16

// SetSlotLanes is how many connections SetSlots spreads a run over when its commands all
// name different slots. The server holds each connection's next command until the
// replicas acknowledged the one before, but one replication round trip acknowledges the
// pending command of every connection at once: eight lanes wait about an eighth as long.
const SetSlotLanes = 8

func (c *conn) SetSlots(ctx context.Context, cmds ...SetSlot) (int, error) {
	if len(cmds) <= 1 {
		return c.setSlotChunks(ctx, c.c.DoMulti, cmds, 0, 1)
	}
	// The first command goes alone: a primary whose replicas do not acknowledge refuses
	// each command only once it waited for them, so a pipelined chunk would take 2 s per
	// command to be refused whole (32 s a lane), where the first alone takes 2 s.
	if n, err := c.setSlotChunks(ctx, c.c.DoMulti, cmds[:1], 0, 1); err != nil {
		return n, err
	}
	n, err := c.setSlotRun(ctx, cmds[1:])
	return 1 + n, err
}

// setSlotRun sends cmds in chunks, over lanes when their slots are distinct, and returns
// how many of them, from the start, succeeded.
func (c *conn) setSlotRun(ctx context.Context, cmds []SetSlot) (int, error) {
	chunks := (len(cmds) + SetSlotChunk - 1) / SetSlotChunk
	if chunks <= 1 || !distinctSlots(cmds) {
		return c.setSlotChunks(ctx, c.c.DoMulti, cmds, 0, 1)
	}
	// Lane l sends chunks l, l+lanes, ...; each stops at its first refusal. The run's
	// answer is the earliest refusal: every command before it was sent and applied (a
	// chunk before it either ran whole on its lane or holds an earlier refusal).
	lanes := min(SetSlotLanes, chunks)
	failedAt := make([]int, lanes)
	errs := make([]error, lanes)
	var wg sync.WaitGroup
	for l := range lanes {
		wg.Go(func() {
			failedAt[l] = len(cmds)
			err := c.c.Dedicated(func(d valkeygo.DedicatedClient) error {
				n, err := c.setSlotChunks(ctx, d.DoMulti, cmds, l, lanes)
				failedAt[l] = n
				return err
			})
			if err != nil && failedAt[l] == len(cmds) { // no connection for the lane
				failedAt[l] = l * SetSlotChunk
			}
			errs[l] = err
		})
	}
	wg.Wait()
	first := 0
	for l := range lanes {
		if failedAt[l] < failedAt[first] {
			first = l
		}
	}
	if errs[first] != nil {
		return failedAt[first], errs[first]
	}
	return len(cmds), nil
}

// setSlotChunks sends chunks lane, lane+lanes, ... of cmds through doMulti and returns
// len(cmds) when all were applied, else the index of the first refused command.
func (c *conn) setSlotChunks(ctx context.Context, doMulti func(context.Context, ...valkeygo.Completed) []valkeygo.ValkeyResult, cmds []SetSlot, lane, lanes int) (int, error) {
	for start := lane * SetSlotChunk; start < len(cmds); start += lanes * SetSlotChunk {
		chunk := cmds[start:min(start+SetSlotChunk, len(cmds))]
		multi := make(valkeygo.Commands, len(chunk))
		for i, x := range chunk {
			multi[i] = c.c.B().Arbitrary("CLUSTER", "SETSLOT").Args(x.args()...).Build()
		}
		// A failed chunk ends the lane: the later commands are not sent (they would each
		// wait out the same missing acknowledgement), and the next observation shows what
		// was applied.
		for i, r := range doMulti(ctx, multi...) {
			if err := r.Error(); err != nil && (chunk[i].State != SlotNode || !replicaRefusal(err)) {
				return start + i, &SetSlotError{Addr: c.addr, Cmd: chunk[i], Err: err}
			}
		}
	}
	return len(cmds), nil
}

// distinctSlots reports whether no two commands name the same slot: only then may they
// run in any order.
func distinctSlots(cmds []SetSlot) bool {
	seen := make(map[int]bool, len(cmds))
	for _, x := range cmds {
		if seen[x.Slot] {
			return false
		}
		seen[x.Slot] = true
	}
	return true
}

// args are the command's arguments after CLUSTER SETSLOT.
func (x SetSlot) args() []string {
	args := []string{strconv.Itoa(x.Slot), string(x.State)}
	if x.NodeID != "" {
		args = append(args, x.NodeID)
	}
	return args
}

// setSlot sends one CLUSTER SETSLOT.
func (c *conn) setSlot(ctx context.Context, x SetSlot) error {
	if err := c.c.Do(ctx, c.c.B().Arbitrary("CLUSTER", "SETSLOT").Args(x.args()...).Build()).Error(); err != nil {
		return &SetSlotError{Addr: c.addr, Cmd: x, Err: err}
	}
	return nil
}

// SetSlotError is a member's refusal of a CLUSTER SETSLOT (or the failure to send it).
type SetSlotError struct {
	Addr string
	Cmd  SetSlot
	Err  error
}

func (e *SetSlotError) Error() string {
	return fmt.Sprintf("CLUSTER SETSLOT %d %s on %s: %v", e.Cmd.Slot, e.Cmd.State, e.Addr, e.Err)
}

func (e *SetSlotError) Unwrap() error { return e.Err }

// ReplicasBehind reports a primary's refusal of a CLUSTER SETSLOT its replicas did not
// acknowledge in time: Valkey 8.0+ sends the command to every online replica first and
// applies it only once they all have it, waiting 2 s by default. The command was not
// applied and can be sent again; it says a replica is slow (loading what a sync sent it,
// a congested link, an overloaded host), not that the move is wrong.
// It returns the primary that refused.
func ReplicasBehind(err error) (primary string, ok bool) {
	var se *SetSlotError
	var ve *valkeygo.ValkeyError
	if errors.As(err, &se) && errors.As(se.Err, &ve) && strings.HasPrefix(ve.Error(), "NOREPLICAS") {
		return se.Addr, true
	}
	return "", false
}

// replicaRefusal reports the server's answer to CLUSTER SETSLOT on a replica. For SETSLOT
// NODE it means the member turned replica while the run was on its way (the source of a
// move gave its last slot away and now follows the new owner): a replica takes its slot
// map from its primary, so the command is moot there rather than a failed pass.
func replicaRefusal(err error) bool {
	return strings.Contains(err.Error(), "SETSLOT only with masters") || strings.Contains(err.Error(), "SETSLOT only with primaries")
}
