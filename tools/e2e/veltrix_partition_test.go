package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
)

// vxOperatorCut is how long each of vxCutOperatorOff's cuts lasts at least; vxOperatorReport
// is how long a cut may go on before the operator has said what it sees: generous for a
// loaded machine (a pass takes one admin timeout, 5 s, with every member asked at once, and
// a Ready cluster is looked at every 30 s unless a watch event comes first), and the test
// fails if it never says it.
const (
	vxOperatorCut    = 30 * time.Second
	vxOperatorReport = 75 * time.Second
)

// vxCutOperatorOff cuts the VeltrixDB operator off from its data plane (issue "Faults
// across the suite", item 2) while a client keeps writing through every member: first from
// member 0 alone (the member it used to ask first for the membership), then from every
// member, vxOperatorCut each. The data plane does not need the operator: every
// acknowledged key reads back through each member afterwards. The operator must say what
// it sees (Ready=False MembersUnreachable naming the members with the cause, state
// Degraded, one Warning event) and change nothing it cannot see: no member removed or
// added, none marked lost, the StatefulSet and every pod kept, the search-ready gates left
// True. After healing it is Ready again.
func vxCutOperatorOff(ctx context.Context, t *testing.T, keys map[string]string) {
	t.Helper()
	uid := operatorUser(ctx, t, "veltrix-operator")
	var ips []string
	for o := range 3 {
		host, _, err := net.SplitHostPort(vxMemberAddr(ctx, t, o))
		if err != nil {
			t.Fatal(err)
		}
		ips = append(ips, host)
	}
	w := startVxWriter(ctx, t)
	vxCutOperatorFrom(ctx, t, uid, ips[:1], "member 0", []string{vxName + "-0"})
	vxCutOperatorFrom(ctx, t, uid, ips, "every member", []string{vxName + "-0", vxName + "-1", vxName + "-2"})
	written, failed, firstErr := w.stop()
	t.Logf("writer through every member during the operator's partitions: %d keys acknowledged, %d writes failed (first error: %s)", len(written), failed, firstErr)
	if len(written) == 0 {
		t.Error("no write was acknowledged while the operator was cut off")
	}
	maps.Copy(keys, written)
	for o := range 3 {
		vxReadAll(ctx, t, o, keys, fmt.Sprintf("the operator's partitions (read through member %d)", o))
	}
}

