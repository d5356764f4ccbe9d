package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestFreeAddrAndPortAreBindable(t *testing.T) {
	for _, addr := range []string{testenv.FreeAddr(t), "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		_ = l.Close()
	}
}

func TestPortsFree(t *testing.T) {
	port := testenv.FreePort(t)
	if err := testenv.PortsFree(port, 1); err != nil {
		t.Fatalf("a free port reported taken: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if err := testenv.PortsFree(port, 1); err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)+" is taken") {
		t.Errorf("a range holding a bound port: %v", err)
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	err := testenv.Poll(context.Background(), time.Millisecond, func(context.Context) (bool, error) {
		calls++
		return calls == 3, nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = testenv.Poll(ctx, time.Millisecond, func(context.Context) (bool, error) { return false, errors.New("not yet: 2 of 3") })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not yet: 2 of 3") {
		t.Fatalf("Poll past its deadline = %v, want the deadline and the last error", err)
	}
}

func TestKubeconfigReachesTheAPIServer(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "default"}, &corev1.Namespace{}); err != nil {
		t.Fatalf("the kubeconfig's client cannot read: %v", err)
	}
}

// TestManagerWaitsAndCounting starts a manager, counts the writes of a client and waits for
// a condition another goroutine sets.
func TestManagerWaitsAndCounting(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "helpers-")
	if !strings.HasPrefix(ns, "helpers-") {
		t.Fatalf("namespace %q", ns)
	}
	mgr := env.StartManager(t, nil, testenv.InNamespaces(ns))
	var writes testenv.WriteCounter
	c := writes.Wrap(mgr.GetClient())

	w := testenv.NewWidget(ns, "w")
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	// Read through the manager's cache: it sees the test's namespace.
	testenv.WaitFor(t, "the cache to hold the widget", func() bool {
		return mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(w), testenv.NewWidget("", "")) == nil
	})
	go func() {
		time.Sleep(200 * time.Millisecond)
		before := w.DeepCopy()
		_ = unstructured.SetNestedSlice(w.Object, []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Succeeded", "message": "Ready.",
			"observedGeneration": w.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		}}, "status", "conditions")
		_ = c.Status().Patch(ctx, w, client.MergeFrom(before))
	}()
	got := testenv.WaitForCondition(t, env.Client, testenv.NewWidget(ns, "w"), "Ready", metav1.ConditionTrue)
	if got.Reason != "Succeeded" || got.Message != "Ready." {
		t.Errorf("condition %+v", got)
	}
	if err := c.Delete(ctx, testenv.NewWidget(ns, "w")); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, testenv.NewWidget("", "")); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	if n := writes.Count(); n != 3 {
		t.Errorf("counted %d writes (create, status patch, delete), want 3; reads must not count", n)
	}
}

// Ports handed out are never handed out again in the process, even when the kernel offers
// a just-released one again.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 300 {
		p := testenv.FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

// Ports below the ephemeral range are bindable, in range and never handed out twice, by
// this function or by FreePort.
func TestFreePortBelowEphemeral(t *testing.T) {
	seen := map[int]bool{}
	for range 300 {
		p := testenv.FreePortBelowEphemeral(t)
		if p < 20000 || p > 31999 {
			t.Fatalf("port %d is outside 20000-31999", p)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends the goroutine,
// as the real one does, so a test can check what a helper fails with.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs f with a fatalRecorder on a goroutine of its own and returns what it failed
// with ("" when it returned).
func failure(t *testing.T, f func(testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

func TestEventuallyTrueAndNil(t *testing.T) {
	calls := 0
	if msg := failure(t, func(tb testing.TB) {
		testenv.EventuallyTrue(tb, time.Second, "the third call", func() bool { calls++; return calls == 3 })
	}); msg != "" || calls != 3 {
		t.Fatalf("EventuallyTrue failed %q after %d calls, want success after 3", msg, calls)
	}
	msg := failure(t, func(tb testing.TB) {
		testenv.EventuallyTrue(tb, 100*time.Millisecond, "never", func() bool { return false })
	})
	if !strings.Contains(msg, "waiting until never") {
		t.Errorf("EventuallyTrue timed out with %q, want it to name what it waited for", msg)
	}

	calls = 0
	msg = failure(t, func(tb testing.TB) {
		testenv.EventuallyNil(tb, 100*time.Millisecond, "readiness", func() error {
			calls++
			return fmt.Errorf("not ready, call %d", calls)
		})
	})
	if want := fmt.Sprintf("not ready, call %d", calls); calls < 2 || !strings.Contains(msg, "waiting until readiness") || !strings.HasSuffix(msg, want) {
		t.Errorf("EventuallyNil timed out after %d calls with %q, want the wait named and the last error %q", calls, msg, want)
	}
	if msg := failure(t, func(tb testing.TB) {
		testenv.EventuallyNil(tb, time.Second, "nil", func() error { return nil })
	}); msg != "" {
		t.Errorf("EventuallyNil on a nil check failed: %q", msg)
	}
}
