// Package testenv starts a real control plane (etcd and kube-apiserver, built by tools/
// from the Go module proxy and cached under .cache/k8s) for integration tests, installs the
// suite's CRDs and cleans up after test processes that were killed mid-run. Its helpers
// serve every module's tests: StartManager, Eventually/WaitFor/WaitForObject/
// WaitForCondition, Poll, WriteCounter, FreeAddr/FreePort, NewNamespace, Kubeconfig,
// LogBuffer, Golden, the test PKI (CA: a throwaway authority and the certificates it
// signs) and the Widget test kind.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// KubernetesVersion is the version of the control-plane binaries tools/ builds.
const KubernetesVersion = "v1.37.2"

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as an admin.
	Config *rest.Config
	// Client is an uncached client with Scheme.
	Client client.Client
	// Scheme knows the built-in kinds and those added at Start.
	Scheme *runtime.Scheme
	// StartupTime is how long the control plane took to become ready.
	StartupTime time.Duration

	env     *envtest.Environment
	scratch string
}

// Options change what Start installs.
type Options struct {
	// CRDDirs hold CRD manifests to install; empty means the repo's deploy/crds.
	CRDDirs []string
	// AddToSchemes register the kinds the tests use.
	AddToSchemes []func(*runtime.Scheme) error
}

// RepoRoot finds the repository root (the directory with go.work) above the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.work above the working directory; run tests inside the repository")
		}
		dir = parent
	}
}

// BinDir is where the control-plane binaries are: $KUBEBUILDER_ASSETS when set (envtest
// binaries from setup-envtest), else the cache tools/ builds into.
func BinDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "k8s", KubernetesVersion), nil
}

// Start sweeps leftovers of killed test runs, starts etcd and kube-apiserver, and installs
// the CRDs. A missing binary is an error that says how to build it.
func Start(opts Options) (*Env, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return nil, fmt.Errorf("testenv: %s not found in %s: run `make controlplane` (builds it from the Go module proxy) or set KUBEBUILDER_ASSETS to envtest binaries", name, bin)
		}
	}
	Sweep(bin)
	scratch, err := os.MkdirTemp("", "opsuite-testenv-")
	if err != nil {
		return nil, err
	}
	wrapped, err := wrapWithParentDeathSignal(bin, scratch)
	if err != nil {
		_ = os.RemoveAll(scratch)
		return nil, err
	}
	crdDirs := opts.CRDDirs
	if len(crdDirs) == 0 {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		crdDirs = []string{filepath.Join(root, "deploy", "crds")}
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	for _, add := range opts.AddToSchemes {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("testenv: adding to scheme: %w", err)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: wrapped,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		// envtest's default (20 s) is short on two cores shared with the e2e suite's
		// clusters: `make test` runs them beside these tests, and kube-apiserver missed
		// it five times in a row there (load 30).
		ControlPlaneStartTimeout: 90 * time.Second,
	}
	// envtest logs its retries through controller-runtime's logger; without one set it
	// prints a stack trace instead. Tests may set their own logger afterwards.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	began := time.Now()
	cfg, err := env.Start()
	if err != nil {
		_ = os.RemoveAll(scratch)
		return nil, fmt.Errorf("testenv: starting the control plane from %s: %w", bin, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	e := &Env{Config: cfg, Client: c, Scheme: scheme, StartupTime: time.Since(began), env: env, scratch: scratch}
	fmt.Fprintf(os.Stderr, "testenv: real kube-apiserver %s and etcd at %s, ready in %s (binaries: %s)\n",
		KubernetesVersion, cfg.Host, e.StartupTime.Round(time.Millisecond), bin)
	return e, nil
}

// Stop stops the API server, then etcd (the other order hangs the API server), and
// removes scratch files.
func (e *Env) Stop() error {
	err := e.env.Stop()
	_ = os.RemoveAll(e.scratch)
	return err
}

// Main runs a package's tests against one control plane: call it from TestMain. It exits
// the process with the tests' code; a control plane that cannot start fails the run.
func Main(m *testing.M, env **Env, addToSchemes ...func(*runtime.Scheme) error) {
	MainWith(m, env, Options{AddToSchemes: addToSchemes})
}

// MainWithWidgets is Main with only the Widget CRD installed (see WidgetGVK).
func MainWithWidgets(m *testing.M, env **Env) {
	opts, err := WidgetOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	MainWith(m, env, opts)
}

// MainWith is Main with every Option (the CRDs of a test's own, for example).
func MainWith(m *testing.M, env **Env, opts Options) {
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stopping:", err)
	}
	os.Exit(code)
}

// wrapWithParentDeathSignal writes, for each binary, a script that execs it with a
// parent-death signal, so a test process killed mid-run (timeout panic, SIGKILL) takes its
// etcd and kube-apiserver with it instead of orphaning them.
func wrapWithParentDeathSignal(bin, scratch string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return "", errors.New("testenv: setpriv (Debian package util-linux) is needed to tie the control plane to the test process")
	}
	dir := filepath.Join(scratch, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(bin)
	if err != nil {
		return "", err
	}
	for _, ent := range entries {
		if ent.IsDir() {
			continue
		}
		real, err := filepath.Abs(filepath.Join(bin, ent.Name()))
		if err != nil {
			return "", err
		}
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, real)
		if err := os.WriteFile(filepath.Join(dir, ent.Name()), []byte(script), 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}
