package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The tag defaults to the chart's appVersion, so the chart's default image is the one built.
func TestRunTagsWithChartAppVersion(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644))
	cmd := exec.Command("go", "build", "-o", filepath.Join(root, "bin", "valkey-operator"), ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test binary: %v\n%s", err, out)
	}
	must(t, os.MkdirAll(filepath.Join(root, "charts", "valkey-operator"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "charts", "valkey-operator", "Chart.yaml"),
		[]byte("apiVersion: v2\nname: valkey-operator\nversion: 0.1.0\nappVersion: \"1.2.3\"\n"), 0o644))

	var stdout, stderr bytes.Buffer
	if err := run([]string{"-root", root, "-services", "valkey-operator"}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "ghcr.io/opsuite/valkey-operator:1.2.3@sha256:") {
		t.Errorf("output %q does not name ghcr.io/opsuite/valkey-operator:1.2.3 with a digest", stdout.String())
	}
	ref, err := name.NewTag("ghcr.io/opsuite/valkey-operator:1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(filepath.Join(root, "dist", "images", "valkey-operator.tar"), &ref)
	if err != nil {
		t.Fatalf("tarball does not hold %s: %v", ref, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "1.2.3" || cfg.Config.Entrypoint[0] != "/valkey-operator" {
		t.Errorf("config %+v", cfg.Config)
	}
	if _, err := os.Stat(filepath.Join(root, "dist", "images", "valkey-operator", "index.json")); err != nil {
		t.Errorf("no OCI layout: %v", err)
	}
}

func TestRunRejectsUnknownServiceAndMissingBinary(t *testing.T) {
	root := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"-root", root, "-services", "nope"}, &out, &out); err == nil || !strings.Contains(err.Error(), "unknown service") {
		t.Errorf("unknown service: %v", err)
	}
	err := run([]string{"-root", root, "-services", "node-agent", "-version", "1"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("missing binary: %v, want advice to run make build", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
