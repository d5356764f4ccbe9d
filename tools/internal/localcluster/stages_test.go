package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/utils/expression"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"
	"sigs.k8s.io/yaml"

	"github.com/opsuite/suite/tools/internal/podrunner"
)

// testStage is the part of a kwok Stage this test plays: its selector and status template.
type testStage struct {
	Metadata struct{ Name string }
	Spec     struct {
		ResourceRef struct{ Kind string }
		Weight      int
		Selector    struct {
			MatchExpressions []struct {
				Key      string
				Operator string
				Values   []string
			}
		}
		Next struct{ StatusTemplate string }
	}
}

// kwokPlay plays the rendered pod stages on a pod as kwok does, with kwok's own jq selector
// and template code: the stage that matches patches the status (a strategic merge), until
// none matches or a patch changes nothing (kwok sends none, so no event follows). Of
// several matching stages kwok picks one at random, by weight when any has one: the test
// fails unless the pick is certain. It returns the pod and the stages whose patch changed it.
func kwokPlay(t *testing.T, stages []testStage, pod *corev1.Pod) (*corev1.Pod, []string) {
	t.Helper()
	renderer := gotpl.NewRenderer(gotpl.FuncMap{
		"NodeIPsWith": func(string) []string { return []string{"127.3.0.1"} },
		"PodIPsWith":  func(string, bool, string, string, string) []string { return []string{"127.1.0.9"} },
	})
	var played []string
	for range 10 {
		var matched, weighted []*testStage
		for i := range stages {
			ok := true
			for _, e := range stages[i].Spec.Selector.MatchExpressions {
				req, err := expression.NewRequirement(e.Key, internalversion.SelectorOperator(e.Operator), e.Values)
				if err != nil {
					t.Fatalf("stage %s, key %s: %v", stages[i].Metadata.Name, e.Key, err)
				}
				m, err := req.Matches(context.Background(), pod)
				if err != nil {
					t.Fatalf("stage %s, key %s: %v", stages[i].Metadata.Name, e.Key, err)
				}
				ok = ok && m
			}
			if ok {
				matched = append(matched, &stages[i])
				if stages[i].Spec.Weight > 0 {
					weighted = append(weighted, &stages[i])
				}
			}
		}
		var next *testStage
		switch {
		case len(matched) == 0:
			return pod, played
		case len(matched) == 1:
			next = matched[0]
		case len(weighted) == 1:
			next = weighted[0]
		default:
			names := []string{}
			for _, m := range matched {
				names = append(names, m.Metadata.Name)
			}
			t.Fatalf("kwok would pick at random among %v", names)
		}
		status, err := renderer.ToJSON(next.Spec.Next.StatusTemplate, pod)
		if err != nil {
			t.Fatalf("stage %s: %v", next.Metadata.Name, err)
		}
		before, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		after, err := strategicpatch.StrategicMergePatch(before, []byte(`{"status":`+string(status)+`}`), corev1.Pod{})
		if err != nil {
			t.Fatalf("stage %s: patch %s: %v", next.Metadata.Name, status, err)
		}
		patched := &corev1.Pod{}
		if err := json.Unmarshal(after, patched); err != nil {
			t.Fatal(err)
		}
		// Compared through JSON both: times keep whole seconds there.
		was := &corev1.Pod{}
		if err := json.Unmarshal(before, was); err != nil {
			t.Fatal(err)
		}
		if apiequality.Semantic.DeepEqual(was, patched) {
			return pod, played
		}
		played = append(played, next.Metadata.Name)
		pod = patched
	}
	t.Fatalf("stages still playing after 10 rounds: %v", played)
	return nil, nil
}

