package veltrixsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStoreSurvivesACrashAndCutsATornRecord(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	st, err := OpenStore(dirs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(dirs); err == nil || !strings.Contains(err.Error(), "is in use by another process") {
		t.Fatalf("second open of locked dirs: %v", err)
	}
	mustApply := func(k string, e Entry) {
		t.Helper()
		if _, err := st.Apply(k, e); err != nil {
			t.Fatal(err)
		}
	}
	mustApply("a", Entry{Val: "1", Ver: 10})
	mustApply("b", Entry{Val: "2", Ver: 10})
	if err := st.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustApply("a", Entry{Val: "3", Ver: 20})
	mustApply("b", Entry{Ver: 20, Del: true})
	mustApply("c", Entry{Val: "4", Ver: 20})
	if stored, _ := st.Apply("c", Entry{Val: "old", Ver: 5}); stored {
		t.Error("an older version replaced a newer one")
	}
	if err := st.Drop("c", 20); err != nil {
		t.Fatal(err)
	}
	// A crash: no checkpoint, and a record torn in the middle of the write.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wal := filepath.Join(dirs[Partition("zz", 2)], walFile)
	f, err := os.OpenFile(wal, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"k":"zz","v":"tor`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	st, err = OpenStore(dirs)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Reopened() {
		t.Error("Reopened() = false with data in the dirs")
	}
	if e, ok := st.Get("a"); !ok || e.Val != "3" {
		t.Errorf("a = %+v %v, want the logged value 3 over the checkpoint's 1", e, ok)
	}
	if e, ok := st.Get("b"); !ok || !e.Del {
		t.Errorf("b = %+v %v, want a tombstone", e, ok)
	}
	if _, ok := st.Get("c"); ok {
		t.Error("c was dropped but came back")
	}
	if _, ok := st.Get("zz"); ok {
		t.Error("the torn record was applied")
	}
	if live, all := st.Len(); live != 1 || all != 2 {
		t.Errorf("Len = %d live, %d entries; want 1, 2", live, all)
	}
	// The torn tail is cut, so the next record starts on a line of its own.
	if _, err := st.Apply("d", Entry{Val: "5", Ver: 30}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "tor") {
		t.Errorf("torn record still in the log: %q", b)
	}
}
