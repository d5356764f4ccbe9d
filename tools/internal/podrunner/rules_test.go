package podrunner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/itchyny/gojq"
)

func TestRulesMatchAndStageSelectorAgree(t *testing.T) {
	rules := Rules(DefaultImageRules("/repo/bin"))
	query, err := gojq.Parse(rules.JQManaged())
	if err != nil {
		t.Fatalf("jq expression does not parse: %v", err)
	}
	code, err := gojq.Compile(query)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		image  string
		binary string // "" when no rule matches
	}{
		{"redis:7", "/usr/bin/redis-server"},
		{"docker.io/library/redis:7.2@sha256:abc", "/usr/bin/redis-server"},
		{"redis", "/usr/bin/redis-server"},
		{"valkey/valkey:8.0", "/usr/bin/valkey-server"},
		{"valkey/valkey:8.1", "/usr/bin/valkey-server"},
		{"docker.io/valkey/valkey-bundle:8", "/usr/bin/valkey-server"},
		{"bitnami/valkey:8.0", "/usr/bin/valkey-server"},
		{"bitnami/redis:7", "/usr/bin/redis-server"},
		{"redis:7.0", "/usr/bin/redis-server"},
		{"ghcr.io/opsuite/vald-operator:v0.1.0", "/repo/bin/vald-operator"},
		{"ghcr.io/opsuite/node-agent@sha256:1234", "/repo/bin/node-agent"},
		{"ghcr.io/opsuite/nested/thing:1", ""},
		{"ghcr.io/veltrixdb/veltrixdb:1.17.0", "/repo/bin/veltrix-sim"},
		{"registry.local:5000/veltrixdb/veltrixdb:1.17.1", "/repo/bin/veltrix-sim"},
		{"veltrixdb/veltrixdb:1.17.1", ""},
		{"nginx:1", ""},
		{"myregistry:5000/redis:7", ""},
		{"quay.io/redis/redis:7", ""},
		{"ghcr.io/oliver006/redis_exporter:v1.74.0", "/repo/.cache/bin/redis_exporter"},
		{"oliver006/redis_exporter:v1.80.0", "/repo/.cache/bin/redis_exporter"},
		{"quay.io/oliver006/redis_exporter:v1.74.0-alpine", "/repo/.cache/bin/redis_exporter"},
	}
	for _, tt := range tests {
		rule, ok := rules.Match(tt.image)
		if got := map[bool]string{true: rule.Binary}[ok]; got != tt.binary {
			t.Errorf("Match(%q) = %q, want %q", tt.image, got, tt.binary)
		}
		pod := map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"image": "pause:3"}, map[string]any{"image": tt.image}}}}
		iter := code.Run(pod)
		v, _ := iter.Next()
		if v != (tt.binary != "") {
			t.Errorf("jq selector on %q = %v, want %v", tt.image, v, tt.binary != "")
		}
	}
}

