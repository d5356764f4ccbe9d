package podrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// wildcardListeners returns the TCP ports pid listens on at every address (0.0.0.0 or
// ::). All pods share the host's network, so such a listener takes the port on every pod
// address and the next pod that binds it fails; the image rule's ListenFlags bind the
// flags it knows to the pod's address, anything else must bind $(POD_IP) itself.
func wildcardListeners(pid int) []string {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, file := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			addr, port, ok := strings.Cut(f[1], ":")
			if !ok || strings.Trim(addr, "0") != "" {
				continue
			}
			if p, err := strconv.ParseUint(port, 16, 16); err == nil {
				out = append(out, fmt.Sprintf("*:%d", p))
			}
		}
	}
	return out
}

// warnWildcardListeners reports wildcard listeners of a container once, in the runner's
// log, the container's log and as a pod Event.
func (w *podWorker) warnWildcardListeners(pod *corev1.Pod, c *container) {
	ports := wildcardListeners(c.cmd.Process.Pid)
	if len(ports) == 0 {
		return
	}
	msg := fmt.Sprintf("Container %s listens on %s at every address; bind to $(POD_IP) or name the flag in the image rule's listenFlags, or other pods cannot use the port.",
		c.spec.Name, strings.Join(ports, ", "))
	w.r.log.Warn("Container listens on every address", "pod", w.key, "container", c.spec.Name, "ports", ports)
	logPath := filepath.Join(w.r.cfg.LogDir, fmt.Sprintf("%s_%s_%s.log", pod.Namespace, pod.Name, c.spec.Name))
	if f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(f, "=== %s localcluster: %s\n", time.Now().Format(time.RFC3339), msg)
		f.Close()
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Reason:         "WildcardListen",
		Message:        msg,
		Type:           corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "localcluster-runner", Host: pod.Spec.NodeName},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	_, _ = w.r.cfg.Client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}
