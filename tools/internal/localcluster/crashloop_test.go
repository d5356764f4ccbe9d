package localcluster

import (
	"testing"
	"time"
)

func TestCrashLoop(t *testing.T) {
	c := crashLoop{restartable: map[string]bool{"kube-scheduler": true}}
	now := time.Date(2026, 12, 5, 15, 0, 0, 0, time.UTC)
	if _, ok := c.next("etcd", now); ok {
		t.Error("etcd restarted: only the restartable components are")
	}
	var waits []time.Duration
	for i := range maxCrashes {
		wait, ok := c.next("kube-scheduler", now.Add(time.Duration(i)*time.Second))
		if !ok {
			t.Fatalf("exit %d within the window refused, want %d restarts", i+1, maxCrashes)
		}
		waits = append(waits, wait)
	}
	for i, w := range waits {
		if want := time.Second << i; w != want {
			t.Errorf("restart %d after %s, want %s", i+1, w, want)
		}
	}
	if _, ok := c.next("kube-scheduler", now.Add(maxCrashes*time.Second)); ok {
		t.Errorf("exit %d within %s restarted: a crash loop stops the cluster", maxCrashes+1, crashWindow)
	}
	// Once the window has passed, the count starts over.
	if wait, ok := c.next("kube-scheduler", now.Add(crashWindow+time.Hour)); !ok || wait != time.Second {
		t.Errorf("exit after a quiet window: restart %v after %s, want a restart after 1s", ok, wait)
	}
}
