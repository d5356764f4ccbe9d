package podrunner

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// churnEnv makes the helper keep every processor busy with goroutines that enter and leave
// system calls, so the goroutine that changes credentials is moved between threads as often
// as the scheduler allows: what a busy node does by chance.
const churnEnv = "PODRUNNER_TEST_CHURN"

func churn() {
	for range 4 * runtime.GOMAXPROCS(0) {
		go func() {
			for {
				_ = syscall.Getpid()
				_, _ = os.Stat("/")
				runtime.Gosched()
			}
		}()
	}
}

// TestExecAsCredentialsOnEveryThread executes a process as 1000:2000 with supplementary
// groups 3000 and 3001 many times while the helper's scheduler is busy: every run must
// carry the user, the group and both supplementary groups. Credentials are per thread in
// Linux; a change made on one thread and an exec from another ran the process with no
// supplementary groups (TestLocalCluster saw "groups []" once in CI).
func TestExecAsCredentialsOnEveryThread(t *testing.T) {
	needRoot(t, "changing credentials")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec := execSpec{Argv: []string{self, "whoami"}, Dir: "/", Env: []string{"PATH=/usr/bin:/bin"},
		User: &credentials{UID: 1000, GID: 2000, Groups: []int64{3000, 3001}}}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	const runs = 60
	bad := 0
	for i := range runs {
		cmd := exec.Command(self, HelperCommand, specPath)
		cmd.Env = append(os.Environ(), churnEnv+"=1", "GOMAXPROCS=4")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("run %d: %v: %s", i, err, out)
		}
		got := statusLines(string(out))
		want := map[string]string{"Uid": "1000 1000 1000 1000", "Gid": "2000 2000 2000 2000", "Groups": "3000 3001"}
		for k, v := range want {
			if got[k] != v {
				bad++
				t.Errorf("run %d: %s %q, want %q", i, k, got[k], v)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d wrong credentials over %d runs", bad, runs)
	}
}

// statusLines reads the Uid, Gid and Groups lines of /proc/<pid>/status, fields joined by
// one space.
func statusLines(status string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "Uid", "Gid", "Groups":
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}
