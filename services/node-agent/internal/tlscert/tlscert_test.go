package tlscert_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/node-agent/internal/tlscert"
	"github.com/opsuite/suite/shared/testenv"
)

// secretVolume writes files the way kubelet updates a Secret volume: a new timestamped
// directory, then an atomic swap of the ..data symlink that tls.crt and tls.key point
// through.
type secretVolume struct {
	dir string
	n   int
}

func (v *secretVolume) write(t *testing.T, files map[string][]byte) {
	t.Helper()
	v.n++
	ts := filepath.Join(v.dir, ".."+time.Now().Format("2006_01_02_15_04_05.")+string(rune('a'+v.n)))
	if err := os.Mkdir(ts, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(ts, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReload serves TLS from a Secret-like volume and replaces the pair under it: new
// handshakes get the new certificate without a restart; a broken or expired pair leaves the
// last good one in service.
func TestReload(t *testing.T) {
	authority := testenv.NewCA(t, "test-ca")
	vol := &secretVolume{dir: t.TempDir()}
	c1, k1 := authority.IssueUntil(t, time.Now().Add(time.Hour), "first")
	vol.write(t, map[string][]byte{"tls.crt": c1, "tls.key": k1})
	files, err := tlscert.Load(filepath.Join(vol.dir, "tls.crt"), filepath.Join(vol.dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	files.Now = func() time.Time { return now }

	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: files.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{RootCAs: authority.Pool(), InsecureSkipVerify: true}) //nolint:gosec // the test reads the name served
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q", got)
	}

	c2, k2 := authority.IssueUntil(t, time.Now().Add(time.Hour), "second")
	vol.write(t, map[string][]byte{"tls.crt": c2, "tls.key": k2})
	if got := served(); got != "first" {
		t.Fatalf("looked at the files again within CheckEvery: %q", got)
	}
	now = now.Add(2 * time.Second)
	if got := served(); got != "second" {
		t.Fatalf("after a renewal, served %q, want second", got)
	}

	// Caught between the two files: the new certificate with the old key.
	c3, k3 := authority.IssueUntil(t, time.Now().Add(time.Hour), "third")
	vol.write(t, map[string][]byte{"tls.crt": c3, "tls.key": k2})
	now = now.Add(2 * time.Second)
	if got := served(); got != "second" {
		t.Fatalf("a mismatched pair: served %q, want the previous one", got)
	}
	vol.write(t, map[string][]byte{"tls.crt": c3, "tls.key": k3})
	now = now.Add(2 * time.Second)
	if got := served(); got != "third" {
		t.Fatalf("the pair completed: served %q", got)
	}

	// An expired certificate is not taken.
	c4, k4 := authority.IssueUntil(t, time.Now().Add(-time.Minute), "expired")
	vol.write(t, map[string][]byte{"tls.crt": c4, "tls.key": k4})
	now = now.Add(2 * time.Second)
	if got := served(); got != "third" {
		t.Fatalf("an expired certificate: served %q", got)
	}

	// Load refuses what it cannot serve.
	if _, err := tlscert.Load(filepath.Join(vol.dir, "tls.crt"), filepath.Join(vol.dir, "tls.key")); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Load of an expired pair: %v", err)
	}
	if _, err := tlscert.Load(filepath.Join(vol.dir, "none.crt"), filepath.Join(vol.dir, "tls.key")); err == nil {
		t.Fatal("Load of a missing file")
	}
}
