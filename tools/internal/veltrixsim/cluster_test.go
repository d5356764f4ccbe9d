package veltrixsim

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

// waitMembers waits until every node lists exactly want ("id=state,..." sorted by id).
func waitMembers(t *testing.T, nodes []*testNode, want string) {
	t.Helper()
	testenv.EventuallyNil(t, 15*time.Second, "members "+want, func() error {
		for _, tn := range nodes {
			if got := memberStates(tn.members()); got != want {
				return fmt.Errorf("%s sees %s", tn.id, got)
			}
		}
		return nil
	})
}

func waitCopies(t *testing.T, nodes []*testNode, want int) {
	t.Helper()
	testenv.EventuallyNil(t, 15*time.Second, fmt.Sprintf("%d stored copies", want), func() error {
		if got := storedCopies(t, nodes); got != want {
			return fmt.Errorf("%d copies", got)
		}
		return nil
	})
}

func TestClusterRoutesKeysToTheirOwners(t *testing.T) {
	nodes := cluster(t, 3, 2)
	want := writeKeys(t, nodes, "k", 150)
	for _, tn := range nodes {
		if lost := lostKeys(t, tn, want); len(lost) > 0 {
			t.Fatalf("via %s: %d keys not read back: %v", tn.id, len(lost), lost[:min(5, len(lost))])
		}
	}
	if got := storedCopies(t, nodes); got != 300 {
		t.Errorf("stored copies = %d, want 150 keys x RF 2", got)
	}
	// Each key is on exactly its owners.
	v := nodes[0].node.snapshot()
	for _, k := range []string{"k-0000", "k-0042", "k-0149"} {
		owners := v.Owners(Partition(k, v.PartitionCount))
		for _, tn := range nodes {
			has := strings.HasPrefix(tn.cmd("_GET "+k), "VAL ")
			if has != containsID(owners, tn.id) {
				t.Errorf("%s on %s: %v, owners %v", k, tn.id, has, owners)
			}
		}
	}
	if ans := nodes[1].cmd("DEL k-0001"); ans != "OK" {
		t.Fatal(ans)
	}
	if got := nodes[2].cmd("GET k-0001"); got != "ERR not found" {
		t.Errorf("GET after DEL = %q", got)
	}
	var top Topology
	code, body := httpDo(t, "GET", "http://"+nodes[2].httpAddr+"/admin/cluster", "", nil)
	if code != 200 || mustUnmarshal(t, body, &top) != nil || top.Epoch != 1 || len(top.Nodes) != 3 || top.PartitionCount != 64 ||
		top.Nodes[0].NodeID != "vc-0" || top.Nodes[0].Address != "127.0.0.1" || top.Nodes[0].State != StateActive {
		t.Errorf("/admin/cluster: %d %s", code, body)
	}
}

func TestJoinThenLeaveLosesNoKey(t *testing.T) {
	nodes := cluster(t, 3, 2, "--sim-move-rate", "400")
	want := writeKeys(t, nodes, "j", 200)
	for _, id := range []string{"vc-3", "vc-4"} {
		j := joiner(t, id, nodes, 2, "--sim-move-rate", "400")
		j.start()
		nodes = append(nodes, j)
	}
	waitMembers(t, nodes, "vc-0=active,vc-1=active,vc-2=active,vc-3=active,vc-4=active")
	for _, via := range []*testNode{nodes[0], nodes[4]} {
		if lost := lostKeys(t, via, want); len(lost) > 0 {
			t.Fatalf("after the joins, via %s: %d keys lost: %v", via.id, len(lost), lost[:min(5, len(lost))])
		}
	}
	waitCopies(t, nodes, 400)
	if n := nodes[3].info()["keys"]; n == "0" {
		t.Errorf("vc-3 joined but holds no keys")
	}

	// Removing vc-4 through vc-1's admin API: leaving until its data moved, then gone.
	code, body := httpDo(t, "DELETE", "http://"+nodes[1].httpAddr+"/admin/cluster/members/vc-4", "", nil)
	if code != http.StatusAccepted || !strings.Contains(body, `"state":"leaving"`) {
		t.Fatalf("DELETE vc-4: %d %s", code, body)
	}
	if lost := lostKeys(t, nodes[2], want); len(lost) > 0 {
		t.Fatalf("while vc-4 is leaving: %d keys not found: %v", len(lost), lost[:min(5, len(lost))])
	}
	waitMembers(t, nodes, "vc-0=active,vc-1=active,vc-2=active,vc-3=active")
	time.Sleep(700 * time.Millisecond) // longer than the join retry: a member that left stays out
	if got := memberStates(nodes[4].members()); got != "vc-0=active,vc-1=active,vc-2=active,vc-3=active" {
		t.Fatalf("vc-4 came back on its own: %s", got)
	}
	if n := nodes[4].info()["keys"]; n != "0" {
		t.Errorf("vc-4 is gone but still holds %s keys", n)
	}
	waitCopies(t, nodes[:4], 400)
	for _, via := range []*testNode{nodes[0], nodes[3], nodes[4]} {
		if lost := lostKeys(t, via, want); len(lost) > 0 {
			t.Fatalf("after the removal, via %s: %d keys lost: %v", via.id, len(lost), lost[:min(5, len(lost))])
		}
	}
	if e0, e3 := nodes[0].info()["epoch"], nodes[3].info()["epoch"]; e0 != e3 {
		t.Errorf("epochs differ: vc-0 %s, vc-3 %s", e0, e3)
	}

	// Scaled up again on the volume it kept: its persisted membership no longer lists it,
	// so it joins anew.
	if err := nodes[4].stop(); err != nil {
		t.Fatal(err)
	}
	nodes[4].start()
	waitMembers(t, nodes, "vc-0=active,vc-1=active,vc-2=active,vc-3=active,vc-4=active")
	waitCopies(t, nodes, 400)
}

