package valdhelmsim

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/podrunner"
)

const manifestNamespace = "vald-helm-operator"

func TestParseOptions(t *testing.T) {
	env := map[string]string{"WATCH_NAMESPACE": "a, b"}
	o, err := ParseOptions([]string{"run", "--watches-file=./watches.yaml", "--zap-log-level=debug", "--deploy-delay=5s"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.DeployDelay != 5*time.Second || strings.Join(o.Namespaces, ",") != "a,b" || o.MaxConcurrentReconciles != 1 {
		t.Fatalf("options %+v", o)
	}
	o, err = ParseOptions([]string{"--namespace=c"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil || strings.Join(o.Namespaces, ",") != "c" || o.DeployDelay != 2*time.Second {
		t.Fatalf("--namespace over WATCH_NAMESPACE: %+v, %v", o, err)
	}
	_, err = ParseOptions([]string{"--deploy-delay=-1s", "--max-concurrent-reconciles=0", "--health-probe-bind-address=8081"}, os.Getenv, io.Discard)
	for _, want := range []string{"--deploy-delay", "--max-concurrent-reconciles", "--health-probe-bind-address"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	if _, err := ParseOptions([]string{"install"}, os.Getenv, io.Discard); err == nil {
		t.Error("an unknown subcommand was accepted")
	}
	if _, err := ParseOptions([]string{"--help"}, os.Getenv, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}

// readManifest reads deploy/local/vald-helm-operator.yaml, the objects in file order.
func readManifest(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "local", "vald-helm-operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("manifest document %q: %v", doc, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs
}

// TestManifestRunsTheSimulatorAsItsServiceAccount applies deploy/local/vald-helm-operator.yaml
// to the real API server, checks the local cluster's runner maps its image to this
// simulator, and runs Main with the Deployment's own arguments (listen addresses bound as
// the runner binds them) as the manifest's ServiceAccount: its RBAC is enough to elect a
// leader and release ValdReleases, and WATCH_NAMESPACE limits what it serves.
func TestManifestRunsTheSimulatorAsItsServiceAccount(t *testing.T) {
	ctx := context.Background()
	var deploy appsv1.Deployment
	for _, obj := range readManifest(t) {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s %s from the manifest: %v", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetKind() == "Deployment" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &deploy); err != nil {
				t.Fatal(err)
			}
		}
		if ns := obj.GetNamespace(); obj.GetKind() != "Namespace" && obj.GetKind() != "ClusterRole" && obj.GetKind() != "ClusterRoleBinding" && ns != manifestNamespace {
			t.Errorf("%s %s is in namespace %q, not %s", obj.GetKind(), obj.GetName(), ns, manifestNamespace)
		}
	}
	if len(deploy.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the manifest has no single-container Deployment: %+v", deploy.Spec.Template.Spec)
	}
	c := deploy.Spec.Template.Spec.Containers[0]
	rule, ok := podrunner.Rules(podrunner.DefaultImageRules("/opt/bin")).Match(c.Image)
	if !ok || rule.Binary != "/opt/bin/vald-helm-sim" {
		t.Fatalf("image %s runs %q on the local cluster, want bin/vald-helm-sim", c.Image, rule.Binary)
	}

	// The arguments as the runner passes them: $(POD_NAMESPACE) expanded, each listen
	// flag the rule names bound to an address of the pod's (here a free loopback port).
	probe := testenv.FreeAddr(t)
	bound := map[string]string{"--metrics-bind-address": testenv.FreeAddr(t), "--health-probe-bind-address": probe}
	var args []string
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		a = strings.ReplaceAll(a, "$(POD_NAMESPACE)", manifestNamespace)
		if name, _, ok := strings.Cut(a, "="); ok && bound[name] != "" {
			found := false
			for _, f := range rule.ListenFlags {
				found = found || f == name
			}
			if !found {
				t.Fatalf("the image rule does not bind %s to the pod's address", name)
			}
			a = name + "=" + bound[name]
			delete(bound, name)
		}
		args = append(args, a)
	}
	if len(bound) > 0 {
		t.Fatalf("the Deployment passes no %v", bound)
	}

	kc, err := clientcmd.LoadFromFile(env.Kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = "system:serviceaccount:" + manifestNamespace + ":" + deploy.Spec.Template.Spec.ServiceAccountName
	}
	kubeconfig := filepath.Join(t.TempDir(), "sa-kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	args = append(args, "--kubeconfig="+kubeconfig, "--deploy-delay=300ms")

	served := testenv.NewNamespace(t, env.Client, "vhs-served-")
	other := testenv.NewNamespace(t, env.Client, "vhs-other-")
	if err := env.Client.Create(ctx, newVR(other, "vr", map[string]any{}, nil)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, newVR(served, "vr", map[string]any{}, nil)); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	var logs testenv.LogBuffer
	go func() {
		done <- Main(runCtx, args, func(k string) string {
			if k == "WATCH_NAMESPACE" {
				return served
			}
			return ""
		}, &logs)
	}()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Main: %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Main did not stop\n%s", logs.String())
		}
	}()

	vr, _ := waitVR(t, served, "vr", "is Deployed (and held by the finalizer) by the simulator running as its ServiceAccount", func(vr *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionDeployed, "True", ReasonInstallSuccessful) && len(vr.GetFinalizers()) == 1
	})
	if vr.GetFinalizers()[0] != Finalizer {
		t.Errorf("finalizers %v", vr.GetFinalizers())
	}
	// Both were created before the simulator started, so had it watched the other
	// namespace it would have written there first or at the same time.
	if vr := getVR(t, other, "vr"); vr.Object["status"] != nil {
		t.Errorf("a ValdRelease outside WATCH_NAMESPACE got a status: %s", describe(vr))
	}
	var lease coordinationv1.Lease
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: manifestNamespace, Name: "vald-helm-operator"}, &lease); err != nil {
		t.Fatalf("leader-election Lease: %v\n%s", err, logs.String())
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("Lease has no holder: %+v", lease.Spec)
	}
	resp, err := http.Get("http://" + probe + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "Updated ValdRelease status") {
		t.Errorf("Main's log does not show the status write:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "forbidden") {
		t.Errorf("the ServiceAccount was refused something:\n%s", logs.String())
	}
}
