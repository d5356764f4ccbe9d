package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// uninstallRelease is uninstalled by TestUninstallRemovesEverything, which lives in the
// last file (go test runs files in name order) so that every product's scenario has run.
// Not the Vald operator: its local-cluster install carries the ValdRelease CRD as a
// template, and deleting it waits on the sample's ValdReleases.
const uninstallRelease = "memgraph-operator"

func TestUninstallRemovesEverything(t *testing.T) {
	needInstalled(t, uninstallRelease)
	s := serviceByName(uninstallRelease)
	ctx := t.Context()
	manifest, err := helm(ctx, "get", "manifest", s.name, "-n", s.namespace())
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("parsing the release manifest: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
	}
	t.Logf("release %s made %d objects: %v", s.name, len(objs), kinds)
	for _, k := range []string{"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if kinds[k] == 0 {
			t.Errorf("the release manifest has no %s", k)
		}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.cfg)))
	begin := time.Now()
	if _, err := helm(ctx, "uninstall", s.name, "-n", s.namespace()); err != nil {
		t.Fatal(err)
	}
	installed.Delete(s.name)
	t.Logf("helm uninstall %s: %s", s.name, since(begin))
	var left []string
	err = poll(ctx, t, "every object of "+s.name+" gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, u := range objs {
			gvk := u.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return false, err
			}
			ri := env.dyn.Resource(m.Resource)
			var obj *unstructured.Unstructured
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				ns := u.GetNamespace()
				if ns == "" {
					ns = s.namespace()
				}
				obj, err = ri.Namespace(ns).Get(ctx, u.GetName(), metav1.GetOptions{})
			} else {
				obj, err = ri.Get(ctx, u.GetName(), metav1.GetOptions{})
			}
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return false, err
			default:
				left = append(left, obj.GetKind()+"/"+obj.GetName())
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("%v; still there: %q", err, left)
	}
	// The pods go with the Deployment's ReplicaSet (garbage collection).
	err = poll(ctx, t, s.name+" pods gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ps, err := pods(ctx, s)
		return len(ps) == 0, err
	})
	if err != nil {
		t.Fatalf("%v:\n%s", err, describePods(ctx, s))
	}
	if _, err := helm(ctx, "status", s.name, "-n", s.namespace()); err == nil {
		t.Errorf("helm still knows release %s", s.name)
	} else if !strings.Contains(err.Error(), "not found") {
		t.Errorf("helm status: %v", errors.Unwrap(err))
	}
}
