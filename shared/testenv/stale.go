package testenv

import (
	"context"
	"reflect"
	"sync"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StaleReads makes a client lag its own status writes the way an informer cache can:
// after a status write of an object of Kind, the next Reads reads of that object return
// it as it was before the write. Writes go to the API server unchanged. Tests use it to
// show that a controller does not judge a transition twice when the cache lags.
type StaleReads struct {
	// Kind is the type whose objects lag (a pointer, as client.Get takes it).
	Kind client.Object
	// Reads is how many reads after each status write see the older object (default 1).
	Reads int

	mu     sync.Mutex
	stale  map[types.NamespacedName]*staleObject
	served int
}

type staleObject struct {
	obj   client.Object
	reads int
}

// Served is how many stale reads the client has answered, so a test can show that the
// lag it is about happened.
func (s *StaleReads) Served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

// Wrap returns c lagging as s says.
func (s *StaleReads) Wrap(c client.Client) client.Client { return &staleClient{Client: c, s: s} }

// Manager makes StartManager's manager client lag as s says (after any NewClient an
// earlier option set, such as a WriteCounter's).
func (s *StaleReads) Manager() ManagerOption {
	return func(o *ctrl.Options) {
		prev := o.NewClient
		if prev == nil {
			prev = client.New
		}
		o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := prev(cfg, opts)
			if err != nil {
				return nil, err
			}
			return s.Wrap(c), nil
		}
	}
}

func (s *StaleReads) matches(obj client.Object) bool {
	return reflect.TypeOf(obj) == reflect.TypeOf(s.Kind)
}

// before records the object as c reads it now, just before a status write of obj.
func (s *StaleReads) before(ctx context.Context, c client.Client, obj client.Object) {
	if !s.matches(obj) {
		return
	}
	key := client.ObjectKeyFromObject(obj)
	now, ok := obj.DeepCopyObject().(client.Object)
	if !ok || c.Get(ctx, key, now) != nil {
		return
	}
	reads := s.Reads
	if reads <= 0 {
		reads = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stale == nil {
		s.stale = map[types.NamespacedName]*staleObject{}
	}
	s.stale[key] = &staleObject{obj: now, reads: reads}
}

// read replaces obj, just read, with the older copy while one is due.
func (s *StaleReads) read(key types.NamespacedName, obj client.Object) {
	if !s.matches(obj) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.stale[key]
	if old == nil || old.obj.GetUID() != obj.GetUID() {
		return
	}
	old.reads--
	if old.reads <= 0 {
		delete(s.stale, key)
	}
	if old.obj.GetResourceVersion() == obj.GetResourceVersion() {
		return
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(old.obj.DeepCopyObject()).Elem())
	s.served++
}

type staleClient struct {
	client.Client
	s *StaleReads
}

func (c *staleClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	c.s.read(key, obj)
	return nil
}

func (c *staleClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *staleClient) SubResource(sub string) client.SubResourceClient {
	inner := c.Client.SubResource(sub)
	if sub != "status" {
		return inner
	}
	return &staleStatus{SubResourceClient: inner, c: c}
}

type staleStatus struct {
	client.SubResourceClient
	c *staleClient
}

func (w *staleStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	w.c.s.before(ctx, w.c.Client, obj)
	return w.SubResourceClient.Update(ctx, obj, opts...)
}

func (w *staleStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w.c.s.before(ctx, w.c.Client, obj)
	return w.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (w *staleStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return w.SubResourceClient.Apply(ctx, obj, opts...)
}

// EventCounts counts the events regarding the object named name in ns by "action/reason"
// (two conditions can share a reason), each repeat included: a repeat of an event (same
// reason, action and objects) is not a new Event but a series on the first, whose count
// the recorder sends when the first repeat happens and later only now and then; a count
// above 1 means the event repeated.
func EventCounts(t testing.TB, c client.Reader, ns, name string) map[string]int32 {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("testenv: listing events: %v", err)
	}
	out := map[string]int32{}
	for _, e := range list.Items {
		if e.Regarding.Name != name {
			continue
		}
		n := int32(1)
		if e.Series != nil && e.Series.Count > 1 {
			n = e.Series.Count
		}
		out[e.Action+"/"+e.Reason] += n
	}
	return out
}
