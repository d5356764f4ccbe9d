package veltrixsim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

// simProcess runs the simulator as a real process (this test binary re-executed).
func simProcess(t *testing.T, env []string, args ...string) (*exec.Cmd, *testenv.LogBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), reexecEnv+"=1"), env...)
	out := &testenv.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, out
}

func waitExit(t *testing.T, cmd *exec.Cmd, out *testenv.LogBuffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(10 * time.Second):
		t.Fatalf("process did not exit; output:\n%s", out)
		return -1
	}
}

func TestProcessRefusesNativeIndexBelowMaxMapCount(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--addr", testenv.FreeAddr(t), "--metrics-addr", testenv.FreeAddr(t), "--data-dirs", dir,
		"--sim-max-map-count-file", mapCountFile(t, 65530)}
	cmd, out := simProcess(t, nil, args...)
	if code := waitExit(t, cmd, out); code == 0 || !strings.Contains(out.String(), "native index needs vm.max_map_count >= 262144, the node has 65530") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	// The map index needs no minimum.
	cmd, out = simProcess(t, []string{EnvIndex + "=map"}, args...)
	metrics := args[3]
	testenv.EventuallyNil(t, 5*time.Second, "readyz with the map index", func() error {
		if code, body := httpDo(t, "GET", "http://"+metrics+"/readyz", "", nil); code != 200 {
			return fmt.Errorf("%d %s; output: %s", code, body, out)
		}
		return nil
	})
	if info := textCmd(t, args[1], "INFO"); !strings.Contains(info, "index=map") {
		t.Errorf("INFO = %s", info)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, cmd, out); code != 0 {
		t.Errorf("SIGTERM exit %d:\n%s", code, out)
	}
}

func TestProcessSIGTERMCheckpointsAndRestartRebuildsSearch(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	text, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t)
	args := []string{"--addr", text, "--metrics-addr", metrics, "--data-dirs", strings.Join(dirs, ","),
		"--sim-max-map-count-file", mapCountFile(t, MinMaxMapCount), "--sim-index-rebuild", "2s"}
	cmd, out := simProcess(t, nil, args...)
	testenv.EventuallyNil(t, 5*time.Second, "readyz", func() error {
		if code, _ := httpDo(t, "GET", "http://"+metrics+"/readyz", "", nil); code != 200 {
			return fmt.Errorf("readyz %d; output: %s", code, out)
		}
		return nil
	})
	for i := range 40 {
		if ans := textCmd(t, text, fmt.Sprintf("PUT t-%02d v%d", i, i)); ans != "OK" {
			t.Fatal(ans)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, cmd, out); code != 0 {
		t.Fatalf("SIGTERM exit %d:\n%s", code, out)
	}
	if !strings.Contains(out.String(), "Wrote the shutdown checkpoint") {
		t.Errorf("no checkpoint logged:\n%s", out)
	}
	lines := 0
	for _, d := range dirs {
		cp, err := os.ReadFile(filepath.Join(d, checkpointFile))
		if err != nil {
			t.Fatal(err)
		}
		lines += strings.Count(string(cp), "\n")
		if st, err := os.Stat(filepath.Join(d, walFile)); err != nil || st.Size() != 0 {
			t.Errorf("log of %s after the checkpoint: %v %v", d, st.Size(), err)
		}
	}
	if lines != 40 {
		t.Errorf("checkpoints hold %d keys, want 40", lines)
	}

	// Restart: the data opens at once, the search index takes --sim-index-rebuild.
	start := time.Now()
	cmd, out = simProcess(t, nil, args...)
	testenv.EventuallyNil(t, 5*time.Second, "readyz after the restart", func() error {
		if code, _ := httpDo(t, "GET", "http://"+metrics+"/readyz", "", nil); code != 200 {
			return fmt.Errorf("readyz %d", code)
		}
		return nil
	})
	info, err := ParseInfo(textCmd(t, text, "INFO"))
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Fatalf("the restart took %s, too long to observe the 2s index rebuild", el)
	}
	if info["search_ready"] != "0" || info["keys"] != "40" {
		t.Errorf("right after the restart INFO = %v, want keys=40 search_ready=0", info)
	}
	if got := textCmd(t, text, "SEARCH t-"); !strings.HasPrefix(got, "ERR search index not ready") {
		t.Errorf("SEARCH while rebuilding = %s", got)
	}
	if got := textCmd(t, text, "GET t-07"); got != "v7" {
		t.Errorf("GET while rebuilding = %q", got)
	}
	testenv.EventuallyNil(t, 5*time.Second, "search_ready=1", func() error {
		if info := textCmd(t, text, "INFO"); !strings.Contains(info, "search_ready=1") {
			return errors.New(info)
		}
		return nil
	})
	if time.Since(start) < 2*time.Second {
		t.Errorf("search_ready=1 after %s, want the 2s rebuild", time.Since(start))
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, cmd, out); code != 0 {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
