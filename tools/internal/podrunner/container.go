package podrunner

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// container is one of the pod's containers and, when a rule manages its image, its process.
type container struct {
	spec    corev1.Container
	rule    ImageRule
	managed bool

	cmd        *exec.Cmd
	exited     chan struct{}
	exitCode   int
	startedAt  time.Time
	finishedAt time.Time
	restarts   int32

	// crash is the back-off of restarts in place; restartAt, when set, is when the
	// exited process starts again; done: exited and not restarted (restartPolicy).
	crash     crashBackoff
	restartAt time.Time
	handled   bool // this run's exit was seen
	done      bool
	// last is the previous run's end (lastState); final is this run's once done.
	last, final *corev1.ContainerStateTerminated
	// waitReason and waitMessage say why a (re)start did not happen.
	waitReason, waitMessage string

	ready         bool
	readyOK       int32
	readyFail     int32
	liveFail      int32
	lastProbe     time.Time
	lastLive      time.Time
	probeStart    time.Time
	listenChecked bool
}

func (w *podWorker) newContainer(c corev1.Container) *container {
	rule, ok := w.r.rules.Match(c.Image)
	return &container{spec: c, rule: rule, managed: ok}
}

func (w *podWorker) startContainer(pod *corev1.Pod, c *container) error {
	user, err := containerCredentials(pod, &c.spec, c.rule.User)
	if err != nil {
		return err
	}
	env, vars, err := w.r.containerEnv(w.ctx, pod, &c.spec, c.rule.Env)
	if err != nil {
		return err
	}
	env = c.rule.podEnv(env, vars, pod.Status.PodIP)
	command := make([]string, len(c.spec.Command))
	for i, s := range c.spec.Command {
		command[i] = expand(s, vars)
	}
	args := make([]string, len(c.spec.Args))
	for i, s := range c.spec.Args {
		args[i] = expand(s, vars)
	}
	argv, err := c.rule.argv(command, args)
	if err != nil {
		return err
	}
	argv = append(argv[:1], bindToPod(argv[1:], c.rule.ListenFlags, pod.Status.PodIP)...)
	nodeVars := maps.Clone(vars)
	maps.Copy(nodeVars, w.r.cfg.NodeVars[pod.Spec.NodeName])
	for _, a := range c.rule.extraArgs(argv) {
		argv = append(argv, expand(a, nodeVars))
	}
	if _, err := os.Stat(argv[0]); err != nil {
		return fmt.Errorf("container %s: binary for image %s missing: %w", c.spec.Name, c.spec.Image, err)
	}
	cmd, err := w.startHelper(pod, c, user, vars, argv, env, "exec-"+c.spec.Name+".json",
		fmt.Sprintf("starting %q on %s as %d:%d", argv, pod.Status.PodIP, user.UID, user.GID))
	if err != nil {
		return fmt.Errorf("starting container %s: %w", c.spec.Name, err)
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	c.startedAt = time.Now()
	c.probeStart = c.startedAt
	c.handled, c.restartAt, c.waitReason, c.waitMessage = false, time.Time{}, "", ""
	c.ready, c.readyOK, c.readyFail, c.liveFail, c.listenChecked = false, 0, 0, 0, false
	c.lastProbe, c.lastLive = time.Time{}, time.Time{}
	if w.r.cfg.PidDir != "" {
		_ = os.WriteFile(w.pidFile(c), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	}
	go func() {
		err := cmd.Wait()
		c.exitCode = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			c.exitCode = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				c.exitCode = 128 + int(ws.Signal())
			}
		} else if err != nil {
			c.exitCode = 128
		}
		c.finishedAt = time.Now()
		close(c.exited)
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}()
	return nil
}

