package memgraphsim

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/bolt/boltclient"
)

func TestParseOptionsBoltTLS(t *testing.T) {
	env := func(string) string { return "" }
	o, warnings, err := ParseOptions([]string{"--bolt-cert-file=/c/tls.crt", "--bolt-key-file", "/c/tls.key"}, env)
	if err != nil || !o.BoltTLS() || o.BoltCertFile != "/c/tls.crt" || o.BoltKeyFile != "/c/tls.key" || len(warnings) != 0 {
		t.Fatalf("both files: %+v %v %v", o, warnings, err)
	}
	// Memgraph serves plain Bolt, with a warning, when only one of the pair is set.
	o, warnings, err = ParseOptions([]string{"--bolt-cert-file=/c/tls.crt"}, env)
	if err != nil || o.BoltTLS() || len(warnings) != 1 || !strings.Contains(warnings[0], "non-secure") {
		t.Fatalf("certificate alone: TLS %v, warnings %q, err %v", o.BoltTLS(), warnings, err)
	}
}

// TestProcessBoltTLS runs the binary with --bolt-cert-file/--bolt-key-file as a data
// instance and a coordinator: Bolt is TLS only (a client trusting the CA is served, plain
// Bolt and a client trusting another CA are not), RELOAD BOLT_SERVER TLS serves renewed
// files to new connections, and a process whose key is missing does not start.
func TestProcessBoltTLS(t *testing.T) {
	ca := testenv.NewCA(t, "sim-ca")
	dir := t.TempDir()
	files := ca.WriteFiles(t, dir, "127.0.0.1")
	tlsFlags := []string{"--bolt-cert-file=" + files.Cert, "--bolt-key-file=" + files.Key}

	dataPort, coordBolt, metricsPort := testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t)
	data := &proc{name: "data", env: haEnv(), bolt: fmt.Sprintf("127.0.0.1:%d", dataPort),
		args: append([]string{"--bolt-address=127.0.0.1", "--bolt-port=" + strconv.Itoa(dataPort), "--metrics-port=" + strconv.Itoa(metricsPort),
			"--management-port=" + strconv.Itoa(testenv.FreePortBelowEphemeral(t)), "--data-directory=" + filepath.Join(dir, "d")}, tlsFlags...)}
	coord := &proc{name: "coordinator", env: haEnv(), bolt: fmt.Sprintf("127.0.0.1:%d", coordBolt),
		args: append([]string{"--bolt-address=127.0.0.1", "--bolt-port=" + strconv.Itoa(coordBolt),
			"--coordinator-id=1", "--coordinator-port=" + strconv.Itoa(testenv.FreePortBelowEphemeral(t)), "--coordinator-hostname=127.0.0.1",
			"--management-port=" + strconv.Itoa(testenv.FreePortBelowEphemeral(t)), "--data-directory=" + filepath.Join(dir, "c")}, tlsFlags...)}
	startProc(t, data)
	startProc(t, coord)

	trusted := boltclient.Options{Username: "admin", Password: "secret", Timeout: 5 * time.Second, TLS: &tls.Config{RootCAs: ca.Pool()}}
	dialTLS := func(addr string, o boltclient.Options) (*boltclient.Client, error) {
		var c *boltclient.Client
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for {
			if c, err = boltclient.Dial(context.Background(), addr, o); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if c != nil {
			t.Cleanup(func() { _ = c.Close() })
		}
		return c, err
	}
	dc, err := dialTLS(data.bolt, trusted)
	if err != nil {
		t.Fatalf("TLS to the data instance: %v", err)
	}
	if res, err := dc.Run(t.Context(), "SHOW REPLICATION ROLE", nil); err != nil || len(res.Records) != 1 {
		t.Fatalf("SHOW REPLICATION ROLE over TLS: %v %v", res, err)
	}
	cc, err := dialTLS(coord.bolt, trusted)
	if err != nil {
		t.Fatalf("TLS to the coordinator: %v", err)
	}
	if res, err := cc.Run(t.Context(), "SHOW INSTANCE", nil); err != nil || len(res.Records) != 1 {
		t.Fatalf("SHOW INSTANCE over TLS: %v %v", res, err)
	}

	for _, addr := range []string{data.bolt, coord.bolt} {
		if _, err := boltclient.Dial(t.Context(), addr, boltclient.Options{Username: "admin", Password: "secret", Timeout: 2 * time.Second}); err == nil {
			t.Errorf("%s: plain Bolt was served, want it refused", addr)
		}
		other := testenv.NewCA(t, "other-ca")
		if _, err := boltclient.Dial(t.Context(), addr, boltclient.Options{Timeout: 2 * time.Second, TLS: &tls.Config{RootCAs: other.Pool()}}); err == nil || !strings.Contains(err.Error(), "unknown authority") {
			t.Errorf("%s: a client trusting another CA: %v, want unknown authority", addr, err)
		}
	}

	// Memgraph gives its metrics server the Bolt SSL context: HTTPS with the Bolt pair,
	// and plain HTTP refused.
	metrics := fmt.Sprintf("127.0.0.1:%d", metricsPort)
	httpsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	if resp, err := httpsClient.Get("https://" + metrics + "/metrics"); err != nil {
		t.Errorf("metrics over HTTPS with the Bolt certificate: %v", err)
	} else {
		var doc map[string]map[string]any
		err := json.NewDecoder(resp.Body).Decode(&doc)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || doc["General"] == nil {
			t.Errorf("metrics over HTTPS: HTTP %d, %v, document %v", resp.StatusCode, err, doc)
		}
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + metrics + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("metrics over plain HTTP were served beside Bolt TLS, want them refused")
		}
	}

	served := func(addr string) [32]byte {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		return sha256.Sum256(c.ConnectionState().PeerCertificates[0].Raw)
	}
	before := served(data.bolt)
	ca.WriteFiles(t, dir, "127.0.0.1") // renewed in place, as the kubelet updates a Secret volume
	if served(data.bolt) != before {
		t.Fatal("renewed files served before RELOAD BOLT_SERVER TLS (Memgraph reads them on the query)")
	}
	if _, err := dc.Run(t.Context(), "reload bolt_server tls;", nil); err != nil {
		t.Fatalf("RELOAD BOLT_SERVER TLS: %v", err)
	}
	if served(data.bolt) == before {
		t.Error("RELOAD BOLT_SERVER TLS did not serve the renewed certificate")
	}
	if served(metrics) != served(data.bolt) {
		t.Error("the metrics server serves another certificate than Bolt after RELOAD BOLT_SERVER TLS")
	}
	if _, err := dc.Run(t.Context(), "SHOW REPLICATION ROLE", nil); err != nil {
		t.Errorf("the connection that reloaded broke: %v", err)
	}
	if _, err := cc.Run(t.Context(), "RELOAD BOLT_SERVER TLS", nil); err != nil {
		t.Errorf("RELOAD BOLT_SERVER TLS on the coordinator: %v", err)
	}

	// A key file that is not there: the process exits instead of serving plain Bolt.
	cmd := exec.Command(simBinary(t), "--bolt-address=127.0.0.1", "--bolt-port="+strconv.Itoa(testenv.FreePortBelowEphemeral(t)),
		"--data-directory="+t.TempDir(), "--bolt-cert-file="+files.Cert, "--bolt-key-file="+filepath.Join(dir, "missing.key"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "missing.key") {
		t.Errorf("missing key: %v %q, want an exit naming the file", err, out)
	}
}
