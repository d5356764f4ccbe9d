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
// so the memory holds no more than the objects that exist.
type memory[O client.Object] struct {
	mu      sync.Mutex
	objects map[types.NamespacedName]remembered[O]
}

type remembered[O client.Object] struct {
	uid types.UID
	// written is the object after the last status write; nil once the cache has caught up.
	written O
	fresh   bool
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
	m.objects[key] = remembered[O]{uid: r.uid}
	return cached, ""
}

// wrote records obj as the API server answered its status write.
func (m *memory[O]) wrote(key types.NamespacedName, obj O) {
	copied, ok := obj.DeepCopyObject().(O)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objects == nil {
		m.objects = map[types.NamespacedName]remembered[O]{}
	}
	m.objects[key] = remembered[O]{uid: obj.GetUID(), written: copied, fresh: true}
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
