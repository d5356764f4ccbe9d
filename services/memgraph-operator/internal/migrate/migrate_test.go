package migrate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

var env *testenv.Env

// The control plane starts with the CRD the operator had before v1alpha1 took the
// document's shape (testdata/v0, git show ff7341f^:deploy/crds/...); the test upgrades it.
func TestMain(m *testing.M) {
	testenv.MainWith(m, &env, testenv.Options{
		CRDDirs:      []string{"testdata/v0"},
		AddToSchemes: []func(*runtime.Scheme) error{memgraphv1.AddToScheme, apiextv1.AddToScheme},
	})
}

// oldCluster is a MemgraphCluster as the earlier operator's users wrote it.
const oldCluster = `apiVersion: memgraph.com/v1alpha1
kind: MemgraphCluster
spec:
  coordinators: 3
  dataInstances: 2
  license: {secretName: enterprise, licenseKey: LIC, organizationKey: ORG}
  storage:
    retentionPolicy: {whenDeleted: Delete, whenScaled: Retain}
`

// TestUpgradeKeepsLicenseAndRetention: clusters stored under the old CRD, read after the
// current CRD is installed and the migration ran, keep their license Secret reference and
// both retention policies; a second run changes nothing; new clusters cannot use the old
// shapes. Without Run the typed read fails (an object where a string belongs).
func TestUpgradeKeepsLicenseAndRetention(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "mgup-")
	split := create(t, ns, "split", oldCluster)
	defaults := create(t, ns, "defaults", strings.NewReplacer(
		", licenseKey: LIC, organizationKey: ORG", "",
		"{whenDeleted: Delete, whenScaled: Retain}", "{}").Replace(oldCluster))

	installCurrentCRD(t)

	n, err := Run(ctx, env.Client)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Run migrated %d clusters, want 2", n)
	}
	c := &memgraphv1.MemgraphCluster{}
	if err := env.Client.Get(ctx, split, c); err != nil {
		t.Fatalf("typed read after the migration: %v", err)
	}
	if c.Spec.Secrets != (memgraphv1.SecretsSpec{Name: "enterprise", LicenseKey: "LIC", OrganizationKey: "ORG"}) || c.Spec.License != nil {
		t.Errorf("split: secrets %+v, license %+v", c.Spec.Secrets, c.Spec.License)
	}
	if c.Spec.Storage.RetentionPolicy != memgraphv1.RetentionDelete || !ptr.Equal(c.Spec.Storage.RetentionPolicyWhenScaled, ptr.To(memgraphv1.RetentionRetain)) {
		t.Errorf("split: retention %q, when scaled %v; want Delete, Retain", c.Spec.Storage.RetentionPolicy, c.Spec.Storage.RetentionPolicyWhenScaled)
	}
	if err := env.Client.Get(ctx, defaults, c); err != nil {
		t.Fatalf("typed read after the migration: %v", err)
	}
	if c.Spec.Secrets != (memgraphv1.SecretsSpec{Name: "enterprise", LicenseKey: memgraphv1.DefaultLicenseKey, OrganizationKey: memgraphv1.DefaultOrganizationKey}) {
		t.Errorf("defaults: secrets %+v", c.Spec.Secrets)
	}
	if c.Spec.Storage.WhenDeleted() != memgraphv1.RetentionRetain || c.Spec.Storage.WhenScaled() != memgraphv1.RetentionRetain || c.Spec.Storage.RetentionPolicyWhenScaled != nil {
		t.Errorf("defaults: retention %q, when scaled %v; want Retain alone", c.Spec.Storage.RetentionPolicy, c.Spec.Storage.RetentionPolicyWhenScaled)
	}

	if n, err := Run(ctx, env.Client); err != nil || n != 0 {
		t.Errorf("second Run: %d migrated, %v; want 0, nil", n, err)
	}

	// The old shapes live on only in stored clusters: a new one is refused, by name.
	for _, tc := range []struct{ name, doc, want string }{
		{"new-license", strings.Replace(oldCluster, "{whenDeleted: Delete, whenScaled: Retain}", "Retain", 1), "spec.license was renamed spec.secrets"},
		{"new-object-retention", strings.Replace(oldCluster, "license: {secretName: enterprise, licenseKey: LIC, organizationKey: ORG}", "secrets: {name: enterprise}", 1), "spec.storage.retentionPolicy: Unsupported value"},
	} {
		u := decode(t, ns, tc.name, tc.doc)
		err := env.Client.Create(ctx, u)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: created with %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
}

func decode(t *testing.T, ns, name, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func create(t *testing.T, ns, name, doc string) client.ObjectKey {
	t.Helper()
	u := decode(t, ns, name, doc)
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s under the old CRD: %v", name, err)
	}
	return client.ObjectKeyFromObject(u)
}

// installCurrentCRD replaces the old CRD with deploy/crds' and waits until the API server
// serves it (a new field's default shows up on read).
func installCurrentCRD(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "crds", "memgraph.com_memgraphclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := &apiextv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, want); err != nil {
		t.Fatal(err)
	}
	crd := &apiextv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: want.Name}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec = want.Spec
	if err := env.Client.Update(ctx, crd); err != nil {
		t.Fatalf("installing the current CRD: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "the current CRD served", func() (bool, string) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(memgraphv1.GroupVersion.WithKind("MemgraphClusterList"))
		if err := env.Client.List(ctx, list); err != nil || len(list.Items) == 0 {
			return false, "no list"
		}
		_, found, _ := unstructured.NestedFieldNoCopy(list.Items[0].Object, "spec", "terminationGracePeriodSeconds", "data")
		return found, "terminationGracePeriodSeconds not defaulted yet"
	})
}
