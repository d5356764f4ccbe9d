// Package tlscert serves the agent's certificate from its files and follows their changes (a
// cert-manager renewal, kubelet's atomic update of a Secret volume) without a restart.
package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// Files is a key pair read from two files, read again when they change.
type Files struct {
	certFile, keyFile string
	// CheckEvery is the least time between two looks at the files, so a flood of handshakes
	// costs no more than one stat per interval. Default 1s.
	CheckEvery time.Duration
	// Log receives reloads and failed reloads; default: discarded.
	Log *slog.Logger
	// Now is the clock; tests move it.
	Now func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   stamp
	checked time.Time
	failed  stamp // the files' stamp when a reload last failed, not to log it again
}

// stamp identifies a version of the two files: kubelet swaps a symlink, cert-manager's CSI
// driver and an editor rename or rewrite; each changes one of these.
type stamp struct {
	cert, key fileStamp
}

type fileStamp struct {
	ino     uint64
	size    int64
	modTime time.Time
}

func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path) // follows the ..data symlink of a Secret volume
	if err != nil {
		return fileStamp{}, err
	}
	s := fileStamp{size: fi.Size(), modTime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	return s, nil
}

func (f *Files) stat() (stamp, error) {
	c, err1 := statFile(f.certFile)
	k, err2 := statFile(f.keyFile)
	return stamp{cert: c, key: k}, errors.Join(err1, err2)
}

// Load reads the key pair; it fails if the files do not hold a valid, matching pair that is
// valid now.
func Load(certFile, keyFile string) (*Files, error) {
	f := &Files{certFile: certFile, keyFile: keyFile}
	st, err := f.stat()
	if err != nil {
		return nil, fmt.Errorf("loading TLS key pair: %w", err)
	}
	cert, err := f.read()
	if err != nil {
		return nil, err
	}
	f.cert, f.stamp, f.checked = cert, st, f.now()
	return f, nil
}

func (f *Files) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *Files) read() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS key pair: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("loading TLS key pair: %w", err)
	}
	if now := f.now(); now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("loading TLS key pair: the certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	cert.Leaf = leaf
	return &cert, nil
}

// Certificate returns the current pair, reading the files again if they changed since the
// last look (at most once per CheckEvery). A pair that cannot be read (a renewal caught
// between its two files, an expired certificate) leaves the previous one in service.
func (f *Files) Certificate() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	every := f.CheckEvery
	if every <= 0 {
		every = time.Second
	}
	now := f.now()
	if now.Sub(f.checked) < every {
		return f.cert
	}
	f.checked = now
	st, err := f.stat()
	if err != nil || st == f.stamp {
		if err != nil && st != f.failed {
			f.failed = st
			f.log().Error("The TLS files cannot be read; serving the previous certificate", "err", err)
		}
		return f.cert
	}
	cert, err := f.read()
	if err != nil {
		if st != f.failed {
			f.failed = st
			f.log().Error("The changed TLS files do not hold a valid key pair; serving the previous certificate", "err", err)
		}
		return f.cert
	}
	f.cert, f.stamp = cert, st
	f.log().Info("Serving a new TLS certificate", "subject", cert.Leaf.Subject.String(),
		"dnsNames", cert.Leaf.DNSNames, "notAfter", cert.Leaf.NotAfter)
	return f.cert
}

func (f *Files) log() *slog.Logger {
	if f.Log != nil {
		return f.Log
	}
	return slog.New(slog.DiscardHandler)
}

// GetCertificate is for tls.Config.
func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.Certificate(), nil
}
