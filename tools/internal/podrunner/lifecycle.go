package podrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// minTermination is what a container gets after its preStop hook, however long the hook
// took: the kubelet's minimum grace period.
const minTermination = 2 * time.Second

// terminate stops the pod's processes as the kubelet does on deletion: every running
// container's preStop hook first (the hooks in parallel, all bounded by the grace period),
// then SIGTERM, then SIGKILL once the rest of the grace period (at least minTermination)
// has passed.
func (w *podWorker) terminate(pod *corev1.Pod, grace time.Duration) {
	start := time.Now()
	w.runPreStop(pod, start.Add(grace))
	w.killAll(max(grace-time.Since(start), minTermination))
}

// runPreStop runs the preStop hook of every running container that has one and returns
// when all have ended or deadline passed (those still running are killed). A hook that
// fails is logged, and its container is stopped all the same.
func (w *podWorker) runPreStop(pod *corev1.Pod, deadline time.Time) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// The pod object removed meanwhile (a forced deletion) ends the hooks at once.
	go func() {
		select {
		case <-w.goneCh:
		case <-w.stopCh:
		case <-ctx.Done():
		}
		cancel()
	}()
	var wg sync.WaitGroup
	for _, c := range w.containers {
		h := c.spec.Lifecycle
		if !c.managed || h == nil || h.PreStop == nil || c.cmd == nil || exitedNow(c) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			begin := time.Now()
			err := w.runHook(ctx, pod, c, h.PreStop)
			took := time.Since(begin).Round(time.Millisecond)
			if err != nil {
				w.r.log.Warn("PreStop hook failed", "pod", w.key, "container", c.spec.Name, "took", took, "err", err)
				w.containerLog(pod, c, fmt.Sprintf("preStop hook failed after %s: %v", took, err))
				return
			}
			w.r.log.Info("PreStop hook ran", "pod", w.key, "container", c.spec.Name, "took", took)
		}()
	}
	wg.Wait()
}

// runHook runs one lifecycle handler of container c until it ends or ctx does.
func (w *podWorker) runHook(ctx context.Context, pod *corev1.Pod, c *container, h *corev1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		return w.execHook(ctx, pod, c, h.Exec.Command)
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	case h.HTTPGet != nil:
		timeout := int32(time.Until(deadlineOf(ctx)).Seconds())
		return probe(ctx, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: h.HTTPGet}, TimeoutSeconds: max(timeout, 1)},
			pod.Status.PodIP, &c.spec)
	case h.TCPSocket != nil:
		return errors.New("tcpSocket lifecycle handlers are not supported (the kubelet refuses them too)")
	}
	return errors.New("the handler names no action")
}

func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(time.Minute)
	}
	return d
}

// execHook runs command inside container c, as `kubectl exec` would: in the container's
// mounts, with its environment, user and hostname (no $(VAR) expansion, as the kubelet
// does not expand a hook's command). The command is either an executable the container's
// image rule stands in for, or a file the container has at that path through one of its
// volumes (a binary an init container copied there); anything else is not in the image.
func (w *podWorker) execHook(ctx context.Context, pod *corev1.Pod, c *container, command []string) error {
	if len(command) == 0 {
		return errors.New("exec hook without a command")
	}
	user, err := containerCredentials(pod, &c.spec, c.rule.User)
	if err != nil {
		return err
	}
	env, vars, err := w.r.containerEnv(ctx, pod, &c.spec, c.rule.Env)
	if err != nil {
		return err
	}
	argv, err := hookArgv(c.rule, &c.spec, command)
	if err != nil {
		return err
	}
	cmd, err := w.startHelper(pod, c, user, vars, argv, env, "prestop-"+c.spec.Name+".json", fmt.Sprintf("preStop hook %q", command))
	if err != nil {
		return fmt.Errorf("starting the hook: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("hook %q: %w", command[0], err)
		}
		return nil
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		exit := <-done
		return fmt.Errorf("hook %q killed (%w): %w", command[0], exit, context.Cause(ctx))
	}
}

// hookArgv maps a hook's command to what the helper executes: the rule's binary for an
// executable it stands in for (with the rest of the command as its arguments), or the
// command itself when its first element is an absolute path inside one of the container's
// volume mounts.
func hookArgv(rule ImageRule, c *corev1.Container, command []string) ([]string, error) {
	first := command[0]
	for _, name := range rule.Commands {
		if path.Base(first) == name {
			return append([]string{rule.Binary}, command[1:]...), nil
		}
	}
	if path.IsAbs(first) {
		clean := path.Clean(first)
		for _, m := range c.VolumeMounts {
			mp := strings.TrimSuffix(path.Clean(m.MountPath), "/")
			if strings.HasPrefix(clean, mp+"/") {
				return append([]string{clean}, command[1:]...), nil
			}
		}
	}
	return nil, fmt.Errorf("executable %q not found in image %s: the local cluster runs only the executables its image rule stands in for (%s) and files the container's volumes hold",
		first, c.Image, strings.Join(rule.Commands, ", "))
}

// containerLog appends one line to c's log, as the kubelet's events would say it.
func (w *podWorker) containerLog(pod *corev1.Pod, c *container, line string) {
	logPath := filepath.Join(w.r.cfg.LogDir, fmt.Sprintf("%s_%s_%s.log", pod.Namespace, pod.Name, c.spec.Name))
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== %s localcluster: %s\n", time.Now().Format(time.RFC3339), line)
}
