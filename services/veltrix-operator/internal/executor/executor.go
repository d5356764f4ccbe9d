// Package executor carries out package planner's membership decisions against VeltrixDB's
// admin API (through veltrix.Admin), one pass at a time, and probes whether a member's
// search index is ready.
package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/opsuite/suite/services/veltrix-operator/internal/planner"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
)

// ErrNoAdminAddr: Step was given no ready pod to ask.
var ErrNoAdminAddr = errors.New("no ready pod to ask for the members")

// Step runs one pass: it reads the members from the first of in.AdminAddrs that answers
// (in.Members is replaced), plans, and sends at most one DELETE (Decision.Remove) or POST
// (Decision.Add) to that same pod.
//
// The Decision is always valid and meant to be applied, errors or not. The error is
// non-nil only when the admin API could not be asked: no address answered the member list
// (the Decision then holds, ReasonMembersUnknown, unless growing), or the DELETE failed
// without an answer or for want of authorization (the Decision holds, ReasonRemoving).
// Callers log or report it and requeue after a delay rather than return it as a
// reconcile error. A DELETE the server declines is not an error: Reason is
// RemovalRefused, Detail the server's message, and Replicas stays.
func Step(ctx context.Context, admin veltrix.Admin, in planner.Input) (planner.Decision, error) {
	members, addr, readErr := readMembers(ctx, admin, in.AdminAddrs)
	in.Members = members
	d := planner.Plan(in)
	if readErr != nil {
		return d, readErr
	}
	if d.Add.ID != "" {
		return addBack(ctx, admin, addr, d)
	}
	if d.Remove == "" {
		return d, nil
	}
	err := admin.RemoveMember(ctx, addr, d.Remove)
	switch {
	case err == nil:
		return planner.RemovalAccepted(in, d), nil
	case errors.Is(err, veltrix.ErrNotFound):
		// Gone already (another pass or a person removed it): the next pass lowers.
		d.Waiting = fmt.Sprintf("member %s left; the StatefulSet shrinks next", d.Remove)
		return d, nil
	case errors.Is(err, veltrix.ErrRefused):
		d.Reason = planner.ReasonRemovalRefused
		d.Waiting = fmt.Sprintf("the server refused to remove member %s; the StatefulSet is not shrunk", d.Remove)
		d.Detail = veltrix.ServerMessage(err)
		return d, nil
	default:
		return d, err
	}
}

func addBack(ctx context.Context, admin veltrix.Admin, addr string, d planner.Decision) (planner.Decision, error) {
	err := admin.AddMember(ctx, addr, d.Add)
	switch {
	case err == nil:
		return d, nil
	case errors.Is(err, veltrix.ErrRefused):
		// Still Scaling: the next pass sees whether it joined some other way.
		d.Waiting = fmt.Sprintf("the server refused to add member %s back", d.Add.ID)
		d.Detail = veltrix.ServerMessage(err)
		return d, nil
	default:
		return d, err
	}
}

// readMembers asks each address in turn and returns the first answer and who gave it.
func readMembers(ctx context.Context, admin veltrix.Admin, addrs []string) ([]veltrix.Member, string, error) {
	if len(addrs) == 0 {
		return nil, "", ErrNoAdminAddr
	}
	var errs []error
	for _, addr := range addrs {
		members, err := admin.Members(ctx, addr)
		if err == nil {
			if members == nil {
				members = []veltrix.Member{} // answered: known, even if empty
			}
			return members, addr, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", errors.Join(errs...)
}

// SearchReady is the probe behind the veltrix.io/search-ready readiness gate: true once the
// member at textAddr reports search_ready=1 in INFO (its search index rebuilt). An error
// means the answer is unknown (unreachable, or INFO without search_ready); callers leave
// the gate as it is or set it False, never True, on an error.
func SearchReady(ctx context.Context, admin veltrix.Admin, textAddr string) (bool, error) {
	info, err := admin.Info(ctx, textAddr)
	if err != nil {
		return false, err
	}
	v, ok := info["search_ready"]
	if !ok {
		return false, fmt.Errorf("INFO from %s has no search_ready", textAddr)
	}
	return v == "1", nil
}

// ForceRemove removes member id at once (DELETE ...?force=true), asking the first of
// addrs that answers the member list; a member already gone is done. The member's data is
// not moved: only for a member whose disks are lost, once its co-owners hold the copies.
func ForceRemove(ctx context.Context, admin veltrix.Admin, addrs []string, id string) error {
	members, addr, err := readMembers(ctx, admin, addrs)
	if err != nil {
		return err
	}
	present := false
	for _, m := range members {
		present = present || m.ID == id
	}
	if !present {
		return nil
	}
	if err := admin.ForceRemoveMember(ctx, addr, id); err != nil && !errors.Is(err, veltrix.ErrNotFound) {
		return err
	}
	return nil
}
