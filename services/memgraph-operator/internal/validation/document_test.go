package validation

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// minimalManifest is the product document's minimal cluster, as a user copies it.
var minimalManifest = filepath.Join(repoRoot, "services", "memgraph-operator", "examples", "minimal-cluster.yaml")

// TestDocumentMinimalManifest: the document's minimal manifest (spec.secrets, a string
// storage.retentionPolicy) is accepted byte for byte with strict field validation, sent as
// the YAML says and not through our Go types, and reads back as the document means it:
// the license from secrets.name, claims retained on delete and on scale-down, and the
// defaults the builders rely on (grace periods, ports) filled in.
func TestDocumentMinimalManifest(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	docs := documents(t, minimalManifest)
	if len(docs) != 1 {
		t.Fatalf("%s holds %d documents, want 1", minimalManifest, len(docs))
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(docs[0], &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	if err := env.Client.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("the document's minimal manifest is refused: %v", err)
	}
	c := &memgraphv1.MemgraphCluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), c); err != nil {
		t.Fatal(err)
	}
	s := c.Spec
	if s.Secrets != (memgraphv1.SecretsSpec{Name: "memgraph-secrets", LicenseKey: "MEMGRAPH_ENTERPRISE_LICENSE", OrganizationKey: "MEMGRAPH_ORGANIZATION_NAME"}) {
		t.Errorf("spec.secrets read back as %+v", s.Secrets)
	}
	if s.Storage.RetentionPolicy != memgraphv1.RetentionRetain || s.Storage.RetentionPolicyWhenScaled != nil ||
		s.Storage.WhenDeleted() != memgraphv1.RetentionRetain || s.Storage.WhenScaled() != memgraphv1.RetentionRetain {
		t.Errorf("storage.retentionPolicy read back as %q (when scaled %v): deleted %s, scaled %s",
			s.Storage.RetentionPolicy, s.Storage.RetentionPolicyWhenScaled, s.Storage.WhenDeleted(), s.Storage.WhenScaled())
	}
	if g := s.TerminationGracePeriodSeconds; !ptr.Equal(g.Data, ptr.To(memgraphv1.DefaultDataTerminationGracePeriodSeconds)) ||
		!ptr.Equal(g.Coordinators, ptr.To(memgraphv1.DefaultCoordinatorTerminationGracePeriodSeconds)) {
		t.Errorf("grace periods defaulted to %v/%v", g.Coordinators, g.Data)
	}
	if s.Coordinators != 3 || s.DataInstances != 2 || s.Ports.Bolt != memgraphv1.DefaultBoltPort {
		t.Errorf("spec read back as %+v", s)
	}

	// The richer shape keeps one source of truth: Delete on delete, Retain on scale-down.
	u.SetName("memgraph-split")
	u.SetResourceVersion("")
	if err := unstructured.SetNestedField(u.Object, "Delete", "spec", "storage", "retentionPolicy"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, "Retain", "spec", "storage", "retentionPolicyWhenScaled"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), c); err != nil {
		t.Fatal(err)
	}
	if c.Spec.Storage.WhenDeleted() != memgraphv1.RetentionDelete || c.Spec.Storage.WhenScaled() != memgraphv1.RetentionRetain {
		t.Errorf("split retention read back: deleted %s, scaled %s", c.Spec.Storage.WhenDeleted(), c.Spec.Storage.WhenScaled())
	}

	// The shapes this API had before are refused by name, so a stale manifest is not
	// half applied. (The CRD still knows them so that clusters stored before keep their
	// values until the operator moves them: see package migrate.)
	for _, stale := range []struct {
		path  []string
		value any
		want  string
	}{
		{[]string{"spec", "license"}, map[string]any{"secretName": "memgraph-secrets"}, "spec.license was renamed spec.secrets"},
		{[]string{"spec", "storage", "retentionPolicy"}, map[string]any{"whenDeleted": "Retain"}, "spec.storage.retentionPolicy"},
	} {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(docs[0], &o.Object); err != nil {
			t.Fatal(err)
		}
		o.SetNamespace(ns)
		o.SetName("memgraph-stale")
		if err := unstructured.SetNestedField(o.Object, stale.value, stale.path...); err != nil {
			t.Fatal(err)
		}
		err := env.Client.Create(ctx, o, client.FieldValidation("Strict"))
		if err == nil {
			t.Errorf("%v accepted, want a refusal", stale.path)
			continue
		}
		if !strings.Contains(err.Error(), stale.want) {
			t.Errorf("%v refused with %v, want %q", stale.path, err, stale.want)
		}
	}
}