// writeExecSpec writes, under name in the pod's directory, what the helper needs to run
// argv as c's process (or a command executed in c, such as a lifecycle hook): c's mounts,
// working directory, hostname, environment and user.
// startHelper starts the helper that runs argv inside container c (its mounts, user and
// environment, described in the exec spec file specName), in a new mount and UTS namespace
// and process group, killed with the runner; its output is appended to the container's
// log after a line saying what starts.
func (w *podWorker) startHelper(pod *corev1.Pod, c *container, user credentials, vars map[string]string, argv, env []string, specName, banner string) (*exec.Cmd, error) {
	specPath, err := w.writeExecSpec(pod, c, user, vars, argv, env, specName)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(w.r.cfg.LogDir, fmt.Sprintf("%s_%s_%s.log", pod.Namespace, pod.Name, c.spec.Name))
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s localcluster: %s\n", time.Now().Format(time.RFC3339), banner)
	cmd := exec.Command(w.r.cfg.HelperBinary, HelperCommand, specPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append([]string{}, w.r.cfg.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

func (w *podWorker) writeExecSpec(pod *corev1.Pod, c *container, user credentials, vars map[string]string, argv, env []string, name string) (string, error) {
	// The container's writable layer, its user's alone.
	if err := mkdirOwned(filepath.Join(w.dir, "containers"), 0o755, -1, -1); err != nil {
		return "", err
	}
	scratch := filepath.Join(w.dir, "containers", c.spec.Name)
	smode, suid, sgid := dirAttrs(true, &user, ownership{})
	if err := mkdirOwned(scratch, smode, suid, sgid); err != nil {
		return "", err
	}
	table, dir, err := mountTable(&c.spec, c.rule.WorkingDir, w.hostsPath, scratch, w.vols, vars)
	if err != nil {
		return "", err
	}
	mounts, err := w.r.prepareMounts(table)
	if err != nil {
		return "", err
	}
	spec := execSpec{Hostname: podHostname(pod), Mounts: mounts, Argv: argv, Env: env, Dir: dir}
	if user.UID != 0 || user.GID != 0 || len(user.Groups) > 0 || user.NoNewPrivs {
		spec.User = &user
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	specPath := filepath.Join(w.dir, name)
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		return "", err
	}
	return specPath, nil
}

func (w *podWorker) pidFile(c *container) string {
	pod := w.current()
	return filepath.Join(w.r.cfg.PidDir, fmt.Sprintf("pod_%s_%s_%s.pid", pod.Namespace, pod.Name, c.spec.Name))
}

func exitedNow(c *container) bool {
	if c.exited == nil {
		return false
	}
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// exited records a container's end and decides, by restartPolicy, whether and when it
// starts again.
func (w *podWorker) exited(pod *corev1.Pod, c *container) {
	c.handled = true
	c.ready = false
	_ = os.Remove(w.pidFile(c))
	reason := "Completed"
	if c.exitCode != 0 {
		reason = "Error"
	}
	run := &corev1.ContainerStateTerminated{ExitCode: int32(c.exitCode), Reason: reason,
		StartedAt: metav1.NewTime(c.startedAt.Truncate(time.Second)), FinishedAt: metav1.NewTime(c.finishedAt.Truncate(time.Second))}
	if c.cmd != nil {
		run.ContainerID = fmt.Sprintf("localcluster://%d", c.cmd.Process.Pid)
	}
	restart := false
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
	case corev1.RestartPolicyOnFailure:
		restart = c.exitCode != 0
	default:
		restart = true
	}
	if !restart {
		c.final, c.done = run, true
		return
	}
	c.last = run
	delay := c.crash.next(c.startedAt, c.finishedAt)
	c.restartAt = c.finishedAt.Add(delay)
	if delay > 0 {
		c.waitReason = "CrashLoopBackOff"
		c.waitMessage = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.spec.Name, pod.Name, pod.Namespace, pod.UID)
	}
	w.r.log.Info("Container exited; restarting it in place", "pod", w.key, "container", c.spec.Name, "exitCode", c.exitCode, "after", delay)
}

// Restart back-off, as the kubelet's: the first restart at once, then 10s doubling up to
// 5m; a container that ran 10 minutes starts over.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
	backoffReset   = 10 * time.Minute
)

// crashBackoff is one container's restart back-off.
type crashBackoff struct{ delay time.Duration }

// next returns how long after its end a container that ran from started to finished
// waits before it starts again, and advances the back-off.
func (b *crashBackoff) next(started, finished time.Time) time.Duration {
	if finished.Sub(started) >= backoffReset {
		b.delay = 0
	}
	wait := b.delay
	b.delay = min(max(2*b.delay, backoffInitial), backoffMax)
	return wait
}
