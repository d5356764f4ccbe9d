// Package executor carries out package planner's membership decisions against VeltrixDB's
// admin API (through veltrix.Admin), one pass at a time, and probes whether a member's
// search index is ready.
package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/opsuite/suite/services/veltrix-operator/internal/planner"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
)

// ErrNoAdminAddr: Step was given no ready pod to ask.
var ErrNoAdminAddr = errors.New("no ready pod to ask for the members")

// Step runs one pass: it asks every serving pod (in.Admins) for the members at once, each
// within the client's timeout, takes the answer of the first in order that gave one
// (in.Members is replaced), records the serving pods that did not answer
// (in.Unreachable), plans, and sends at most one DELETE (Decision.Remove) or POST
// (Decision.Add) to the pod that answered.
//
// The Decision is always valid and meant to be applied, errors or not. The error is
// non-nil only when the admin API could not be asked: a serving pod did not answer (the
// Decision then holds, ReasonMembersUnreachable, unless growing), no pod answered with
// the member list (ReasonMembersUnknown, or MembersUnreachable), or the DELETE failed
// without an answer or for want of authorization (the Decision holds, ReasonRemoving).
// Callers log or report it and requeue after a delay rather than return it as a
// reconcile error. A DELETE the server declines is not an error: Reason is
// RemovalRefused, Detail the server's message, and Replicas stays.
func Step(ctx context.Context, admin veltrix.Admin, in planner.Input) (planner.Decision, error) {
	read := readMembers(ctx, admin, in.Admins)
	in.Members = read.members
	in.Unreachable = nil
	for pod, err := range read.unreachable {
		if in.Unreachable == nil {
			in.Unreachable = map[string]string{}
		}
		in.Unreachable[pod] = veltrix.Cause(err)
	}
	d := planner.Plan(in)
	if read.err != nil {
		return d, read.err
	}
	if d.Reason == planner.ReasonMembersUnreachable {
		// Nothing is sent while the operator's view is incomplete (Plan holds).
		return d, read.failures()
	}
	addr := read.addr
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

// memberRead is what readMembers found.
type memberRead struct {
	// members is the first answer in the order asked (nil when none answered), addr who
	// gave it.
	members []veltrix.Member
	addr    string
	// unreachable are the pods whose admin API gave no answer (veltrix.ErrUnreachable, a
	// refused connection aside: nothing listens there, the pod's own probes see that), by
	// pod name; other failures (a wrong token) are in errs only.
	unreachable map[string]error
	// err joins every failure when nobody answered; nil otherwise.
	err  error
	errs []error
}

// failures joins every pod's failure, nil when every pod answered.
func (r memberRead) failures() error { return errors.Join(r.errs...) }

// readMembers asks every endpoint at once (each request bounded by the client's timeout):
// a pass waits for the slowest pod only, however many do not answer, where asking one
// after another would cost one timeout per unanswering pod.
func readMembers(ctx context.Context, admin veltrix.Admin, eps []planner.Endpoint) memberRead {
	if len(eps) == 0 {
		return memberRead{err: ErrNoAdminAddr}
	}
	lists := make([][]veltrix.Member, len(eps))
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() { lists[i], errs[i] = admin.Members(ctx, ep.Addr) })
	}
	wg.Wait()
	var r memberRead
	for i, ep := range eps {
		switch err := errs[i]; {
		case err == nil && r.members == nil:
			r.members, r.addr = lists[i], ep.Addr
			if r.members == nil {
				r.members = []veltrix.Member{} // answered: known, even if empty
			}
		case err == nil:
		case errors.Is(err, veltrix.ErrUnreachable) && !veltrix.NotListening(err):
			if r.unreachable == nil {
				r.unreachable = map[string]error{}
			}
			r.unreachable[ep.Pod] = err
			r.errs = append(r.errs, err)
		default:
			r.errs = append(r.errs, err)
		}
	}
	if r.members == nil {
		r.err = errors.Join(r.errs...)
	}
	return r
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

// ForceRemove removes member id at once (DELETE ...?force=true), asking every endpoint
// for the member list at once and the first in order that answered for the removal; a
// member already gone is done. The member's data is
// not moved: only for a member whose disks are lost, once its co-owners hold the copies.
func ForceRemove(ctx context.Context, admin veltrix.Admin, eps []planner.Endpoint, id string) error {
	read := readMembers(ctx, admin, eps)
	if read.err != nil {
		return read.err
	}
	members, addr := read.members, read.addr
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
