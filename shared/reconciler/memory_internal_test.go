package reconciler

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func widgetAt(uid, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(rv)
	return u
}

// TestMemorySeen: the copy of a status write goes once the cache is seen holding that
// version or a later one, whichever of the write's answer and the cache's event comes
// first; an older cache version, or another object of the name, leaves it.
func TestMemorySeen(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	for _, tc := range []struct {
		name  string
		steps func(m *memory[*unstructured.Unstructured])
		want  int
	}{
		{"the cache sees the write after its answer", func(m *memory[*unstructured.Unstructured]) {
			m.wrote(key, widgetAt("u1", "11"))
			m.seen(key, "u1", "11")
		}, 0},
		{"the cache sees the write before its answer", func(m *memory[*unstructured.Unstructured]) {
			m.seen(key, "u1", "11")
			m.wrote(key, widgetAt("u1", "11"))
		}, 0},
		{"the cache is behind the write", func(m *memory[*unstructured.Unstructured]) {
			m.wrote(key, widgetAt("u1", "11"))
			m.seen(key, "u1", "10")
		}, 1},
		{"the cache holds a later version", func(m *memory[*unstructured.Unstructured]) {
			m.wrote(key, widgetAt("u1", "11"))
			m.seen(key, "u1", "12")
		}, 0},
		{"another object of the name", func(m *memory[*unstructured.Unstructured]) {
			m.wrote(key, widgetAt("u1", "11"))
			m.seen(key, "u2", "12")
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &memory[*unstructured.Unstructured]{}
			m.fresher(key, widgetAt("u1", "10")) // the pass's first read
			tc.steps(m)
			if got := m.writtenCopies(); got != tc.want {
				t.Errorf("%d copies held, want %d", got, tc.want)
			}
			// Whatever was dropped, the next pass reads the cache's version when it caught
			// up, and the write's while it has not.
			got, replaced := m.fresher(key, widgetAt("u1", "10"))
			if tc.want == 1 && tc.name != "another object of the name" && got.GetResourceVersion() != "11" {
				t.Errorf("a lagging cache's pass read version %s, want the write's 11", got.GetResourceVersion())
			}
			if replaced != "" {
				t.Errorf("replaced %q", replaced)
			}
		})
	}
}
