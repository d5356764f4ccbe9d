package podrunner

import (
	"reflect"
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
		{"valkey/valkey:8.0", "/usr/bin/redis-server"},
		{"docker.io/valkey/valkey-bundle:8", "/usr/bin/redis-server"},
		{"bitnami/redis:7", "/usr/bin/redis-server"},
		{"ghcr.io/opsuite/vald-operator:v0.1.0", "/repo/bin/vald-operator"},
		{"ghcr.io/opsuite/node-agent@sha256:1234", "/repo/bin/node-agent"},
		{"ghcr.io/opsuite/nested/thing:1", ""},
		{"nginx:1", ""},
		{"myregistry:5000/redis:7", ""},
		{"quay.io/redis/redis:7", ""},
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
