package veltrixsim

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

func TestStandaloneProtocol(t *testing.T) {
	tn := newTestNode(t, "solo")
	tn.start()
	for _, c := range []struct{ line, want string }{
		{"PING", "PONG"},
		{"PUT k1 hello world", "OK"},
		{"GET k1", "hello world"},
		{"GET nope", "ERR not found"},
		{"PUT k2 v2", "OK"},
		{"DEL k1", "OK"},
		{"GET k1", "ERR not found"},
		{"PUT onlykey", "ERR usage: PUT <key> <value>"},
		{"FLY", `ERR unknown command "FLY"`},
	} {
		if got := tn.cmd(c.line); got != c.want {
			t.Errorf("%s = %q, want %q", c.line, got, c.want)
		}
	}
	info := tn.info()
	for k, want := range map[string]string{"node_id": "solo", "mode": "standalone", "keys": "1", "search_ready": "1", "members": "1", "epoch": "1"} {
		if info[k] != want {
			t.Errorf("INFO %s=%q, want %q (%v)", k, info[k], want, info)
		}
	}
	if top := tn.cmd("TOPOLOGY"); !strings.Contains(top, `"node_id":"solo"`) || !strings.Contains(top, `"partition_count":64`) {
		t.Errorf("TOPOLOGY = %s", top)
	}
	if got := tn.cmd("SEARCH k"); got != `["k2"]` {
		t.Errorf("SEARCH k = %s", got)
	}
	code, body := httpDo(t, "GET", "http://"+tn.httpAddr+"/healthz", "", nil)
	if code != 200 {
		t.Errorf("healthz %d %s", code, body)
	}
	code, body = httpDo(t, "GET", "http://"+tn.httpAddr+"/metrics", "", nil)
	if code != 200 || !strings.Contains(body, "\nveltrixdb_keys 1\n") || !strings.Contains(body, `veltrixdb_cluster_members{state="active"} 1`) {
		t.Errorf("metrics %d:\n%s", code, body)
	}
	code, body = httpDo(t, "DELETE", "http://"+tn.httpAddr+"/admin/cluster/members/solo", "", nil)
	if code != http.StatusConflict || !strings.Contains(body, "standalone mode has no online membership") {
		t.Errorf("DELETE in standalone: %d %s", code, body)
	}
}

func TestReadyzWaitsForTheDataNotTheIndex(t *testing.T) {
	tn := newTestNode(t, "slow")
	tn.args = append(tn.args, "--sim-open-delay", "400ms")
	tn.launch()
	testenv.EventuallyNil(t, 2*time.Second, "readyz 503 while opening", func() error {
		code, _ := httpDo(t, "GET", "http://"+tn.httpAddr+"/readyz", "", nil)
		if code != http.StatusServiceUnavailable {
			return fmt.Errorf("readyz %d", code)
		}
		return nil
	})
	if got := textCmd(t, tn.textAddr, "GET x"); !strings.HasPrefix(got, "ERR loading") {
		t.Errorf("GET while opening = %q", got)
	}
	testenv.EventuallyNil(t, 3*time.Second, "readyz 200", func() error {
		if code, _ := httpDo(t, "GET", "http://"+tn.httpAddr+"/readyz", "", nil); code != 200 {
			return fmt.Errorf("readyz %d", code)
		}
		return nil
	})
}

