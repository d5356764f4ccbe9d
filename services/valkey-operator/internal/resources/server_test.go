package resources

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/testenv"
)

// A real server (valkeytest.Bins: valkey-server 8.0, or redis-server 7.0 with
// VALKEY_SERVER=redis-server) started from rendered files. These tests talk RESP over a
// plain socket: the renderers are what is under test, and a raw client shows exactly what
// the server answered.

// respConn is one connection speaking RESP2.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

// respError is an error reply ("-NOAUTH ...").
type respError string

func (e respError) Error() string { return string(e) }

func dialRESP(addr string, tlsConfig *tls.Config) (*respConn, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	var c net.Conn
	var err error
	if tlsConfig != nil {
		c, err = tls.DialWithDialer(&d, "tcp", addr, tlsConfig)
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, r: bufio.NewReader(c)}, nil
}

func (c *respConn) Close() { _ = c.c.Close() }

// do sends one command and reads its reply: a string (simple or bulk), an int64, nil, a
// []any, or a respError as the error.
func (c *respConn) do(args ...string) (any, error) {
	_ = c.c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.c, b.String()); err != nil {
		return nil, err
	}
	return c.read()
}

func (c *respConn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	switch body := line[1:]; line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, respError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(body)
		out := make([]any, 0, max(n, 0))
		for range n {
			v, err := c.read()
			if err != nil && !errors.As(err, new(respError)) {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unexpected reply %q", line)
	}
}

// str runs a command that must answer a string.
func (c *respConn) str(t *testing.T, args ...string) string {
	t.Helper()
	v, err := c.do(args...)
	if err != nil {
		t.Fatalf("%v: %v", redact(args), err)
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%v: reply %#v, want a string", redact(args), v)
	}
	return s
}

// redact hides AUTH passwords in failure messages.
func redact(args []string) []string {
	if len(args) > 0 && strings.EqualFold(args[0], "AUTH") {
		return []string{"AUTH", "..."}
	}
	return args
}

// infoField reads one "field:value" line of an INFO or CLUSTER INFO reply.
func infoField(info, field string) string {
	for l := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v
		}
	}
	return ""
}

// testServer is a server process started from a directory of rendered files.
type testServer struct {
	addr string
	dir  string
	bus  int
	tls  *tls.Config // client config when the server speaks TLS only
}

// serverFiles are the rendered files a testServer starts from.
type serverFiles struct {
	config        ServerConfig
	acl           ACLFiles
	ca, cert, key []byte // TLS material, when the config enables TLS
}

// layoutFor is the temp-dir layout a testServer's config is rendered for.
func layoutFor(dir string) serverPaths {
	return serverPaths{data: filepath.Join(dir, "data"), acl: filepath.Join(dir, "acl"), tls: filepath.Join(dir, "tls")}
}

// startServer writes the files under dir (rendered with layoutFor(dir)) and starts
// the server on them. Like the local cluster, it appends --bind and the ports on the
// command line, which the server applies after the file. It waits until the server
// answers, and stops it at cleanup.
func startServer(t *testing.T, dir string, f serverFiles) *testServer {
	t.Helper()
	bin := valkeytest.Bins(t)
	p := layoutFor(dir)
	for _, d := range []string{p.data, p.acl, p.tls} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, ConfigKeyServer)
	write(conf, []byte(f.config.Server))
	write(filepath.Join(p.acl, ACLKeyUsers), []byte(f.acl.Users))
	write(filepath.Join(p.acl, ACLKeyAuth), []byte(f.acl.Auth))
	port, bus := testenv.FreePort(t), testenv.FreePort(t)
	args := []string{conf, "--bind", "127.0.0.1", "--cluster-port", strconv.Itoa(bus),
		"--logfile", filepath.Join(dir, "server.log"), "--cluster-node-timeout", "2000"}
	s := &testServer{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, bus: bus}
	if f.cert != nil {
		write(filepath.Join(p.tls, TLSKeyCA), f.ca)
		write(filepath.Join(p.tls, TLSKeyCert), f.cert)
		write(filepath.Join(p.tls, TLSKeyKey), f.key)
		args = append(args, "--tls-port", strconv.Itoa(port))
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(f.ca) {
			t.Fatal("CA PEM does not parse")
		}
		// Pod IPs change, so clients verify a DNS name of the Service.
		s.tls = &tls.Config{RootCAs: pool, ServerName: "c.ns.svc", MinVersion: tls.VersionTLS12}
	} else {
		args = append(args, "--port", strconv.Itoa(port))
	}
	cmd := exec.Command(bin.Server, args...)
	// Its own process group: a BGSAVE child (a full sync's RDB) outlives a SIGKILL of the
	// server alone and would write into the data directory while the test removes it.
	testenv.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // killed at cleanup, so its exit status says nothing
		close(done)
	}()
	t.Cleanup(func() {
		if err := testenv.KillGroup(cmd.Process.Pid, done, 10*time.Second); err != nil {
			t.Errorf("%s on %s: %v", bin.Name, s.addr, err)
		}
		if t.Failed() {
			s.logTail(t)
		}
	})
	testenv.Eventually(t, 15*time.Second, s.addr+" answering", func() (bool, string) {
		select {
		case <-done:
			s.logTail(t)
			t.Fatalf("%s on %s exited at start (config below)\n%s", bin.Name, s.addr, f.config.Server)
		default:
		}
		c, err := dialRESP(s.addr, s.tls)
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		// Any reply, NOAUTH included, means it is up.
		_, err = c.do("PING")
		var re respError
		return err == nil || errors.As(err, &re), fmt.Sprint(err)
	})
	return s
}

func (s *testServer) logTail(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if err != nil {
		t.Logf("no server log: %v", err)
		return
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	t.Logf("%s log tail:\n%s", s.addr, b)
}

// login dials the server and authenticates as user (no AUTH when user is "").
func (s *testServer) login(t *testing.T, user, password string) *respConn {
	t.Helper()
	c, err := dialRESP(s.addr, s.tls)
	if err != nil {
		t.Fatalf("dialling %s: %v", s.addr, err)
	}
	t.Cleanup(c.Close)
	if user != "" {
		if got := c.str(t, "AUTH", user, password); got != "OK" {
			t.Fatalf("AUTH %s = %q", user, got)
		}
	}
	return c
}
