// Package objectstoretest runs a real S3 server for tests: versitygw with its posix
// backend (pinned in tools/objectstore, built by `make objectstore` into .cache/bin) on a
// free loopback port, over a temporary directory, with random root keys, optionally
// serving TLS with a certificate from a test CA. The server is killed at the test's end
// and its log tail printed when the test failed.
package objectstoretest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/testenv"
)

// BinaryEnv names a variable that points at another versitygw binary.
const BinaryEnv = "VERSITYGW"

// Region is the region the server signs for.
const Region = "us-east-1"

// Binary is $VERSITYGW, else .cache/bin/versitygw at the repository root; the error says
// how to build it.
func Binary() (string, error) {
	if b := os.Getenv(BinaryEnv); b != "" {
		return b, nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	b := filepath.Join(root, ".cache", "bin", "versitygw")
	if _, err := os.Stat(b); err != nil {
		return "", fmt.Errorf("objectstoretest: the S3 server %s is missing: run `make objectstore` (it builds versitygw from tools/objectstore/go.mod, about 3 minutes once)", b)
	}
	return b, nil
}

// Server is one running versitygw.
type Server struct {
	// Endpoint is the URL clients use (http:// or, with TLS, https://127.0.0.1:<port>).
	Endpoint string
	Port     int
	// Dir is the posix backend's root: one directory per bucket, one file per object.
	Dir string
	// AccessKey and SecretKey are the root user's keys.
	AccessKey, SecretKey string
	// CA is the PEM of the CA that signed the server's certificate; nil without TLS.
	CA []byte

	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Option changes how Start runs the server.
type Option func(*options)

type options struct{ ca *testenv.CA }

// WithTLS serves HTTPS with a certificate for 127.0.0.1 signed by ca.
func WithTLS(ca *testenv.CA) Option { return func(o *options) { o.ca = ca } }

// Start runs versitygw and waits until its health endpoint answers.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	s := &Server{Port: testenv.FreePort(t), Dir: filepath.Join(work, "data"), AccessKey: randomHex(t, 10), SecretKey: randomHex(t, 20), log: filepath.Join(work, "versitygw.log")}
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", s.Port)
	args := []string{"--port", addr, "--health", "/health", "--region", Region, "--quiet"}
	scheme := "http"
	if o.ca != nil {
		if err := os.Mkdir(filepath.Join(work, "tls"), 0o700); err != nil {
			t.Fatal(err)
		}
		files := o.ca.WriteFiles(t, filepath.Join(work, "tls"), "127.0.0.1")
		args = append(args, "--cert", files.Cert, "--key", files.Key)
		s.CA = o.ca.PEM
		scheme = "https"
	}
	s.Endpoint = scheme + "://" + addr
	args = append(args, "posix", s.Dir)
	logFile, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(bin, args...)
	// The keys go through the environment, not the command line ps shows.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A test process killed mid-run takes the server with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait() // killed at cleanup, so its exit status says nothing
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			if b, err := os.ReadFile(s.log); err == nil {
				t.Logf("versitygw log tail:\n%s", tail(string(b), 2000))
			}
		}
	})
	hc := &http.Client{Timeout: time.Second}
	if o.ca != nil {
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(o.ca.PEM), MinVersion: tls.VersionTLS12}}
	}
	testenv.Eventually(t, 20*time.Second, "versitygw at "+s.Endpoint+" healthy", func() (bool, string) {
		select {
		case <-s.done:
			b, _ := os.ReadFile(s.log)
			t.Fatalf("versitygw exited at start:\n%s", tail(string(b), 2000))
		default:
		}
		resp, err := hc.Get(s.Endpoint + "/health")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return s
}

func (s *Server) stop(t testing.TB) {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Errorf("versitygw pid %d did not exit", s.cmd.Process.Pid)
	}
}

// Credentials are the root user's keys.
func (s *Server) Credentials() objectstore.Credentials {
	return objectstore.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}
}

// Settings point at bucket and prefix on this server.
func (s *Server) Settings(bucket, prefix string) objectstore.Settings {
	return objectstore.Settings{Endpoint: s.Endpoint, Bucket: bucket, Prefix: prefix, Region: Region, CA: s.CA}
}

// Store opens bucket and prefix on this server, creating the bucket.
func (s *Server) Store(t testing.TB, bucket, prefix string) *objectstore.Store {
	t.Helper()
	st, err := objectstore.New(s.Settings(bucket, prefix), s.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// UploadFile stores the file at from under bucket/key with minio-go's FPutObject and its
// defaults (the size known, parts uploaded in parallel): copying a file with the S3 client
// directly, the baseline benchmarks compare the operator's paths with.
func (s *Server) UploadFile(ctx context.Context, bucket, key, from string) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	_, err = c.FPutObject(ctx, bucket, key, from, minio.PutObjectOptions{ContentType: "application/octet-stream"})
	return err
}

// DownloadFile writes bucket/key to the file at to with minio-go's FGetObject and its
// defaults, the download's baseline.
func (s *Server) DownloadFile(ctx context.Context, bucket, key, to string) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	return c.FGetObject(ctx, bucket, key, to, minio.GetObjectOptions{})
}

func (s *Server) client() (*minio.Client, error) {
	secure := s.CA != nil
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if secure {
		transport.TLSClientConfig.RootCAs = pool(s.CA)
	}
	return minio.New(fmt.Sprintf("127.0.0.1:%d", s.Port), &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:       secure,
		Region:       Region,
		Transport:    transport,
		BucketLookup: minio.BucketLookupPath,
	})
}

func pool(pemCA []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemCA)
	return p
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
