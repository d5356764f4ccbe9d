package veltrixtest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// fatalRecorder stops at the first Fatalf and keeps its message.
type fatalRecorder struct {
	testing.TB
	msg string
}

type fatalStop struct{}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(fatalStop{})
}

func TestMissingBinaryFailsSayingRunMakeBuild(t *testing.T) {
	t.Setenv(EnvBinary, filepath.Join(t.TempDir(), "veltrix-sim"))
	rec := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(fatalStop); !ok {
					panic(r)
				}
			}
		}()
		Binary(rec)
	}()
	if !strings.Contains(rec.msg, "run make build") {
		t.Fatalf("Binary with no simulator: %q, want a failure saying run make build", rec.msg)
	}
}

func TestBinaryFound(t *testing.T) {
	if path := Binary(t); filepath.Base(path) != "veltrix-sim" {
		t.Fatalf("Binary = %s", path)
	}
}
