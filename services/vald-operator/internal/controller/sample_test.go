package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/testenv"
	"sigs.k8s.io/yaml"
)

// TestSample runs the release of deploy/samples/vald.yaml (in the test's namespace) to
// Completed: the blue entry, inactive and without a cluster id, neither blocks it nor
// gets a ValdRelease.
func TestSample(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "samples", "vald.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, nil)
	var vor *valdv1.ValdOperatorRelease
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if strings.Contains(doc, "kind: ValdOperatorRelease") {
			vor = &valdv1.ValdOperatorRelease{}
			if err := yaml.UnmarshalStrict([]byte(doc), vor); err != nil {
				t.Fatal(err)
			}
		}
	}
	if vor == nil {
		t.Fatal("no ValdOperatorRelease in the sample")
	}
	vor.Namespace = h.ns
	h.create(vor)
	h.waitStatus(vor.Name, statusCompleted)
	if got := names(h.valdReleases()); got != h.ns+"-cluster-a,"+h.ns+"-cluster-b" {
		t.Errorf("ValdReleases %s", got)
	}
}