func TestRemovalRefusals(t *testing.T) {
	nodes := cluster(t, 2, 2)
	url := "http://" + nodes[1].httpAddr + "/admin/cluster/members/"
	for _, c := range []struct {
		faults string
		id     string
		code   int
		msg    string
	}{
		{`{"refuse_delete":409}`, "vc-1", 409, "removal of member vc-1 refused (simulated fault 409)"},
		{`{"refuse_delete":500}`, "vc-1", 500, "removal of member vc-1 refused (simulated fault 500)"},
		{`{"refuse_delete":0}`, "vc-1", 409, "removing vc-1 would leave 1 members, fewer than the replication factor 2"},
		{`{"refuse_delete":0}`, "vc-9", 404, "member vc-9 is not in the cluster"},
	} {
		if code, body := httpDo(t, "POST", "http://"+nodes[1].httpAddr+"/admin/sim/faults", "", strings.NewReader(c.faults)); code != 200 {
			t.Fatalf("faults %s: %d %s", c.faults, code, body)
		}
		code, body := httpDo(t, "DELETE", url+c.id, "", nil)
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("DELETE %s with %s: %d %s, want %d %q", c.id, c.faults, code, body, c.code, c.msg)
		}
	}
	if got := memberStates(nodes[0].members()); got != "vc-0=active,vc-1=active" {
		t.Errorf("membership changed by refused removals: %s", got)
	}
}

func TestPersistedMembershipWinsOverPeers(t *testing.T) {
	nodes := cluster(t, 3, 2)
	want := writeKeys(t, nodes, "p", 60)
	j := joiner(t, "vc-3", nodes, 2)
	j.start()
	nodes = append(nodes, j)
	waitMembers(t, nodes, "vc-0=active,vc-1=active,vc-2=active,vc-3=active")
	for _, tn := range nodes {
		if err := tn.stop(); err != nil {
			t.Fatalf("stop %s: %v", tn.id, err)
		}
	}
	// vc-1 alone, with --peers naming only the three bootstrap members: nobody can tell
	// it about vc-3, so what it lists comes from its data dir.
	nodes[1].start()
	if got := memberStates(nodes[1].members()); got != "vc-0=active,vc-1=active,vc-2=active,vc-3=active" {
		t.Errorf("after the restart vc-1 lists %s", got)
	}
	for _, tn := range []*testNode{nodes[0], nodes[2], nodes[3]} {
		tn.start()
	}
	if lost := lostKeys(t, nodes[1], want); len(lost) > 0 {
		t.Errorf("after restarting every member: %d keys lost: %v", len(lost), lost[:min(5, len(lost))])
	}
}

func TestCrashMidMoveResumesAfterRestart(t *testing.T) {
	nodes := cluster(t, 3, 2, "--sim-move-rate", "200")
	want := writeKeys(t, nodes, "c", 150)
	// Only vc-2, the member that will leave, carries the knob.
	if err := nodes[2].stop(); err != nil {
		t.Fatal(err)
	}
	nodes[2].start("--sim-crash-mid-move", "10")
	code, body := httpDo(t, "DELETE", "http://"+nodes[0].httpAddr+"/admin/cluster/members/vc-2", "", nil)
	if code != http.StatusAccepted {
		t.Fatalf("DELETE vc-2: %d %s", code, body)
	}
	select {
	case err := <-nodes[2].done:
		if !errors.Is(err, ErrCrashedMidMove) {
			t.Fatalf("vc-2 stopped with %v, want a crash mid-move", err)
		}
		nodes[2].cancel = nil
	case <-time.After(10 * time.Second):
		t.Fatal("vc-2 did not crash mid-move")
	}
	if lost := lostKeys(t, nodes[1], want); len(lost) > 0 {
		t.Fatalf("with vc-2 down mid-move: %d keys lost: %v", len(lost), lost[:min(5, len(lost))])
	}
	// Restarted with the same flags: the crash fires once per data dir; the move resumes.
	nodes[2].start("--sim-crash-mid-move", "10")
	if got := nodes[2].info()["state"]; got != StateLeaving && got != "absent" {
		t.Errorf("vc-2 after the restart: state %s", got)
	}
	waitMembers(t, nodes, "vc-0=active,vc-1=active")
	waitCopies(t, nodes[:2], 300)
	if lost := lostKeys(t, nodes[2], want); len(lost) > 0 {
		t.Fatalf("after the move resumed: %d keys lost: %v", len(lost), lost[:min(5, len(lost))])
	}
	dir := strings.Split(argValue(nodes[2].args, "--data-dirs"), ",")[0]
	if _, err := os.Stat(filepath.Join(dir, crashMarker)); err != nil {
		t.Errorf("crash marker: %v", err)
	}
}

