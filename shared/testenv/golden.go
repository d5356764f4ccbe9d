package testenv

import (
	"os"
	"testing"
)

// Golden compares got with the golden file at path, or (re)writes the file when update is
// set (the calling package's -update flag: flags are the test binary's, so each package
// registers its own). A missing file fails and says how to write it.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it; review the diff):\n--- got\n%s", path, got)
	}
}
