package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// DefaultTimeout bounds WaitFor and the waits built on it: long enough for a loaded
// 2-core CI machine, short enough that a stuck test says so before the go test timeout.
const DefaultTimeout = 60 * time.Second

// pollInterval is how often waits look again.
const pollInterval = 50 * time.Millisecond

// handedOut remembers the ports FreeAddr gave this process: the kernel may offer a port it
// just released again, and two servers of one test given the same port make one.
var handedOut = struct {
	sync.Mutex
	ports map[string]bool
}{ports: map[string]bool{}}

// FreeAddr returns a loopback address with a port nothing listens on right now and that no
// earlier call in this process returned.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testenv: finding a free port: %v", err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		handedOut.Lock()
		seen := handedOut.ports[addr]
		handedOut.ports[addr] = true
		handedOut.Unlock()
		if !seen {
			return addr
		}
	}
}

// FreePort returns a loopback port nothing listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(FreeAddr(t))
	n, _ := strconv.Atoi(port)
	return n
}

// FreePortBelowEphemeral returns a loopback port from 20000-31999, below the kernel's
// ephemeral range (32768 up), that nothing listens on now and that no earlier call in this
// process returned. It is for a server that binds its port later (a process started
// afterwards, a member configured before it runs): the processes under test dial many short
// connections, and an ephemeral port could become the source port of one of them first.
func FreePortBelowEphemeral(t testing.TB) int {
	t.Helper()
	for range 1000 {
		p := 20000 + mathrand.IntN(12000)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		handedOut.Lock()
		seen := handedOut.ports[addr]
		handedOut.Unlock()
		if seen {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = l.Close()
		handedOut.Lock()
		seen = handedOut.ports[addr]
		handedOut.ports[addr] = true
		handedOut.Unlock()
		if !seen && reservePort(p) {
			return p
		}
	}
	t.Fatal("testenv: no free port in 20000-31999")
	return 0
}

// portLocks holds, for the process's life, a lock on a file per port FreePortBelowEphemeral
// handed out: go test runs several packages' test binaries at once, and a port one of
// them was given (its server not bound yet) is then skipped by the others, where only
// this process's memory kept it before (a simulator failed with "address already in
// use" in CI). The kernel drops the locks when the process ends.
var portLocks struct {
	sync.Mutex
	files []*os.File
}

// portLockDir is where the lock files are, shared by every test process of the machine.
var portLockDir = filepath.Join(os.TempDir(), "opsuite-testenv-ports")

// reservePort takes port p's lock for this process; false when another live process
// holds it. A lock that cannot be set up at all (no writable temporary directory) does
// not stop the test: the in-process check still stands.
func reservePort(p int) bool {
	if err := os.MkdirAll(portLockDir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(portLockDir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return !errors.Is(err, syscall.EWOULDBLOCK)
	}
	portLocks.Lock()
	portLocks.files = append(portLocks.files, f)
	portLocks.Unlock()
	return true
}

// PortsFree reports, as an error naming the first taken one, whether the n loopback ports
// from first on can all be bound now (a local cluster's fixed port range, say).
func PortsFree(first, n int) error {
	for p := first; p < first+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return fmt.Errorf("port %d is taken: %w", p, err)
		}
		_ = l.Close()
	}
	return nil
}

// Poll calls cond every interval until it reports done, returns an error, or ctx ends;
// then the error says what cond last reported.
func Poll(ctx context.Context, interval time.Duration, cond func(context.Context) (bool, error)) error {
	var last error
	for {
		done, err := cond(ctx)
		if err == nil && done {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// Eventually calls check until it reports done, for at most timeout, and fails the test
// naming what it waited for and the last state check described.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, state := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			if state == "" {
				t.Fatalf("timed out after %s waiting until %s", timeout, what)
			}
			t.Fatalf("timed out after %s waiting until %s; last seen:\n%s", timeout, what, state)
		}
		time.Sleep(pollInterval)
	}
}

// EventuallyTrue is Eventually for a check with no state to describe.
func EventuallyTrue(t testing.TB, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	Eventually(t, timeout, what, func() (bool, string) { return ok(), "" })
}