func TestArgv(t *testing.T) {
	rule, _ := Rules(DefaultImageRules("/repo/bin")).Match("redis:7")
	tests := []struct {
		command, args []string
		want          []string
		wantErr       bool
	}{
		{nil, nil, []string{"/usr/bin/redis-server"}, false},
		{nil, []string{"--port", "7000"}, []string{"/usr/bin/redis-server", "--port", "7000"}, false},
		{[]string{"redis-server"}, []string{"/etc/redis.conf"}, []string{"/usr/bin/redis-server", "/etc/redis.conf"}, false},
		{[]string{"/usr/local/bin/valkey-server", "/conf/valkey.conf"}, nil, []string{"/usr/bin/redis-server", "/conf/valkey.conf"}, false},
		{nil, []string{"redis-server", "--appendonly", "yes"}, []string{"/usr/bin/redis-server", "--appendonly", "yes"}, false},
		{[]string{"sh", "-c", "redis-server"}, nil, nil, true},
	}
	for _, tt := range tests {
		got, err := rule.argv(tt.command, tt.args)
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("argv(%q, %q) = %q, %v; want %q, error %v", tt.command, tt.args, got, err, tt.want, tt.wantErr)
		}
	}
	// The operator's pods run valkey-server whatever spec.image says; a Valkey image given
	// redis-server (its compatibility link) runs valkey-server too.
	valkey, _ := Rules(DefaultImageRules("/repo/bin")).Match("valkey/valkey:8.1")
	for _, tt := range []struct {
		rule    ImageRule
		command []string
		want    string
	}{
		{rule, []string{"valkey-server"}, "/usr/bin/redis-server"},
		{valkey, []string{"valkey-server"}, "/usr/bin/valkey-server"},
		{valkey, []string{"redis-server"}, "/usr/bin/valkey-server"},
		{valkey, []string{"/usr/local/bin/docker-entrypoint.sh"}, "/usr/bin/valkey-server"},
	} {
		got, err := tt.rule.argv(tt.command, []string{"/config/valkey.conf"})
		if err != nil || !reflect.DeepEqual(got, []string{tt.want, "/config/valkey.conf"}) {
			t.Errorf("%s: argv(%q) = %q, %v; want %s", tt.rule.Image, tt.command, got, err, tt.want)
		}
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"POD_IP": "127.1.0.4", "PORT": "6379"}
	tests := map[string]string{
		"$(POD_IP):$(PORT)": "127.1.0.4:6379",
		"$$(POD_IP)":        "$(POD_IP)",
		"$(UNSET)":          "$(UNSET)",
		"plain $ sign":      "plain $ sign",
		"$(POD_IP":          "$(POD_IP",
	}
	for in, want := range tests {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBindToPod(t *testing.T) {
	flags := ListenFlagsOpsuite
	ip := "127.1.0.7"
	tests := []struct {
		in, want []string
	}{
		{[]string{"--metrics-bind-address=:8443", "--leader-elect"}, []string{"--metrics-bind-address=127.1.0.7:8443", "--leader-elect"}},
		{[]string{"--listen", ":9443", "--health-listen=0.0.0.0:9444"}, []string{"--listen", "127.1.0.7:9443", "--health-listen=127.1.0.7:9444"}},
		{[]string{"-health-probe-bind-address=[::]:8081"}, []string{"-health-probe-bind-address=127.1.0.7:8081"}},
		// A disabled listener, an explicit host and unrelated flags stay as written.
		{[]string{"--metrics-bind-address=0", "--listen=127.0.0.1:9443", "--tls-cert=:8443"}, []string{"--metrics-bind-address=0", "--listen=127.0.0.1:9443", "--tls-cert=:8443"}},
		{[]string{"--listen"}, []string{"--listen"}},
		{[]string{"--listen=$(POD_IP):9443"}, []string{"--listen=$(POD_IP):9443"}},
	}
	for _, tt := range tests {
		if got := bindToPod(tt.in, flags, ip); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("bindToPod(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	in := []string{"--listen=:1"}
	_ = bindToPod(in, flags, ip)
	if in[0] != "--listen=:1" {
		t.Errorf("bindToPod changed its input: %q", in)
	}
}

func TestParseUser(t *testing.T) {
	tests := []struct {
		user    string
		uid     int64
		gid     int64 // -1: none
		wantErr bool
	}{
		{"", 0, -1, false},
		{"65532:65532", 65532, 65532, false},
		{"1001", 1001, -1, false},
		{"nonroot", 0, -1, true},
		{"1:x", 0, -1, true},
		{"-1", 0, -1, true},
	}
	for _, tt := range tests {
		uid, gid, err := parseUser(tt.user)
		g := int64(-1)
		if gid != nil {
			g = *gid
		}
		if (err != nil) != tt.wantErr || (err == nil && (uid != tt.uid || g != tt.gid)) {
			t.Errorf("parseUser(%q) = %d, %d, %v; want %d, %d, error %v", tt.user, uid, g, err, tt.uid, tt.gid, tt.wantErr)
		}
	}
}

// A rule says what a simulator needs; invalid ones are refused when the runner starts.
func TestRuleValidate(t *testing.T) {
	for _, r := range DefaultImageRules("/repo/bin") {
		if err := r.Validate(); err != nil {
			t.Errorf("default rule %q: %v", r.Image, err)
		}
	}
	bad := []ImageRule{
		{Image: "x", Binary: "/b", User: "nonroot"},
		{Image: "x", Binary: "/b", Env: []string{"NOVALUE"}},
		{Image: "x", Binary: "/b", ListenFlags: []string{"listen"}},
		{Image: "x", Binary: "/b", ListenFlags: []string{"--listen=:1"}},
		{Image: "x", Binary: "/b", Subcommands: []string{"--signer"}},
		{Image: "x", Binary: "/b", ListenEnv: []string{"ADDR=:1"}},
		{Image: "x", Binary: "/b", LoopbackEnv: []string{""}},
		{Image: "[", Binary: "/b"},
		{Image: "x"},
	}
	for _, r := range bad {
		if err := r.Validate(); err == nil {
			t.Errorf("rule %+v accepted", r)
		}
	}
}

func TestDefaultRulesNodeAgent(t *testing.T) {
	rules := Rules(DefaultImageRules("/repo/bin"))
	agent, ok := rules.Match("ghcr.io/opsuite/node-agent:0.1.0")
	if !ok || agent.Binary != "/repo/bin/node-agent" {
		t.Fatalf("node-agent rule: %+v, %v", agent, ok)
	}
	vars := map[string]string{NodeDevicesVar: "/dev/loop3,/dev/loop4"}
	var extra []string
	for _, a := range agent.ExtraArgs {
		extra = append(extra, expand(a, vars))
	}
	want := []string{"--allow-loop-devices", "--device-allow=/dev/loop3,/dev/loop4"}
	if !reflect.DeepEqual(extra, want) {
		t.Errorf("node-agent extra args %q, want %q", extra, want)
	}
	// The chart's signer Deployment runs `node-agent signer ...`: it has no disks, and the
	// agent's flags would make it exit (flag provided but not defined).
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"--listen=:9443"}, 2},
		{[]string{"signer", "--ca-cert=/ca/tls.crt"}, 0},
		{[]string{"node-agent", "signer", "--name=x"}, 0},
		{[]string{"--name=signer"}, 2},
	} {
		argv, err := agent.argv(nil, tt.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := agent.extraArgs(argv); len(got) != tt.want {
			t.Errorf("args %q: extra args %q, want %d", tt.args, got, tt.want)
		}
	}
	op, _ := rules.Match("ghcr.io/opsuite/vald-operator:0.1.0")
	if len(op.ExtraArgs) != 0 || op.User != "65532:65532" || len(op.ListenFlags) == 0 {
		t.Errorf("operator rule %+v: want no extra args, user 65532:65532, listen flags", op)
	}
}

// The exporter sidecar as the Valkey operator writes it: a loopback address of the server
// and the listen address in the environment become the pod's address; the image's
// defaults (REDIS_ADDR and the listen address unset) too; the name localhost stays (the
// pod's /etc/hosts names the pod's address so, and a TLS client verifies that name);
// other values stay.
func TestRedisExporterEnv(t *testing.T) {
	rule, ok := Rules(DefaultImageRules("/repo/bin")).Match("ghcr.io/oliver006/redis_exporter:v1.74.0")
	if !ok || rule.User != "59000:59000" {
		t.Fatalf("redis_exporter rule %+v, %v", rule, ok)
	}
	const ip = "127.1.0.9"
	tests := []struct {
		env, want []string
	}{
		{
			[]string{"REDIS_ADDR=redis://localhost:6379", "REDIS_USER=valkey-exporter", "REDIS_PASSWORD=localhost:1", "REDIS_EXPORTER_WEB_LISTEN_ADDRESS=:9121"},
			[]string{"REDIS_ADDR=redis://localhost:6379", "REDIS_USER=valkey-exporter", "REDIS_PASSWORD=localhost:1", "REDIS_EXPORTER_WEB_LISTEN_ADDRESS=127.1.0.9:9121"},
		},
		{
			[]string{"REDIS_ADDR=rediss://user:pw@127.0.0.1:6380", "REDIS_EXPORTER_WEB_LISTEN_ADDRESS=0.0.0.0:9200"},
			[]string{"REDIS_ADDR=rediss://user:pw@127.1.0.9:6380", "REDIS_EXPORTER_WEB_LISTEN_ADDRESS=127.1.0.9:9200"},
		},
		{[]string{"REDIS_ADDR=localhost:6379"}, []string{"REDIS_ADDR=localhost:6379"}},
		{[]string{"REDIS_ADDR=rediss://localhost:6379"}, []string{"REDIS_ADDR=rediss://localhost:6379"}},
		{[]string{"REDIS_ADDR=127.0.0.1:6379"}, []string{"REDIS_ADDR=127.1.0.9:6379"}},
		{[]string{"REDIS_ADDR=redis://[::1]"}, []string{"REDIS_ADDR=redis://127.1.0.9"}},
		// Another member, or a server elsewhere, stays.
		{[]string{"REDIS_ADDR=redis://demo-0-0.demo:6379", "REDIS_EXPORTER_WEB_LISTEN_ADDRESS=127.0.0.1:9121"},
			[]string{"REDIS_ADDR=redis://demo-0-0.demo:6379", "REDIS_EXPORTER_WEB_LISTEN_ADDRESS=127.0.0.1:9121"}},
	}
	for _, tt := range tests {
		vars := map[string]string{}
		for _, e := range tt.env {
			k, v, _ := strings.Cut(e, "=")
			vars[k] = v
		}
		got := rule.podEnv(tt.env, vars, ip)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("podEnv(%q) = %q, want %q", tt.env, got, tt.want)
		}
		for _, e := range tt.want {
			if k, v, _ := strings.Cut(e, "="); vars[k] != v {
				t.Errorf("vars[%s] = %q, want %q", k, vars[k], v)
			}
		}
	}
	// Neither set: the image's ENV, the binary's own defaults, is rewritten.
	defaults := rule.podEnv(rule.Env, map[string]string{}, ip)
	want := []string{"REDIS_ADDR=redis://localhost:6379", "REDIS_EXPORTER_WEB_LISTEN_ADDRESS=127.1.0.9:9121"}
	if !reflect.DeepEqual(defaults, want) {
		t.Errorf("image defaults %q, want %q", defaults, want)
	}
	if got := bindToPod([]string{"--web.listen-address=:9121"}, rule.ListenFlags, ip); got[0] != "--web.listen-address=127.1.0.9:9121" {
		t.Errorf("listen flag %q", got)
	}
	// A rule without such variables leaves the environment alone.
	valkey, _ := Rules(DefaultImageRules("/repo/bin")).Match("valkey/valkey:8.0")
	in := []string{"REDIS_ADDR=redis://localhost:6379"}
	if got := valkey.podEnv(in, map[string]string{}, ip); !reflect.DeepEqual(got, in) {
		t.Errorf("valkey rule rewrote %q", got)
	}
}
