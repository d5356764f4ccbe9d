package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A netPartition drops every packet between one pod address and a set of others, both
// ways, on the host's loopback (pods are processes on their own 127.x addresses; the runner
// makes the servers' outbound connections come from their pod address). It heals itself
// after at most its bound, at the test's end, or when healed by hand.
type netPartition = testenv.Dropped

// partitionPods cuts a off from every address in others for at most bound (loopback
// addresses only, by the suite's rules).
func partitionPods(t *testing.T, a string, others []string, bound time.Duration) *netPartition {
	t.Helper()
	var rules [][]string
	for _, o := range others {
		rules = append(rules, []string{"-s", a, "-d", o}, []string{"-s", o, "-d", a})
	}
	p := testenv.DropOutput(t, bound, rules...)
	t.Logf("partitioned %s from %s (at most %s)", a, strings.Join(others, ","), bound)
	return p
}

// partitionUser cuts the processes of one user (uid) off from every address in addrs for at
// most bound. An operator's connections come from the host's 127.0.0.1 here, not from its
// pod address, but every operator runs as the charts' non-root user and no data-plane
// process does: a rule on the sending user cuts the operators off from those pods and
// leaves the pods' own traffic alone. Cutting the sender's packets is enough for TCP: no
// connection opens, and an open one stalls.
func partitionUser(t *testing.T, uid int64, addrs []string, bound time.Duration) *netPartition {
	t.Helper()
	var rules [][]string
	for _, ip := range addrs {
		rules = append(rules, []string{"-m", "owner", "--uid-owner", strconv.FormatInt(uid, 10), "-d", ip})
	}
	p := testenv.DropOutput(t, bound, rules...)
	t.Logf("partitioned uid %d from %s (at most %s)", uid, strings.Join(addrs, ","), bound)
	return p
}

// operatorUser is the uid the named operator's pods run as, for partitionUser: the charts'
// non-root user, which no data-plane process runs as.
func operatorUser(ctx context.Context, t *testing.T, operator string) int64 {
	t.Helper()
	d, err := controllerDeployment(ctx, serviceByName(operator))
	if err != nil {
		t.Fatal(err)
	}
	uid := podUser(d)
	if uid <= 0 {
		t.Fatalf("%s's pod runs as uid %d: a cut by user needs the charts' non-root user", operator, uid)
	}
	return uid
}

// eventsSince lists the events of reason about the object kind/name in namespace ns since
// begin, as "<type> <action>: <note>", in time order.
func eventsSince(ctx context.Context, t *testing.T, ns, kind, name, reason string, begin time.Time) []string {
	t.Helper()
	evs, err := env.client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		at   time.Time
		line string
	}
	var found []ev
	for _, e := range evs.Items {
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == reason && !at.Before(begin.Add(-time.Second)) {
			found = append(found, ev{at, fmt.Sprintf("%s %s: %s", e.Type, e.Action, e.Note)})
		}
	}
	slices.SortFunc(found, func(a, b ev) int { return a.at.Compare(b.at) })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.line
	}
	return out
}
