package podrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podWorker owns one pod: it starts its processes once kwok gave the pod an address,
// probes them, reports status and stops them when the pod goes.
type podWorker struct {
	r   *Runner
	key string
	uid types.UID
	dir string

	mu        sync.Mutex
	pod       *corev1.Pod
	hostsPath string
	hostsData string

	kick     chan struct{}
	goneCh   chan struct{}
	goneOnce sync.Once
	stopCh   chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	ctx        context.Context
	cancel     context.CancelFunc
	containers []*container
	inits      []*container
	tokens     []*tokenSource
	// nextRefresh is when ConfigMap and Secret volumes are next compared with the API.
	nextRefresh time.Time
	// vols is the host directory of each volume, for restarts.
	vols map[string]string
	// waiting and waitingReason say why the pod is not started yet, for status.
	waiting, waitingReason string
	// initCrash backs off retries of a pod whose init container failed; initRestarts
	// counts the retries per init container, initFailure is the last failed one's status.
	initCrash    crashBackoff
	initFailed   bool
	initRestarts map[string]int32
	initFailure  *corev1.ContainerStatus
	terminal     bool
	lastStatus   *corev1.PodStatus
}

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

func newPodWorker(r *Runner, pod *corev1.Pod) *podWorker {
	ctx, cancel := context.WithCancel(context.Background())
	return &podWorker{
		r:      r,
		key:    pod.Namespace + "/" + pod.Name,
		uid:    pod.UID,
		dir:    filepath.Join(r.cfg.StateDir, string(pod.UID)),
		pod:    pod,
		kick:   make(chan struct{}, 1),
		goneCh: make(chan struct{}),
		stopCh: make(chan struct{}),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
}

func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// gone: the pod object no longer exists (or its node went away): kill at once.
func (w *podWorker) gone() { w.goneOnce.Do(func() { close(w.goneCh) }) }

// shutdown: the runner stops; kill the processes but leave the pod object alone.
func (w *podWorker) shutdown() { w.stopOnce.Do(func() { close(w.stopCh) }) }

func (w *podWorker) current() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

func (w *podWorker) run() {
	defer close(w.done)
	defer w.cancel()
	log := w.r.log.With("pod", w.key)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	started := false
	nextSetup := time.Time{}
	for {
		select {
		case <-w.goneCh:
			w.killAll(0)
			w.cleanup()
			log.Info("Stopped pod processes", "reason", "pod removed")
			return
		case <-w.stopCh:
			w.killAll(0)
			return
		case <-w.kick:
		case <-tick.C:
		}
		pod := w.current()
		if pod.DeletionTimestamp != nil {
			grace := 30 * time.Second
			if pod.DeletionGracePeriodSeconds != nil {
				grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
			}
			w.killAll(grace)
			w.r.deletePod(context.Background(), pod)
			w.cleanup()
			log.Info("Stopped pod processes", "reason", "pod deleted")
			return
		}
		if w.terminal {
			continue
		}
		if !started {
			if pod.Status.PodIP == "" || time.Now().Before(nextSetup) {
				continue
			}
			if err := w.start(pod); err != nil {
				w.waiting = err.Error()
				var ce *configError
				switch {
				case errors.As(err, &ce):
					w.waitingReason = reasonConfigError
				case errors.Is(err, errNotYet):
					w.waitingReason = "ContainerCreating"
				default:
					w.waitingReason = "CreateContainerError"
				}
				if !errors.Is(err, errNotYet) {
					log.Warn("Failed to start pod", "err", err)
				}
				w.killAll(0)
				w.containers, w.inits, w.tokens = nil, nil, nil
				delay := time.Second
				if w.initFailed {
					// As the kubelet shows it: the init container in back-off (or ended,
					// for restartPolicy Never), the others waiting for it.
					w.initFailed = false
					w.waiting, w.waitingReason = "", "PodInitializing"
					delay = w.initCrash.next(time.Time{}, time.Time{})
					if f := w.initFailure; !w.terminal && delay > 0 {
						f.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
							Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, f.Name, pod.Name, pod.Namespace, pod.UID)}}
					}
				}
				nextSetup = time.Now().Add(delay)
				w.reportStatus(pod)
				continue
			}
			started = true
			w.waiting, w.waitingReason = "", ""
			log.Info("Started pod processes", "ip", pod.Status.PodIP)
		}
		w.observe(pod)
		w.refreshTokens(w.ctx, pod)
		w.refreshVolumes(w.ctx, pod)
		w.reportStatus(pod)
	}
}

