package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

// A control-plane outage stops kube-apiserver and etcd, keeps them stopped for a while and
// starts them again on the same data, as a restart of a real control plane does. The
// controller manager, the scheduler, kwok and the pods keep running: they lose the API
// server and must ride it out, as they would in production.

// outageFile holds the length of the outage the daemon is asked for (SIGUSR1).
func (o *Options) outageFile() string { return o.StateDir() + "/outage" }

// MaxOutage bounds an outage: longer ones would let the nodes' leases expire everywhere,
// which is another fault.
const MaxOutage = 5 * time.Minute

// ControlPlaneOutage asks the running cluster's daemon to stop kube-apiserver and etcd for
// d, and returns once the API server answers /readyz again (or ctx ends). It reports the
// time the API server was unreachable, as seen from here.
func ControlPlaneOutage(ctx context.Context, o Options, d time.Duration) (time.Duration, error) {
	if d <= 0 || d > MaxOutage {
		return 0, fmt.Errorf("outage of %s: want more than 0 and at most %s", d, MaxOutage)
	}
	pid, err := readPidFile(o.daemonPidFile())
	if err != nil {
		return 0, fmt.Errorf("no running cluster daemon in %s: %w", o.Dir, err)
	}
	if !alive(pid) {
		return 0, fmt.Errorf("no running cluster daemon in %s: process %d is gone", o.Dir, pid)
	}
	client, err := o.httpClient()
	if err != nil {
		return 0, err
	}
	readyz := o.APIServerURL() + "/readyz"
	if !answers(client, readyz) {
		return 0, errors.New("the API server is not ready before the outage")
	}
	if err := os.WriteFile(o.outageFile(), []byte(d.String()+"\n"), 0o644); err != nil {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return 0, fmt.Errorf("signalling the daemon: %w", err)
	}
	var down time.Time
	for {
		up := answers(client, readyz)
		switch {
		case !up && down.IsZero():
			down = time.Now()
		case up && !down.IsZero():
			return time.Since(down), nil
		}
		if !alive(pid) {
			return 0, errors.New("the cluster daemon exited during the outage; see its log")
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for the API server after a %s outage: %w", d, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func answers(c *http.Client, url string) bool {
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// readOutage is the outage the daemon was asked for.
func (o *Options) readOutage() (time.Duration, error) {
	b, err := os.ReadFile(o.outageFile())
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil || d <= 0 || d > MaxOutage {
		return 0, fmt.Errorf("outage file %s: %q", o.outageFile(), b)
	}
	return d, nil
}