// TestPodStagesReadinessGates: a kwok-simulated pod with a readiness gate becomes Running
// but not Ready, its gate's condition left to its owner; Ready follows the gate's condition
// as the kubelet derives it, with the kubelet's reason and messages; a pod without gates is
// Ready at once; pods the runner owns are left to the runner.
func TestPodStagesReadinessGates(t *testing.T) {
	rules := podrunner.Rules{{Image: "example.test/run", Binary: "/bin/true"}}
	data, err := renderStages(rules, true, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var stages []testStage
	for _, doc := range bytes.Split(data, []byte("---\n")) {
		var s testStage
		if err := yaml.Unmarshal(doc, &s); err != nil {
			t.Fatal(err)
		}
		if s.Spec.ResourceRef.Kind == "Pod" {
			stages = append(stages, s)
		}
	}
	const gate = "example.test/warm"
	newPod := func(image string, gates ...corev1.PodConditionType) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"},
			Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "app", Image: image}}},
			Status:     corev1.PodStatus{Phase: corev1.PodPending},
		}
		for _, g := range gates {
			p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: g})
		}
		return p
	}
	ready := func(t *testing.T, p *corev1.Pod, status corev1.ConditionStatus, reason, message string) {
		t.Helper()
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				if c.Status != status || c.Reason != reason || c.Message != message {
					t.Errorf("Ready=%s %q %q, want %s %q %q", c.Status, c.Reason, c.Message, status, reason, message)
				}
				return
			}
		}
		t.Errorf("no Ready condition: %+v", p.Status.Conditions)
	}
	setGate := func(p *corev1.Pod, s corev1.ConditionStatus) *corev1.Pod {
		p = p.DeepCopy()
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == gate {
				p.Status.Conditions[i].Status = s
				return p
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: gate, Status: s, Reason: "Owner"})
		return p
	}

	t.Run("no gates", func(t *testing.T) {
		p, played := kwokPlay(t, stages, newPod("example.test/sim:1"))
		if p.Status.Phase != corev1.PodRunning || len(played) != 1 {
			t.Errorf("phase %s after %v, want Running after pod-ready alone", p.Status.Phase, played)
		}
		ready(t, p, corev1.ConditionTrue, "", "")
	})
	t.Run("runner pod left alone", func(t *testing.T) {
		p, played := kwokPlay(t, stages, newPod("example.test/run:1", gate))
		if len(played) != 1 || played[0] != "pod-runner-assign-address" || p.Status.Phase != corev1.PodPending || len(p.Status.Conditions) != 0 {
			t.Errorf("stages %v played on a runner pod (phase %s, conditions %+v), want only its address", played, p.Status.Phase, p.Status.Conditions)
		}
	})
	t.Run("gate held, then followed", func(t *testing.T) {
		p, played := kwokPlay(t, stages, newPod("example.test/sim:1", gate, "example.test/other"))
		if p.Status.Phase != corev1.PodRunning {
			t.Fatalf("phase %s after %v, want Running", p.Status.Phase, played)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == gate || c.Type == "example.test/other" {
				t.Errorf("kwok set the gate's condition %s=%s: that is its owner's", c.Type, c.Status)
			}
		}
		ready(t, p, corev1.ConditionFalse, "ReadinessGatesNotReady",
			`corresponding condition of pod readiness gate "example.test/warm" does not exist., corresponding condition of pod readiness gate "example.test/other" does not exist.`)

		p = setGate(p, corev1.ConditionFalse)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "example.test/other", Status: corev1.ConditionTrue})
		// Ready stays False: its lastTransitionTime stays too.
		since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				p.Status.Conditions[i].LastTransitionTime = since
			}
		}
		p, played = kwokPlay(t, stages, p)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && !c.LastTransitionTime.Equal(&since) {
				t.Errorf("Ready stayed False but its lastTransitionTime moved from %v to %v", since, c.LastTransitionTime)
			}
		}
		if len(played) != 1 || played[0] != "pod-readiness-gates" {
			t.Errorf("stages played on a gate change: %v, want pod-readiness-gates", played)
		}
		ready(t, p, corev1.ConditionFalse, "ReadinessGatesNotReady", `the status of pod readiness gate "example.test/warm" is not "True", but False`)

		p, _ = kwokPlay(t, stages, setGate(p, corev1.ConditionTrue))
		ready(t, p, corev1.ConditionTrue, "", "")
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.LastTransitionTime.Equal(&since) {
				t.Error("Ready turned True but kept its old lastTransitionTime")
			}
		}
		if p, played := kwokPlay(t, stages, p); len(played) != 0 {
			t.Errorf("stages %v played on a settled pod %+v", played, p.Status.Conditions)
		}

		p, _ = kwokPlay(t, stages, setGate(p, corev1.ConditionFalse))
		ready(t, p, corev1.ConditionFalse, "ReadinessGatesNotReady", `the status of pod readiness gate "example.test/warm" is not "True", but False`)
		for _, c := range p.Status.Conditions {
			if c.Type == gate && (c.Status != corev1.ConditionFalse || c.Reason != "Owner") {
				t.Errorf("the gate's condition changed by kwok: %+v", c)
			}
		}
	})
}
