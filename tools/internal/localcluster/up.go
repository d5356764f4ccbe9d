package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Up starts the cluster in the background and returns once it is ready. If the cluster in
// o.Dir already runs, it only checks that it is healthy. self is the binary to start as
// the daemon (the localcluster command).
func Up(ctx context.Context, o Options, self string, out io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	begin := time.Now()
	if pid, err := readPidFile(o.daemonPidFile()); err == nil && alive(pid) && o.belongs(pid) {
		if err := o.waitReady(ctx, pid, 3*time.Minute); err != nil {
			return err
		}
		fmt.Fprintf(out, "Cluster already running (daemon pid %d); kubeconfig: %s\n", pid, o.Kubeconfig())
		return nil
	}
	if !o.DisableRunner && os.Geteuid() != 0 {
		return errors.New("the process runner needs root (it mounts pod volumes in private mount namespaces); run as root or pass --no-runner")
	}
	if err := o.ensureBinaries(ctx, out); err != nil {
		return err
	}
	for _, d := range []string{o.LogDir(), o.PidDir(), o.StateDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// Leftovers of a daemon that died without cleaning up.
	o.killRecorded(5 * time.Second)
	if err := os.Remove(o.readyFile()); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := o.save(); err != nil {
		return err
	}
	logPath := filepath.Join(o.LogDir(), "localcluster.log")
	// Appended, so what a crashed daemon wrote survives the next up.
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(self, "daemon", "--dir", o.Dir, "--repo", o.RepoRoot)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.Dir = o.StateDir()
	cmd.Env = append(os.Environ(), EnvDir+"="+o.Dir)
	// Its own session: the daemon outlives `up` and the terminal it ran in.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the cluster daemon: %w", err)
	}
	pid := cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	// The daemon's bounds: 3 minutes to boot, 2 more for the object store.
	timeout := 3 * time.Minute
	if o.ObjectStore {
		timeout += 2 * time.Minute
	}
	if err := o.waitReady(ctx, pid, timeout); err != nil {
		_ = killGroup(pid, 10*time.Second)
		return fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, logPath, tail(logPath, 30))
	}
	fmt.Fprintf(out, "Cluster ready in %s; kubeconfig: %s, logs: %s\n", time.Since(begin).Round(100*time.Millisecond), o.Kubeconfig(), o.LogDir())
	return nil
}

func (o *Options) waitReady(ctx context.Context, pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(o.readyFile()); err == nil {
			return nil
		}
		if !alive(pid) {
			return errors.New("the cluster daemon exited before the cluster was ready")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster was not ready within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// belongs reports whether pid was started for this cluster (its environment names o.Dir),
// so a stale pidfile never makes us signal an unrelated process.
func (o *Options) belongs(pid int) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	return bytes.Contains(env, []byte(EnvDir+"="+o.Dir+"\x00"))
}

// killRecorded stops every process recorded in the pid directory that belongs to us.
func (o *Options) killRecorded(grace time.Duration) {
	entries, _ := os.ReadDir(o.PidDir())
	for _, e := range entries {
		path := filepath.Join(o.PidDir(), e.Name())
		if pid, err := readPidFile(path); err == nil && alive(pid) && o.belongs(pid) {
			_ = killGroup(pid, grace)
		}
		_ = os.Remove(path)
	}
}

// Down stops the daemon (which stops every component and pod process), then anything
// still recorded, and removes the cluster's files unless keep is set.
func Down(o Options, keep bool, out io.Writer) error {
	stopped := false
	if pid, err := readPidFile(o.daemonPidFile()); err == nil && alive(pid) && o.belongs(pid) {
		if err := killGroup(pid, 60*time.Second); err != nil {
			return err
		}
		stopped = true
	}
	o.killRecorded(5 * time.Second)
	if err := unmountUnder(o.Dir); err != nil {
		return err
	}
	// The daemon detaches them as it stops; this is for a daemon that died.
	if err := o.detachDisks(); err != nil {
		return err
	}
	if stopped {
		fmt.Fprintln(out, "Cluster stopped")
	} else {
		fmt.Fprintln(out, "Cluster was not running")
	}
	if keep {
		return nil
	}
	if !otherClusterRunning(o.Dir) {
		removeHostMountpoints(filepath.Join(o.StateDir(), "host-mountpoints"))
	}
	for _, p := range []string{o.Kubeconfig(), o.LogDir(), o.StateDir()} {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	_ = os.Remove(o.Dir) // only if empty
	fmt.Fprintf(out, "Removed %s\n", o.Dir)
	return nil
}

// unmountUnder detaches any mount below dir left in the host namespace. Pod volumes are
// mounted in private namespaces only, so this is a safety net.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var targets []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			targets = append(targets, fields[4])
		}
	}
	for i := len(targets) - 1; i >= 0; i-- {
		if err := syscall.Unmount(targets[i], syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting %s: %w", targets[i], err)
		}
	}
	return nil
}

