package main

import (
	"context"
	"strings"
	"testing"
)

// TestFlags: --help lists the operator's own flag next to the common ones, and a bad
// --pv-root is refused before anything starts.
func TestFlags(t *testing.T) {
	if err := run(context.Background(), []string{"--help"}); err != nil {
		t.Errorf("--help: %v", err)
	}
	err := run(context.Background(), []string{"--pv-root=relative"})
	if err == nil || !strings.Contains(err.Error(), "--pv-root must be an absolute path") {
		t.Errorf("relative --pv-root: %v", err)
	}
	err = run(context.Background(), []string{"--pool-label-prefix=pool.acme.io/x"})
	if err == nil || !strings.Contains(err.Error(), "--pool-label-prefix must be a DNS subdomain") {
		t.Errorf("--pool-label-prefix with a slash: %v", err)
	}
	t.Setenv(EnvPVRoot, "/")
	err = run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "--pv-root must be an absolute path other than /") {
		t.Errorf("%s=/: %v", EnvPVRoot, err)
	}
}
