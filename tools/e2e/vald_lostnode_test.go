package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The lost-node scenario's release, its node-pool label prefix (the scenario's own, so
// the labels it adds touch nothing else) and the grace it sets through the chart.
const (
	vlnNamespace = "e2e-vald-lostnode"
	vlnName      = "lost"
	vlnPrefix    = "lostnode.e2e.opsuite.io"
	vlnGrace     = 60 * time.Second
)

// vlnManifest has two entries: "plain" on the general pool only, "dedicated" with an
// agent pool too.
func vlnManifest() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: vald.vdaas.org/v1
kind: ValdOperatorRelease
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  infrastructure:
    - role: plain
      clusters: [{name: plain, id: p1}]
      nodePools:
        general: {replicas: 1}
    - role: dedicated
      clusters: [{name: dedicated, id: d1}]
      nodePools:
        general: {replicas: 1}
        agent: {replicas: 1, machineResource: {cpu: "4", memory: 8Gi}}
  vectorEngine:
    name: vald
    vald:
      agent:
        ngt:
          dimension: 8
`, vlnNamespace, vlnName)
}

// TestValdLostNode (issue 24, item 1, for Vald): with the node-pool match on and a short
// NODEPOOL_LOSS_GRACE (set through the chart's values), the agent pool of one entry is one
// node of the local cluster, which is deleted (the node controller and the scheduler run
// there; the node's pods go with it). The entry's ValdRelease is held as last rendered
// (same UID, generation and values) with NodePoolMatchLost=True/Held and a Warning event,
// the release still Completed; the node recreated within the grace clears the condition
// and keeps the same ValdRelease. Deleted again and not back, the ValdRelease is pruned
// when the grace ends, never before, and the other entry's stays; the node back, the
// entry's ValdRelease is created again. The node, its labels and the operator's
// configuration are restored at the end, and every DaemonSet is ready on every node again,
// for the scenarios after this one.
func TestValdLostNode(t *testing.T) {
	needRunner(t, "a deleted node takes its pods' processes; its DaemonSet pods come back with it")
	needInstalled(t, "vald-operator")
	ctx := scenarioContext(t)
	s := serviceByName("vald-operator")

	// The operator's configuration through the chart, put back at the end.
	prev, err := helmConfig(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{"REQUIRE_NODEPOOL_MATCH": "true", "NODEPOOL_LOSS_GRACE": vlnGrace.String(), "NODEPOOL_LABEL_PREFIX": vlnPrefix}
	t.Cleanup(func() {
		back := map[string]string{}
		for k := range settings {
			back[k] = prev[k]
		}
		if err := vlnConfigure(context.Background(), t, s, back); err != nil {
			t.Errorf("putting the operator's configuration back: %v", err)
		}
	})
	if err := vlnConfigure(ctx, t, s, settings); err != nil {
		t.Fatal(err)
	}

	agentNode, generalNode, err := vlnNodes(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	labels := func(pool string) string {
		return fmt.Sprintf(`{"metadata":{"labels":{%q:%q,%q:%q}}}`, vlnPrefix+"/namespace", vlnNamespace, vlnPrefix+"/type", pool)
	}
	t.Cleanup(func() {
		unlabel := fmt.Sprintf(`{"metadata":{"labels":{%q:null,%q:null}}}`, vlnPrefix+"/namespace", vlnPrefix+"/type")
		for _, n := range []string{agentNode, generalNode} {
			if _, err := env.client.CoreV1().Nodes().Patch(context.Background(), n, types.MergePatchType, []byte(unlabel), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the scenario's labels from node %s: %v", n, err)
			}
		}
	})
	for n, pool := range map[string]string{agentNode: "agent", generalNode: "general"} {
		if _, err := env.client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(labels(pool)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = env.client.CoreV1().Namespaces().Delete(bg, vlnNamespace, metav1.DeleteOptions{})
		_ = poll(bg, t, "namespace "+vlnNamespace+" gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := env.client.CoreV1().Namespaces().Get(ctx, vlnNamespace, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err := vlnDaemonSetsReady(bg, t, agentNode); err != nil {
			t.Errorf("after the scenario: %v", err)
		}
	})
	restore := keepNode(ctx, t, agentNode)
	t.Logf("agent pool: node %s; general pool: node %s (labels %s/namespace=%s, %s/type)", agentNode, generalNode, vlnPrefix, vlnNamespace, vlnPrefix)

	applyManifest(ctx, t, vlnManifest())
	awaitVorCompleted(ctx, t, vlnNamespace, vlnName, 1, "dedicated", "plain")
	dedicated := vlnNamespace + "-dedicated"
	before, err := env.dyn.Resource(vrGVR).Namespace(vlnNamespace).Get(ctx, dedicated, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// held waits for NodePoolMatchLost=True/Held naming the entry, and returns it.
	held := func(what string) metav1.Condition {
		t.Helper()
		var v vorView
		err := poll(ctx, t, what, 2*time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			if v, err = readVor(ctx, vlnNamespace, vlnName); err != nil {
				return false, err
			}
			c := v.conditions["NodePoolMatchLost"]
			return c.Status == metav1.ConditionTrue && c.Reason == "Held" && strings.Contains(c.Message, `"dedicated"`), nil
		})
		if err != nil {
			diagnose(ctx, t, s)
			t.Fatalf("%v; vor: %s", err, v)
		}
		if !v.isTrue("Completed") || v.state != "Ready" {
			t.Errorf("while held, the release reads %s: the hold is no phase and changes no STATUS", v)
		}
		return v.conditions["NodePoolMatchLost"]
	}
	// unchanged fails unless the entry's ValdRelease is the one of before, as last rendered.
	unchanged := func(when string) {
		t.Helper()
		now, err := env.dyn.Resource(vrGVR).Namespace(vlnNamespace).Get(ctx, dedicated, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if now.GetUID() != before.GetUID() || now.GetGeneration() != before.GetGeneration() || !reflect.DeepEqual(now.Object["spec"], before.Object["spec"]) || !reflect.DeepEqual(now.GetLabels(), before.GetLabels()) {
			t.Errorf("%s: ValdRelease %s is uid %s generation %d, was uid %s generation %d (or its values or labels changed): want it as last rendered",
				when, dedicated, now.GetUID(), now.GetGeneration(), before.GetUID(), before.GetGeneration())
		}
	}

	// 1. The node is lost, and comes back within the grace.
	deleted := time.Now()
	if err := env.client.CoreV1().Nodes().Delete(ctx, agentNode, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := held("NodePoolMatchLost=True/Held after node " + agentNode + " was deleted")
	heldAfter := since(deleted)
	until := c.LastTransitionTime.Add(vlnGrace)
	if !strings.Contains(c.Message, until.UTC().Format(time.RFC3339)) {
		t.Errorf("NodePoolMatchLost %q does not name the grace's end %s", c.Message, until.UTC().Format(time.RFC3339))
	}
	if err := poll(ctx, t, "a Warning event for the hold", time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := env.client.CoreV1().Events(vlnNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + vlnName})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Type == corev1.EventTypeWarning && e.Reason == "Held" }), nil
	}); err != nil {
		t.Error(err)
	}
	unchanged("held")
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	if !restored.Before(until) {
		t.Fatalf("the node came back %s after the hold began, past the grace of %s: the machine is too slow for this scenario's grace", restored.Sub(c.LastTransitionTime.Time), vlnGrace)
	}
	var v vorView
	if err := poll(ctx, t, "NodePoolMatchLost gone with the node back", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		v, err = readVor(ctx, vlnNamespace, vlnName)
		_, lost := v.conditions["NodePoolMatchLost"]
		return err == nil && !lost && v.isTrue("Completed"), err
	}); err != nil {
		t.Fatalf("%v; vor: %s", err, v)
	}
	clearedAfter := since(restored)
	unchanged("with the node back within the grace")

	// 2. Lost again, and not back: pruned once the grace is over, never before.
	lost := time.Now()
	if err := env.client.CoreV1().Nodes().Delete(ctx, agentNode, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c = held("held again after node " + agentNode + " was deleted again")
	unchanged("held again")
	var prunedAt time.Time
	if err := poll(ctx, t, "ValdRelease "+dedicated+" pruned after the grace", vlnGrace+2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.dyn.Resource(vrGVR).Namespace(vlnNamespace).Get(ctx, dedicated, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			prunedAt = time.Now()
			return true, nil
		}
		if err != nil {
			return false, err
		}
		// Until then it is the one of before.
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	if early := c.LastTransitionTime.Add(vlnGrace - time.Second); prunedAt.Before(early) {
		t.Errorf("pruned %s after the hold began, before the grace of %s", prunedAt.Sub(c.LastTransitionTime.Time), vlnGrace)
	}
	prunedAfter := prunedAt.Sub(lost).Round(100 * time.Millisecond)
	v = awaitVorCompleted(ctx, t, vlnNamespace, vlnName, 1, "plain")
	if _, lost := v.conditions["NodePoolMatchLost"]; lost {
		t.Errorf("NodePoolMatchLost still there once the held ValdRelease was pruned: %s", v)
	}

	// 3. The node back: the entry is generated again.
	back := time.Now()
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	awaitVorCompleted(ctx, t, vlnNamespace, vlnName, 1, "dedicated", "plain")
	again, err := env.dyn.Resource(vrGVR).Namespace(vlnNamespace).Get(ctx, dedicated, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetUID() == before.GetUID() {
		t.Errorf("ValdRelease %s after the prune has the old uid %s", dedicated, again.GetUID())
	}
	t.Logf("grace %s: held %s after the node's deletion; the condition cleared %s after the node came back (%s after the deletion); deleted again, pruned %s after the deletion (%s after the hold began); the node back, the entry's ValdRelease created and the release Completed %s later",
		vlnGrace, heldAfter, clearedAfter, restored.Sub(deleted).Round(100*time.Millisecond), prunedAfter, prunedAt.Sub(c.LastTransitionTime.Time).Round(100*time.Millisecond), since(back))
}

// helmConfig is the operator release's config values (the chart's `config` keys).
func helmConfig(ctx context.Context, s service) (map[string]string, error) {
	out, err := helm(ctx, "get", "values", s.name, "-n", s.namespace(), "-a", "-o", "json")
	if err != nil {
		return nil, err
	}
	var values struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal([]byte(out), &values); err != nil {
		return nil, fmt.Errorf("helm get values: %w", err)
	}
	config := map[string]string{}
	for k, v := range values.Config {
		config[k] = fmt.Sprint(v)
	}
	return config, nil
}

// vlnConfigure sets the operator's config keys by helm upgrade and waits until the new
// pods run them, ready and the only ones.
func vlnConfigure(ctx context.Context, t *testing.T, s service, config map[string]string) error {
	t.Helper()
	old, err := pods(ctx, s)
	if err != nil {
		return err
	}
	args := []string{"upgrade", s.name, filepath.Join(env.root, "charts", s.name), "-n", s.namespace(), "--reuse-values"}
	for k, v := range config {
		args = append(args, "--set-string", "config."+k+"="+v)
	}
	if _, err := helm(ctx, args...); err != nil {
		return err
	}
	return poll(ctx, t, fmt.Sprintf("%s rolled out with %v", s.name, config), 3*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := controllerDeployment(ctx, s)
		if err != nil || !deploymentReady(d) {
			return false, err
		}
		vars := map[string]string{}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			vars[e.Name] = e.Value
		}
		for k, v := range config {
			if vars[k] != v {
				return false, nil
			}
		}
		ps, err := pods(ctx, s)
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			if slices.ContainsFunc(old, func(o corev1.Pod) bool { return o.UID == p.UID }) {
				return false, nil // an old pod is still there
			}
		}
		return true, nil
	})
}

// vlnNodes picks the node to lose, an agent node of the local cluster that runs no
// operator pod (it is not the operator that is lost here), and a general node.
func vlnNodes(ctx context.Context, s service) (agent, general string, err error) {
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", err
	}
	// An agent node with no operator's pod is best; on a cluster where every operator is
	// installed (an e2e shard) there may be none, and then one without the Vald
	// operator's pod: the other operators' pods on it go with the node and their
	// Deployments make them again elsewhere (vlnDaemonSetsReady waits for that).
	busy, vald := map[string]bool{}, map[string]bool{}
	for _, op := range operators() {
		ps, err := pods(ctx, op)
		if err != nil {
			return "", "", err
		}
		for _, p := range ps {
			busy[p.Spec.NodeName] = true
			if op.name == s.name {
				vald[p.Spec.NodeName] = true
			}
		}
	}
	var fallback string
	for _, n := range nodes.Items {
		switch n.Labels["pool.opsuite.io/type"] {
		case "agent":
			if agent == "" && !busy[n.Name] {
				agent = n.Name
			}
			if fallback == "" && !vald[n.Name] {
				fallback = n.Name
			}
		case "general":
			if general == "" {
				general = n.Name
			}
		}
	}
	if agent == "" {
		agent = fallback
	}
	if agent == "" || general == "" {
		return "", "", fmt.Errorf("no agent node without the %s pod (%q) or no general node (%q) among %d nodes", s.name, agent, general, len(nodes.Items))
	}
	return agent, general, nil
}

// vlnDaemonSetsReady waits until every DaemonSet has its pods ready, the node agent's on
// node among them, and every operator's Deployment is rolled out.
func vlnDaemonSetsReady(ctx context.Context, t *testing.T, node string) error {
	var notReady []string
	agents := serviceByName("node-agent")
	err := poll(ctx, t, "every DaemonSet ready, the node agent on "+node+" too", 4*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := env.client.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		notReady = notReady[:0]
		for _, ds := range list.Items {
			if st := ds.Status; st.ObservedGeneration < ds.Generation || st.NumberReady != st.DesiredNumberScheduled {
				notReady = append(notReady, fmt.Sprintf("%s/%s %d/%d", ds.Namespace, ds.Name, st.NumberReady, st.DesiredNumberScheduled))
			}
		}
		ps, err := env.client.CoreV1().Pods(agents.namespace()).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err
		}
		if !slices.ContainsFunc(ps.Items, func(p corev1.Pod) bool { return podReady(&p) }) {
			notReady = append(notReady, "no ready node agent on "+node)
		}
		// The operators whose pods went with the node, made again elsewhere.
		for _, op := range operators() {
			ds, err := env.client.AppsV1().Deployments(op.namespace()).List(ctx, metav1.ListOptions{LabelSelector: selector(op.name)})
			if err != nil {
				return false, err
			}
			for _, d := range ds.Items {
				if !deploymentReady(&d) {
					notReady = append(notReady, "deployment "+d.Namespace+"/"+d.Name)
				}
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %v", err, notReady)
	}
	return nil
}