func TestAdminAuth(t *testing.T) {
	tn := newTestNode(t, "auth")
	tn.env[EnvAdminToken] = "s3cret"
	tn.start()
	url := "http://" + tn.httpAddr + "/admin/cluster"
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {"wrong", 401}, {"s3cret", 200}} {
		if code, body := httpDo(t, "GET", url, c.token, nil); code != c.want {
			t.Errorf("token %q: %d %s, want %d", c.token, code, body, c.want)
		}
	}
	if code, _ := httpDo(t, "POST", "http://"+tn.httpAddr+"/admin/checkpoint", "s3cret", nil); code != 200 {
		t.Errorf("checkpoint with token: %d", code)
	}
	// Without a token only loopback callers are served.
	open := newTestNode(t, "open")
	open.start()
	h := open.node.httpHandler()
	for _, c := range []struct {
		remote string
		want   int
	}{{"127.0.0.1:5555", 200}, {"[::1]:5555", 200}, {"10.1.2.3:5555", 403}} {
		r := httptest.NewRequest("GET", "/admin/cluster/members", nil)
		r.RemoteAddr = c.remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("no token, caller %s: %d %s, want %d", c.remote, w.Code, w.Body, c.want)
		}
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	low, ok := mapCountFile(t, 65530), mapCountFile(t, MinMaxMapCount)
	auth := mapCountFile(t, 1) // any readable file stands for an RBAC config
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "" = accepted
	}{
		{"go net with raft", []string{"--mode=raft", "--node-id=a", "-net=go"}, nil, ""},
		{"cpp with raft", []string{"--mode=raft", "--node-id=a", "-net=cpp"}, nil, "-net=cpp is refused in -mode raft"},
		{"uring with replicated", []string{"--mode=replicated", "--node-id=a", "--net=uring"}, nil, "-net=uring is refused in -mode replicated"},
		{"poll with auth-config", []string{"-net=poll", "--auth-config=" + auth}, nil, "-net=poll is refused with -auth-config"},
		{"cpp standalone", []string{"-net=cpp"}, nil, ""},
		{"bad net", []string{"-net=rust"}, nil, `-net="rust": want go, cpp, uring or poll`},
		{"native index below minimum", []string{"--sim-max-map-count-file=" + low}, nil,
			"native index needs vm.max_map_count >= 262144, the node has 65530: raise it on the node (a container cannot set it) or set VELTRIXDB_INDEX=map"},
		{"map index below minimum", []string{"--sim-max-map-count-file=" + low}, map[string]string{EnvIndex: "map"}, ""},
		{"unreadable max_map_count", []string{"--sim-max-map-count-file=" + dir + "/nope"}, nil, "cannot read vm.max_map_count"},
		{"missing data dir", []string{"--data-dirs=" + dir + "/nope"}, nil, "data dir " + dir + "/nope"},
		{"raw vlogs unpaired", []string{"--raw-vlogs=/dev/null,/dev/null"}, nil, "--raw-vlogs has 2 devices for 1 data dirs"},
		{"raw vlogs paired", []string{"--raw-vlogs=/dev/null"}, nil, ""},
		{"cluster without node id", []string{"--mode=raft"}, nil, "--node-id is required in -mode raft"},
		{"not in peers, no join", []string{"--mode=raft", "--node-id=x", "--peers=a@h:1"}, nil, "node x is not in --peers and --join is not set"},
		{"bad mode", []string{"--mode=mesh"}, nil, `-mode="mesh"`},
		{"io_uring bridge sqpoll", nil, map[string]string{EnvURingBridge: "sqpoll"}, ""},
		{"io_uring bridge unknown", nil, map[string]string{EnvURingBridge: "always"}, `VELTRIXDB_URING_BRIDGE="always": want off, on or sqpoll`},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--data-dirs=" + dir, "--sim-max-map-count-file=" + ok}, c.args...)
			cfg, err := ParseConfig(args, func(k string) string { return c.env[k] }, &strings.Builder{})
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Check()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestEnvironment(t *testing.T) {
	env := map[string]string{EnvAdminToken: "tok", EnvReplicationFactor: "3", EnvCacheMaxSizeMB: "262144",
		EnvMoveRate: "5", EnvRefuseDelete: "500", EnvIndexRebuild: "2s", EnvIndex: "map"}
	cfg, err := ParseConfig(nil, func(k string) string { return env[k] }, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AdminToken != "tok" || cfg.ReplicationFactor != 3 || cfg.CacheMaxSizeMB != 262144 || cfg.MoveRate != 5 ||
		cfg.RefuseDelete != 500 || cfg.IndexRebuild != 2*time.Second || cfg.Index != IndexMap {
		t.Errorf("from the environment: %+v", cfg)
	}
	cfg, err = ParseConfig([]string{"--admin-token=flag", "--replication-factor=2", "--sim-move-rate=0"}, func(k string) string { return env[k] }, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AdminToken != "flag" || cfg.ReplicationFactor != 2 || cfg.MoveRate != 0 {
		t.Errorf("flags must win over the environment: %+v", cfg)
	}
}

// TestURingBridge: INFO's uring_bridge is off without VELTRIXDB_URING_BRIDGE, the mode asked
// for when io_uring_setup is allowed, and fallback (pwrite) when it is refused, as under
// seccomp RuntimeDefault; with probe, whatever this kernel answers.
func TestURingBridge(t *testing.T) {
	for _, c := range []struct {
		bridge, probe, want string
	}{
		{"", "", URingOff},
		{"off", URingProbeBlocked, URingOff},
		{"on", URingProbeAllowed, URingOn},
		{"sqpoll", URingProbeAllowed, URingSQPoll},
		{"on", URingProbeBlocked, URingFallback},
		{"sqpoll", URingProbeBlocked, URingFallback},
	} {
		env := map[string]string{EnvURingBridge: c.bridge, EnvSimURing: c.probe, EnvIndex: "map"}
		cfg, err := ParseConfig([]string{"--data-dirs=" + t.TempDir()}, func(k string) string { return env[k] }, &strings.Builder{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := NewNode(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.InfoFields()["uring_bridge"]; got != c.want {
			t.Errorf("%s=%q %s=%q: uring_bridge=%s, want %s", EnvURingBridge, c.bridge, EnvSimURing, c.probe, got, c.want)
		}
	}
	env := map[string]string{EnvURingBridge: "on", EnvIndex: "map"}
	cfg, err := ParseConfig([]string{"--data-dirs=" + t.TempDir()}, func(k string) string { return env[k] }, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNode(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := n.InfoFields()["uring_bridge"]
	if got != URingOn && got != URingFallback {
		t.Errorf("probing this kernel: uring_bridge=%s, want on or fallback", got)
	}
	t.Logf("this kernel's io_uring_setup: uring_bridge=%s (%v)", got, n.uringErr)
}
