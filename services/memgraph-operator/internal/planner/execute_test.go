package planner

import (
	"errors"
	"reflect"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

func TestExecute(t *testing.T) {
	refusedBy := func(msg string) error { return refuse(msg) }
	unreachable := &memgraph.Error{Kind: memgraph.KindUnreachable, Err: errors.New("connection reset")}
	handover := []Command{
		{Kind: UnregisterInstance, Instance: DataInstance{Name: "d_3"}},
		{Kind: DemoteInstance, Instance: DataInstance{Name: "d_2"}},
		{Kind: SetMain, Candidates: []string{"d_0", "d_1"}, Fallback: "d_2"},
		{Kind: UnregisterInstance, Instance: DataInstance{Name: "d_2"}},
		{Kind: RemoveCoordinator, Coordinator: Coordinator{ID: 4}},
		{Kind: YieldLeadership},
		{Kind: RegisterInstance, Instance: DataInstance{Name: "never"}},
	}
	cases := []struct {
		name     string
		fail     map[string]error // by query
		executed []string
		stopped  string // the query text of the failed command's first attempt
		fellBack bool
		yielded  bool
	}{
		{name: "all accepted; nothing after YIELD LEADERSHIP",
			executed: []string{"UNREGISTER INSTANCE d_3", "DEMOTE INSTANCE d_2", "SET INSTANCE d_0 TO MAIN",
				"UNREGISTER INSTANCE d_2", "REMOVE COORDINATOR 4", "YIELD LEADERSHIP"},
			yielded: true},
		{name: "a refusal stops the pass",
			fail:     map[string]error{"DEMOTE INSTANCE d_2": refusedBy("Writing to Raft log failed. Please retry the operation.")},
			executed: []string{"UNREGISTER INSTANCE d_3"}, stopped: "DEMOTE INSTANCE d_2"},
		{name: "a refused candidate passes to the next",
			fail: map[string]error{"SET INSTANCE d_0 TO MAIN": refusedBy("Couldn't set instance to main!")},
			executed: []string{"UNREGISTER INSTANCE d_3", "DEMOTE INSTANCE d_2", "SET INSTANCE d_1 TO MAIN",
				"UNREGISTER INSTANCE d_2", "REMOVE COORDINATOR 4", "YIELD LEADERSHIP"},
			yielded: true},
		{name: "every candidate refused: the demoted MAIN is restored and the pass stops",
			fail: map[string]error{"SET INSTANCE d_0 TO MAIN": refusedBy("Couldn't set instance to main!"),
				"SET INSTANCE d_1 TO MAIN": refusedBy("Writing to Raft log failed. Please retry the operation.")},
			executed: []string{"UNREGISTER INSTANCE d_3", "DEMOTE INSTANCE d_2", "SET INSTANCE d_2 TO MAIN"},
			fellBack: true},
		{name: "an existing MAIN ends the candidates at once",
			fail:     map[string]error{"SET INSTANCE d_0 TO MAIN": refusedBy("Couldn't set instance to main since there is already a main instance in cluster!")},
			executed: []string{"UNREGISTER INSTANCE d_3", "DEMOTE INSTANCE d_2"}, stopped: "SET INSTANCE d_0 TO MAIN"},
		{name: "a transport error ends the candidates at once",
			fail:     map[string]error{"SET INSTANCE d_0 TO MAIN": unreachable},
			executed: []string{"UNREGISTER INSTANCE d_3", "DEMOTE INSTANCE d_2"}, stopped: "SET INSTANCE d_0 TO MAIN"},
		{name: "even the fallback refused: the pass stops with the refusal",
			fail: map[string]error{"SET INSTANCE d_0 TO MAIN": refusedBy("x"), "SET INSTANCE d_1 TO MAIN": refusedBy("y"),
				"SET INSTANCE d_2 TO MAIN": refusedBy("z")},
			executed: []string{"UNREGISTER INSTANCE d_3", "DEMOTE INSTANCE d_2"}, stopped: "SET INSTANCE d_0 TO MAIN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sent []string
			rep := Execute(handover, func(_ Command, a Attempt) error {
				sent = append(sent, a.Cypher)
				return c.fail[a.Cypher]
			})
			var got []string
			for _, a := range rep.Executed {
				got = append(got, a.Cypher)
			}
			if !reflect.DeepEqual(got, c.executed) {
				t.Errorf("executed\n got %q\nwant %q", got, c.executed)
			}
			stopped := ""
			if rep.Failed != nil {
				stopped = rep.Failed.Cypher()
			}
			if stopped != c.stopped || (rep.Err != nil) != (c.stopped != "") {
				t.Errorf("stopped at %q (%v), want %q", stopped, rep.Err, c.stopped)
			}
			if rep.FellBack != c.fellBack || rep.Yielded != c.yielded {
				t.Errorf("FellBack %v Yielded %v, want %v %v", rep.FellBack, rep.Yielded, c.fellBack, c.yielded)
			}
			for _, q := range sent {
				if q == "REGISTER INSTANCE never" || q == handover[6].Cypher() {
					t.Errorf("a command after YIELD LEADERSHIP was sent")
				}
			}
		})
	}
}

// TestHandoverFallback: every survivor refuses the MAIN, the demoted MAIN is restored
// (never a MAIN-less cluster left behind), and the handover succeeds once they accept.
func TestHandoverFallback(t *testing.T) {
	w := newWorld(7, 3, 3)
	w.liveC, w.specC = 1, 1
	w.scale(3, 3)
	w.converge(t, 10)
	w.m.write(5)
	w.parkMain(t, dataName(2))
	w.scale(3, 2)
	w.m.refuseMain = map[string]bool{dataName(0): true, dataName(1): true}
	for i := 0; i < 3; i++ {
		w.pass(t, -1)
		if w.m.main != dataName(2) {
			t.Fatalf("pass %d: MAIN is %q, want the restored %s", i, w.m.main, dataName(2))
		}
	}
	w.assertNoViolations(t, "refused handovers")
	w.m.refuseMain = nil
	w.converge(t, 5)
	w.assertNoViolations(t, "after the handover")
}
