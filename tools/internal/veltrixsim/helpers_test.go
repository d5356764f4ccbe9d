package veltrixsim

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

const reexecEnv = "VELTRIXSIM_TEST_MAIN"

// TestMain lets tests run the simulator as a real process: the test binary re-executed
// with reexecEnv set behaves like cmd/veltrix-sim.
func TestMain(m *testing.M) {
	if os.Getenv(reexecEnv) == "1" {
		err := RunProcess(os.Args[1:])
		if code := ExitCode(err); code != 0 {
			fmt.Fprintln(os.Stderr, "veltrix-sim:", err)
			os.Exit(code)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mapCountFile writes a fake /proc/sys/vm/max_map_count.
func mapCountFile(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "max_map_count")
	if err := os.WriteFile(p, []byte(fmt.Sprintf("%d\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// testNode is an in-process server on 127.0.0.1 ports of its own.
type testNode struct {
	t        *testing.T
	id       string
	args     []string
	env      map[string]string
	textLn   net.Listener
	httpLn   net.Listener
	textAddr string
	httpAddr string
	node     *Node
	cancel   context.CancelFunc
	done     chan error
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// newTestNode reserves the listeners (so peers can name the address) without serving.
func newTestNode(t *testing.T, id string) *testNode {
	tn := &testNode{t: t, id: id, textLn: listen(t), httpLn: listen(t), env: map[string]string{}}
	tn.textAddr, tn.httpAddr = tn.textLn.Addr().String(), tn.httpLn.Addr().String()
	tn.args = []string{"--node-id", id, "--data-dirs", t.TempDir() + "," + t.TempDir(),
		"--sim-max-map-count-file", mapCountFile(t, MinMaxMapCount), "--sim-gossip-interval", "50ms",
		"--sim-index-rebuild", "300ms", "--addr", tn.textAddr, "--metrics-addr", tn.httpAddr}
	t.Cleanup(func() { _ = tn.stop() })
	return tn
}

func (tn *testNode) start(extra ...string) {
	tn.t.Helper()
	tn.launch(extra...)
	tn.waitReady()
}

// launch starts serving without waiting for /readyz.
func (tn *testNode) launch(extra ...string) {
	tn.t.Helper()
	if tn.textLn == nil {
		tn.textLn, tn.httpLn = mustListen(tn.t, tn.textAddr), mustListen(tn.t, tn.httpAddr)
	}
	cfg, err := ParseConfig(append(append([]string{}, tn.args...), extra...), func(k string) string { return tn.env[k] }, io.Discard)
	if err != nil {
		tn.t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{tn.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := NewNode(cfg, log)
	if err != nil {
		tn.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tn.node, tn.cancel, tn.done = n, cancel, make(chan error, 1)
	textLn, httpLn := tn.textLn, tn.httpLn
	tn.textLn, tn.httpLn = nil, nil
	go func() { tn.done <- n.Serve(ctx, textLn, httpLn) }()
}

func mustListen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("listen %s: %v", addr, err)
	return nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// stop ends the server cleanly (a checkpoint) and returns Serve's error.
func (tn *testNode) stop() error {
	if tn.cancel == nil {
		if tn.textLn != nil {
			tn.textLn.Close()
			tn.httpLn.Close()
			tn.textLn, tn.httpLn = nil, nil
		}
		return nil
	}
	tn.cancel()
	err := <-tn.done
	tn.cancel = nil
	return err
}

func (tn *testNode) waitReady() {
	tn.t.Helper()
	testenv.EventuallyNil(tn.t, 5*time.Second, "readyz of "+tn.id, func() error {
		code, body := httpDo(tn.t, "GET", "http://"+tn.httpAddr+"/readyz", "", nil)
		if code != http.StatusOK {
			return fmt.Errorf("readyz %d %s", code, body)
		}
		return nil
	})
}

func (tn *testNode) cmd(line string) string {
	tn.t.Helper()
	return textCmd(tn.t, tn.textAddr, line)
}

func (tn *testNode) info() map[string]string {
	tn.t.Helper()
	f, err := ParseInfo(tn.cmd("INFO"))
	if err != nil {
		tn.t.Fatal(err)
	}
	return f
}

func (tn *testNode) members() []MemberJSON {
	tn.t.Helper()
	code, body := httpDo(tn.t, "GET", "http://"+tn.httpAddr+"/admin/cluster/members", "", nil)
	if code != http.StatusOK {
		tn.t.Fatalf("members: %d %s", code, body)
	}
	var ms []MemberJSON
	if err := json.Unmarshal([]byte(body), &ms); err != nil {
		tn.t.Fatal(err)
	}
	return ms
}

func textCmd(t *testing.T, addr, line string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
		t.Fatal(err)
	}
	ans, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("%s to %s: %v", line, addr, err)
	}
	return strings.TrimRight(ans, "\n")
}

func httpDo(t *testing.T, method, url, token string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// cluster starts n members with RF rf, all listed in --peers and --join.
func cluster(t *testing.T, size, rf int, extra ...string) []*testNode {
	t.Helper()
	nodes := make([]*testNode, size)
	var peers, join []string
	for i := range nodes {
		nodes[i] = newTestNode(t, fmt.Sprintf("vc-%d", i))
		peers = append(peers, nodes[i].id+"@"+nodes[i].textAddr)
		join = append(join, nodes[i].textAddr)
	}
	for _, tn := range nodes {
		tn.args = append(tn.args, "--mode", ModeReplicated, "--replication-factor", fmt.Sprint(rf),
			"--peers", strings.Join(peers, ","), "--join", strings.Join(join, ","), "--advertise-addr", tn.textAddr)
		tn.args = append(tn.args, extra...)
		tn.start()
	}
	return nodes
}

// joiner prepares a node that joins through the bootstrap members.
func joiner(t *testing.T, id string, boot []*testNode, rf int, extra ...string) *testNode {
	t.Helper()
	tn := newTestNode(t, id)
	var peers, join []string
	for _, b := range boot[:3] {
		peers = append(peers, b.id+"@"+b.textAddr)
		join = append(join, b.textAddr)
	}
	tn.args = append(tn.args, "--mode", ModeReplicated, "--replication-factor", fmt.Sprint(rf),
		"--peers", strings.Join(peers, ","), "--join", strings.Join(join, ","), "--advertise-addr", tn.textAddr)
	tn.args = append(tn.args, extra...)
	return tn
}

// writeKeys writes count keys, spreading the writes over the members.
func writeKeys(t *testing.T, nodes []*testNode, prefix string, count int) map[string]string {
	t.Helper()
	want := map[string]string{}
	for i := range count {
		k, v := fmt.Sprintf("%s-%04d", prefix, i), fmt.Sprintf("value %d of %s", i, prefix)
		if ans := nodes[i%len(nodes)].cmd("PUT " + k + " " + v); ans != "OK" {
			t.Fatalf("PUT %s via %s: %s", k, nodes[i%len(nodes)].id, ans)
		}
		want[k] = v
	}
	return want
}

// lostKeys reads every key through via and returns the ones not found with their value.
func lostKeys(t *testing.T, via *testNode, want map[string]string) []string {
	t.Helper()
	var lost []string
	for k, v := range want {
		if got := via.cmd("GET " + k); got != v {
			lost = append(lost, fmt.Sprintf("%s=%q", k, got))
		}
	}
	return lost
}

// storedCopies sums keys= over the members.
func storedCopies(t *testing.T, nodes []*testNode) int {
	t.Helper()
	total := 0
	for _, tn := range nodes {
		k, err := strconv.Atoi(tn.info()["keys"])
		if err != nil {
			t.Fatalf("INFO keys of %s: %v", tn.id, err)
		}
		total += k
	}
	return total
}

// memberStates returns "id=state,..." as one member sees it.
func memberStates(ms []MemberJSON) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.ID+"="+m.State)
	}
	return strings.Join(s, ",")
}

func mustUnmarshal(t *testing.T, body string, v any) error {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Errorf("decoding %s: %v", body, err)
		return err
	}
	return nil
}
