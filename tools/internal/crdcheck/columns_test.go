package crdcheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opsuite/suite/shared/testenv"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// wantColumns names, per kind, the columns a person needs at a glance (priority 0, so
// plain `kubectl get` shows them). A kind in deploy/crds missing here fails the test, so a
// new kind gets its columns decided.
var wantColumns = map[string][]string{
	"VeltrixCluster":          {"Size", "Ready", "Version", "State", "Reason", "Last Failover", "Age"},
	"ValkeyCluster":           {"State", "Reason", "Shards", "Ready Shards", "Last Failover", "Age"},
	"ValkeyNode":              {"Role", "Shard", "Ready", "Age"},
	"ValkeyBackup":            {"Cluster", "Phase", "Size", "Stopped", "Age"},
	"MemgraphCluster":         {"State", "Reason", "Coordinators", "Data", "Ready Coordinators", "Ready Data", "Main", "Leader", "Last Failover", "Age"},
	"ValdOperatorRelease":     {"Phase", "Progress", "Status", "Age"},
	"ValdRelease":             {"Deployed", "Age"},
	"MemgraphBackup":          {"Cluster", "Phase", "Size", "Age"},
	"ValkeyScheduledBackup":   {"Cluster", "Schedule", "Last Backup", "Next", "Age"},
	"MemgraphScheduledBackup": {"Cluster", "Schedule", "Last Backup", "Next", "Age"},
}

// readCRDs parses every CRD in deploy/crds.
func readCRDs(t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no CRDs in deploy/crds: run `make generate`")
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crds = append(crds, crd)
	}
	return crds
}

// TestPrinterColumns reads every CRD in deploy/crds and checks, for each served version,
// that the kind shows the columns wantColumns names and that every column's JSONPath
// (priority 1 ones too) names a field the schema has: a typo in a marker would otherwise
// show an empty column forever, with no error anywhere.
func TestPrinterColumns(t *testing.T) {
	crds := readCRDs(t)
	seen := map[string]bool{}
	if len(crds) < 7 {
		t.Errorf("%d CRDs in deploy/crds, want at least 7", len(crds))
	}
	for _, crd := range crds {
		kind := crd.Spec.Names.Kind
		seen[kind] = true
		want, ok := wantColumns[kind]
		if !ok {
			t.Errorf("%s: a kind this test does not know: add the columns a person needs to wantColumns", kind)
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			var shown []string
			for _, col := range v.AdditionalPrinterColumns {
				if col.Priority == 0 {
					shown = append(shown, col.Name)
				}
				if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
					t.Errorf("%s %s: no schema", kind, v.Name)
					continue
				}
				if err := resolve(v.Schema.OpenAPIV3Schema, col.JSONPath); err != "" {
					t.Errorf("%s %s: column %q (%s): %s", kind, v.Name, col.Name, col.JSONPath, err)
				}
				if strings.Contains(col.JSONPath, "conditions[0]") {
					t.Errorf("%s %s: column %q shows the first condition, not one by type", kind, v.Name, col.Name)
				}
			}
			for _, name := range want {
				if !slices.Contains(shown, name) {
					t.Errorf("%s %s: column %q missing from `kubectl get` (shown: %v)", kind, v.Name, name, shown)
				}
			}
		}
	}
	for _, kind := range []string{"VeltrixCluster", "ValkeyCluster", "ValkeyNode", "ValkeyBackup", "MemgraphCluster", "ValdOperatorRelease", "ValdRelease"} {
		if !seen[kind] {
			t.Errorf("%s: no CRD in deploy/crds", kind)
		}
	}
}

// resolve walks a printer column's JSONPath (the subset kubectl's columns use: .field,
// [*], [n] and [?(@.field=="value")]) through the schema and says what is missing ("" when
// every step exists). Below x-kubernetes-preserve-unknown-fields anything goes; metadata
// is the API server's, whose schema a CRD does not carry.
func resolve(s *apiextensionsv1.JSONSchemaProps, path string) string {
	if strings.HasPrefix(path, ".metadata.") {
		field, _, _ := strings.Cut(strings.TrimPrefix(path, ".metadata."), ".")
		if slices.Contains([]string{"name", "namespace", "creationTimestamp", "labels", "annotations", "generation", "deletionTimestamp"}, field) {
			return ""
		}
		return "metadata has no field " + field
	}
	rest := path
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "["):
			end := strings.Index(rest, "]")
			if end < 0 {
				return "unclosed ["
			}
			filter := rest[1:end]
			rest = rest[end+1:]
			if s.Type != "array" || s.Items == nil || s.Items.Schema == nil {
				if preservesUnknown(s) {
					return ""
				}
				return "[" + filter + "] on a field that is not an array"
			}
			s = s.Items.Schema
			if strings.HasPrefix(filter, "?(@.") {
				field, _, _ := strings.Cut(strings.TrimPrefix(filter, "?(@."), "=")
				field = strings.TrimRight(field, "!<> ")
				if _, ok := s.Properties[field]; !ok && !preservesUnknown(s) {
					return "the filter names " + field + ", which the items do not have"
				}
			}
		case strings.HasPrefix(rest, "."):
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			field := rest[:end]
			rest = rest[end:]
			next, ok := s.Properties[field]
			if !ok {
				if preservesUnknown(s) {
					return ""
				}
				return "no field " + field
			}
			s = &next
		default:
			return "cannot parse " + rest
		}
	}
	return ""
}

func preservesUnknown(s *apiextensionsv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}

// TestResolve makes sure the walker can fail: a column naming a field that is not there.
func TestResolve(t *testing.T) {
	yes := true
	cond := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"type": {Type: "string"}, "status": {Type: "string"}}}
	schema := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"state":      {Type: "string"},
			"conditions": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &cond}},
		}},
		"spec": {Type: "object", XPreserveUnknownFields: &yes},
	}}
	for path, ok := range map[string]bool{
		".status.state":      true,
		".status.stat":       false,
		".status.state.more": false,
		".status.conditions[?(@.type==\"Ready\")].status": true,
		".status.conditions[?(@.kind==\"Ready\")].status": false,
		".status.conditions[0].reason":                    false,
		".status.state[0]":                                false,
		".spec.anything.below":                            true,
		".metadata.creationTimestamp":                     true,
		".metadata.uid2":                                  false,
	} {
		if got := resolve(schema, path) == ""; got != ok {
			t.Errorf("resolve(%s) ok=%v, want %v (%s)", path, got, ok, resolve(schema, path))
		}
	}
}