// start checks every container's user, prepares volumes and the hosts file, runs managed
// init containers to completion and starts the managed containers.
func (w *podWorker) start(pod *corev1.Pod) error {
	inits := make([]*container, 0, len(pod.Spec.InitContainers))
	for _, c := range pod.Spec.InitContainers {
		inits = append(inits, w.newContainer(c))
	}
	mains := make([]*container, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		mains = append(mains, w.newContainer(c))
	}
	// Refused before anything is made, as the kubelet refuses to create the container.
	for _, ct := range append(append([]*container{}, inits...), mains...) {
		if !ct.managed {
			continue
		}
		if _, err := containerCredentials(pod, &ct.spec, ct.rule.User); err != nil {
			return err
		}
	}
	if err := mkdirOwned(w.dir, 0o755, -1, -1); err != nil {
		return err
	}
	vols, err := w.prepareVolumes(w.ctx, pod)
	if err != nil {
		return err
	}
	w.vols = vols
	hosts := filepath.Join(w.dir, "hosts")
	w.mu.Lock()
	w.hostsPath = hosts
	w.hostsData = ""
	w.mu.Unlock()
	w.writeHosts(w.r.hostsTable())

	for _, ct := range inits {
		w.inits = append(w.inits, ct)
		if !ct.managed {
			continue
		}
		ct.restarts = w.initRestarts[ct.spec.Name]
		if err := w.startContainer(pod, ct); err != nil {
			return err
		}
		select {
		case <-ct.exited:
		case <-w.goneCh:
			return errors.New("pod removed")
		case <-w.stopCh:
			return errors.New("runner stopped")
		}
		if ct.exitCode != 0 {
			// Restarted with the pod's back-off unless the pod never restarts.
			if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
				w.terminal = true
			}
			w.initFailed = true
			w.exited(pod, ct)
			cs := w.containerStatus(ct)
			if !w.terminal {
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
				if w.initRestarts == nil {
					w.initRestarts = map[string]int32{}
				}
				w.initRestarts[ct.spec.Name]++
			}
			w.initFailure = &cs
			return fmt.Errorf("init container %s exited with %d", ct.spec.Name, ct.exitCode)
		}
	}
	for _, ct := range mains {
		w.containers = append(w.containers, ct)
		if !ct.managed {
			ct.ready = true
			ct.startedAt = time.Now()
			continue
		}
		if err := w.startContainer(pod, ct); err != nil {
			return err
		}
	}
	return nil
}

func (w *podWorker) newContainer(c corev1.Container) *container {
	rule, ok := w.r.rules.Match(c.Image)
	return &container{spec: c, rule: rule, managed: ok}
}

