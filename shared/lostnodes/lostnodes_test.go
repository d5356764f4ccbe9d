package lostnodes

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObserveAndLost(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gone := metav1.NewTime(t0)
	node := func(name, host string, ready corev1.ConditionStatus, deleting bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if host != "" {
			n.Labels = map[string]string{HostnameLabel: host}
		}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(t0)}}
		}
		if deleting {
			n.DeletionTimestamp = &gone
			n.Finalizers = []string{"x"}
		}
		return n
	}
	ns := Observe([]corev1.Node{
		node("a", "", corev1.ConditionTrue, false),
		node("b", "host-b", corev1.ConditionUnknown, false),
		node("c", "", "", false),
		node("d", "", corev1.ConditionTrue, true),
	})
	cases := []struct {
		node  string
		at    time.Duration
		lost  bool
		left  time.Duration
		state Health
	}{
		{"a", 0, false, 0, Ready},
		{"c", 0, false, 0, Ready}, // no Ready condition: ready
		{"host-b", time.Minute, false, 4 * time.Minute, NotReady},
		{"host-b", 5 * time.Minute, true, 0, NotReady},
		{"b", 5 * time.Minute, true, 0, NotReady}, // by its name too
		{"d", 0, true, 0, Deleted},                // being deleted
		{"e", 0, true, 0, Deleted},
	}
	for _, c := range cases {
		s := ns.Of(c.node)
		lost, left := s.Lost(t0.Add(c.at), 5*time.Minute)
		if s.Health != c.state || lost != c.lost || left != c.left {
			t.Errorf("%s at +%s: health %v lost %v left %s, want %v %v %s", c.node, c.at, s.Health, lost, left, c.state, c.lost, c.left)
		}
	}
}

func TestPinnedHost(t *testing.T) {
	term := func(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: exprs}
	}
	host := func(op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: HostnameLabel, Operator: op, Values: values}
	}
	pv := func(terms ...corev1.NodeSelectorTerm) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{}
		if terms != nil {
			v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
		}
		return v
	}
	cases := []struct {
		name string
		pv   *corev1.PersistentVolume
		want string
	}{
		{"no affinity", pv(), ""},
		{"one host", pv(term(host(corev1.NodeSelectorOpIn, "n1"))), "n1"},
		{"two hosts", pv(term(host(corev1.NodeSelectorOpIn, "n1", "n2"))), ""},
		{"two terms", pv(term(host(corev1.NodeSelectorOpIn, "n1")), term(host(corev1.NodeSelectorOpIn, "n2"))), ""},
		{"not In", pv(term(host(corev1.NodeSelectorOpNotIn, "n1"))), ""},
		{"zone only", pv(term(corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z"}})), ""},
	}
	for _, c := range cases {
		if got := PinnedHost(c.pv); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
