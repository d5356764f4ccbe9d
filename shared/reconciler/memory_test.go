package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestStatusWriteTheCacheHasNotSeen: passes that read the object from before the last
// status write (a lagging cache) judge transitions against that write, so they neither
// write the status again nor repeat its events.
func TestStatusWriteTheCacheHasNotSeen(t *testing.T) {
	f := newFixture(t, func(_ context.Context, u *unstructured.Unstructured) (reconciler.Result, error) {
		setCondition(u, cond("Ready", "False", "WaitingForShards"))
		return reconciler.Wait(time.Second), nil
	})
	stale := &testenv.StaleReads{Kind: newWidget(), Reads: 3}
	f.cfg.Client = stale.Wrap(f.cfg.Client)
	r, err := reconciler.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	createWidget(t, f.ns, "w")
	for range 4 {
		if _, err := f.reconcile(t, r, "w"); err != nil {
			t.Fatal(err)
		}
	}
	if stale.Served() != 3 {
		t.Fatalf("%d stale reads served, want 3", stale.Served())
	}
	if n := f.writes.Count(); n != 1 {
		t.Errorf("4 passes, 3 of them reading the object from before the status write, wrote %d times; want 1", n)
	}
	assertEventOnce(t, f.ns, "w", "Ready/WaitingForShards")
}

// assertEventOnce waits for the event of action/reason about name and checks that it stays one
// (no repeat recorded).
func assertEventOnce(t *testing.T, ns, name, reason string) {
	t.Helper()
	testenv.Eventually(t, testenv.DefaultTimeout, reason+" recorded", func() (bool, string) {
		got := testenv.EventCounts(t, env.Client, ns, name)
		return got[reason] > 0, ""
	})
	// A repeat is sent as a patch of the first event right after it is recorded.
	time.Sleep(2 * time.Second)
	if got := testenv.EventCounts(t, env.Client, ns, name); got[reason] != 1 {
		t.Errorf("event %s recorded %d times, want once (events: %v)", reason, got[reason], got)
	}
}

// TestOnGone: an object found gone, or its name found holding another object, is
// forgotten and OnGone told its UID; the memory keeps nothing of it.
func TestOnGone(t *testing.T) {
	f := newFixture(t, func(_ context.Context, u *unstructured.Unstructured) (reconciler.Result, error) {
		setCondition(u, cond("Ready", "True", "Succeeded"))
		return reconciler.Done(), nil
	})
	var mu sync.Mutex
	var gone []string
	f.cfg.OnGone = func(key types.NamespacedName, uid types.UID) {
		mu.Lock()
		defer mu.Unlock()
		gone = append(gone, key.Name+"/"+string(uid))
	}
	r, err := reconciler.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := createWidget(t, f.ns, "w")
	if _, err := f.reconcile(t, r, "w"); err != nil {
		t.Fatal(err)
	}
	if r.Remembered() != 1 {
		t.Fatalf("remembered %d objects, want 1", r.Remembered())
	}
	// Deleted and created again between two passes: the first is gone.
	if err := env.Client.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	second := createWidget(t, f.ns, "w")
	if _, err := f.reconcile(t, r, "w"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reconcile(t, r, "w"); err != nil {
		t.Fatal(err)
	}
	// Never seen by this reconciler: gone without a UID.
	if _, err := f.reconcile(t, r, "other"); err != nil {
		t.Fatal(err)
	}
	want := []string{"w/" + string(first.GetUID()), "w/" + string(second.GetUID()), "other/"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(gone, want) {
		t.Errorf("OnGone calls %v, want %v", gone, want)
	}
	if r.Remembered() != 0 {
		t.Errorf("remembered %d objects after they went, want 0", r.Remembered())
	}
}

// TestTrackCacheDropsWrittenCopies: with TrackCache, the copy of a status write goes once
// the cache holds the write, with no further pass; without it, it stays until one.
func TestTrackCacheDropsWrittenCopies(t *testing.T) {
	for _, track := range []bool{true, false} {
		f := newFixture(t, func(_ context.Context, u *unstructured.Unstructured) (reconciler.Result, error) {
			setCondition(u, cond("Ready", "True", "Succeeded"))
			return reconciler.Done(), nil
		})
		r, err := reconciler.New(f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if track {
			mgr := env.StartManager(t, nil)
			if err := r.TrackCache(context.Background(), mgr.GetCache(), newWidget()); err != nil {
				t.Fatal(err)
			}
		}
		createWidget(t, f.ns, "w")
		if _, err := f.reconcile(t, r, "w"); err != nil {
			t.Fatal(err)
		}
		if n := f.writes.Count(); n != 1 {
			t.Fatalf("the pass wrote %d times, want the status once", n)
		}
		if !track {
			time.Sleep(time.Second)
			if n := r.WrittenCopies(); n != 1 {
				t.Errorf("without TrackCache: %d copies held after the write, want 1 until the next pass", n)
			}
			continue
		}
		testenv.Eventually(t, testenv.DefaultTimeout, "the copy of the status write to go", func() (bool, string) {
			n := r.WrittenCopies()
			return n == 0, fmt.Sprintf("%d copies held", n)
		})
	}
}