// vxCutOperatorFrom is one cut of vxCutOperatorOff: the operator (uid) cut off from addrs,
// the pods of the members named.
func vxCutOperatorFrom(ctx context.Context, t *testing.T, uid int64, addrs []string, what string, members []string) {
	t.Helper()
	token := vxAdminToken(ctx, t)
	type identity struct {
		members  string
		replicas int32
		pods     map[string]string
		lost     int
		failover *metav1.Time
	}
	look := func() identity {
		t.Helper()
		c, err := vxCluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := identity{replicas: c.Status.Size, pods: map[string]string{}, lost: len(c.Status.LostNodes), failover: c.Status.LastFailoverTime}
		var views []string
		for o := range 3 {
			m, err := vxMembers(ctx, vxAdminAddr(ctx, t, o), token)
			if err != nil {
				t.Fatalf("members seen by member %d: %v", o, err)
			}
			views = append(views, fmt.Sprint(m))
		}
		id.members = strings.Join(slices.Compact(views), " | ")
		sts, err := env.client.AppsV1().StatefulSets(vxNamespace).Get(ctx, vxName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		id.replicas = *sts.Spec.Replicas
		pods, err := env.client.CoreV1().Pods(vxNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + vxName})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			id.pods[p.Name] = string(p.UID)
		}
		return id
	}
	before := look()
	cut := partitionUser(t, uid, addrs, 2*time.Minute)
	begin := time.Now()
	var reported time.Duration
	var lines []string
	gatesHeld := true
	for time.Since(begin) < vxOperatorCut || (reported == 0 && time.Since(begin) < vxOperatorReport) {
		if c, err := vxCluster(ctx); err == nil {
			r := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionReady)
			line := fmt.Sprintf("%s %d/%d", c.Status.State, c.Status.ReadyMembers, c.Status.Size)
			if r != nil {
				line += fmt.Sprintf(" Ready=%s %s: %s", r.Status, r.Reason, r.Message)
			}
			if len(lines) == 0 || lines[len(lines)-1] != line {
				lines = append(lines, line)
				t.Logf("+%.1fs operator cut off from %s reports: %s", time.Since(begin).Seconds(), what, line)
			}
			named := r != nil && r.Status == metav1.ConditionFalse && r.Reason == veltrixv1.ReasonMembersUnreachable && c.Status.State == veltrixv1.StateDegraded
			for _, m := range members {
				named = named && strings.Contains(r.Message, m+" (no answer within")
			}
			if reported == 0 && named {
				reported = time.Since(begin)
			}
		}
		pods, err := env.client.CoreV1().Pods(vxNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + vxName})
		if err == nil {
			for _, p := range pods.Items {
				if g := vxPodCondition(&p, veltrixv1.SearchReadyGate); g.Status != corev1.ConditionTrue && gatesHeld {
					gatesHeld = false
					t.Errorf("cut off from %s: pod %s's search-ready gate went %s (%s)", what, p.Name, g.Status, g.Reason)
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	lasted := cut.Heal()
	healed := time.Now()
	t.Logf("operator partition from %s healed after %s", what, lasted.Round(100*time.Millisecond))
	if reported == 0 {
		t.Errorf("cut off from %s for %s, the operator never reported Ready=False %s naming %v", what, lasted.Round(time.Second), veltrixv1.ReasonMembersUnreachable, members)
	} else {
		t.Logf("cut off from %s: Ready=False %s naming %v after %.1fs", what, veltrixv1.ReasonMembersUnreachable, members, reported.Seconds())
	}
	waitVeltrix(ctx, t, 3, 3*time.Minute)
	t.Logf("after the operator's partition from %s: Ready %s after healing", what, since(healed))
	after := look()
	if after.members != before.members {
		t.Errorf("the membership changed while the operator was cut off from %s: %s, before %s", what, after.members, before.members)
	}
	if after.replicas != before.replicas || after.lost != before.lost || !after.failover.Equal(before.failover) {
		t.Errorf("cut off from %s: StatefulSet %d replicas (before %d), %d lost nodes (before %d), lastFailoverTime %v (before %v)",
			what, after.replicas, before.replicas, after.lost, before.lost, after.failover, before.failover)
	}
	for pod, uid := range before.pods {
		if after.pods[pod] != uid {
			t.Errorf("pod %s was replaced or deleted while the operator was cut off from %s", pod, what)
		}
	}
	warnings := eventsSince(ctx, t, vxNamespace, "VeltrixCluster", vxName, veltrixv1.ReasonMembersUnreachable, begin)
	t.Logf("cut off from %s: %s events %q", what, veltrixv1.ReasonMembersUnreachable, warnings)
	var ready []string
	for _, e := range warnings {
		if strings.HasPrefix(e, "Warning "+veltrixv1.ConditionReady+":") {
			ready = append(ready, e)
		}
	}
	if len(ready) != 1 {
		t.Errorf("cut off from %s: %d Warning events %s on Ready, want one: %q", what, len(ready), veltrixv1.ReasonMembersUnreachable, warnings)
	}
}

// vxWriter writes keys in batches of five through members 0, 1 and 2 in turn, from the
// suite (root, so a cut of the operator's user leaves it alone). A key is acknowledged when
// its PUT answered OK.
type vxWriter struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	written  map[string]string
	failed   int
	firstErr string
}

// startVxWriter writes through the sample's members 0, 1 and 2 at their addresses now.
func startVxWriter(ctx context.Context, t *testing.T) *vxWriter {
	t.Helper()
	var addrs []string
	for o := range 3 {
		addrs = append(addrs, vxMemberAddr(ctx, t, o))
	}
	return startVxWriterVia(ctx, "oc", func(_ context.Context, o int) (string, error) { return addrs[o], nil })
}

// startVxWriterVia writes keys prefix<ordinal>-<batch>-<n> through the member of each
// ordinal at the address addr gives for the batch.
func startVxWriterVia(ctx context.Context, prefix string, addr func(context.Context, int) (string, error)) *vxWriter {
	ctx, cancel := context.WithCancel(ctx)
	w := &vxWriter{cancel: cancel, done: make(chan struct{}), written: map[string]string{}, firstErr: "none"}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			o := i % 3
			a, aerr := addr(ctx, o)
			for k := range 5 {
				key, val := fmt.Sprintf("%s%d-%05d-%d", prefix, o, i, k), fmt.Sprintf("w%d-%05d-%d", o, i, k)
				err := aerr
				if err == nil {
					err = vxPut(a, key, val)
				}
				w.mu.Lock()
				if err == nil {
					w.written[key] = val
				} else {
					if w.failed == 0 {
						w.firstErr = err.Error()
					}
					w.failed++
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

// vxPut sends one PUT on a connection of its own.
func vxPut(addr, key, val string) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "PUT %s %s\n", key, val); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(line); got != "OK" {
		return fmt.Errorf("PUT %s through %s: %q", key, addr, got)
	}
	return nil
}

// stop ends the writer and returns the acknowledged keys and the failures.
func (w *vxWriter) stop() (written map[string]string, failed int, firstErr string) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.written), w.failed, w.firstErr
}
