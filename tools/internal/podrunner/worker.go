package podrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
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
			w.terminate(pod, grace)
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
