package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/testenv"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// harness is one test's manager running the reconciler in-process against the real
// API server, restricted to the test's namespace.
type harness struct {
	t      *testing.T
	ns     string
	r      *Reconciler
	writes *testenv.WriteCounter
	opts   Options
}

func start(t *testing.T, mutate func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, ns: newNamespace(t), writes: &testenv.WriteCounter{}}
	opts := DefaultOptions()
	opts.RequeueAfter = time.Second
	opts.wrapClient = h.writes.Wrap
	// No Vald Helm Operator runs here: ValdReleases count once they exist, unless a test
	// turns this on and writes their status itself (TestHelmOperatorStatus).
	opts.RequireDeployed = false
	if mutate != nil {
		mutate(&opts)
	}
	h.opts = opts
	env.StartManager(t, func(mgr ctrl.Manager) (err error) {
		h.r, err = SetupWithManager(mgr, opts)
		return err
	}, testenv.InNamespaces(h.ns), ManagerOptions) // the binary's cache
	return h
}

func newNamespace(t testing.TB) string {
	t.Helper()
	return testenv.NewNamespace(t, env.Client, "vor-")
}

// upToDate is the check that spares a converged release its ValdRelease applies.
func upToDate(want, current *valdv1.ValdRelease) bool { return children.UpToDate(want, current) }

// release is a valid ValdOperatorRelease with one active entry of the given clusters
// (name=id pairs; an empty id is left for an external system).
func (h *harness) release(name string, clusters ...string) *valdv1.ValdOperatorRelease {
	var cls []valdv1.Cluster
	for _, c := range clusters {
		n, id, _ := strings.Cut(c, "=")
		cls = append(cls, valdv1.Cluster{Name: n, ID: id})
	}
	return &valdv1.ValdOperatorRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: valdv1.ValdOperatorReleaseSpec{
			Infrastructure: []valdv1.Infrastructure{{
				Role: "green", Active: ptr.To(true), Clusters: cls,
				NodePools: valdv1.NodePools{General: &valdv1.NodePool{Replicas: 2}},
			}},
			VectorEngine: valdv1.VectorEngine{Name: "vald", Vald: valdv1.Vald{Agent: valdv1.Agent{NGT: valdv1.NGT{Dimension: 8}}}},
		},
	}
}

func (h *harness) create(obj client.Object) {
	h.t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		h.t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

// update applies change to the latest version of the release, retrying on conflicts.
func (h *harness) update(name string, change func(*valdv1.ValdOperatorRelease)) {
	h.t.Helper()
	for range 10 {
		vor := h.get(name)
		change(vor)
		err := env.Client.Update(context.Background(), vor)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			h.t.Fatalf("updating %s: %v", name, err)
		}
	}
	h.t.Fatalf("updating %s: conflicts", name)
}

func (h *harness) get(name string) *valdv1.ValdOperatorRelease {
	h.t.Helper()
	vor := &valdv1.ValdOperatorRelease{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: h.ns, Name: name}, vor); err != nil {
		h.t.Fatal(err)
	}
	return vor
}

func (h *harness) valdReleases() []valdv1.ValdRelease {
	h.t.Helper()
	list := &valdv1.ValdReleaseList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

func names(vrs []valdv1.ValdRelease) string {
	var out []string
	for _, vr := range vrs {
		out = append(out, vr.Name)
	}
	return strings.Join(out, ",")
}

// conds renders a release's status as "phase progress state | Type=Status/Reason ...".
func conds(vor *valdv1.ValdOperatorRelease) string {
	var parts []string
	for _, c := range vor.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("%s %s %s | %s", vor.Status.Phase, vor.Status.ProgressText, vor.Status.State, strings.Join(parts, " "))
}

// waitStatus waits until the release's rendered status is want and its status is of the
// current generation, and returns it.
func (h *harness) waitStatus(name, want string) *valdv1.ValdOperatorRelease {
	h.t.Helper()
	return testenv.WaitForObject(h.t, env.Client, &valdv1.ValdOperatorRelease{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}},
		"has status "+want,
		func(v *valdv1.ValdOperatorRelease) bool {
			return conds(v) == want && v.Status.ObservedGeneration == v.Generation
		},
		func(v *valdv1.ValdOperatorRelease) string {
			return fmt.Sprintf(" got  %s (observed generation %d of %d)\n want %s", conds(v), v.Status.ObservedGeneration, v.Generation, want)
		})
}

// waitFor polls cond until it holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	testenv.WaitFor(h.t, what, cond)
}

func condition(vor *valdv1.ValdOperatorRelease, t string) metav1.Condition {
	for _, c := range vor.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

// statusRecorder watches a namespace's releases and keeps every distinct rendered status,
// in the order the API server delivered them.
type statusRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (h *harness) recordStatuses(name string) *statusRecorder {
	h.t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		h.t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &valdv1.ValdOperatorReleaseList{}, client.InNamespace(h.ns))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(w.Stop)
	rec := &statusRecorder{}
	go func() {
		for ev := range w.ResultChan() {
			vor, ok := ev.Object.(*valdv1.ValdOperatorRelease)
			if !ok || vor.Name != name {
				continue
			}
			s := conds(vor)
			rec.mu.Lock()
			if len(rec.seen) == 0 || rec.seen[len(rec.seen)-1] != s {
				rec.seen = append(rec.seen, s)
			}
			rec.mu.Unlock()
		}
	}()
	return rec
}

func (r *statusRecorder) statuses() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// events lists the events regarding a release as "Type Action/Reason", sorted.
func (h *harness) events(release string) []string {
	h.t.Helper()
	evs := &eventsv1.EventList{}
	if err := env.Client.List(context.Background(), evs, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var got []string
	for _, e := range evs.Items {
		if e.Regarding.Name == release {
			got = append(got, e.Type+" "+e.Action+"/"+e.Reason)
		}
	}
	slices.Sort(got)
	return got
}

// eventNotes lists the notes of the events regarding a release, sorted.
func (h *harness) eventNotes(release string) []string {
	h.t.Helper()
	evs := &eventsv1.EventList{}
	if err := env.Client.List(context.Background(), evs, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var got []string
	for _, e := range evs.Items {
		if e.Regarding.Name == release {
			got = append(got, e.Note)
		}
	}
	slices.Sort(got)
	return got
}