// EventuallyNil is Eventually for a check that says what is still wrong as an error: it
// waits until check returns nil and, on timeout, reports the last error.
func EventuallyNil(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	Eventually(t, timeout, what, func() (bool, string) {
		if err := check(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// WaitFor waits up to DefaultTimeout until ok holds.
func WaitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	EventuallyTrue(t, DefaultTimeout, what, ok)
}

// WaitForObject reads obj (by its namespace and name) through c until ok accepts it and
// returns it; on timeout describe says what the object last looked like.
func WaitForObject[O client.Object](t testing.TB, c client.Reader, obj O, what string, ok func(O) bool, describe func(O) string) O {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	Eventually(t, DefaultTimeout, fmt.Sprintf("%s %s", key, what), func() (bool, string) {
		if err := c.Get(context.Background(), key, obj); err != nil {
			return false, err.Error()
		}
		return ok(obj), describe(obj)
	})
	return obj
}

// WaitForCondition waits until obj's status.conditions hold condType with status, stamped
// with the object's current generation, and returns that condition.
func WaitForCondition(t testing.TB, c client.Reader, obj client.Object, condType string, status metav1.ConditionStatus) metav1.Condition {
	t.Helper()
	var found metav1.Condition
	WaitForObject(t, c, obj, fmt.Sprintf("has %s=%s", condType, status), func(o client.Object) bool {
		conds, err := ConditionsOf(o)
		if err != nil {
			return false
		}
		for _, cd := range conds {
			if cd.Type == condType && cd.Status == status && cd.ObservedGeneration == o.GetGeneration() {
				found = cd
				return true
			}
		}
		return false
	}, func(o client.Object) string {
		conds, err := ConditionsOf(o)
		if err != nil {
			return err.Error()
		}
		s := fmt.Sprintf("generation %d, conditions:", o.GetGeneration())
		for _, cd := range conds {
			s += fmt.Sprintf("\n  %s=%s/%s (generation %d): %s", cd.Type, cd.Status, cd.Reason, cd.ObservedGeneration, cd.Message)
		}
		return s
	})
	return found
}

// ConditionsOf reads status.conditions of any object that has them.
func ConditionsOf(obj client.Object) ([]metav1.Condition, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	st, _ := u["status"].(map[string]any)
	raw, _ := st["conditions"].([]any)
	var conds []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var cd metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cd); err != nil {
			return nil, err
		}
		conds = append(conds, cd)
	}
	return conds, nil
}

// NewNamespace creates a namespace named prefix plus a random suffix, so tests sharing one
// control plane do not see each other's objects. Without kube-controller-manager a deleted
// namespace never goes, so it is left in place.
func NewNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + rand.String(6)}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("testenv: creating namespace: %v", err)
	}
	return ns.Name
}

// Kubeconfig writes a kubeconfig for the Env's admin into the test's temporary directory
// and returns its path, for code under test that takes --kubeconfig.
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	kc.AuthInfos["testenv"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.Config.CertData, ClientKeyData: e.Config.KeyData, Token: e.Config.BearerToken}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "testenv"}
	kc.CurrentContext = "testenv"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("testenv: writing kubeconfig: %v", err)
	}
	return path
}

// ManagerOption changes the manager StartManager builds.
type ManagerOption func(*ctrl.Options)

// InNamespaces limits the manager's cache to namespaces (a test's own).
func InNamespaces(namespaces ...string) ManagerOption {
	return func(o *ctrl.Options) {
		o.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			o.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
}

// StartManager builds a manager against the Env (the Env's scheme, metrics and probes off,
// no leader election, controller name validation off so every test may register the same
// controller), lets setup add controllers, starts it, waits for its cache, and stops it
// when the test ends, failing the test if it stopped with an error.
func (e *Env) StartManager(t testing.TB, setup func(ctrl.Manager) error, opts ...ManagerOption) ctrl.Manager {
	t.Helper()
	skip := true
	mo := ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	mo.Controller.SkipNameValidation = &skip
	for _, o := range opts {
		o(&mo)
	}
	mgr, err := ctrl.NewManager(e.Config, mo)
	if err != nil {
		t.Fatalf("testenv: creating manager: %v", err)
	}
	if setup != nil {
		if err := setup(mgr); err != nil {
			t.Fatalf("testenv: setting up the manager: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("testenv: manager stopped with %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("testenv: the manager's cache did not sync")
	}
	return mgr
}

// WriteCounter counts the writes (create, update, patch, apply, delete, and those of the
// status subresource) issued through the clients it wraps, so a test can prove that a
// converged controller writes nothing.
type WriteCounter struct{ n atomic.Int64 }

// Wrap returns c counting its writes on w.
func (w *WriteCounter) Wrap(c client.Client) client.Client {
	return &countingClient{Client: c, n: &w.n}
}

// Count is the number of writes so far.
func (w *WriteCounter) Count() int64 { return w.n.Load() }

type countingClient struct {
	client.Client
	n *atomic.Int64
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.n.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.n.Add(1)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

// Status is the "status" subresource, as controller-runtime's own client has it.
func (c *countingClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *countingClient) SubResource(sub string) client.SubResourceClient {
	return &countingSubResource{SubResourceClient: c.Client.SubResource(sub), n: c.n}
}

type countingSubResource struct {
	client.SubResourceClient
	n *atomic.Int64
}

func (c *countingSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	c.n.Add(1)
	return c.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (c *countingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.n.Add(1)
	return c.SubResourceClient.Update(ctx, obj, opts...)
}

func (c *countingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	c.n.Add(1)
	return c.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (c *countingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	c.n.Add(1)
	return c.SubResourceClient.Apply(ctx, obj, opts...)
}

// LogBuffer collects what code under test logs from several goroutines, for assertions on
// the logs and for failure messages.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// BlackHole listens on a loopback port, accepts every connection and never answers: to a
// client, a member whose packets are dropped (a partition between it and the client) once
// the connection is made. Give a client this address in place of a member's to cut the
// client off from it while the members still reach each other. It stops when the test
// ends.
func BlackHole(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range held {
			_ = conn.Close()
		}
	})
	return ln.Addr().String()
}
