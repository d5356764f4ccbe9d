package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/testenv"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestRunAgainstAPIServer runs the binary's entry point, flags and environment included,
// against a real API server that lacks the ValdRelease CRD at first (the Vald Helm Operator
// owns it and may come later): the operator starts and serves its probes, the release says
// the CRD is missing (condition and event), installing the CRD converges it without a
// restart, metrics are served, and the manager stops cleanly.
func TestRunAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crds := t.TempDir()
	vorCRD, err := os.ReadFile(filepath.Join(root, "deploy", "crds", "vald.vdaas.org_valdoperatorreleases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crds, "vor.yaml"), vorCRD, 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{CRDDirs: []string{crds}, AddToSchemes: []func(*runtime.Scheme) error{valdv1.AddToScheme, apiextensionsv1.AddToScheme}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()

	metricsAddr, probeAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testenv.LogBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, []string{
			"--kubeconfig=" + env.Kubeconfig(t), "--leader-elect=false", "--log-format=text",
			"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=" + probeAddr,
		}, func(k string) string {
			return map[string]string{"REQUEUE_AFTER": "1s", "CRD_POLL_INTERVAL": "200ms"}[k]
		}, logs)
	}()

	c := env.Client
	vor := &valdv1.ValdOperatorRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "nocrd", Namespace: "default"},
		Spec: valdv1.ValdOperatorReleaseSpec{
			Infrastructure: []valdv1.Infrastructure{{Role: "green", Active: ptr.To(true), Clusters: []valdv1.Cluster{{Name: "a", ID: "1"}}}},
			VectorEngine:   valdv1.VectorEngine{Name: "vald", Vald: valdv1.Vald{Agent: valdv1.Agent{NGT: valdv1.NGT{Dimension: 4}}}},
		},
	}
	if err := c.Create(ctx, vor); err != nil {
		t.Fatal(err)
	}
	const missing = "The ValdRelease CRD (valdreleases.vald.vdaas.org) is not installed: install the Vald Helm Operator, or the vald-operator chart with installValdReleaseCRD=true, or `kubectl apply -f deploy/crds/vald.vdaas.org_valdreleases.yaml`. The operator notices it without a restart."
	testenv.WaitForObject(t, c, vor, "says the CRD is missing", func(got *valdv1.ValdOperatorRelease) bool {
		for _, cond := range got.Status.Conditions {
			if cond.Type == valdv1.ConditionWaitingCreateVrs && cond.Reason == valdv1.ReasonPending && cond.Message == missing {
				return got.Status.State == "Pending"
			}
		}
		return false
	}, func(got *valdv1.ValdOperatorRelease) string { return describe(got, done, logs) })
	testenv.WaitFor(t, "an event saying the CRD is missing", func() bool {
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "nocrd" && e.Action == valdv1.ConditionWaitingCreateVrs && e.Reason == valdv1.ReasonPending && strings.Contains(e.Note, "valdreleases.vald.vdaas.org) is not installed") {
				return true
			}
		}
		return false
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + probeAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s while the CRD is missing: %d %s", path, resp.StatusCode, body)
		}
	}

	// The CRD installed: the same process picks it up and the release converges.
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "crds", "vald.vdaas.org_valdreleases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	// No Vald Helm Operator runs here: the test writes the status it would, once the
	// ValdRelease exists, and only then does the release complete.
	vr := &valdv1.ValdRelease{}
	testenv.WaitFor(t, "the ValdRelease after the CRD appeared", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default-a"}, vr) == nil
	})
	testenv.WaitForObject(t, c, vor, "waits for the Vald Helm Operator", func(got *valdv1.ValdOperatorRelease) bool {
		for _, cond := range got.Status.Conditions {
			if cond.Type == valdv1.ConditionWaitingCreateVrs && strings.HasPrefix(cond.Message, "Waiting for the Vald Helm Operator to deploy") {
				return got.Status.State == "Pending"
			}
		}
		return false
	}, func(got *valdv1.ValdOperatorRelease) string { return describe(got, done, logs) })
	deployed := `{"status":{"conditions":[{"type":"Initialized","status":"True"},{"type":"Deployed","status":"True","reason":"InstallSuccessful"}]}}`
	if err := c.Status().Patch(ctx, vr, client.RawPatch(types.MergePatchType, []byte(deployed))); err != nil {
		t.Fatal(err)
	}
	testenv.WaitForObject(t, c, vor, "is Completed and Ready", func(got *valdv1.ValdOperatorRelease) bool {
		return got.Status.Phase == valdv1.ConditionCompleted && got.Status.State == "Ready"
	}, func(got *valdv1.ValdOperatorRelease) string { return describe(got, done, logs) })
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

	// The ValdRelease watch runs: a deleted ValdRelease comes back through its event.
	if err := c.Delete(ctx, vr); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the deleted ValdRelease to come back", func() bool {
		again := &valdv1.ValdRelease{}
		return c.Get(ctx, client.ObjectKeyFromObject(vr), again) == nil && again.UID != vr.UID
	})

	select {
	case err := <-done:
		t.Fatalf("the operator exited while it should run: %v\nlogs:\n%s", err, logs)
	case <-time.After(10 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// describe renders what a failed wait saw: the status, whether the operator exited, its logs.
func describe(got *valdv1.ValdOperatorRelease, done chan error, logs *testenv.LogBuffer) string {
	exited := "running"
	select {
	case err := <-done:
		exited = fmt.Sprintf("exited: %v", err)
		done <- err
	default:
	}
	return fmt.Sprintf("%+v\noperator %s\nlogs:\n%s", got.Status, exited, logs)
}
