package crdcheck

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// waited is one object and the conditions the README tells people to `kubectl wait` on.
type waited struct {
	resource, name string
	// from names a sample in deploy/samples holding the object; else obj is used.
	from string
	obj  string
	// status is written besides the conditions (the fields the columns show).
	status map[string]any
	// conditions: the types the README's `kubectl wait --for=condition=` lines name.
	conditions []string
	// shown: values `kubectl get` must print once the status is written.
	shown []string
}

var waitedKinds = []waited{
	{resource: "vkc", name: "demo", from: "valkey.yaml", conditions: []string{"Ready"},
		status: map[string]any{"state": "Ready", "reason": "ClusterHealthy", "shards": int64(3), "readyShards": int64(3), "lastFailoverTime": "2025-01-01T00:00:00Z"}, shown: []string{"Ready", "ClusterHealthy"}},
	{resource: "vkn", name: "demo-0-0", obj: `
apiVersion: valkey.io/v1alpha1
kind: ValkeyNode
metadata: {name: demo-0-0}
spec: {clusterName: demo, shardIndex: 0, nodeIndex: 0}`, conditions: []string{"Ready", "ExternalAddressAnnounced"},
		status: map[string]any{"role": "primary", "shard": int64(0), "ready": true}, shown: []string{"primary", "true"}},
	{resource: "vkb", name: "cache-manual-1", obj: `
apiVersion: valkey.io/v1alpha1
kind: ValkeyBackup
metadata: {name: cache-manual-1}
spec: {cluster: {name: demo}}`, conditions: []string{"Completed"},
		status: map[string]any{"phase": "Completed", "size": int64(4096), "stoppedAt": "2025-01-01T00:00:00Z"}, shown: []string{"Completed", "4096"}},
	{resource: "mgc", name: "memgraph-demo", from: "memgraph.yaml", conditions: []string{"Ready", "Converged", "Updated", "VolumesResized"},
		status: map[string]any{"state": "Ready", "reason": "Ready", "main": "instance_0", "leader": "coordinator_1", "coordinators": int64(3), "dataInstances": int64(2), "readyCoordinators": int64(3), "readyDataInstances": int64(2), "lastFailoverTime": "2025-01-01T00:00:00Z"},
		shown:  []string{"instance_0", "coordinator_1"}},
	{resource: "vc", name: "veltrix-demo", from: "veltrix.yaml", conditions: []string{"Ready"},
		status: map[string]any{"state": "Ready", "reason": "MembersReady", "size": int64(3), "readyMembers": int64(3), "lastFailoverTime": "2025-01-01T00:00:00Z"},
		shown:  []string{"Ready", "MembersReady"}},
	{resource: "vor", name: "my-vor", from: "vald.yaml", conditions: []string{"Completed"},
		status: map[string]any{"phase": "Completed", "state": "Ready", "progressText": "3/3"}, shown: []string{"Completed", "3/3"}},
}

// TestKubectlWaitAndColumns creates an object of every kind the README waits on (from
// deploy/samples where there is one), then, on the real API server, with the pinned
// kubectl:
//   - `kubectl wait --for=condition=<type>` times out while the condition is False (so the
//     check can fail),
//   - and returns once the status subresource says True: the types the README names are
//     ones kubectl can wait on, under the status the CRD's schema admits;
//   - `kubectl get` shows the written fields in the columns.
func TestKubectlWaitAndColumns(t *testing.T) {
	kubectl := kubectlPath(t)
	kubeconfig := env.Kubeconfig(t)
	ns := testenv.NewNamespace(t, env.Client, "crdcheck")
	ctx := context.Background()
	run := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	for _, w := range waitedKinds {
		t.Run(w.resource, func(t *testing.T) {
			u := objectOf(t, w)
			u.SetNamespace(ns)
			if err := env.Client.Create(ctx, u); err != nil {
				t.Fatalf("creating %s/%s: %v", w.resource, w.name, err)
			}
			writeStatus(t, u, w, metav1.ConditionFalse)
			for _, c := range w.conditions {
				if out, err := run(30*time.Second, "wait", "--for=condition="+c, w.resource+"/"+w.name, "--timeout=1s"); err == nil {
					t.Errorf("kubectl wait --for=condition=%s returned with the condition False: %s", c, out)
				}
			}
			writeStatus(t, u, w, metav1.ConditionTrue)
			for _, c := range w.conditions {
				if out, err := run(60*time.Second, "wait", "--for=condition="+c, w.resource+"/"+w.name, "--timeout=20s"); err != nil {
					t.Errorf("kubectl wait --for=condition=%s: %v: %s", c, err, out)
				}
			}
			out, err := run(30*time.Second, "get", w.resource, w.name)
			if err != nil {
				t.Fatalf("kubectl get: %v: %s", err, out)
			}
			header, _, _ := strings.Cut(out, "\n")
			for _, col := range wantColumns[u.GetKind()] {
				if !strings.Contains(header, strings.ToUpper(col)) {
					t.Errorf("kubectl get %s: no column %s in %q", w.resource, strings.ToUpper(col), header)
				}
			}
			for _, v := range w.shown {
				if !strings.Contains(out, v) {
					t.Errorf("kubectl get %s: %q not shown:\n%s", w.resource, v, out)
				}
			}
			t.Logf("kubectl get %s:\n%s", w.resource, out)
		})
	}
}

// kubectlPath is the kubectl `make controlplane` builds next to the API server ($KUBECTL
// overrides it).
func kubectlPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KUBECTL"); p != "" {
		return p
	}
	dir, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("kubectl missing (%v): run `make controlplane`, or point $KUBECTL at one", err)
	}
	return p
}

// objectOf reads the object from its sample (the document of its kind and name) or its
// literal.
func objectOf(t *testing.T, w waited) *unstructured.Unstructured {
	t.Helper()
	var r io.Reader = strings.NewReader(w.obj)
	if w.from != "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(root, "deploy", "samples", w.from))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r = f
	}
	dec := k8syaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if u.GetName() == w.name && u.GetKind() != "Namespace" && u.GetKind() != "Secret" {
			return u
		}
	}
	t.Fatalf("no %s named %s in %s", w.resource, w.name, w.from)
	return nil
}

// writeStatus writes w.status and every condition of w with the status s through the
// status subresource, as the operator does.
func writeStatus(t *testing.T, u *unstructured.Unstructured, w waited, s metav1.ConditionStatus) {
	t.Helper()
	ctx := context.Background()
	testenv.EventuallyNil(t, 10*time.Second, "writing the status of "+w.name, func() error {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(schema.FromAPIVersionAndKind(u.GetAPIVersion(), u.GetKind()))
		if err := env.Client.Get(ctx, clientKey(u), live); err != nil {
			return err
		}
		status := map[string]any{}
		for k, v := range w.status {
			status[k] = v
		}
		var conds []any
		for _, c := range w.conditions {
			conds = append(conds, map[string]any{"type": c, "status": string(s), "reason": "Test", "message": "written by the test",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": live.GetGeneration()})
		}
		status["conditions"] = conds
		status["observedGeneration"] = live.GetGeneration()
		live.Object["status"] = status
		return env.Client.Status().Update(ctx, live)
	})
}

func clientKey(u *unstructured.Unstructured) client.ObjectKey {
	return client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}
}