// removeHostMountpoints removes the empty mount points the runner had to create on the
// host, unless another process still uses them as a mount point.
func removeHostMountpoints(list string) {
	data, err := os.ReadFile(list)
	if err != nil {
		return
	}
	seen := map[string]bool{}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		p := lines[i]
		if p == "" || seen[p] || !filepath.IsAbs(p) || p == "/" {
			continue
		}
		seen[p] = true
		removeEmptyTree(p)
	}
}

// otherClusterRunning reports whether a process of another local cluster runs; its pods
// may use the same mount points (removing one would detach their mounts).
func otherClusterRunning(dir string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte(EnvDir+"=")); ok && string(v) != dir {
				return true
			}
		}
	}
	return false
}

func removeEmptyTree(p string) {
	st, err := os.Lstat(p)
	if err != nil {
		return
	}
	if st.IsDir() {
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			removeEmptyTree(filepath.Join(p, e.Name()))
		}
		_ = syscall.Rmdir(p)
		return
	}
	if st.Mode().IsRegular() && st.Size() == 0 {
		_ = os.Remove(p)
	}
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ensureBinaries builds what is missing: the control plane through
// tools/build-controlplane.sh (or the etcd wrapper module), kwok from the tools module.
func (o *Options) ensureBinaries(ctx context.Context, out io.Writer) error {
	missing := func(p string) bool { _, err := os.Stat(p); return err != nil }
	tools := filepath.Join(o.RepoRoot, "tools")
	kube := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	needKube := false
	for _, b := range kube {
		needKube = needKube || missing(filepath.Join(o.BinDir, b))
	}
	script := filepath.Join(tools, "build-controlplane.sh")
	if (needKube || missing(filepath.Join(o.BinDir, "etcd"))) && !missing(script) {
		fmt.Fprintf(out, "Building the control plane (%s)...\n", script)
		if err := run(ctx, out, o.RepoRoot, nil, "bash", script); err != nil {
			return err
		}
	}
	if missing(filepath.Join(o.BinDir, "etcd")) {
		fmt.Fprintln(out, "Building etcd...")
		if err := run(ctx, out, filepath.Join(tools, "etcd"), []string{"GOWORK=off"}, "go", "build", "-trimpath", "-o", filepath.Join(o.BinDir, "etcd"), "."); err != nil {
			return err
		}
	}
	if missing(o.KwokBinary) {
		fmt.Fprintln(out, "Building kwok...")
		if err := run(ctx, out, tools, []string{"GOWORK=off"}, "go", "build", "-o", o.KwokBinary, "sigs.k8s.io/kwok/cmd/kwok"); err != nil {
			return err
		}
	}
	if o.ObjectStore && missing(o.ObjectStoreBinary) {
		fmt.Fprintln(out, "Building the object store (versitygw, pinned in tools/objectstore)...")
		if err := run(ctx, out, filepath.Join(tools, "objectstore"), []string{"GOWORK=off"}, "go", "build", "-trimpath", "-o", o.ObjectStoreBinary, "github.com/versity/versitygw/cmd/versitygw"); err != nil {
			return err
		}
	}
	var errs []error
	for _, b := range append(kube, "etcd") {
		if p := filepath.Join(o.BinDir, b); missing(p) {
			errs = append(errs, fmt.Errorf("%s is missing: build it with tools/build-controlplane.sh (control plane binaries come from the tools/k8s and tools/etcd wrapper modules)", p))
		}
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, out io.Writer, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s (in %s): %w", name, strings.Join(args, " "), dir, err)
	}
	return nil
}

// ProcessIDs returns the pids of every process the cluster runs (daemon, components, pod
// processes), for measurements.
func ProcessIDs(o Options) []int {
	var pids []int
	entries, _ := os.ReadDir(o.PidDir())
	for _, e := range entries {
		if pid, err := readPidFile(filepath.Join(o.PidDir(), e.Name())); err == nil && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// RSS returns the resident set size of pid in bytes.
func RSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
