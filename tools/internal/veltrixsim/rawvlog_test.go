package veltrixsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRawVLogHeader: a device without a header is claimed, its owner reopens it and its
// clean shutdowns are counted on the device; another member is refused.
func TestRawVLogHeader(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "vlog")
	if err := os.WriteFile(dev, make([]byte, 2*rawVLogBlockSize), 0o600); err != nil {
		t.Fatal(err)
	}
	vs, err := openRawVLogs([]string{dev}, "m-0")
	if err != nil {
		t.Fatal(err)
	}
	if n, cp := rawVLogInfo(vs); n != "1" || cp != "0" {
		t.Errorf("new device: raw_vlogs=%s raw_vlog_checkpoints=%s", n, cp)
	}
	if err := vs[0].checkpoint(); err != nil {
		t.Fatal(err)
	}
	closeRawVLogs(vs)

	vs, err = openRawVLogs([]string{dev}, "m-0")
	if err != nil {
		t.Fatalf("the owner reopening: %v", err)
	}
	if _, cp := rawVLogInfo(vs); cp != "1" {
		t.Errorf("after one clean shutdown: raw_vlog_checkpoints=%s", cp)
	}
	closeRawVLogs(vs)

	if _, err := openRawVLogs([]string{dev}, "m-1"); err == nil || !strings.Contains(err.Error(), "belongs to member m-0, not m-1") {
		t.Errorf("another member opening it: %v", err)
	}
	if n, cp := rawVLogInfo(nil); n != "0" || cp != "0" {
		t.Errorf("no raw VLogs: %s %s", n, cp)
	}
}