func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func setFaults(t *testing.T, tn *testNode, body string) {
	t.Helper()
	if code, out := httpDo(t, "POST", "http://"+tn.httpAddr+"/admin/sim/faults", "", strings.NewReader(body)); code != 200 {
		t.Fatalf("faults %s: %d %s", body, code, out)
	}
}

func TestJoinerStaysJoiningUntilDataMoved(t *testing.T) {
	nodes := cluster(t, 3, 2)
	want := writeKeys(t, nodes, "h", 80)
	for _, tn := range nodes {
		setFaults(t, tn, `{"move_rate":0}`)
	}
	j := joiner(t, "vc-3", nodes, 2)
	j.start()
	nodes = append(nodes, j)
	waitMembers(t, nodes, "vc-0=active,vc-1=active,vc-2=active,vc-3=joining")
	time.Sleep(500 * time.Millisecond)
	if got := memberStates(nodes[0].members()); got != "vc-0=active,vc-1=active,vc-2=active,vc-3=joining" {
		t.Fatalf("with moves held vc-3 must stay joining: %s", got)
	}
	if lost := lostKeys(t, j, want); len(lost) > 0 {
		t.Fatalf("while vc-3 joins: %d keys not found: %v", len(lost), lost[:min(5, len(lost))])
	}
	// POST of a member already in is idempotent.
	body := fmt.Sprintf(`{"id":"vc-3","addr":%q}`, j.textAddr)
	if code, out := httpDo(t, "POST", "http://"+nodes[2].httpAddr+"/admin/cluster/members", "", strings.NewReader(body)); code != 200 || !strings.Contains(out, `"id":"vc-3"`) {
		t.Fatalf("POST vc-3 again: %d %s", code, out)
	}
	for _, tn := range nodes[:3] {
		setFaults(t, tn, `{"move_rate":1000}`)
	}
	waitMembers(t, nodes, "vc-0=active,vc-1=active,vc-2=active,vc-3=active")
	waitCopies(t, nodes, 160)
}

func TestRemovalHeldByMoveRateZeroStaysLeaving(t *testing.T) {
	nodes := cluster(t, 3, 2)
	want := writeKeys(t, nodes, "s", 80)
	setFaults(t, nodes[2], `{"move_rate":0}`)
	if code, body := httpDo(t, "DELETE", "http://"+nodes[0].httpAddr+"/admin/cluster/members/vc-2", "", nil); code != http.StatusAccepted {
		t.Fatalf("DELETE vc-2: %d %s", code, body)
	}
	waitMembers(t, nodes, "vc-0=active,vc-1=active,vc-2=leaving")
	time.Sleep(time.Second)
	if got := memberStates(nodes[1].members()); got != "vc-0=active,vc-1=active,vc-2=leaving" {
		t.Fatalf("with moves held vc-2 must stay leaving: %s", got)
	}
	if n := nodes[2].info()["keys"]; n == "0" {
		t.Fatalf("vc-2 moved its keys with move_rate 0")
	}
	// A second DELETE while it leaves is accepted again (idempotent).
	if code, body := httpDo(t, "DELETE", "http://"+nodes[1].httpAddr+"/admin/cluster/members/vc-2", "", nil); code != http.StatusAccepted {
		t.Fatalf("second DELETE vc-2: %d %s", code, body)
	}
	setFaults(t, nodes[2], `{"move_rate":1000}`)
	waitMembers(t, nodes, "vc-0=active,vc-1=active")
	if lost := lostKeys(t, nodes[0], want); len(lost) > 0 {
		t.Fatalf("%d keys lost: %v", len(lost), lost[:min(5, len(lost))])
	}
}

func TestBootstrapMemberWithAFreshDataDirJoinsAgain(t *testing.T) {
	nodes := cluster(t, 3, 2)
	want := writeKeys(t, nodes, "f", 60)
	if code, body := httpDo(t, "DELETE", "http://"+nodes[0].httpAddr+"/admin/cluster/members/vc-2", "", nil); code != http.StatusAccepted {
		t.Fatalf("DELETE vc-2: %d %s", code, body)
	}
	waitMembers(t, nodes, "vc-0=active,vc-1=active")
	if err := nodes[2].stop(); err != nil {
		t.Fatal(err)
	}
	// Its volume is gone (reclaim policy Delete): --peers lists it, the cluster does not.
	for i, a := range nodes[2].args {
		if a == "--data-dirs" {
			nodes[2].args[i+1] = t.TempDir()
		}
	}
	nodes[2].start()
	waitMembers(t, nodes, "vc-0=active,vc-1=active,vc-2=active")
	waitCopies(t, nodes, 120)
	if lost := lostKeys(t, nodes[2], want); len(lost) > 0 {
		t.Fatalf("%d keys lost: %v", len(lost), lost[:min(5, len(lost))])
	}
}