func (w *podWorker) startContainer(pod *corev1.Pod, c *container) error {
	vols := w.vols
	user, err := containerCredentials(pod, &c.spec, c.rule.User)
	if err != nil {
		return err
	}
	env, vars, err := w.r.containerEnv(w.ctx, pod, &c.spec, c.rule.Env)
	if err != nil {
		return err
	}
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

	// The container's writable layer, its user's alone.
	if err := mkdirOwned(filepath.Join(w.dir, "containers"), 0o755, -1, -1); err != nil {
		return err
	}
	scratch := filepath.Join(w.dir, "containers", c.spec.Name)
	smode, suid, sgid := dirAttrs(true, &user, ownership{})
	if err := mkdirOwned(scratch, smode, suid, sgid); err != nil {
		return err
	}
	var mounts []mountSpec
	add := func(src, target string, ro bool) error {
		st, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("mount source %s: %w", src, err)
		}
		// A target inside another volume is created in that volume, inside the namespace.
		nested := false
		for _, m := range c.spec.VolumeMounts {
			parent := strings.TrimSuffix(m.MountPath, "/")
			nested = nested || (target != parent && strings.HasPrefix(target, parent+"/"))
		}
		if !nested {
			if err := w.r.ensureMountpoint(target, !st.IsDir()); err != nil {
				return fmt.Errorf("mount point %s: %w", target, err)
			}
		}
		mounts = append(mounts, mountSpec{Source: src, Target: target, ReadOnly: ro})
		return nil
	}
	if err := add(w.hostsPath, "/etc/hosts", true); err != nil {
		return err
	}
	covered := func(p string) bool {
		for _, m := range c.spec.VolumeMounts {
			if p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/") {
				return true
			}
		}
		return false
	}
	dir := c.spec.WorkingDir
	if dir == "" {
		dir = c.rule.WorkingDir
	}
	switch {
	case dir == "":
		dir = scratch
	case !covered(dir):
		// The image's writable layer at its working directory.
		if err := add(scratch, dir, false); err != nil {
			return err
		}
	}
	for _, m := range c.spec.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok {
			return fmt.Errorf("volume %s not found", m.Name)
		}
		if sub := m.SubPath; sub != "" || m.SubPathExpr != "" {
			if m.SubPathExpr != "" {
				sub = expand(m.SubPathExpr, vars)
			}
			parent := src
			src = filepath.Join(src, filepath.Clean("/"+sub))
			if _, err := os.Stat(src); os.IsNotExist(err) {
				// Owned like the volume it lies in, as the kubelet makes it.
				st, err := os.Stat(parent)
				if err != nil {
					return err
				}
				sys, _ := st.Sys().(*syscall.Stat_t)
				if err := os.MkdirAll(src, 0o750); err != nil {
					return err
				}
				if sys != nil {
					if err := chownMode(src, 0o750|uint32(st.Mode().Perm()&0o020), int(sys.Uid), int(sys.Gid)); err != nil {
						return err
					}
				}
			}
		}
		if err := add(src, m.MountPath, m.ReadOnly); err != nil {
			return err
		}
	}

	// Raw block volumes: the node's device node bound at the device path, in the pod's
	// namespace only (the empty file the bind covers is the host's mount point).
	for _, d := range c.spec.VolumeDevices {
		src, ok := vols[d.Name]
		if !ok {
			return fmt.Errorf("volume %s not found", d.Name)
		}
		if st, err := os.Stat(src); err != nil || st.Mode()&os.ModeDevice == 0 {
			return fmt.Errorf("volumeDevice %s: %s is not a block volume", d.Name, src)
		}
		if err := add(src, d.DevicePath, false); err != nil {
			return err
		}
	}

	spec := execSpec{Hostname: podHostname(pod), Mounts: mounts, Argv: argv, Env: env, Dir: dir}
	if user.UID != 0 || user.GID != 0 || len(user.Groups) > 0 || user.NoNewPrivs {
		spec.User = &user
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	specPath := filepath.Join(w.dir, "exec-"+c.spec.Name+".json")
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(w.r.cfg.LogDir, fmt.Sprintf("%s_%s_%s.log", pod.Namespace, pod.Name, c.spec.Name))
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s localcluster: starting %q on %s as %d:%d\n", time.Now().Format(time.RFC3339), argv, pod.Status.PodIP, user.UID, user.GID)
	cmd := exec.Command(w.r.cfg.HelperBinary, HelperCommand, specPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append([]string{}, w.r.cfg.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
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

// observe runs due probes, notices exited processes and restarts them in place as the
// kubelet does: by restartPolicy, after a back-off that grows with each crash.
func (w *podWorker) observe(pod *corev1.Pod) {
	now := time.Now()
	managed, done, failed := 0, 0, 0
	for _, c := range w.containers {
		if !c.managed {
			continue
		}
		managed++
		switch {
		case c.cmd != nil && !exitedNow(c):
			w.probeContainer(pod, c)
			if !c.listenChecked && now.Sub(c.startedAt) > 3*time.Second {
				c.listenChecked = true
				w.warnWildcardListeners(pod, c)
			}
		case c.cmd != nil && !c.handled:
			w.exited(pod, c)
		}
		if !c.restartAt.IsZero() && !now.Before(c.restartAt) {
			if err := w.startContainer(pod, c); err != nil {
				c.waitReason, c.waitMessage = "CreateContainerError", truncate(err.Error())
				var ce *configError
				if errors.As(err, &ce) {
					c.waitReason = reasonConfigError
				}
				c.restartAt = now.Add(time.Second)
				w.r.log.Warn("Failed to restart container", "pod", w.key, "container", c.spec.Name, "err", err)
			} else {
				c.restarts++
				w.r.log.Info("Restarted container", "pod", w.key, "container", c.spec.Name, "restarts", c.restarts)
			}
		}
		if c.done {
			done++
			if c.exitCode != 0 {
				failed++
			}
		}
	}
	// Every container ended for good: the pod is Succeeded or Failed (statuses say which).
	if managed > 0 && done == managed {
		w.terminal = true
		w.r.log.Info("Pod containers ended", "pod", w.key, "failed", failed)
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

func (w *podWorker) probeContainer(pod *corev1.Pod, c *container) {
	now := time.Now()
	if rp := c.spec.ReadinessProbe; rp != nil {
		if now.Sub(c.probeStart) >= time.Duration(rp.InitialDelaySeconds)*time.Second &&
			now.Sub(c.lastProbe) >= period(rp) {
			c.lastProbe = now
			err := probe(w.ctx, rp, pod.Status.PodIP, &c.spec)
			if err == nil {
				c.readyFail = 0
				c.readyOK++
				if c.readyOK >= max(rp.SuccessThreshold, 1) {
					c.ready = true
				}
			} else {
				c.readyOK = 0
				c.readyFail++
				if c.readyFail >= threshold(rp.FailureThreshold) || !c.ready {
					c.ready = false
				}
			}
		}
	} else {
		c.ready = true
	}
	if lp := c.spec.LivenessProbe; lp != nil {
		if now.Sub(c.probeStart) >= time.Duration(lp.InitialDelaySeconds)*time.Second &&
			now.Sub(c.lastLive) >= period(lp) {
			c.lastLive = now
			if err := probe(w.ctx, lp, pod.Status.PodIP, &c.spec); err != nil {
				c.liveFail++
				if c.liveFail >= threshold(lp.FailureThreshold) {
					w.r.log.Info("Liveness probe failed; killed the container", "pod", w.key, "container", c.spec.Name, "err", err)
					_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
				}
			} else {
				c.liveFail = 0
			}
		}
	}
}

func period(p *corev1.Probe) time.Duration {
	if p.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(p.PeriodSeconds) * time.Second
}

func threshold(t int32) int32 {
	if t <= 0 {
		return 3
	}
	return t
}

// killAll sends SIGTERM to every running process group, SIGKILL after grace.
func (w *podWorker) killAll(grace time.Duration) {
	all := append(append([]*container{}, w.inits...), w.containers...)
	for _, c := range all {
		if c.cmd != nil && !exitedNow(c) {
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	deadline := time.After(grace)
	for _, c := range all {
		if c.cmd == nil {
			continue
		}
		select {
		case <-c.exited:
		case <-deadline:
		}
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
		_ = os.Remove(w.pidFile(c))
	}
}

func (w *podWorker) cleanup() {
	w.mu.Lock()
	w.hostsPath = ""
	w.mu.Unlock()
	_ = os.RemoveAll(w.dir)
}

// reportStatus patches the pod status when it changed since the last patch.
func (w *podWorker) reportStatus(pod *corev1.Pod) {
	st := w.desiredStatus(pod)
	if w.lastStatus != nil && reflect.DeepEqual(*w.lastStatus, st) {
		return
	}
	now := metav1.Now()
	conds := make([]map[string]any, 0, len(st.Conditions))
	for _, c := range st.Conditions {
		lt := now
		for _, old := range pod.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				lt = old.LastTransitionTime
			}
		}
		// A strategic merge keeps fields a patch leaves out: null clears an old reason or
		// message. Only the runner's own condition types are in the list; the merge by type
		// leaves every other condition (readiness gates) as its writer set it.
		m := map[string]any{"type": c.Type, "status": c.Status, "lastTransitionTime": lt, "reason": nil, "message": nil}
		if c.Reason != "" {
			m["reason"] = c.Reason
		}
		if c.Message != "" {
			m["message"] = c.Message
		}
		conds = append(conds, m)
	}
	patch := map[string]any{"status": map[string]any{
		"phase":                 st.Phase,
		"conditions":            conds,
		"containerStatuses":     st.ContainerStatuses,
		"initContainerStatuses": st.InitContainerStatuses,
		"reason":                st.Reason,
		"message":               st.Message,
	}}
	data, err := json.Marshal(patch)
	if err != nil {
		return
	}
	_, err = w.r.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(w.ctx, pod.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status")
	if err != nil {
		if !apierrors.IsNotFound(err) {
			w.r.log.Warn("Failed to patch pod status", "pod", w.key, "err", err)
		}
		return
	}
	w.lastStatus = &st
}

// containerStatus is one container as the kubelet reports it.
func (w *podWorker) containerStatus(c *container) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, ImageID: "localcluster://" + c.rule.Binary,
		RestartCount: c.restarts}
	if c.last != nil {
		cs.LastTerminationState.Terminated = c.last
	}
	switch {
	case !c.managed:
		started := true
		cs.Started, cs.Ready = &started, c.ready
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt.Truncate(time.Second))}
		return cs
	case c.cmd == nil:
		reason := c.waitReason
		if reason == "" {
			reason = "ContainerCreating"
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: c.waitMessage}
		return cs
	case c.done:
		cs.State.Terminated = c.final
	case exitedNow(c):
		// Waiting for its restart (back-off, or a start that failed).
		reason, msg := c.waitReason, c.waitMessage
		if reason == "" {
			reason, msg = "ContainerCreating", ""
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
	default:
		started := true
		cs.Started = &started
		cs.Ready = c.ready
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt.Truncate(time.Second))}
	}
	cs.ContainerID = fmt.Sprintf("localcluster://%d", c.cmd.Process.Pid)
	return cs
}

func (w *podWorker) desiredStatus(pod *corev1.Pod) corev1.PodStatus {
	var st corev1.PodStatus
	cond := func(t corev1.PodConditionType, ok bool, reason string) {
		s := corev1.ConditionFalse
		if ok {
			s, reason = corev1.ConditionTrue, ""
		}
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason})
	}
	if len(w.containers) == 0 {
		// Not started yet.
		st.Phase = corev1.PodPending
		cond(corev1.PodInitialized, len(pod.Spec.InitContainers) == 0, "PodInitializing")
		reason := w.waitingReason
		if reason == "" {
			reason = "ContainerCreating"
		}
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: truncate(w.waiting)}}})
		}
		if w.initFailure != nil {
			st.InitContainerStatuses = []corev1.ContainerStatus{*w.initFailure}
		}
		if w.terminal {
			st.Phase = corev1.PodFailed
		}
		names := make([]string, 0, len(pod.Spec.Containers))
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		w.readiness(pod, &st, names)
		return st
	}
	var unready []string
	failed := 0
	for _, c := range w.containers {
		cs := w.containerStatus(c)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if !cs.Ready {
			unready = append(unready, c.spec.Name)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			failed++
		}
	}
	for _, c := range w.inits {
		cs := w.containerStatus(c)
		if !c.managed || exitedNow(c) {
			cs.Ready, cs.Started = false, nil
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	st.Phase = corev1.PodRunning
	switch {
	case w.terminal && failed == 0:
		st.Phase = corev1.PodSucceeded
	case w.terminal:
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "ProcessExited", "A container process exited."
	}
	cond(corev1.PodInitialized, true, "")
	w.readiness(pod, &st, unready)
	return st
}

// readiness adds ContainersReady and Ready, by the kubelet's rule: Ready also waits for the
// conditions of the pod's readiness gates, which others set on the pod (the runner never
// writes them); a change of one re-runs this through the pod's watch event.
func (w *podWorker) readiness(pod *corev1.Pod, st *corev1.PodStatus, unready []string) {
	cr := containersReadyCondition(st.Phase, unready)
	st.Conditions = append(st.Conditions, cr, podReadyCondition(pod.Spec.ReadinessGates, pod.Status.Conditions, cr))
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}
