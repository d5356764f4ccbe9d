package planner

import "github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"

// Report is what Execute did.
type Report struct {
	// Executed are the attempts the cluster accepted, in order.
	Executed []Attempt
	// Err stopped the pass: a refusal (the pass must re-observe before anything else is
	// tried) or a transport error. Failed is the command it stopped at.
	Err    error
	Failed *Command
	// FellBack: every caught-up candidate refused the MAIN and the demoted MAIN was
	// restored, so the retirement made no progress and the pass stopped.
	FellBack bool
	// Yielded: the pass ended with YIELD LEADERSHIP; the leader is being re-elected.
	Yielded bool
	// ModeBlocked: Memgraph refused a registration's mode for mixing SYNC and
	// STRICT_SYNC although no replica the plan knew of was in the way, so the MAIN's own
	// registered mode is (Observed.MainBlocksMode); the pass stopped after the fallback.
	ModeBlocked bool
}

// Execute runs a plan's commands in order through run, with the rules that make a pass
// safe to stop anywhere: the first error ends the pass (a later command's premise may
// no longer hold), except that SetMain goes on to its next candidate when one is refused
// for any reason but an existing MAIN, and RegisterInstance goes on to its FallbackMode
// when the mode is refused for mixing (and then ends the pass: ModeBlocked); a fallback
// promotion ends the pass; YIELD LEADERSHIP ends it. It does no I/O of its own: run does.
func Execute(cmds []Command, run func(Command, Attempt) error) Report {
	var rep Report
	for i := range cmds {
		c := cmds[i]
		attempts := c.Attempts()
		for j, a := range attempts {
			err := run(c, a)
			if err == nil {
				rep.Executed = append(rep.Executed, a)
				if a.Fallback {
					rep.FellBack = true
					return rep
				}
				if a.ModeFallback {
					rep.ModeBlocked = true
					return rep
				}
				break
			}
			last := j == len(attempts)-1
			if c.Kind == RegisterInstance && !last && memgraph.RefusalOf(err) == memgraph.RefusalModeMix {
				continue
			}
			if c.Kind == SetMain && !last && memgraph.IsRefused(err) &&
				memgraph.RefusalOf(err) != memgraph.RefusalMainExists {
				continue
			}
			rep.Err, rep.Failed = err, &c
			return rep
		}
		if c.Kind == YieldLeadership {
			rep.Yielded = true
			return rep
		}
	}
	return rep
}
