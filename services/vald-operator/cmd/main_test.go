package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// TestRunAgainstAPIServer runs the binary's entry point, flags and environment included,
// against a real API server: a release converges, metrics and probes are served, and the
// manager stops cleanly.
func TestRunAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	env, err := testenv.Start(testenv.Options{AddToSchemes: []func(*runtime.Scheme) error{valdv1.AddToScheme}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()

	kubeconfig := env.Kubeconfig(t)

	metricsAddr, probeAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testenv.LogBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, []string{
			"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--log-format=text",
			"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=" + probeAddr,
		}, func(k string) string { return map[string]string{"REQUEUE_AFTER": "1s"}[k] }, logs)
	}()

	c := env.Client
	vor := &valdv1.ValdOperatorRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Spec: valdv1.ValdOperatorReleaseSpec{
			Infrastructure: []valdv1.Infrastructure{{Role: "green", Active: ptr.To(true), Clusters: []valdv1.Cluster{{Name: "a", ID: "1"}}}},
			VectorEngine:   valdv1.VectorEngine{Name: "vald", Vald: valdv1.Vald{Agent: valdv1.Agent{NGT: valdv1.NGT{Dimension: 4}}}},
		},
	}
	if err := c.Create(ctx, vor); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForObject(t, c, vor, "is Completed and Ready", func(got *valdv1.ValdOperatorRelease) bool {
		return got.Status.Phase == valdv1.ConditionCompleted && got.Status.State == "Ready"
	}, func(got *valdv1.ValdOperatorRelease) string { return fmt.Sprintf("%+v\nlogs:\n%s", got.Status, logs) })
	for path, want := range map[string]string{
		"http://" + metricsAddr + "/metrics": "vald_operator_reconcile_total",
		"http://" + probeAddr + "/readyz":    "ok",
		"http://" + probeAddr + "/healthz":   "ok",
	} {
		resp, err := http.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, body without %q", path, resp.StatusCode, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}
