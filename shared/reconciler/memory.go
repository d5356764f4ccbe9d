package reconciler

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// memory is what the reconciler keeps of each object between passes: its UID, and the
// object as the API server answered the last status write while the cache has not caught
// up with it. The cache can lag a write by a pass or more; judged from the cached object,
// a transition the last pass already recorded looks new again, and its event repeats. An
// entry is dropped when its object is gone (NotFound, or its name reused by another UID),
// so the memory holds no more than the objects that exist. With TrackCache, the copy of a
// status write is dropped as soon as the cache holds it, not at the object's next pass
// (which a converged object may never have): the memory then holds copies only of the
// writes the cache has yet to see.
type memory[O client.Object] struct {
	mu      sync.Mutex
	objects map[types.NamespacedName]remembered[O]
}

type remembered[O client.Object] struct {
	uid types.UID
	// written is the object after the last status write; nil once the cache has caught up.
	written O
	fresh   bool
	// cached is the latest resourceVersion the cache was seen holding (TrackCache).
	cached string
}

// fresher returns the newer of cached and the object after the last status write (its
// resourceVersion is higher), and the UID that key held before when it now holds another
// object ("" when not).
func (m *memory[O]) fresher(key types.NamespacedName, cached O) (O, types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objects == nil {
		m.objects = map[types.NamespacedName]remembered[O]{}
	}
	r, ok := m.objects[key]
	var replaced types.UID
	if ok && r.uid != cached.GetUID() {
		replaced, ok = r.uid, false
	}
	if !ok {
		m.objects[key] = remembered[O]{uid: cached.GetUID()}
		return cached, replaced
	}
	if !r.fresh {
		return cached, ""
	}
	if cmp, err := resourceversion.CompareResourceVersion(r.written.GetResourceVersion(), cached.GetResourceVersion()); err == nil && cmp > 0 {
		if copied, ok := r.written.DeepCopyObject().(O); ok {
			return copied, ""
		}
	}
	// The cache has caught up (or the versions do not compare): it is the truth again.
	m.objects[key] = remembered[O]{uid: r.uid, cached: r.cached}
	return cached, ""
}

// newer reports whether resourceVersion a is later than b; versions that do not compare
// are not.
func newer(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp > 0
}

// seen records that the cache holds the object of key (of uid) at resourceVersion rv:
// the copy of the last status write goes once the cache holds that version or a later
// one, as fresher would drop it at the next pass. An object the memory does not know, or
// knows by another UID, is left to fresher (which tells OnGone of a replaced one).
func (m *memory[O]) seen(key types.NamespacedName, uid types.UID, rv string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.objects[key]
	if !ok || r.uid != uid {
		return
	}
	if r.cached == "" || newer(rv, r.cached) {
		r.cached = rv
	}
	if r.fresh && !newer(r.written.GetResourceVersion(), rv) {
		r.written, r.fresh = *new(O), false
	}
	m.objects[key] = r
}

// wrote records obj as the API server answered its status write.
func (m *memory[O]) wrote(key types.NamespacedName, obj O) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objects == nil {
		m.objects = map[types.NamespacedName]remembered[O]{}
	}
	prev := m.objects[key]
	if prev.uid == obj.GetUID() && prev.cached != "" && !newer(obj.GetResourceVersion(), prev.cached) {
		// The cache saw this write before its answer got here: nothing to remember.
		m.objects[key] = remembered[O]{uid: prev.uid, cached: prev.cached}
		return
	}
	copied, ok := obj.DeepCopyObject().(O)
	if !ok {
		return
	}
	m.objects[key] = remembered[O]{uid: obj.GetUID(), written: copied, fresh: true, cached: prev.cached}
}

// writtenCopies is how many copies of status writes the memory holds.
func (m *memory[O]) writtenCopies() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.objects {
		if r.fresh {
			n++
		}
	}
	return n
}

// gone drops key and returns the UID it held ("" when unknown).
func (m *memory[O]) gone(key types.NamespacedName) types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := m.objects[key].uid
	delete(m.objects, key)
	return uid
}

// len is how many objects are remembered.
func (m *memory[O]) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.objects)
}
