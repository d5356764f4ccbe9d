package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGolden: update writes the file, an equal rendering passes, a different one fails.
func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.yaml")
	Golden(t, path, []byte("a: 1\n"), true)
	if b, err := os.ReadFile(path); err != nil || string(b) != "a: 1\n" {
		t.Fatalf("update wrote %q, %v", b, err)
	}
	Golden(t, path, []byte("a: 1\n"), false)
	inner := &testing.T{}
	done := make(chan struct{})
	go func() { defer close(done); Golden(inner, path, []byte("a: 2\n"), false) }()
	<-done
	if !inner.Failed() {
		t.Error("a different rendering passed")
	}
}
