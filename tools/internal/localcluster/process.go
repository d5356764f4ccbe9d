package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one control-plane component started by the daemon. It runs in its own
// process group and receives SIGKILL when the daemon dies, so nothing outlives the daemon.
type process struct {
	name   string
	binary string
	args   []string
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
}

func (o *Options) startProcess(name, binary string, args []string) (*process, error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("%s: binary missing: %w", name, err)
	}
	logf, err := os.OpenFile(filepath.Join(o.LogDir(), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // appended: an outage restarts etcd and kube-apiserver
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = o.StateDir()
	cmd.Env = append(os.Environ(), "NO_PROXY=127.0.0.0/8,localhost", "no_proxy=127.0.0.0/8,localhost")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, binary: binary, args: args, cmd: cmd, done: make(chan struct{})}
	if err := writePidFile(filepath.Join(o.PidDir(), name+".pid"), cmd.Process.Pid); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after the grace period.
func (p *process) stop(grace time.Duration) {
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
	}
	// Children that left the group's leader behind.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

func writePidFile(path string, pid int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

func readPidFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// killGroup terminates the process group led by pid and waits until it is gone.
func killGroup(pid int, grace time.Duration) error {
	if !alive(pid) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; alive(pid) && i < 100; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		return errors.New("process " + strconv.Itoa(pid) + " did not exit")
	}
	return nil
}
