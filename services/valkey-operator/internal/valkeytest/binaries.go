package valkeytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ServerEnv names the variable that chooses the server every test tier runs:
// "valkey-server" (the default: Debian bookworm-backports' Valkey 8.0) or "redis-server"
// (Debian's Redis 7.0, the compatibility run, `make test-redis7`). A path to either
// binary works too (a Valkey 8.1 or 9.0 built elsewhere); its client is the valkey-cli or
// redis-cli beside it, else the one on PATH.
const ServerEnv = "VALKEY_SERVER"

// DefaultServer is the server the tests run when ServerEnv is unset.
const DefaultServer = "valkey-server"

// Binaries are the server and its command-line client the tests run.
type Binaries struct {
	// Server and CLI are absolute paths.
	Server string
	CLI    string
	// Name is the server's basename, "valkey-server" or "redis-server".
	Name string
}

// Valkey reports whether the chosen binary is Valkey's. Tests use it only to say what they
// expect of the server; the operator itself tells servers apart by INFO.
func (b Binaries) Valkey() bool { return b.Name == "valkey-server" }

// Bins resolves ServerEnv and fails the test clearly when a binary is missing.
func Bins(t testing.TB) Binaries {
	t.Helper()
	b, err := LookupBinaries(os.Getenv(ServerEnv))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// LookupBinaries resolves a ServerEnv value ("" is DefaultServer).
func LookupBinaries(choice string) (Binaries, error) {
	if choice == "" {
		choice = DefaultServer
	}
	name := filepath.Base(choice)
	var cliName, pkg string
	switch name {
	case "valkey-server":
		cliName, pkg = "valkey-cli", "valkey-server and valkey-tools from bookworm-backports (.ci/run adds it)"
	case "redis-server":
		cliName, pkg = "redis-cli", "redis-server (.ci/apt-packages.txt)"
	default:
		return Binaries{}, fmt.Errorf("%s=%q: want valkey-server or redis-server, or a path to one", ServerEnv, choice)
	}
	server, err := exec.LookPath(choice)
	if err != nil {
		return Binaries{}, fmt.Errorf("%s=%s: %s not found (%w): apt-get install %s", ServerEnv, choice, name, err, pkg)
	}
	if server, err = filepath.Abs(server); err != nil {
		return Binaries{}, err
	}
	cli := filepath.Join(filepath.Dir(server), cliName)
	if _, err := os.Stat(cli); err != nil {
		cli = cliName
	}
	if cli, err = exec.LookPath(cli); err != nil {
		return Binaries{}, fmt.Errorf("%s=%s: %s not found beside %s nor on PATH (%w): apt-get install %s", ServerEnv, choice, cliName, server, err, pkg)
	}
	return Binaries{Server: server, CLI: cli, Name: name}, nil
}

// Version is the server binary's own `--version` ("Valkey server v=8.0.1 ..."): what a test
// expects the operator to detect over the wire, read another way.
func (b Binaries) Version(t testing.TB) (major, minor int) {
	t.Helper()
	out, err := exec.Command(b.Server, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", b.Server, err)
	}
	for f := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err == nil {
				return major, minor
			}
		}
	}
	t.Fatalf("%s --version printed no v=<major>.<minor>: %q", b.Server, out)
	return 0, 0
}
